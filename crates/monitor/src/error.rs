//! Why a monitor check failed.

/// A backend crate's own error, carried as the source of a [`CheckError`].
pub type BackendError = Box<dyn std::error::Error + Send + Sync + 'static>;

/// Why one monitor check (connect, ping, read_only, lag, cluster state, load probe) failed. Its
/// text is what `monitor.*_log`'s error columns and the log lines show.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CheckError {
    /// The check did not finish within its budget (the `monitor_*_timeout` variables).
    #[error("Operation timed out")]
    TimedOut,
    /// Connecting, logging in or talking to the server failed; the backend crate's error.
    #[error(transparent)]
    Connection(BackendError),
    /// The TLS settings for the server (its `*_servers_ssl_params` row) cannot be used.
    #[error("monitor TLS settings: {0}")]
    Tls(#[source] BackendError),
    /// The server answered the check's statement with an error.
    #[error("{message}")]
    Refused {
        /// The server's error code, when its protocol has a numeric one (MySQL).
        code: Option<u16>,
        /// The server's message.
        message: String,
    },
    /// The server's answer is not one the check can read (a value that is not a number, a
    /// missing column); says what was read.
    #[error("{0}")]
    Unreadable(String),
    /// This protocol's checker does not do this check (Galera on PostgreSQL).
    #[error("{0}")]
    Unsupported(&'static str),
}

impl CheckError {
    /// A backend crate's error.
    pub fn connection(e: impl std::error::Error + Send + Sync + 'static) -> Self {
        CheckError::Connection(Box::new(e))
    }

    /// The server's TLS settings cannot be used (`sluice-net`'s error, say).
    pub fn tls(e: impl std::error::Error + Send + Sync + 'static) -> Self {
        CheckError::Tls(Box::new(e))
    }

    /// The server's refusal, with its message only.
    pub fn refused(message: impl Into<String>) -> Self {
        CheckError::Refused {
            code: None,
            message: message.into(),
        }
    }
}

//! Backend-side errors.

use sluice_mysql_proto::packets::ErrInfo;

/// What went wrong talking to a backend server.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// TCP connect failed or timed out.
    #[error("cannot connect to {server}: {why}")]
    Connect {
        /// `host:port`.
        server: String,
        /// Why.
        why: String,
    },
    /// The server refused our credentials or the auth exchange failed.
    #[error("authentication to {server} as {user:?} failed: {info:?}")]
    Auth {
        /// `host:port`.
        server: String,
        /// Backend user.
        user: String,
        /// The server's error.
        info: ErrInfo,
    },
    /// The auth exchange needs something we cannot do (e.g. full caching_sha2 auth without TLS).
    #[error("cannot authenticate to {server}: {why}")]
    AuthUnsupported {
        /// `host:port`.
        server: String,
        /// Why.
        why: String,
    },
    /// TLS to the backend failed.
    #[error("TLS to {server} failed: {why}")]
    Tls {
        /// `host:port`.
        server: String,
        /// Why.
        why: String,
    },
    /// Malformed packet or socket failure (a reset, the server closing the connection).
    #[error("{server}: {source}")]
    Protocol {
        /// `host:port`.
        server: String,
        /// The cause.
        source: sluice_mysql_proto::Error,
    },
    /// A reply that does not fit the command's reply shape.
    #[error("unexpected reply from {server}: {why}")]
    UnexpectedReply {
        /// `host:port`.
        server: String,
        /// What.
        why: &'static str,
    },
    /// No connection could be obtained within `mysql-connect_timeout_server_max`.
    #[error(
        "Max connect timeout reached while reaching hostgroup {hostgroup} after {elapsed_ms}ms"
    )]
    ConnectTimeout {
        /// The hostgroup.
        hostgroup: u32,
        /// Time spent.
        elapsed_ms: u64,
        /// The last connect error, for the log.
        last_error: Option<String>,
    },
    /// No backend credentials for the user.
    #[error("no backend credentials for user {0:?} (a mysql_users row with backend=1)")]
    NoBackendUser(String),
}

impl Error {
    /// Whether another connection attempt may succeed. Not when the server rejected the
    /// credentials, the authentication needs what Sluice cannot do, or TLS is misconfigured:
    /// each would fail the same way on every server.
    pub fn is_retryable(&self) -> bool {
        !(self.is_access_denied()
            || matches!(self, Error::AuthUnsupported { .. } | Error::Tls { .. }))
    }

    /// True when the server rejected the credentials (not worth retrying on another server).
    pub fn is_access_denied(&self) -> bool {
        matches!(self, Error::Auth { info, .. } if matches!(info.code, 1044 | 1045 | 1698 | 1251))
    }
}

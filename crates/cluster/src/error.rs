//! The crate's one error type.

/// Why talking to the configuration store failed, or why its address is wrong.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// `--config-store` / `[cluster] config_store` is not `etcd://host:port[,host:port…]/prefix`.
    #[error("config store address {url:?}: {why}")]
    BadUrl {
        /// What was given.
        url: String,
        /// What is wrong with it.
        why: &'static str,
    },
    /// No member of the store answered.
    #[error("no etcd member answered ({0})")]
    Unreachable(String),
    /// A member answered with an HTTP error.
    #[error("etcd {endpoint} answered HTTP {status}: {body}")]
    Http {
        /// The member.
        endpoint: String,
        /// The HTTP status.
        status: u16,
        /// The start of its answer.
        body: String,
    },
    /// A member's answer could not be read (not HTTP, not JSON, over the size bound).
    #[error("etcd {endpoint}: unreadable answer: {why}")]
    Malformed {
        /// The member.
        endpoint: String,
        /// What was wrong.
        why: String,
    },
    /// A stored module is not what Sluice writes.
    #[error("stored module {key}: {why}")]
    BadModule {
        /// The key.
        key: String,
        /// What was wrong.
        why: String,
    },
}

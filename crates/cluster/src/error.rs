//! The crate's one error type.

/// Why talking to the configuration store failed, or why its address is wrong.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
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
    /// A member refused a request, or its answer could not be used.
    #[error("etcd, {doing}: {source}")]
    Etcd {
        /// What Sluice was doing.
        doing: &'static str,
        /// What etcd's client said.
        #[source]
        source: etcd_client::Error,
    },
    /// A stored module is not what Sluice writes.
    #[error("stored module {key}: {why}")]
    BadModule {
        /// The key.
        key: String,
        /// What was wrong.
        why: String,
    },
    /// A peer announced a module this node does not have.
    #[error("{0} is not a module this node knows")]
    UnknownModule(String),
    /// A peer's module rows changed between its announcement and the read.
    #[error("its rows have checksum {got}, not the announced {announced} (changed while read)")]
    ChecksumChanged {
        /// The checksum of the rows read.
        got: String,
        /// The checksum the peer announced.
        announced: String,
    },
    /// Applying a peer's module here failed; the admin's message.
    #[error("applying it failed: {0}")]
    Apply(String),
    /// Connecting to a peer's admin port failed, or the connection broke.
    #[error(transparent)]
    PeerConnection(#[from] sluice_mysql_backend::Error),
    /// A peer's admin answered a statement with an error.
    #[error("the peer refused `{sql}`: {why}")]
    PeerRefused {
        /// The statement.
        sql: String,
        /// Its error message and code.
        why: String,
    },
    /// A peer's admin did not answer within the bound.
    #[error("no answer within {0}s")]
    PeerSilent(u64),
}

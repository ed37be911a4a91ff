//! The crate's error type.

/// What went wrong setting up Sluice's network side.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A port could not be opened.
    #[error("cannot listen on {addr} ({what}): {source}")]
    Listen {
        /// The `host:port` asked for.
        addr: String,
        /// Which port it is ("MySQL frontend (mysql-interfaces)", …).
        what: String,
        /// The system's reason.
        source: std::io::Error,
    },
    /// A TLS certificate or key could not be read or used.
    #[error("{setting}: {why}")]
    Tls {
        /// The setting (and file) at fault, e.g. `mysql-ssl_cert /etc/sluice/cert.pem`.
        setting: String,
        /// Why.
        why: String,
    },
}

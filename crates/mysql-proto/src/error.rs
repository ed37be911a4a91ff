//! Protocol errors.

/// A malformed, oversized or unexpected packet, or an I/O failure while reading one.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The peer closed the connection.
    #[error("connection closed by peer")]
    Closed,
    /// Socket error.
    #[error("i/o error: {0}")]
    Io(#[from] std::io::Error),
    /// A packet larger than the configured bound.
    #[error("packet of {size} bytes exceeds the limit of {limit} bytes")]
    TooLarge {
        /// Announced size.
        size: usize,
        /// Bound.
        limit: usize,
    },
    /// A packet that does not parse.
    #[error("malformed {what} packet: {why}")]
    Malformed {
        /// Which packet.
        what: &'static str,
        /// What was wrong.
        why: &'static str,
    },
}

impl Error {
    /// Shorthand for [`Error::Malformed`].
    pub fn malformed(what: &'static str, why: &'static str) -> Self {
        Error::Malformed { what, why }
    }
}

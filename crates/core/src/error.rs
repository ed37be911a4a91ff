//! The core crate's error type.

/// Errors raised by config loading and core decisions.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The config file could not be read.
    #[error("cannot read config file {path}: {source}")]
    ConfigRead {
        /// The file.
        path: String,
        /// Why.
        source: std::io::Error,
    },
    /// The config is malformed or a value is out of range; the message names key and line.
    #[error("invalid config: {0}")]
    ConfigInvalid(String),
}

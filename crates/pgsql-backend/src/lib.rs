//! sluice-pgsql-backend: the PostgreSQL wire pieces Sluice needs on both sides — message
//! framing ([`frame`]), SCRAM-SHA-256 for clients and servers ([`scram`]) — and server
//! connections with their pool ([`conn`], [`pool`]).

pub mod conn;
pub mod frame;
mod idle;
pub mod md5auth;
pub mod monitor;
pub mod pool;
pub mod prepared;
pub mod scram;
pub mod stream;

/// Errors talking to a PostgreSQL server or client.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Socket error.
    #[error("i/o error: {0}")]
    Io(#[from] std::io::Error),
    /// The peer closed the connection.
    #[error("connection closed by peer")]
    Closed,
    /// A message larger than the bound.
    #[error("message of {0} bytes exceeds the limit")]
    TooLarge(usize),
    /// A malformed message.
    #[error("malformed message: {0}")]
    Malformed(&'static str),
    /// The server sent an ErrorResponse; its fields.
    #[error("server error {code}: {message}")]
    Server {
        /// SQLSTATE.
        code: String,
        /// Message.
        message: String,
    },
    /// Authentication failed or is not supported.
    #[error("authentication: {0}")]
    Auth(String),
    /// No connection within `pgsql-connect_timeout_server_max`.
    #[error(
        "Max connect timeout reached while reaching hostgroup {hostgroup} after {elapsed_ms}ms"
    )]
    ConnectTimeout {
        /// Hostgroup.
        hostgroup: u32,
        /// Time spent.
        elapsed_ms: u64,
    },
}

//! sluice-pgsql-proto: the PostgreSQL wire pieces Sluice needs on both sides of a connection —
//! message framing with a size bound and the messages Sluice writes ([`frame`]), SCRAM-SHA-256
//! for clients and servers ([`scram`]), MD5 password hashing ([`md5auth`]) and a pure tracker of
//! a server's replies ([`reply`]), message type bytes by name ([`tag`]) and borrowed views of
//! the client messages Sluice looks into ([`message`]). No sockets beyond `AsyncRead` for reading frames; the twin
//! of `sluice-mysql-proto`.
//!
//! ```
//! use sluice_pgsql_proto::frame::{complete_len, message};
//! use sluice_pgsql_proto::scram;
//!
//! // A whole SCRAM-SHA-256 exchange, both ends in memory.
//! let (mut client, client_first) = scram::Client::new("s3cret");
//! let (server, server_first) = scram::Server::new("s3cret", &client_first)?;
//! let client_final = client.finish(&server_first)?;
//! let server_final = server.finish(&client_final)?;
//! client.verify(&server_final)?;
//!
//! // A wrong password is refused by the server side.
//! let (mut intruder, first) = scram::Client::new("guess");
//! let (server, server_first) = scram::Server::new("s3cret", &first)?;
//! assert!(server.finish(&intruder.finish(&server_first)?).is_err());
//!
//! // Framing: a Query message and where it ends in a buffer.
//! let query = message(b'Q', b"SELECT 1\0");
//! assert_eq!(complete_len(&query)?, Some(query.len()));
//! assert_eq!(complete_len(&query[..3])?, None);
//! # Ok::<(), sluice_pgsql_proto::Error>(())
//! ```

pub mod frame;
pub mod md5auth;
pub mod message;
pub mod reply;
pub mod scram;
pub mod tag;

/// Errors reading PostgreSQL messages.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
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
    /// A SCRAM-SHA-256 exchange failed: a malformed message, a nonce or signature that does not
    /// match, a wrong password.
    #[error("SCRAM: {0}")]
    Scram(&'static str),
}

//! The PostgreSQL frontend's error type: which side failed, so a session ends with the right
//! words — a client that broke the protocol is told so, a lost server is reported as the server.

/// Why a PostgreSQL client session (or its login) ended early.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The client's side: its socket failed or closed, or it sent a message over the size bound
    /// or malformed.
    #[error("client connection: {0}")]
    Client(sluice_pgsql_proto::Error),
    /// A server connection failed: connecting, logging in, its socket, a malformed reply, an
    /// ErrorResponse where Sluice needed success.
    #[error(transparent)]
    Server(#[from] sluice_pgsql_backend::Error),
    /// The client's login was refused; it has been sent an ErrorResponse with `sqlstate`.
    #[error("login refused ({sqlstate}): {message}")]
    LoginRefused {
        /// The SQLSTATE the client got (`28P01` wrong password, `53300` too many clients, ...).
        sqlstate: &'static str,
        /// The message the client got.
        message: String,
    },
}

impl Error {
    /// The SQLSTATE the client is sent: `08P01` for a protocol violation, the login's refusal
    /// code, or the server connection's (see [`sluice_pgsql_backend::Error::sqlstate`]).
    pub fn sqlstate(&self) -> &str {
        match self {
            Error::Client(_) => "08P01",
            Error::Server(e) => e.sqlstate(),
            Error::LoginRefused { sqlstate, .. } => sqlstate,
        }
    }

    /// A server-side failure of a wire operation on a server connection.
    pub(crate) fn server_wire(e: impl Into<sluice_pgsql_proto::Error>) -> Error {
        Error::Server(sluice_pgsql_backend::Error::Wire(e.into()))
    }
}

impl From<sluice_pgsql_proto::Error> for Error {
    fn from(e: sluice_pgsql_proto::Error) -> Self {
        Error::Client(e)
    }
}

/// Socket errors in this crate are the client's: server sockets are read and written by
/// `sluice-pgsql-backend`, or mapped to [`Error::Server`] where this crate touches one.
impl From<std::io::Error> for Error {
    fn from(e: std::io::Error) -> Self {
        Error::Client(sluice_pgsql_proto::Error::Io(e))
    }
}

use sluice_pgsql_backend::Error as PgError;
use sluice_pgsql_proto::frame::error_response;

/// The ErrorResponse a client gets for a failed server connection.
pub(crate) fn error_for(e: &PgError) -> Vec<u8> {
    let severity = if e.is_fatal() { "FATAL" } else { "ERROR" };
    let message = match e {
        PgError::Server { message, .. } => message.clone(),
        PgError::ConnectTimeout { .. } => e.to_string(),
        other => format!("backend connection failed: {other}"),
    };
    error_response(severity, e.sqlstate(), &message)
}

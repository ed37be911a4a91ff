//! Frontend errors and their mapping to the MySQL error a client sees.

use sluice_mysql_proto::packets::err_payload;

/// An error that ends a client's command (or its session) with a MySQL ERR packet.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// Wrong password, unknown or inactive user, or TLS required.
    #[error("Access denied for user '{user}'@'{host}' (using password: {using_password}){extra}")]
    AccessDenied {
        /// User name the client sent.
        user: String,
        /// Client address.
        host: String,
        /// "YES" or "NO".
        using_password: &'static str,
        /// Additional reason, e.g. ". SSL is required".
        extra: String,
    },
    /// Global or per-user `max_connections` reached.
    #[error("Too many connections")]
    TooManyConnections,
    /// A backend-side failure (connect timeout, lost connection, refused login).
    #[error(transparent)]
    Backend(#[from] sluice_mysql_backend::Error),
    /// A malformed or oversized packet from the client.
    #[error(transparent)]
    Protocol(#[from] sluice_mysql_proto::Error),
    /// A feature the client asked for that Sluice does not provide.
    #[error("{0}")]
    Unsupported(String),
}

/// The error a client gets when its backend connection is lost: `ER_CONNECTION_KILLED`. Not
/// 2013 (`CR_SERVER_LOST`, what ProxySQL sends): codes 2000–2999 are client-library codes, and
/// MariaDB Connector/C (the `mariadb` CLI, mysqlclient builds on it) rejects a server that sends
/// one as "Received malformed packet" (2027).
pub(crate) const LOST_BACKEND: (u16, &str) = (1927, "70100");

/// A read that must see earlier writes found no replica that applied them within
/// `mysql-causal_reads_timeout_ms` (`mysql-causal_reads_on_timeout = error`); retrying is safe.
pub(crate) const CAUSAL_READ_TIMEOUT: (u16, &str) = (9110, "HY000");

impl Error {
    /// The (errno, SQLSTATE) the client sees.
    pub fn code(&self) -> (u16, &'static str) {
        use sluice_mysql_backend::Error as B;
        match self {
            Error::AccessDenied { .. } => (1045, "28000"),
            Error::TooManyConnections => (1040, "08004"),
            Error::Backend(B::ConnectTimeout { .. }) => (9001, "HY000"),
            Error::Backend(B::Auth { info, .. }) => (info.code, "28000"),
            Error::Backend(_) => LOST_BACKEND,
            Error::Protocol(sluice_mysql_proto::Error::TooLarge { .. }) => (1153, "08S01"),
            Error::Protocol(_) => (1047, "08S01"),
            Error::Unsupported(_) => (1235, "42000"),
        }
    }

    /// The ERR packet payload for this error.
    pub fn to_err_payload(&self) -> Vec<u8> {
        let (code, state) = self.code();
        let msg = match self {
            Error::Backend(sluice_mysql_backend::Error::Auth { server, info, .. }) => {
                format!("{} (backend {server})", info.message)
            }
            Error::Backend(e @ sluice_mysql_backend::Error::ConnectTimeout { .. }) => e.to_string(),
            Error::Backend(e) => format!("Lost connection to backend server: {e}"),
            Error::Protocol(sluice_mysql_proto::Error::TooLarge { .. }) => {
                "Got a packet bigger than 'max_allowed_packet' bytes".to_string()
            }
            other => other.to_string(),
        };
        err_payload(code, state, &msg)
    }
}

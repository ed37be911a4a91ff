//! sluice-pgsql-backend: connections to PostgreSQL servers ([`PgConn`]) and their pool
//! ([`PgPool`]), and the monitor's checks. The wire pieces (framing, SCRAM, MD5) live in
//! `sluice-pgsql-proto`.
//!
//! ```no_run
//! use sluice_core::pool::PoolOptions;
//! use sluice_core::runtime::HostgroupServer;
//! use sluice_pgsql_backend::{PgCheckout, PgPool, ROUND_PAUSE};
//! use sluice_pgsql_proto::scram::ClientSecret;
//! use std::time::Duration;
//!
//! # async fn run() -> Result<(), sluice_pgsql_backend::Error> {
//! let servers = [HostgroupServer::new("127.0.0.1", 5432, 0)];
//! let pool = PgPool::new(None);
//! let request = PgCheckout {
//!     hostgroup: 0,
//!     servers: &servers,
//!     user: "app",
//!     secret: &ClientSecret::Password("app".into()),
//!     database: "app",
//!     session: None,
//!     // One attempt 1 s, the whole checkout 5 s; no session thread, regular priority.
//!     options: PoolOptions::with_timeouts(
//!         Duration::from_secs(1),
//!         Duration::from_secs(5),
//!         ROUND_PAUSE,
//!     ),
//! };
//! let mut conn = pool.checkout(&request).await?;
//! let answer = conn.conn().query_value("SELECT 20 + 22").await?;
//! assert_eq!(answer.as_deref(), Some("42"));
//! conn.release_clean(); // back to the pool for the next checkout
//! # Ok(()) }
//! ```
//! `examples/pg_pooled_query.rs` runs the same against a real server.

mod budget;
mod conn;
mod idle;
pub mod monitor;
mod pool;
pub mod prepared;
mod stream;

pub use conn::{ConnectParams, PgConn, query_message, send_cancel};
pub use pool::{PgCheckout, PgKey, PgPool, PgPooled, ROUND_PAUSE, pool_options};
pub(crate) use sluice_pgsql_proto::{frame, md5auth, scram};

/// Errors talking to a PostgreSQL server or client.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The wire: a socket error, the peer closing, a message over the bound or malformed.
    #[error(transparent)]
    Wire(#[from] sluice_pgsql_proto::Error),
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
    /// The server asks for TLS (`use_ssl=1`) and no client configuration serves it.
    #[error("TLS to {server}: {source}")]
    Tls {
        /// `host:port`.
        server: String,
        /// Why.
        #[source]
        source: sluice_net::Error,
    },
    /// No connection within `pgsql-connect_timeout_server_max`.
    #[error(
        "Max connect timeout reached while reaching hostgroup {hostgroup} after {elapsed_ms}ms"
    )]
    ConnectTimeout {
        /// Hostgroup.
        hostgroup: u32,
        /// Time spent.
        elapsed_ms: u64,
        /// The last connect error, for the log.
        last_error: Option<String>,
    },
}

impl From<std::io::Error> for Error {
    fn from(e: std::io::Error) -> Self {
        Error::Wire(sluice_pgsql_proto::Error::Io(e))
    }
}

impl Error {
    /// The SQLSTATE a client is sent when this error costs it a server connection: the server's
    /// own for its ErrorResponse, `08001` when none could be had in time, `08006` otherwise.
    pub fn sqlstate(&self) -> &str {
        match self {
            Error::Server { code, .. } => code,
            Error::ConnectTimeout { .. } => "08001",
            _ => "08006",
        }
    }

    /// Whether the client is sent this error as FATAL: the server refused the login (or a
    /// startup parameter) as it would refuse the client's own. Else it is an ERROR.
    pub fn is_fatal(&self) -> bool {
        matches!(self, Error::Server { .. })
    }

    /// Whether another connection attempt may succeed: a socket failure or a server going
    /// away. Not a refused login, an authentication Sluice cannot perform, a spent budget.
    pub fn is_retryable(&self) -> bool {
        matches!(self, Error::Wire(_))
    }

    /// A malformed message from the server.
    pub(crate) fn malformed(what: &'static str) -> Self {
        Error::Wire(sluice_pgsql_proto::Error::Malformed(what))
    }
}

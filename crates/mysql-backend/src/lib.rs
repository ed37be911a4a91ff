//! sluice-mysql-backend: Sluice's connections to MySQL/MariaDB servers.
//!
//! - [`BackendConn`]: one authenticated server connection (TLS and compression optional) that
//!   forwards commands and relays the raw reply to a client writer.
//! - [`MysqlPool`]: connections per (hostgroup, server, user, capability class),
//!   `max_connections` honoured, reset and reused across client sessions; [`PooledConn`] is
//!   one checked out.
//! - [`monitor`]: the health checks the monitor runs; [`tls`]: client TLS towards servers.

mod conn;
mod error;
pub mod monitor;
mod ops;
mod pool;
mod relay;
mod state;
mod stmt_cache;
mod stream;
pub mod tls;

pub use conn::{BackendConn, BackendSecret, ConnectParams};
pub use error::Error;
pub use ops::{Prepared, ServerErr};
pub use pool::{CheckoutRequest, MysqlPool, PooledConn};
pub use relay::RelayOutcome;
pub use state::SessionState;
pub use stmt_cache::{BackendStmt, StmtCache};

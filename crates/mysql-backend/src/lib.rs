//! sluice-mysql-backend: Sluice's connections to MySQL/MariaDB servers.
//!
//! - [`conn`]: one authenticated server connection (TLS optional) that forwards commands and relays
//!   the raw reply to a client writer.
//! - [`pool`]: connections per (hostgroup, server, user, capability class), `max_connections`
//!   honoured, reset and reused across client sessions.

pub mod conn;
pub mod error;
pub mod monitor;
mod ops;
pub mod pool;
mod relay;
pub mod state;
pub mod stmt_cache;
pub mod stream;
pub mod tls;

pub use conn::{BackendConn, BackendSecret, ConnectParams};
pub use error::Error;
pub use ops::{Prepared, ServerErr};
pub use pool::{CheckoutRequest, MysqlPool, PooledConn};
pub use relay::RelayOutcome;
pub use state::SessionState;
pub use stmt_cache::{BackendStmt, StmtCache};

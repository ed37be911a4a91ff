//! sluice-mysql-backend: Sluice's connections to MySQL/MariaDB servers.
//!
//! - [`BackendConn`]: one authenticated server connection (TLS and compression optional) that
//!   forwards commands and relays the raw reply to a client writer.
//! - [`MysqlPool`]: connections per (hostgroup, server, user, capability class),
//!   `max_connections` honoured, reset and reused across client sessions; [`PooledConn`] is
//!   one checked out.
//! - [`monitor`]: the health checks the monitor runs (client TLS towards servers is built by
//!   `sluice_net::client_tls`).
//!
//! ```no_run
//! use sluice_core::pool::PoolOptions;
//! use sluice_core::runtime::HostgroupServer;
//! use sluice_mysql_backend::{BackendSecret, CheckoutRequest, MysqlPool};
//! use std::time::Duration;
//!
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! let servers = [HostgroupServer::new("127.0.0.1", 3306, 10)];
//! let pool = MysqlPool::new(None);
//! let secret = BackendSecret::Clear("app".into());
//! let request = CheckoutRequest {
//!     hostgroup: 10,
//!     servers: &servers,
//!     user: "app",
//!     secret: &secret,
//!     charset: 45, // utf8mb4_general_ci
//!     client_caps: 0,
//!     max_packet: 64 << 20,
//!     // One attempt 1 s, the whole checkout 5 s, 10 ms between rounds over the servers; not
//!     // on a session thread, regular priority (served in arrival order among equals).
//!     options: PoolOptions::with_timeouts(
//!         Duration::from_secs(1),
//!         Duration::from_secs(5),
//!         Duration::from_millis(10),
//!     ),
//! };
//! let mut conn = pool.checkout(&request).await?;
//! let answer = conn.conn().query_table("SELECT 20 + 22").await?;
//! conn.release_clean(); // back to the pool for the next checkout
//! # let _ = answer; Ok(()) }
//! ```
//! `examples/mysql_pooled_query.rs` runs the same against a real server.

mod conn;
mod error;
pub mod monitor;
mod ops;
mod pool;
mod relay;
mod state;
mod stmt_cache;
mod stream;

pub use conn::{BackendConn, BackendSecret, ConnectParams, client_caps};
pub use error::Error;
pub use ops::{Prepared, ServerErr};
pub use pool::{CheckoutRequest, MysqlPool, PooledConn};
pub use relay::{CommitSink, RelayOutcome};
pub use state::SessionState;
pub use stmt_cache::{BackendStmt, StmtCache};

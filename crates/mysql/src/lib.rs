//! sluice-mysql: Sluice's MySQL frontend.
//!
//! [`listener`] accepts clients; [`handshake`] runs the connection phase (TLS, authentication
//! against `mysql_users`); [`session`] runs the command loop, forwarding commands to a backend
//! connection from the pool and relaying raw replies.

pub mod admin;
pub mod auth;
pub mod capture;
/// Per-command counters and backend errors (shared with the PostgreSQL side).
pub use sluice_core::query::commands as counters;
pub mod error;
pub mod handshake;
pub mod listener;
pub mod registry;
pub mod session;
pub mod sql;
pub mod stmt_registry;
pub mod stream;
pub mod tls;

pub use error::Error;
pub use listener::{MysqlFrontend, serve};

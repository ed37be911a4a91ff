//! sluice-mysql: Sluice's MySQL frontend.
//!
//! [`MysqlFrontend`] is the data port: built with [`MysqlFrontend::builder`] and run with [`serve`],
//! it accepts clients, runs the connection phase (TLS, authentication against `mysql_users`) and
//! the command loop, forwarding commands to backend connections from a
//! [`MysqlPool`](sluice_mysql_backend::MysqlPool) and relaying raw replies; an embedding service
//! can see each query first through a
//! [`StatementHook`](sluice_core::query::StatementHook). [`admin`] serves the admin port over
//! the MySQL protocol. Sessions, the SQL classifier and the handshake are internal.

pub mod admin;
mod auth;
mod capture;
/// Per-command counters and backend errors (shared with the PostgreSQL side).
pub use sluice_core::query::commands as counters;
mod error;
#[cfg(fuzzing)]
pub mod fuzzing;
mod handshake;
mod listener;
mod live_view;
pub mod registry;
mod session;
mod sql;
pub mod stmt_registry;
mod stream;

pub use error::Error;
pub use listener::{FrontendCounters, MysqlFrontend, MysqlFrontendBuilder, serve};
pub use registry::SessionRegistry;
pub use stmt_registry::{StmtRegistry, StmtScope};

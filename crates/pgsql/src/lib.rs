//! sluice-pgsql: Sluice's PostgreSQL frontend.
//!
//! [`PgFrontend`] is the data port: built with [`PgFrontend::builder`] and run with [`serve`], it
//! accepts clients, runs the login (SSLRequest, StartupMessage, SCRAM/MD5/cleartext against
//! `pgsql_users`) and each client's session under transaction pooling, forwarding raw messages
//! to server connections from a [`PgPool`](sluice_pgsql_backend::PgPool) and relaying raw
//! replies. [`serve_admin`] serves the admin port (`psql -h 127.0.0.1 -p 6132 -U admin`) on
//! pgwire: the same admin store the MySQL-protocol admin port reaches. [`listen`] is the
//! LISTEN/NOTIFY fan-out, [`sessions`] the processlist rows. The accept side (`listener.rs`), the
//! login (`login/`) and the session (`session/`, one file per concern) are internal.

mod admin;
mod error;
mod frontend;
#[cfg(fuzzing)]
pub mod fuzzing;
pub mod listen;
mod listener;
mod live_view;
mod login;
mod pids;
mod session;
pub mod sessions;

pub use admin::{PgAdmin, serve_admin};
pub use error::Error;
pub use frontend::{PgFrontend, PgFrontendBuilder};
pub use listener::serve;

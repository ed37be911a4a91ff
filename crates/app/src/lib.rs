//! Sluice as a library: the whole proxy — the MySQL and PostgreSQL data ports with their pools,
//! the admin ports, the health monitors, the MCP port, the fleet sync — built from a
//! [`sluice_core::config::Config`] and served until a stop. The `sluice` binary is this crate
//! behind a command line; another Rust program can run the same thing in process:
//!
//! ```no_run
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! use sluice_app::{App, Options};
//! let config = sluice_core::config::Config::from_file(std::path::Path::new("sluice.toml"))?;
//! let options = Options {
//!     shutdown_timeout: std::time::Duration::from_secs(30),
//!     ..Options::default()
//! };
//! let app = App::build(config, options).await?;
//! // Serves until ctrl-c (or `PROXYSQL SHUTDOWN` on the admin port), then drains.
//! app.serve(async {
//!     let _ = tokio::signal::ctrl_c().await;
//!     "ctrl-c"
//! })
//! .await?;
//! # Ok(())
//! # }
//! ```
//!
//! `examples/embedded.rs` runs one against the test backends.

mod app;
mod error;
mod guards;
mod live;
mod notify;
mod ports;
mod signals;
mod stop;
mod takeover;

pub use app::{App, MemoryRows, Options};
pub use error::Error;
pub use signals::stop_requested;

//! sluice-admin: the admin store behind ports 6032 (MySQL protocol) and 6132 (PostgreSQL).
//!
//! SQLite (through sqlx) holds ProxySQL's tables in the schemas `main` (memory), `disk` (a file
//! in the datadir), `stats` and `monitor`. [`Admin`] runs admin statements: plain SQL on those
//! tables, `SET mysql-x = y`, `SHOW ...`, and the `LOAD`/`SAVE` commands that move configuration
//! between the config file, memory, disk and the runtime the data path reads.
//!
//! ```
//! use sluice_admin::{Admin, AdminOptions};
//! use sluice_core::admin::{AdminExecutor, AdminReply, AdminRole};
//! use sluice_core::config::Config;
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let file = Config::parse("[[mysql_servers]]\nhostname = \"10.0.0.5\"\nport = 3306\n")?;
//! // No datadir: the `disk` schema lives in memory too.
//! let options = AdminOptions { datadir: None, initial: true, file };
//! let (admin, _config, _source) = Admin::open(options).await?;
//! let run = |sql| admin.execute(AdminRole::Admin, sql);
//! run("UPDATE mysql_servers SET weight = 5").await.map_err(|e| e.message)?;
//! let reply = run("SELECT hostname, weight FROM mysql_servers").await.map_err(|e| e.message)?;
//! let AdminReply::Rows(rows) = reply else { panic!("rows expected") };
//! assert_eq!(rows.rows, [[Some("10.0.0.5".to_string()), Some("5".to_string())]]);
//! // The stats account cannot change the configuration.
//! let refused = admin.execute(AdminRole::Stats, "DELETE FROM mysql_servers").await;
//! assert!(refused.is_err());
//! # Ok(())
//! # }
//! ```

mod cluster;
mod cluster_tables;
mod command;
mod config_store;
mod engine;
mod export;
mod functions;
mod guard;
mod layers;
mod observe;
mod pgbouncer;
mod schema;
mod schema_defs;
mod stats;
mod store;

pub use cluster::{
    ClusterBoard, EMPTY_CHECKSUM, ModuleChecksum, ModuleRows, PeerChecksum, PeerMetrics,
    PeerRecord, log_sync,
};
pub use command::{Command, Direction, Module, parse_command};
pub use config_store::{ConfigStore, StoreError, StoreFuture, StoreStatus};
pub use pgbouncer::PgBouncerCommand;

/// Why the admin store could not be opened at start.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The SQLite database (the datadir's `sluice.db`, or memory) could not be opened.
    #[error("admin database: {0}")]
    Open(String),
    /// Creating ProxySQL's tables failed.
    #[error("admin database schema: {0}")]
    Schema(String),
    /// The configuration saved on disk does not validate (start with `--initial` to use the
    /// config file instead).
    #[error("the saved configuration in {path} is invalid: {why}")]
    SavedConfig {
        /// The database file.
        path: String,
        /// What is wrong, naming the table and row.
        why: String,
    },
    /// Copying configuration between the layers failed.
    #[error("admin database: {0}")]
    Layers(String),
    /// The configuration could not be written as TOML (`SAVE CONFIG TO FILE`, `SELECT CONFIG
    /// FILE`).
    #[error("writing the configuration as TOML: {0}")]
    Export(#[from] toml::ser::Error),
}
pub use engine::{Admin, AdminOptions, StartupSource};
pub use export::config_to_toml;

/// Runs every reader an admin statement goes through before SQLite sees it: the command
/// grammar, the PgBouncer console words and the guard that refuses what reaches files or loads
/// code. For the fuzz targets in `fuzz/`; compiled only with `--cfg fuzzing`.
#[cfg(fuzzing)]
pub fn fuzz_statement(sql: &str) {
    let _ = parse_command(sql);
    let _ = guard::refused(sql);
    for word in sql.split_whitespace().take(4) {
        let _ = PgBouncerCommand::parse(word);
    }
}

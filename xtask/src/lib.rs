//! Project automation shared by `cargo xtask` and the end-to-end tests: it installs, starts and
//! stops the real MariaDB and PostgreSQL servers the tests run against.
//!
//! Everything lives in a state folder under `target/sluice-backends/`; every process is started
//! detached with a pid file so that `down` stops exactly what `up` started.

pub mod etcd;
pub mod galera;
pub mod import_samples;
pub mod layers;
pub mod mariadb;
pub mod package;
pub mod packages;
pub mod postgres;
pub mod proc;
pub mod tls;

use std::path::{Path, PathBuf};

/// Ports and credentials of the test backends, fixed so that docs and tests can name them.
pub mod ports {
    /// MariaDB primary.
    pub const MY_PRIMARY: u16 = 13306;
    /// MariaDB replica (GTID replication from the primary, `read_only=ON`).
    pub const MY_REPLICA: u16 = 13307;
    /// PostgreSQL 15 primary.
    pub const PG_PRIMARY: u16 = 15432;
    /// PostgreSQL 15 streaming replica.
    pub const PG_REPLICA: u16 = 15433;
}

/// The workspace root (the folder holding the top `Cargo.toml`).
pub fn workspace_root() -> PathBuf {
    let here = Path::new(env!("CARGO_MANIFEST_DIR"));
    here.parent()
        .map(Path::to_path_buf)
        .unwrap_or_else(|| here.to_path_buf())
}

/// The state folder for backends: `SLUICE_BACKENDS_DIR` or `target/sluice-backends`.
pub fn state_dir() -> PathBuf {
    match std::env::var_os("SLUICE_BACKENDS_DIR") {
        Some(dir) => PathBuf::from(dir),
        None => workspace_root().join("target").join("sluice-backends"),
    }
}

/// Result type of xtask steps: a human-readable message on failure.
pub type Result<T> = std::result::Result<T, String>;

/// Starts both replica pairs (installing packages first when needed); idempotent.
pub fn backends_up() -> Result<()> {
    packages::ensure_server_packages()?;
    let dir = state_dir();
    proc::make_traversable(&dir)?;
    mariadb::pair_up(&dir)?;
    postgres::pair_up(&dir)?;
    Ok(())
}

/// Stops every backend process recorded in the state folder.
pub fn backends_down() -> Result<()> {
    let dir = state_dir();
    let my = mariadb::pair_down(&dir);
    let pg = postgres::pair_down(&dir);
    my.and(pg)
}

/// Stops the backends, wipes their data and starts a fresh pair of each.
pub fn backends_reset() -> Result<()> {
    backends_down()?;
    let dir = state_dir();
    for sub in ["my1", "my2", "pg1", "pg2", "pgsock1", "pgsock2"] {
        let path = dir.join(sub);
        if path.exists() {
            std::fs::remove_dir_all(&path)
                .map_err(|e| format!("removing {}: {e}", path.display()))?;
        }
    }
    backends_up()
}

/// Prints one line per backend: up or down, role, replication state.
pub fn backends_status() -> Result<()> {
    let dir = state_dir();
    mariadb::print_status(&dir);
    postgres::print_status(&dir);
    Ok(())
}

//! The seam the backend crates implement: the checks ([`Checker`]), where and as whom they
//! run ([`CheckTarget`]) and the hooks the pools call. The monitor connections they keep are
//! [`crate::KeptConnections`].

use super::CheckError;
use sluice_core::runtime::ServerKey;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

/// A check's result: `Ok` with its value, or why it failed.
pub type CheckFuture<T> = Pin<Box<dyn Future<Output = Result<T, CheckError>> + Send + 'static>>;

/// Where and as whom a check runs.
#[derive(Debug, Clone)]
pub struct CheckTarget {
    /// The server to check.
    pub server: ServerKey,
    /// The account the check logs in with (`monitor_username`).
    pub username: String,
    /// Its password (`monitor_password`).
    pub password: String,
    /// The database a PostgreSQL check connects to (`monitor_dbname`).
    pub dbname: String,
    /// `check_type` of the server's replication pair (MySQL).
    pub check_type: String,
    /// Time budget for connecting, when a check has to.
    pub timeout: Duration,
    /// pt-heartbeat table for the lag check (`schema.table`), or empty.
    pub heartbeat_table: String,
    /// A row of the server has `use_ssl=1`: the check connects over TLS, with the same
    /// verification as the data path's connections.
    pub use_ssl: bool,
    /// The server's `*_servers_ssl_params` rows (the one for the monitor user, else the one
    /// for every user, overrides the `ssl_p2s_*` variables).
    pub ssl_params: Vec<std::sync::Arc<sluice_core::config::ServerSslParams>>,
}

/// The checks a backend crate implements.
pub trait Checker: Send + Sync + 'static {
    /// Opens a new monitor connection; its time in µs.
    fn connect(&self, t: CheckTarget) -> CheckFuture<u64>;
    /// A heartbeat on the server's monitor connection (opened when needed); its time in µs.
    fn ping(&self, t: CheckTarget) -> CheckFuture<u64>;
    /// Whether the server is read-only (MySQL `check_type`; PostgreSQL `pg_is_in_recovery()`).
    fn read_only(&self, t: CheckTarget) -> CheckFuture<bool>;
    /// Replication lag in seconds (`None` when the server reports NULL); on multi-source
    /// replicas the worst channel.
    fn replication_lag(&self, t: CheckTarget) -> CheckFuture<Option<u64>>;
    /// The member's Group Replication state, role and applier queue (MySQL only).
    fn group_replication(
        &self,
        _t: CheckTarget,
    ) -> CheckFuture<sluice_core::topology::MemberState> {
        Box::pin(async {
            Err(CheckError::Unsupported(
                "Group Replication is a MySQL feature",
            ))
        })
    }
    /// The node's Galera state (`wsrep_*`; MySQL/MariaDB only).
    fn galera(&self, _t: CheckTarget) -> CheckFuture<sluice_core::topology::GaleraStatus> {
        Box::pin(async { Err(CheckError::Unsupported("Galera is a MySQL/MariaDB feature")) })
    }
    /// The server's load for workload guards ([`crate::ServerLoad`], [`crate::Monitor::load_signal`]).
    fn server_load(&self, _t: CheckTarget) -> CheckFuture<super::load::ServerLoad> {
        Box::pin(async { Err(CheckError::Unsupported("this checker reads no server load")) })
    }
    /// Writes the heartbeat row on a writer, creating its table when missing
    /// ([`crate::ServerLoad`], [`crate::Monitor::load_signal`]).
    fn write_heartbeat(&self, _t: CheckTarget) -> CheckFuture<()> {
        Box::pin(async { Err(CheckError::Unsupported("this checker writes no heartbeat")) })
    }
    /// How old (ms) the newest heartbeat row the server holds is; `None` when it holds none.
    fn heartbeat_age_ms(&self, _t: CheckTarget) -> CheckFuture<Option<u64>> {
        Box::pin(async { Err(CheckError::Unsupported("this checker reads no heartbeat")) })
    }
    /// Forgets the monitor connection to `server` (after a failure or a shun).
    fn drop_connection(&self, server: &ServerKey);
}

pub use sluice_core::pool::{ConnectErrorHook, ConnectOutcomeFn};

/// Called when a server is shunned, to close the data path's connections to it.
pub type OnShun = Arc<dyn Fn(&ServerKey) + Send + Sync>;

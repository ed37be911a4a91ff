//! The admin interface as the protocol frontends see it: an executor that takes one SQL
//! statement and returns rows or a count, and the live-state views the admin tables show.
//! The SQLite-backed implementation lives in `sluice-admin`; the MySQL and PostgreSQL frontends
//! serve it on their admin ports.

use crate::Protocol;
use std::future::Future;
use std::pin::Pin;

/// What an admin login may do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AdminRole {
    /// Full access (`admin-admin_credentials`).
    Admin,
    /// Read-only access to the stats schema (`admin-stats_credentials`).
    Stats,
}

/// One admin login.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AdminCredential {
    /// The admin account's name.
    pub user: String,
    /// Its password in clear, as `admin-admin_credentials` holds it.
    pub password: String,
    /// What the account may do: everything, or read the stats tables only.
    pub role: AdminRole,
}

/// A result set: column names and rows of text values (`None` = NULL).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AdminRows {
    /// Column names, in order.
    pub columns: Vec<String>,
    /// Rows, each with one cell per column; `None` is SQL NULL.
    pub rows: Vec<Vec<Option<String>>>,
}

/// The outcome of one admin statement.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AdminReply {
    /// Rows to show.
    Rows(AdminRows),
    /// Done; rows affected and an optional message (e.g. "restart required").
    Done {
        /// Rows affected.
        affected: u64,
        /// Info text.
        message: Option<String>,
    },
}

/// The error of a control the process carries out for an admin command (its own crate's type,
/// with its source chain); the admin engine shows its text.
pub type ControlError = Box<dyn std::error::Error + Send + Sync + 'static>;

/// A control this process does not have (an embedding without that subsystem).
#[derive(Debug, Clone, Copy, thiserror::Error)]
#[error("{0} is not available in this process")]
pub struct Unavailable(pub &'static str);

/// A failed admin statement.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AdminError {
    /// MySQL error number (1045, 1064, 1105, ...).
    pub code: u16,
    /// The five-character SQLSTATE the client gets.
    pub sqlstate: &'static str,
    /// What went wrong, for a person.
    pub message: String,
}

impl AdminError {
    /// A generic error (1105, HY000).
    pub fn new(message: impl Into<String>) -> Self {
        AdminError {
            code: 1105,
            sqlstate: "HY000",
            message: message.into(),
        }
    }
}

impl std::fmt::Display for AdminError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for AdminError {}

/// A boxed future, so the executor can be used as a trait object.
pub type AdminFuture<'a> =
    Pin<Box<dyn Future<Output = Result<AdminReply, AdminError>> + Send + 'a>>;

/// Runs admin statements.
pub trait AdminExecutor: Send + Sync {
    /// Executes one statement with the rights of `role`.
    fn execute<'a>(&'a self, role: AdminRole, sql: &'a str) -> AdminFuture<'a>;
    /// The current admin logins (from `admin-admin_credentials` / `admin-stats_credentials`).
    fn credentials(&self) -> Vec<AdminCredential>;
}

/// One row of `stats_*_connection_pool`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PoolRow {
    /// The hostgroup the pooled connections serve.
    pub hostgroup: u32,
    /// The server's host name.
    pub srv_host: String,
    /// The server's port.
    pub srv_port: u16,
    /// Status as the data path sees it.
    pub status: String,
    /// Connections in use.
    pub conn_used: u32,
    /// Connections open and waiting in the pool.
    pub conn_free: u32,
    /// Commands forwarded to this server in this hostgroup.
    pub queries: u64,
    /// Connections opened to this server for this hostgroup (`ConnOK`).
    pub connects_ok: u64,
    /// Connect attempts that failed (`ConnERR`).
    pub connects_err: u64,
    /// Bytes sent to this server in this hostgroup.
    pub bytes_sent: u64,
    /// Bytes received from it.
    pub bytes_recv: u64,
    /// The replication lag (s) the monitor last read; `None` when it does not check it.
    pub replication_lag_s: Option<u64>,
    /// The monitor's last ping time (µs); 0 before the first answer.
    pub latency_us: u64,
}

/// One row of `stats_*_processlist`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProcessRow {
    /// Sluice's id for the session.
    pub session_id: u32,
    /// The account the client logged in as.
    pub user: String,
    /// Schema / database.
    pub db: String,
    /// The client's `ip:port`.
    pub client: String,
    /// Hostgroup of the user.
    pub hostgroup: u32,
    /// `None` when multiplexed, else why the session holds its backend connection.
    pub pin_reason: Option<String>,
    /// How long the session has held it for that (or an overlapping) reason, in seconds.
    pub pinned_seconds: Option<u64>,
    /// The workload class whose queue the session waits in, and for how long (ms).
    pub queued: Option<(String, u64)>,
    /// The session thread (`mysql-threads` / `pgsql-threads`, 0-based) the session runs on:
    /// ProxySQL's `ThreadID`. `None` off the session threads (an embedding without workers).
    pub thread: Option<usize>,
    /// The channels a PostgreSQL session listens to through Sluice's listener connection.
    pub listening: Vec<String>,
}

/// Since when a session has been pinned, after a publish that says whether it is (`pinned`):
/// kept while it stays pinned, whatever the reason, and cleared when it is not.
pub fn pinned_since(since: Option<std::time::Instant>, pinned: bool) -> Option<std::time::Instant> {
    match (since, pinned) {
        (_, false) => None,
        (Some(t), true) => Some(t),
        (None, true) => Some(std::time::Instant::now()),
    }
}

/// One hostgroup's traffic on the PostgreSQL side, for PgBouncer's `SHOW STATS` family.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HostgroupTraffic {
    /// The hostgroup (PgBouncer's "database" column shows it as `hostgroup_<n>`).
    pub hostgroup: u32,
    /// Transactions started there.
    pub transactions: u64,
    /// Statements answered there.
    pub queries: u64,
    /// Bytes sent to its servers (what clients sent).
    pub bytes_to_servers: u64,
    /// Bytes received from its servers (what clients got).
    pub bytes_from_servers: u64,
    /// Time statements took there, in µs.
    pub query_time_us: u64,
    /// Time sessions waited for a server connection there, in µs.
    pub wait_us: u64,
}

/// Live state of the data path, read by the admin's stats tables.
pub trait LiveStats: Send + Sync {
    /// Connection pool rows (MySQL side).
    fn mysql_connection_pool(&self) -> Vec<PoolRow>;
    /// Connected MySQL clients.
    fn mysql_processlist(&self) -> Vec<ProcessRow>;
    /// `stats_mysql_global` name/value pairs.
    fn mysql_global(&self) -> Vec<(String, String)>;
    /// `stats_mysql_commands_counters` rows, in that table's column order.
    fn mysql_commands_counters(&self) -> Vec<Vec<Option<String>>>;
    /// `stats_mysql_errors` rows, in that table's column order.
    fn mysql_errors(&self) -> Vec<Vec<Option<String>>>;
    /// `stats_mysql_free_connections` rows, in that table's column order.
    fn mysql_free_connections(&self) -> Vec<Vec<Option<String>>>;
    /// Called after a new runtime configuration was published: connections to servers that left
    /// (or went OFFLINE_HARD) are closed.
    fn runtime_changed(&self);
    /// Closes a client session; false when there is no such session.
    fn kill_session(&self, id: u32) -> bool;
    /// `stats_*_query_digest` rows; `reset` empties the map (the `_reset` table).
    fn query_digests(&self, _p: Protocol, _reset: bool) -> Vec<crate::query::DigestRow> {
        Vec::new()
    }
    /// `stats_*_query_rules`: (rule_id, hits).
    fn query_rule_hits(&self, _p: Protocol) -> Vec<(u32, u64)> {
        Vec::new()
    }
    /// Query-processor and cache counters for `stats_*_global`.
    fn query_globals(&self, _p: Protocol) -> Vec<(String, String)> {
        Vec::new()
    }
    /// `stats_pgsql_commands_counters` rows, in that table's column order.
    fn pgsql_commands_counters(&self) -> Vec<Vec<Option<String>>> {
        Vec::new()
    }
    /// The monitor's log rows of one check kind.
    fn monitor_log(
        &self,
        _p: Protocol,
        _kind: crate::monitor::CheckKind,
    ) -> Vec<crate::monitor::CheckRow> {
        Vec::new()
    }
    /// The hostgroups as the data path uses them now (configuration + monitor verdicts).
    fn live_hostgroups(
        &self,
        _p: Protocol,
    ) -> Option<std::collections::BTreeMap<u32, Vec<crate::runtime::HostgroupServer>>> {
        None
    }
    /// Connected PostgreSQL clients.
    fn pgsql_processlist(&self) -> Vec<ProcessRow> {
        Vec::new()
    }
    /// `stats_pgsql_errors` rows, in that table's column order.
    fn pgsql_errors(&self) -> Vec<Vec<Option<String>>> {
        Vec::new()
    }
    /// `stats_pgsql_free_connections` rows, in that table's column order.
    fn pgsql_free_connections(&self) -> Vec<Vec<Option<String>>> {
        Vec::new()
    }
    /// `stats_pgsql_listen_channels` rows: (database, channel, listeners, received,
    /// delivered, dropped).
    fn pgsql_listen_channels(&self) -> Vec<Vec<Option<String>>> {
        Vec::new()
    }
    /// `stats_pgsql_listeners` rows: (hostgroup, srv_host, srv_port, database, backend_pid,
    /// channels, reconnects, last_error).
    fn pgsql_listeners(&self) -> Vec<Vec<Option<String>>> {
        Vec::new()
    }
    /// `stats_pgsql_connection_pool` rows.
    fn pgsql_connection_pool(&self) -> Vec<PoolRow> {
        Vec::new()
    }
    /// Per-hostgroup traffic of the PostgreSQL side (PgBouncer's `SHOW STATS`).
    fn pgsql_hostgroup_traffic(&self) -> Vec<HostgroupTraffic> {
        Vec::new()
    }
    /// Every statement's latency on protocol `p` so far, all hostgroups together (the status
    /// page's p99 from successive snapshots).
    fn statement_latency(&self, _p: Protocol) -> crate::metrics::HistogramSnapshot {
        crate::metrics::HistogramSnapshot::default()
    }
    /// Seconds since the process started.
    fn uptime_seconds(&self) -> u64 {
        0
    }
    /// True while `PROXYSQL PAUSE` (or PgBouncer's `PAUSE`) holds new connections.
    fn paused(&self) -> bool {
        false
    }
    /// `PROXYSQL RELOAD TLS`: the frontends' certificate and key files are read again and used
    /// for new handshakes; on error (named in the message) the current ones stay.
    fn reload_tls(&self) -> Result<(), ControlError> {
        Err(Unavailable("TLS reload").into())
    }
    /// `RAG SYNC SOURCE n`: starts a sync of RAG source `n`; the message says it started,
    /// `Err` why it cannot.
    fn rag_sync(&self, _source_id: u32) -> Result<String, ControlError> {
        Err(Unavailable("RAG").into())
    }
    /// `stats_memory_metrics` rows: (name, bytes).
    fn memory_metrics(&self) -> Vec<(String, String)> {
        Vec::new()
    }
    /// `stats_pgsql_global` rows beyond the query processor's (clients, statements, pools).
    fn pgsql_global(&self) -> Vec<(String, String)> {
        Vec::new()
    }
    /// Writes both protocol sides' metric families (`/metrics`, `SHOW PROMETHEUS METRICS`).
    fn write_metrics(&self, _out: &mut crate::metrics::Exposition) {}
    /// `stats_workload_classes` rows (admission control); `None`: this build keeps none.
    fn workload_classes(&self) -> Option<AdminRows> {
        None
    }
    /// `stats_workload_guards` rows.
    fn workload_guards(&self) -> Option<AdminRows> {
        None
    }
    /// `GET /throttler/check?app=`: what the guards answering for `app` say.
    fn throttler_check(&self, _app: &str) -> crate::admission::ThrottleAnswer {
        crate::admission::ThrottleAnswer {
            status: 200,
            value: 0.0,
            threshold: 0.0,
            message: "no admission control in this build".into(),
        }
    }
    /// The MCP endpoint's stats tables (`stats_mcp_query_tools_counters`,
    /// `stats_mcp_query_digest`, `stats_mcp_query_rules`, `stats_rag_sources`) by name.
    fn mcp_tables(&self) -> Vec<(&'static str, AdminRows)> {
        Vec::new()
    }
    /// Clients connected now on the `p` side (`Client_Connections_connected`).
    fn clients_connected(&self, _p: Protocol) -> u64 {
        0
    }
    /// Why Sluice should not get new clients now (`/readyz`), or `None` when it is ready.
    fn not_ready(&self) -> Option<String> {
        None
    }
    /// `PROXYSQL FLUSH QUERY CACHE`: entries dropped.
    fn flush_query_cache(&self, _p: Protocol) -> usize {
        0
    }
    /// Client addresses with failed logins (`stats_*_client_host_cache`).
    fn client_hosts(&self, _p: Protocol) -> Vec<crate::login_throttle::ClientHostRow> {
        Vec::new()
    }
    /// Forgets every client address's failed logins (`PROXYSQL FLUSH … CLIENT HOSTS`); returns
    /// how many addresses were held.
    fn flush_client_hosts(&self, _p: Protocol) -> usize {
        0
    }
    /// Asks the process to stop (PROXYSQL SHUTDOWN).
    fn shutdown(&self);
    /// Stops / resumes accepting client connections (PROXYSQL PAUSE / RESUME).
    fn set_paused(&self, paused: bool);
}

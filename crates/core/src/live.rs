//! The data path's live state as the admin tables, the HTTP port and the status page show it
//! ([`LiveStats`]: typed rows, one method per view, the protocol side as a parameter where both
//! sides have the view), and the commands the admin carries out on the running process
//! ([`Control`]). `sluice-app` implements both over the running frontends, monitors and MCP
//! endpoint; `sluice-admin` turns the rows into its tables, naming each side's columns.

use crate::Protocol;
use crate::login_throttle::{ClientHostRow, LoginThrottle};
use crate::metrics::{Exposition, FrontendStats, HistogramSnapshot, ProtocolMetrics};
use crate::query::commands::{CommandCount, ErrorCount};
use crate::query::{DigestRow, QueryCache, QueryProcessorStats};
use crate::runtime::{HostgroupServer, ServerKey};
use crate::topology::{CheckKind, CheckRow};
use std::collections::BTreeMap;

/// The error of a control the process carries out for an admin command (its own crate's type,
/// with its source chain); the admin engine shows its text.
pub type ControlError = Box<dyn std::error::Error + Send + Sync + 'static>;

/// A control this process does not have (an embedding without that subsystem).
#[derive(Debug, Clone, Copy, thiserror::Error)]
#[error("{0} is not available in this process")]
pub struct Unavailable(pub &'static str);

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

/// One idle server connection (`stats_*_free_connections`, PgBouncer's `SHOW SERVERS`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FreeConnection {
    /// The server's id for the connection: MySQL's thread id, PostgreSQL's backend pid.
    pub backend_id: u32,
    /// The hostgroup it was checked out for.
    pub hostgroup: u32,
    /// The server it is open to.
    pub server: ServerKey,
    /// The account it is logged in as.
    pub user: String,
    /// The schema (MySQL) or database (PostgreSQL) selected on it now.
    pub database: Option<String>,
    /// `time_zone` set on it, if any (MySQL).
    pub time_zone: Option<String>,
    /// `sql_mode` set on it, if any (MySQL).
    pub sql_mode: Option<String>,
    /// `autocommit` set on it, if any (MySQL).
    pub autocommit: Option<String>,
    /// Time in the pool (ms).
    pub idle_ms: u64,
}

/// One row of `stats_pgsql_listen_channels`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListenChannelRow {
    /// The database of the listener connection.
    pub database: String,
    /// The channel.
    pub channel: String,
    /// Sessions listening to it.
    pub listeners: usize,
    /// Notifications received on it.
    pub received: u64,
    /// Notifications written to clients.
    pub delivered: u64,
    /// Notifications lost with sessions ended for not reading them.
    pub dropped: u64,
}

/// One row of `stats_pgsql_listeners`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListenerRow {
    /// The writer hostgroup.
    pub hostgroup: u32,
    /// The server connected to (`host:port`), while connected.
    pub server: Option<String>,
    /// The database.
    pub database: String,
    /// The listener connection's backend pid, while connected.
    pub backend_pid: Option<u32>,
    /// Channels listened to.
    pub channels: usize,
    /// Times it was opened again after a loss or a writer change.
    pub reconnects: u64,
    /// Why it was last lost, if it was.
    pub last_error: Option<String>,
}

/// What the monitor measured of one server, for the pool rows (`sluice-monitor`'s `Monitor`
/// implements it).
pub trait ServerReadings: Send + Sync {
    /// The last ping time (µs); 0 when none.
    fn latency_us(&self, server: &ServerKey) -> u64;
    /// The last replication lag (s) measured; `None` when none.
    fn replication_lag(&self, server: &ServerKey) -> Option<u64>;
}

/// One protocol side's frontend as the live views read it. `sluice-mysql`'s `MysqlFrontend`
/// and `sluice-pgsql`'s `PgFrontend` implement it in their own crates, over their own sessions,
/// pools and counters; a [`LiveStats`] picks the side by [`Protocol`].
pub trait FrontendView: Send + Sync {
    /// `stats_*_connection_pool`: every server of the live hostgroups with its pool's
    /// connections and traffic, and `readings`' latency and lag.
    fn connection_pool(&self, readings: &dyn ServerReadings) -> Vec<PoolRow>;
    /// `stats_*_processlist`: one row per client session.
    fn processlist(&self) -> Vec<ProcessRow>;
    /// `stats_*_commands_counters`.
    fn commands_counters(&self) -> Vec<CommandCount>;
    /// `stats_*_errors`.
    fn errors(&self) -> Vec<ErrorCount>;
    /// `stats_*_free_connections`: the idle pooled connections.
    fn free_connections(&self) -> Vec<FreeConnection>;
    /// Clients, statements, transactions and their latency.
    fn frontend_stats(&self) -> &FrontendStats;
    /// The query processor's statistics (digests, rule hits, counters).
    fn query_stats(&self) -> &QueryProcessorStats;
    /// The query cache.
    fn query_cache(&self) -> &QueryCache;
    /// What the metrics and `stats_*_global` read; `servers` are its [`connection_pool`] rows,
    /// `monitor_checks` its monitor's (kind, successes, failures).
    ///
    /// [`connection_pool`]: FrontendView::connection_pool
    fn metrics<'a>(
        &'a self,
        servers: &'a [PoolRow],
        monitor_checks: Vec<(&'static str, u64, u64)>,
    ) -> ProtocolMetrics<'a>;
    /// `stats_*_global` rows only this side has (MySQL's `Stmt_Cached`, `Paused`, …).
    fn own_globals(&self) -> Vec<(String, String)> {
        Vec::new()
    }
    /// Clients connected now.
    fn clients_connected(&self) -> u64;
    /// The failed-login table of this side's ports.
    fn login_throttle(&self) -> &LoginThrottle;
}

/// What the data path shows: each view as typed rows. The defaults answer "nothing" for an
/// embedding without that subsystem.
pub trait LiveStats: Send + Sync {
    /// `stats_*_connection_pool`: every server of the live hostgroups, and servers that left
    /// the configuration but still hold connections.
    fn connection_pool(&self, p: Protocol) -> Vec<PoolRow>;
    /// The connected clients (`stats_*_processlist`).
    fn processlist(&self, p: Protocol) -> Vec<ProcessRow>;
    /// `stats_*_global`: frontend, pools, query processor, cache and monitor counters.
    fn globals(&self, p: Protocol) -> Vec<(String, String)>;
    /// `stats_*_commands_counters`.
    fn commands_counters(&self, p: Protocol) -> Vec<CommandCount>;
    /// `stats_*_errors`.
    fn errors(&self, p: Protocol) -> Vec<ErrorCount>;
    /// The idle server connections (`stats_*_free_connections`).
    fn free_connections(&self, p: Protocol) -> Vec<FreeConnection>;
    /// `stats_*_query_digest`; `reset` empties the map (the `_reset` table).
    fn query_digests(&self, _p: Protocol, _reset: bool) -> Vec<DigestRow> {
        Vec::new()
    }
    /// `stats_*_query_rules`: (rule_id, hits).
    fn query_rule_hits(&self, _p: Protocol) -> Vec<(u32, u64)> {
        Vec::new()
    }
    /// The monitor's log rows of one check kind.
    fn monitor_log(&self, _p: Protocol, _kind: CheckKind) -> Vec<CheckRow> {
        Vec::new()
    }
    /// The hostgroups as the data path uses them now (configuration + monitor verdicts).
    fn live_hostgroups(&self, _p: Protocol) -> Option<BTreeMap<u32, Vec<HostgroupServer>>> {
        None
    }
    /// Client addresses with failed logins (`stats_*_client_host_cache`).
    fn client_hosts(&self, _p: Protocol) -> Vec<ClientHostRow> {
        Vec::new()
    }
    /// Clients connected now (`Client_Connections_connected`).
    fn clients_connected(&self, _p: Protocol) -> u64 {
        0
    }
    /// Every statement's latency so far, all hostgroups together (the status page's p99 from
    /// successive snapshots).
    fn statement_latency(&self, _p: Protocol) -> HistogramSnapshot {
        HistogramSnapshot::default()
    }
    /// `stats_pgsql_listen_channels`.
    fn listen_channels(&self) -> Vec<ListenChannelRow> {
        Vec::new()
    }
    /// `stats_pgsql_listeners`.
    fn listeners(&self) -> Vec<ListenerRow> {
        Vec::new()
    }
    /// Per-hostgroup traffic of the PostgreSQL side (PgBouncer's `SHOW STATS`).
    fn pgsql_hostgroup_traffic(&self) -> Vec<HostgroupTraffic> {
        Vec::new()
    }
    /// Seconds since the process started.
    fn uptime_seconds(&self) -> u64 {
        0
    }
    /// True while `PROXYSQL PAUSE` (or PgBouncer's `PAUSE`) holds new connections.
    fn paused(&self) -> bool {
        false
    }
    /// `stats_memory_metrics` rows: (name, bytes).
    fn memory_metrics(&self) -> Vec<(String, String)> {
        Vec::new()
    }
    /// Writes both protocol sides' metric families (`/metrics`, `SHOW PROMETHEUS METRICS`).
    fn write_metrics(&self, _out: &mut Exposition) {}
    /// `stats_workload_classes` rows (admission control); `None`: this build keeps none.
    fn workload_classes(&self) -> Option<crate::admin::AdminRows> {
        None
    }
    /// `stats_workload_guards` rows.
    fn workload_guards(&self) -> Option<crate::admin::AdminRows> {
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
    fn mcp_tables(&self) -> Vec<(&'static str, crate::admin::AdminRows)> {
        Vec::new()
    }
    /// Why Sluice should not get new clients now (`/readyz`), or `None` when it is ready.
    fn not_ready(&self) -> Option<String> {
        None
    }
}

/// What the admin's commands do to the running process.
pub trait Control: Send + Sync {
    /// Called after a new runtime configuration was published: connections to servers that
    /// left (or went OFFLINE_HARD) are closed, the MCP port follows its variables.
    fn runtime_changed(&self);
    /// Closes a client session (`KILL`); false when there is no such session.
    fn kill_session(&self, id: u32) -> bool;
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
    /// `PROXYSQL FLUSH QUERY CACHE`: entries dropped.
    fn flush_query_cache(&self, _p: Protocol) -> usize {
        0
    }
    /// Forgets every client address's failed logins (`PROXYSQL FLUSH … CLIENT HOSTS`);
    /// returns how many addresses were held.
    fn flush_client_hosts(&self, _p: Protocol) -> usize {
        0
    }
    /// Asks the process to stop (`PROXYSQL SHUTDOWN`).
    fn shutdown(&self);
    /// Stops / resumes accepting client connections (`PROXYSQL PAUSE` / `RESUME`).
    fn set_paused(&self, paused: bool);
}

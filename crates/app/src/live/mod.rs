//! The data path's live state as the admin tables show it.

use sluice_core::ConfigHandle;
use sluice_core::live::{
    Control, ControlError, FreeConnection, FrontendView, HostgroupTraffic, ListenChannelRow,
    ListenerRow, LiveStats, PoolRow, ProcessRow,
};
use sluice_core::metrics::{Exposition, global_rows, write_protocol};
use sluice_core::query::DigestRow;
use sluice_core::query::commands::{CommandCount, ErrorCount};
use sluice_core::runtime::HostgroupServer;
use sluice_core::topology::{CheckKind, CheckRow};
use sluice_core::{PerProtocol, Protocol};
use sluice_monitor::Monitor;
use sluice_mysql::MysqlFrontend;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use tokio_util::sync::CancellationToken;

/// Reads counters and sessions of the running frontends.
pub(crate) struct Live {
    pub mysql: Arc<MysqlFrontend>,
    pub pgsql: Arc<sluice_pgsql::PgFrontend>,
    /// The MySQL and PostgreSQL monitors.
    pub monitors: PerProtocol<Arc<Monitor>>,
    pub config: ConfigHandle,
    /// Cancelled by `PROXYSQL SHUTDOWN`.
    pub stop: CancellationToken,
    /// When the process started (`ProxySQL_Uptime`).
    pub started: std::time::Instant,
    /// The MCP port's supervisor (it follows runtime changes).
    pub mcp: Arc<sluice_mcp::McpServer>,
    /// The MCP endpoint's counters.
    pub mcp_stats: Arc<sluice_mcp::McpStats>,
    /// More `stats_memory_metrics` rows from the embedder ([`crate::Options::memory_rows`]).
    pub memory_rows: Option<crate::MemoryRows>,
}

impl Live {
    /// One protocol side's frontend, as the views read it.
    fn side(&self, p: Protocol) -> &dyn FrontendView {
        match p {
            Protocol::Mysql => &*self.mysql,
            Protocol::Pgsql => &*self.pgsql,
        }
    }

    /// Seconds since the process started.
    fn uptime(&self) -> String {
        self.started.elapsed().as_secs().to_string()
    }

    /// `stats_*_global`: uptime, the side's counters and metrics, its own rows, the query
    /// processor's and the monitor's.
    fn global_rows(&self, p: Protocol) -> Vec<(String, String)> {
        let side = self.side(p);
        let servers = side.connection_pool(&*self.monitors[p]);
        let mut rows = vec![("ProxySQL_Uptime".to_string(), self.uptime())];
        rows.extend(global_rows(
            &side.metrics(&servers, self.monitors[p].log.check_counts()),
        ));
        rows.extend(side.own_globals());
        rows.extend(query_globals(side));
        rows.extend(self.monitors[p].counters());
        rows
    }
}

/// The query processor's and the query cache's `stats_*_global` rows.
fn query_globals(side: &dyn FrontendView) -> Vec<(String, String)> {
    let q = side.query_stats();
    let l = |a: &std::sync::atomic::AtomicU64| a.load(Ordering::Relaxed).to_string();
    let mut v = vec![
        ("Queries_delayed".to_string(), l(&q.delayed)),
        ("Queries_blocked_by_rules".to_string(), l(&q.blocked)),
        ("Queries_answered_by_rules".to_string(), l(&q.ok_answered)),
        ("Queries_rewritten".to_string(), l(&q.rewritten)),
        ("Queries_mirrored".to_string(), l(&q.mirrored)),
        ("Queries_mirror_dropped".to_string(), l(&q.mirror_dropped)),
        (
            "Queries_killed_by_timeout".to_string(),
            l(&q.killed_by_timeout),
        ),
        (
            "Query_digests_entries".to_string(),
            q.digests.len().to_string(),
        ),
        (
            "Query_digests_evicted".to_string(),
            q.digests.evicted().to_string(),
        ),
    ];
    v.extend(side.query_cache().global_rows());
    v
}

impl LiveStats for Live {
    fn connection_pool(&self, p: Protocol) -> Vec<PoolRow> {
        self.side(p).connection_pool(&*self.monitors[p])
    }

    fn processlist(&self, p: Protocol) -> Vec<ProcessRow> {
        self.side(p).processlist()
    }

    fn globals(&self, p: Protocol) -> Vec<(String, String)> {
        self.global_rows(p)
    }

    fn commands_counters(&self, p: Protocol) -> Vec<CommandCount> {
        self.side(p).commands_counters()
    }

    fn errors(&self, p: Protocol) -> Vec<ErrorCount> {
        self.side(p).errors()
    }

    fn free_connections(&self, p: Protocol) -> Vec<FreeConnection> {
        self.side(p).free_connections()
    }

    fn query_digests(&self, p: Protocol, reset: bool) -> Vec<DigestRow> {
        let d = &self.side(p).query_stats().digests;
        if reset { d.take_rows() } else { d.rows() }
    }

    fn query_rule_hits(&self, p: Protocol) -> Vec<(u32, u64)> {
        self.side(p).query_stats().rule_hits()
    }

    fn monitor_log(&self, p: Protocol, kind: CheckKind) -> Vec<CheckRow> {
        self.monitors[p].log.rows(kind)
    }

    fn live_hostgroups(&self, p: Protocol) -> Option<BTreeMap<u32, Vec<HostgroupServer>>> {
        let rt = self.config.load();
        Some(match p {
            Protocol::Mysql => rt.mysql.hostgroups.clone(),
            Protocol::Pgsql => rt.pgsql.hostgroups.clone(),
        })
    }

    fn listen_channels(&self) -> Vec<ListenChannelRow> {
        self.pgsql.listen_channels()
    }

    fn listeners(&self) -> Vec<ListenerRow> {
        self.pgsql.listeners()
    }

    fn write_metrics(&self, out: &mut Exposition) {
        for p in [Protocol::Mysql, Protocol::Pgsql] {
            let side = self.side(p);
            let servers = side.connection_pool(&*self.monitors[p]);
            write_protocol(
                out,
                &side.metrics(&servers, self.monitors[p].log.check_counts()),
            );
        }
        self.mcp_stats.write_metrics(out);
        let rt = self.config.load();
        let admission = self.mysql.admission();
        admission.write_metrics(out, &rt.workload_classes);
        admission.write_guard_metrics(out, &rt.workload_guards);
    }

    fn workload_classes(&self) -> Option<sluice_core::admin::AdminRows> {
        let rt = self.config.load();
        Some(self.mysql.admission().stats_rows(&rt.workload_classes))
    }

    fn workload_guards(&self) -> Option<sluice_core::admin::AdminRows> {
        let rt = self.config.load();
        Some(self.mysql.admission().guard_rows(&rt.workload_guards))
    }

    fn throttler_check(&self, app: &str) -> sluice_core::admission::ThrottleAnswer {
        let rt = self.config.load();
        self.mysql
            .admission()
            .throttler_check(&rt.workload_guards, app)
    }

    fn mcp_tables(&self) -> Vec<(&'static str, sluice_core::admin::AdminRows)> {
        self.mcp_stats.tables()
    }

    fn memory_metrics(&self) -> Vec<(String, String)> {
        let my = self.mysql.counters();
        let pg = self.pgsql.query_stats();
        let mut rows: Vec<(&str, u64)> = Vec::new();
        if let Some(rss) = sluice_core::util::rss_bytes() {
            rows.push(("resident_memory_bytes", rss));
        }
        rows.extend([
            (
                "mysql_query_digest_memory",
                my.query.digests.memory_bytes() as u64,
            ),
            (
                "pgsql_query_digest_memory",
                pg.digests.memory_bytes() as u64,
            ),
            ("mysql_query_cache_memory", my.cache.memory_bytes() as u64),
            (
                "pgsql_query_cache_memory",
                self.pgsql.cache().memory_bytes() as u64,
            ),
            (
                "mysql_prepared_statements",
                self.mysql.statements().len() as u64,
            ),
            ("mysql_sessions", u64::from(self.mysql.registry().total())),
            ("pgsql_sessions", self.pgsql.sessions().len() as u64),
        ]);
        if let Some(more) = self.memory_rows {
            rows.extend(more());
        }
        rows.into_iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    fn statement_latency(&self, p: Protocol) -> sluice_core::metrics::HistogramSnapshot {
        let mut all = sluice_core::metrics::HistogramSnapshot::default();
        for (_, h) in self.side(p).frontend_stats().latency.snapshot() {
            all.add(h);
        }
        all
    }

    fn pgsql_hostgroup_traffic(&self) -> Vec<HostgroupTraffic> {
        self.pgsql.hostgroup_traffic()
    }

    fn uptime_seconds(&self) -> u64 {
        self.started.elapsed().as_secs()
    }

    fn paused(&self) -> bool {
        self.mysql.paused().load(Ordering::Relaxed)
    }

    fn clients_connected(&self, p: Protocol) -> u64 {
        self.side(p).clients_connected()
    }

    fn not_ready(&self) -> Option<String> {
        if self.stop.is_cancelled() || self.mysql.shutdown().is_cancelled() {
            return Some("shutting down".into());
        }
        if self.mysql.paused().load(Ordering::Relaxed) {
            return Some("paused (PROXYSQL PAUSE)".into());
        }
        sluice_core::readiness::writers_without_online_server(&self.config.load())
    }

    fn client_hosts(&self, p: Protocol) -> Vec<sluice_core::login_throttle::ClientHostRow> {
        self.side(p).login_throttle().rows()
    }
}

impl Control for Live {
    fn rag_sync(&self, source_id: u32) -> Result<String, ControlError> {
        Ok(self.mcp.service().rag_sync(source_id)?)
    }

    fn reload_tls(&self) -> Result<(), ControlError> {
        let rt = self.config.load();
        if let Some(t) = self.mysql.tls() {
            t.reload(&rt.mysql.variables.frontend_tls())?;
        }
        if let Some(t) = self.pgsql.tls() {
            t.reload(&rt.pgsql.variables.frontend_tls())?;
        }
        Ok(())
    }

    fn flush_query_cache(&self, p: Protocol) -> usize {
        self.side(p).query_cache().flush()
    }

    fn flush_client_hosts(&self, p: Protocol) -> usize {
        let t = self.side(p).login_throttle();
        let n = t.rows().len();
        t.flush();
        n
    }

    fn runtime_changed(&self) {
        let rt = self.config.load();
        self.mysql
            .pool()
            .purge_idle(|hg, server| rt.mysql.server_in_service(hg, server));
        self.mcp.reconfigure();
    }

    fn kill_session(&self, id: u32) -> bool {
        self.mysql.registry().kill(id)
    }

    fn shutdown(&self) {
        self.stop.cancel();
    }

    fn set_paused(&self, paused: bool) {
        self.mysql.paused().store(paused, Ordering::Relaxed);
    }
}

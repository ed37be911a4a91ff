//! The data path's live state as the admin tables show it.

use sluice_core::ConfigHandle;
use sluice_core::live::{
    Control, ControlError, FreeConnection, HostgroupTraffic, ListenChannelRow, ListenerRow,
    LiveStats, PoolRow, ProcessRow,
};
use sluice_core::metrics::{Exposition, ProtocolMetrics, global_rows, write_protocol};
use sluice_core::query::commands::{CommandCount, ErrorCount};
use sluice_core::query::{DigestRow, QueryProcessorStats};
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

mod pgsql;

impl Live {
    /// The failed-login table of one protocol's ports.
    fn login_throttle(&self, p: Protocol) -> &sluice_core::login_throttle::LoginThrottle {
        match p {
            Protocol::Mysql => self.mysql.login_gate().throttle(),
            Protocol::Pgsql => self.pgsql.login_gate().throttle(),
        }
    }

    /// Seconds since the process started.
    fn uptime(&self) -> String {
        self.started.elapsed().as_secs().to_string()
    }

    /// What the metrics and `stats_*_global` read about one protocol side; `servers` are its
    /// connection pool rows.
    fn metrics_of<'a>(&'a self, p: Protocol, servers: &'a [PoolRow]) -> ProtocolMetrics<'a> {
        match p {
            Protocol::Mysql => ProtocolMetrics {
                protocol: "mysql",
                frontend: &self.mysql.counters().stats,
                clients_connected: self.clients_connected(p),
                pool: self.mysql.pool().pool_stats(),
                servers,
                query: &self.mysql.counters().query,
                cache: &self.mysql.counters().cache,
                errors: &self.mysql.counters().commands,
                monitor_checks: self.monitors.mysql.log.check_counts(),
            },
            Protocol::Pgsql => ProtocolMetrics {
                protocol: "pgsql",
                frontend: self.pgsql.stats(),
                clients_connected: self.clients_connected(p),
                pool: self.pgsql.pool().pool_stats(),
                servers,
                query: self.pgsql.query_stats(),
                cache: self.pgsql.cache(),
                errors: &self.pgsql.server_stats().errors,
                monitor_checks: self.monitors.pgsql.log.check_counts(),
            },
        }
    }

    fn monitor(&self, p: Protocol) -> &Monitor {
        &self.monitors[p]
    }

    fn query_stats(&self, p: Protocol) -> &QueryProcessorStats {
        match p {
            Protocol::Mysql => &self.mysql.counters().query,
            Protocol::Pgsql => self.pgsql.query_stats(),
        }
    }
}

impl Live {
    fn mysql_connection_pool_rows(&self) -> Vec<PoolRow> {
        // Every server of the live hostgroups (like ProxySQL), plus pools of servers that left
        // the configuration but still hold connections (shown as OFFLINE_HARD).
        let rt = self.config.load();
        let stats = self.mysql.pool().stats();
        let counts = |hg: u32, key: &sluice_core::runtime::ServerKey| {
            stats
                .iter()
                .find(|s| s.hostgroup == hg && &s.server == key)
                .map_or((0, 0), |s| (s.open.saturating_sub(s.idle), s.idle))
        };
        let row = |hg: u32, key: &sluice_core::runtime::ServerKey, status: &str| {
            let (used, free) = counts(hg, key);
            let t = self.mysql.pool().traffic().of(hg, &key.to_string());
            PoolRow {
                latency_us: self.monitors.mysql.latency_us(key),
                replication_lag_s: self.monitors.mysql.replication_lag(key),
                queries: t.queries.get(),
                connects_ok: t.connects_ok.load(Ordering::Relaxed),
                connects_err: t.connects_err.load(Ordering::Relaxed),
                bytes_sent: t.bytes_sent.get(),
                bytes_recv: t.bytes_recv.get(),
                hostgroup: hg,
                srv_host: key.hostname.clone(),
                srv_port: key.port,
                status: status.to_string(),
                conn_used: used,
                conn_free: free,
            }
        };
        let mut rows: Vec<PoolRow> = rt
            .mysql
            .hostgroups
            .iter()
            .flat_map(|(hg, v)| v.iter().map(move |h| (*hg, h)))
            .map(|(hg, h)| row(hg, &h.key, h.status.as_str()))
            .collect();
        for s in &stats {
            let known = rt
                .mysql
                .hostgroups
                .get(&s.hostgroup)
                .is_some_and(|v| v.iter().any(|h| h.key == s.server));
            if !known {
                rows.push(row(s.hostgroup, &s.server, "OFFLINE_HARD"));
            }
        }
        rows
    }

    fn mysql_processlist_rows(&self) -> Vec<ProcessRow> {
        let rt = self.config.load();
        self.mysql
            .registry()
            .processlist()
            .into_iter()
            .map(|p| ProcessRow {
                session_id: p.id,
                hostgroup: rt
                    .mysql
                    .frontend_users
                    .get(&p.user)
                    .map_or(0, |u| u.default_hostgroup.0),
                user: p.user,
                db: p.schema,
                client: p.client,
                pin_reason: p.pin_reason.map(str::to_string),
                pinned_seconds: p.pinned_since.map(|t| t.elapsed().as_secs()),
                queued: p
                    .waiting
                    .map(|(class, since)| (class, since.elapsed().as_millis() as u64)),
                thread: p.thread,
                listening: Vec::new(),
            })
            .collect()
    }

    fn mysql_global_rows(&self) -> Vec<(String, String)> {
        let servers = self.mysql_connection_pool_rows();
        let mut rows = vec![("ProxySQL_Uptime".to_string(), self.uptime())];
        rows.extend(global_rows(&self.metrics_of(Protocol::Mysql, &servers)));
        rows.extend([
            (
                "Stmt_Cached".into(),
                self.mysql.statements().len().to_string(),
            ),
            (
                "Unparsed_SET_statements".into(),
                self.mysql
                    .counters()
                    .unparsed_set
                    .load(Ordering::Relaxed)
                    .to_string(),
            ),
            (
                "Paused".into(),
                self.mysql.paused().load(Ordering::Relaxed).to_string(),
            ),
        ]);
        rows
    }

    fn query_globals(&self, p: Protocol) -> Vec<(String, String)> {
        let q = self.query_stats(p);
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
        v.extend(match p {
            Protocol::Mysql => self.mysql.counters().cache.global_rows(),
            Protocol::Pgsql => self.pgsql.cache().global_rows(),
        });
        v.extend(self.monitor(p).counters());
        v
    }

    fn pgsql_global_rows(&self) -> Vec<(String, String)> {
        let servers = self.pgsql_connection_pool_rows();
        let mut rows = vec![("ProxySQL_Uptime".to_string(), self.uptime())];
        rows.extend(global_rows(&self.metrics_of(Protocol::Pgsql, &servers)));
        rows
    }
}

impl LiveStats for Live {
    fn connection_pool(&self, p: Protocol) -> Vec<PoolRow> {
        match p {
            Protocol::Mysql => self.mysql_connection_pool_rows(),
            Protocol::Pgsql => self.pgsql_connection_pool_rows(),
        }
    }

    fn processlist(&self, p: Protocol) -> Vec<ProcessRow> {
        match p {
            Protocol::Mysql => self.mysql_processlist_rows(),
            Protocol::Pgsql => self.pgsql_processlist_rows(),
        }
    }

    fn globals(&self, p: Protocol) -> Vec<(String, String)> {
        let mut rows = match p {
            Protocol::Mysql => self.mysql_global_rows(),
            Protocol::Pgsql => self.pgsql_global_rows(),
        };
        rows.extend(self.query_globals(p));
        rows
    }

    fn commands_counters(&self, p: Protocol) -> Vec<CommandCount> {
        match p {
            Protocol::Mysql => self.mysql.counters().commands.commands(),
            Protocol::Pgsql => self.pgsql.commands().commands(),
        }
    }

    fn errors(&self, p: Protocol) -> Vec<ErrorCount> {
        match p {
            Protocol::Mysql => self.mysql.counters().commands.errors(),
            Protocol::Pgsql => self.pgsql.server_stats().errors.errors(),
        }
    }

    fn free_connections(&self, p: Protocol) -> Vec<FreeConnection> {
        match p {
            Protocol::Mysql => self.mysql.pool().free_connections(),
            Protocol::Pgsql => self.pgsql.pool().free_connections(),
        }
    }

    fn query_digests(&self, p: Protocol, reset: bool) -> Vec<DigestRow> {
        let d = &self.query_stats(p).digests;
        if reset { d.take_rows() } else { d.rows() }
    }

    fn query_rule_hits(&self, p: Protocol) -> Vec<(u32, u64)> {
        self.query_stats(p).rule_hits()
    }

    fn monitor_log(&self, p: Protocol, kind: CheckKind) -> Vec<CheckRow> {
        self.monitor(p).log.rows(kind)
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
        let my_servers = self.mysql_connection_pool_rows();
        write_protocol(out, &self.metrics_of(Protocol::Mysql, &my_servers));
        let pg_servers = self.pgsql_connection_pool_rows();
        write_protocol(out, &self.metrics_of(Protocol::Pgsql, &pg_servers));
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
        let stats = match p {
            Protocol::Mysql => &self.mysql.counters().stats,
            Protocol::Pgsql => self.pgsql.stats(),
        };
        let mut all = sluice_core::metrics::HistogramSnapshot::default();
        for (_, h) in stats.latency.snapshot() {
            all.add(h);
        }
        all
    }

    fn pgsql_hostgroup_traffic(&self) -> Vec<HostgroupTraffic> {
        self.pgsql_hostgroup_traffic_rows()
    }

    fn uptime_seconds(&self) -> u64 {
        self.started.elapsed().as_secs()
    }

    fn paused(&self) -> bool {
        self.mysql.paused().load(Ordering::Relaxed)
    }

    fn clients_connected(&self, p: Protocol) -> u64 {
        match p {
            Protocol::Mysql => u64::from(self.mysql.registry().total()),
            Protocol::Pgsql => self.pgsql.sessions().len() as u64,
        }
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
        self.login_throttle(p).rows()
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
        match p {
            Protocol::Mysql => self.mysql.counters().cache.flush(),
            Protocol::Pgsql => self.pgsql.cache().flush(),
        }
    }

    fn flush_client_hosts(&self, p: Protocol) -> usize {
        let t = self.login_throttle(p);
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

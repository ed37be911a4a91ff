//! The MySQL side of the live views ([`FrontendView`]): pools, sessions and counters of this
//! frontend as `stats_mysql_*`, the metrics and the status page show them.

use crate::MysqlFrontend;
use sluice_core::live::{FreeConnection, FrontendView, PoolRow, ProcessRow, ServerReadings};
use sluice_core::login_throttle::LoginThrottle;
use sluice_core::metrics::{FrontendStats, ProtocolMetrics};
use sluice_core::query::commands::{CommandCount, ErrorCount};
use sluice_core::query::{QueryCache, QueryProcessorStats};
use sluice_core::runtime::ServerKey;
use std::sync::atomic::Ordering;

impl FrontendView for MysqlFrontend {
    /// Every server of the live hostgroups (like ProxySQL), plus pools of servers that left the
    /// configuration but still hold connections (shown as OFFLINE_HARD).
    fn connection_pool(&self, readings: &dyn ServerReadings) -> Vec<PoolRow> {
        let rt = self.config().load();
        let stats = self.pool().stats();
        let counts = |hg: u32, key: &ServerKey| {
            stats
                .iter()
                .find(|s| s.hostgroup == hg && &s.server == key)
                .map_or((0, 0), |s| (s.open.saturating_sub(s.idle), s.idle))
        };
        let row = |hg: u32, key: &ServerKey, status: &str| {
            let (used, free) = counts(hg, key);
            let t = self.pool().traffic().of(hg, &key.to_string());
            PoolRow {
                latency_us: readings.latency_us(key),
                replication_lag_s: readings.replication_lag(key),
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

    fn processlist(&self) -> Vec<ProcessRow> {
        let rt = self.config().load();
        self.registry()
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

    fn commands_counters(&self) -> Vec<CommandCount> {
        self.counters().commands.commands()
    }

    fn errors(&self) -> Vec<ErrorCount> {
        self.counters().commands.errors()
    }

    fn free_connections(&self) -> Vec<FreeConnection> {
        self.pool().free_connections()
    }

    fn frontend_stats(&self) -> &FrontendStats {
        &self.counters().stats
    }

    fn query_stats(&self) -> &QueryProcessorStats {
        &self.counters().query
    }

    fn query_cache(&self) -> &QueryCache {
        &self.counters().cache
    }

    fn metrics<'a>(
        &'a self,
        servers: &'a [PoolRow],
        monitor_checks: Vec<(&'static str, u64, u64)>,
    ) -> ProtocolMetrics<'a> {
        ProtocolMetrics {
            protocol: "mysql",
            frontend: &self.counters().stats,
            clients_connected: self.clients_connected(),
            pool: self.pool().pool_stats(),
            servers,
            query: &self.counters().query,
            cache: &self.counters().cache,
            errors: &self.counters().commands,
            monitor_checks,
        }
    }

    fn own_globals(&self) -> Vec<(String, String)> {
        vec![
            ("Stmt_Cached".into(), self.statements().len().to_string()),
            (
                "Unparsed_SET_statements".into(),
                self.counters()
                    .unparsed_set
                    .load(Ordering::Relaxed)
                    .to_string(),
            ),
            (
                "Paused".into(),
                self.paused().load(Ordering::Relaxed).to_string(),
            ),
        ]
    }

    fn clients_connected(&self) -> u64 {
        u64::from(self.registry().total())
    }

    fn login_throttle(&self) -> &LoginThrottle {
        self.login_gate().throttle()
    }
}

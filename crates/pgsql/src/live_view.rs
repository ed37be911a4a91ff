//! The PostgreSQL side of the live views ([`FrontendView`]): pools, sessions and counters of
//! this frontend as `stats_pgsql_*`, the metrics, the status page and PgBouncer's `SHOW`
//! commands show them; and the per-hostgroup traffic (`SHOW STATS`).

use crate::PgFrontend;
use sluice_core::live::{
    FreeConnection, FrontendView, HostgroupTraffic, PoolRow, ProcessRow, ServerReadings,
};
use sluice_core::login_throttle::LoginThrottle;
use sluice_core::metrics::{FrontendStats, ProtocolMetrics};
use sluice_core::query::commands::{CommandCount, ErrorCount};
use sluice_core::query::{QueryCache, QueryProcessorStats};
use std::collections::BTreeMap;
use std::sync::atomic::Ordering;

impl FrontendView for PgFrontend {
    /// Every server of the live hostgroups with its pool's connections and traffic.
    fn connection_pool(&self, readings: &dyn ServerReadings) -> Vec<PoolRow> {
        let rt = self.config().load();
        let stats = self.pool().stats();
        rt.pgsql
            .hostgroups
            .iter()
            .flat_map(|(hg, servers)| servers.iter().map(move |s| (*hg, s)))
            .map(|(hg, s)| {
                let (used, free) = stats
                    .iter()
                    .find(|x| x.0 == hg && x.1 == s.key)
                    .map_or((0, 0), |x| (x.2, x.3));
                let t = self.pool().traffic().of(hg, &s.key.to_string());
                PoolRow {
                    hostgroup: hg,
                    srv_host: s.key.hostname.clone(),
                    srv_port: s.key.port,
                    status: s.status.as_str().to_string(),
                    conn_used: used,
                    conn_free: free,
                    queries: t.queries.get(),
                    connects_ok: t.connects_ok.load(Ordering::Relaxed),
                    connects_err: t.connects_err.load(Ordering::Relaxed),
                    bytes_sent: t.bytes_sent.get(),
                    bytes_recv: t.bytes_recv.get(),
                    latency_us: readings.latency_us(&s.key),
                    replication_lag_s: readings.replication_lag(&s.key),
                }
            })
            .collect()
    }

    fn processlist(&self) -> Vec<ProcessRow> {
        self.sessions()
            .list()
            .into_iter()
            .map(|p| ProcessRow {
                session_id: p.id,
                user: p.user,
                db: p.database,
                client: p.client,
                hostgroup: p.hostgroup,
                pin_reason: p.pin_reason.map(str::to_string),
                pinned_seconds: p.pinned_since.map(|t| t.elapsed().as_secs()),
                queued: p
                    .waiting
                    .map(|(class, since)| (class, since.elapsed().as_millis() as u64)),
                thread: p.thread,
                listening: p.listening,
            })
            .collect()
    }

    fn commands_counters(&self) -> Vec<CommandCount> {
        self.commands().commands()
    }

    fn errors(&self) -> Vec<ErrorCount> {
        self.server_stats().errors.errors()
    }

    fn free_connections(&self) -> Vec<FreeConnection> {
        self.pool().free_connections()
    }

    fn frontend_stats(&self) -> &FrontendStats {
        self.stats()
    }

    fn query_stats(&self) -> &QueryProcessorStats {
        PgFrontend::query_stats(self)
    }

    fn query_cache(&self) -> &QueryCache {
        self.cache()
    }

    fn metrics<'a>(
        &'a self,
        servers: &'a [PoolRow],
        monitor_checks: Vec<(&'static str, u64, u64)>,
    ) -> ProtocolMetrics<'a> {
        ProtocolMetrics {
            protocol: "pgsql",
            frontend: self.stats(),
            clients_connected: self.clients_connected(),
            pool: self.pool().pool_stats(),
            servers,
            query: PgFrontend::query_stats(self),
            cache: self.cache(),
            errors: &self.server_stats().errors,
            monitor_checks,
        }
    }

    fn clients_connected(&self) -> u64 {
        self.sessions().len() as u64
    }

    fn login_throttle(&self) -> &LoginThrottle {
        self.login_gate().throttle()
    }
}

impl PgFrontend {
    /// Per hostgroup: transactions, statements, bytes each way, time in statements and waiting
    /// for a connection (PgBouncer's `SHOW STATS`).
    pub fn hostgroup_traffic(&self) -> Vec<HostgroupTraffic> {
        let rt = self.config().load();
        let stats = self.stats();
        let latency: BTreeMap<i64, _> = stats.latency.snapshot().into_iter().collect();
        rt.pgsql
            .hostgroups
            .iter()
            .map(|(hg, servers)| {
                let h = i64::from(*hg);
                let (mut sent, mut recv) = (0, 0);
                for s in servers {
                    let t = self.pool().traffic().of(*hg, &s.key.to_string());
                    sent += t.bytes_sent.get();
                    recv += t.bytes_recv.get();
                }
                let lat = latency.get(&h);
                HostgroupTraffic {
                    hostgroup: *hg,
                    transactions: stats.transactions.get(h),
                    queries: lat.map_or(0, |l| l.count),
                    bytes_to_servers: sent,
                    bytes_from_servers: recv,
                    query_time_us: lat.map_or(0, |l| (l.sum_seconds * 1e6) as u64),
                    wait_us: stats.wait_us.get(h),
                }
            })
            .collect()
    }
}

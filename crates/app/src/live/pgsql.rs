//! The PostgreSQL side's rows of `LiveStats`: sessions, pools and traffic.

use super::Live;
use sluice_core::live::{HostgroupTraffic, PoolRow, ProcessRow};
use std::collections::BTreeMap;
use std::sync::atomic::Ordering;

impl Live {
    pub(super) fn pgsql_processlist_rows(&self) -> Vec<ProcessRow> {
        self.pgsql
            .sessions()
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

    pub(super) fn pgsql_connection_pool_rows(&self) -> Vec<PoolRow> {
        let rt = self.config.load();
        let stats = self.pgsql.pool().stats();
        rt.pgsql
            .hostgroups
            .iter()
            .flat_map(|(hg, servers)| servers.iter().map(move |s| (*hg, s)))
            .map(|(hg, s)| {
                let (used, free) = stats
                    .iter()
                    .find(|x| x.0 == hg && x.1 == s.key)
                    .map_or((0, 0), |x| (x.2, x.3));
                let t = self.pgsql.pool().traffic().of(hg, &s.key.to_string());
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
                    latency_us: self.monitors.pgsql.latency_us(&s.key),
                    replication_lag_s: self.monitors.pgsql.replication_lag(&s.key),
                }
            })
            .collect()
    }

    pub(super) fn pgsql_hostgroup_traffic_rows(&self) -> Vec<HostgroupTraffic> {
        let rt = self.config.load();
        let stats = self.pgsql.stats();
        let latency: BTreeMap<i64, _> = stats.latency.snapshot().into_iter().collect();
        rt.pgsql
            .hostgroups
            .iter()
            .map(|(hg, servers)| {
                let h = i64::from(*hg);
                let (mut sent, mut recv) = (0, 0);
                for s in servers {
                    let t = self.pgsql.pool().traffic().of(*hg, &s.key.to_string());
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

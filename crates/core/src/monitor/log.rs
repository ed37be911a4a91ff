//! The monitor's check logs (the `monitor.*_log` tables), bounded by `monitor_history` and a
//! row cap, and its OK/ERR counters (`MySQL_Monitor_*_check_OK/ERR`, `PgSQL_Monitor_*`).

use crate::runtime::ServerKey;
use crate::util::lock;
use std::collections::VecDeque;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

/// The kinds of health check the monitor runs, each with its log table.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CheckKind {
    /// Open a monitor connection.
    Connect,
    /// Heartbeat on the monitor connection.
    Ping,
    /// read_only / pg_is_in_recovery().
    ReadOnly,
    /// Replication lag (Seconds_Behind_Master / replay lag).
    ReplicationLag,
    /// Group Replication member state (MySQL).
    GroupReplication,
    /// Galera node state (MariaDB / Percona XtraDB Cluster).
    Galera,
}

impl CheckKind {
    /// All kinds, in counter order.
    pub const ALL: [CheckKind; 6] = [
        CheckKind::Connect,
        CheckKind::Ping,
        CheckKind::ReadOnly,
        CheckKind::ReplicationLag,
        CheckKind::GroupReplication,
        CheckKind::Galera,
    ];

    /// The name in counters and table names.
    pub fn name(self) -> &'static str {
        match self {
            CheckKind::Connect => "connect",
            CheckKind::Ping => "ping",
            CheckKind::ReadOnly => "read_only",
            CheckKind::ReplicationLag => "replication_lag",
            CheckKind::GroupReplication => "group_replication",
            CheckKind::Galera => "galera",
        }
    }

    fn index(self) -> usize {
        self as usize
    }
}

/// One check's row.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CheckRow {
    /// The server checked.
    pub server: ServerKey,
    /// Start (µs since the epoch).
    pub time_start_us: u64,
    /// Duration when it succeeded (µs), else 0.
    pub success_time_us: u64,
    /// The value read: read_only 0/1, or the lag in seconds (`None`: NULL or not applicable).
    pub value: Option<i64>,
    /// What went wrong.
    pub error: Option<String>,
    /// Group Replication: the member's state and role.
    pub member: Option<(String, String)>,
    /// Galera: what the node reported.
    pub galera: Option<super::cluster::GaleraStatus>,
}

/// Most rows kept per check kind, whatever `monitor_history` says.
const MAX_ROWS: usize = 20_000;

/// Bounded logs and counters of one protocol's monitor.
#[derive(Debug, Default)]
pub struct MonitorLog {
    rows: [Mutex<VecDeque<CheckRow>>; 6],
    ok: [AtomicU64; 6],
    err: [AtomicU64; 6],
}

impl MonitorLog {
    /// Records a check; rows older than `history_ms` (and beyond the cap) are dropped.
    pub fn record(&self, kind: CheckKind, row: CheckRow, history_ms: u64) {
        let i = kind.index();
        if row.error.is_some() {
            self.err[i].fetch_add(1, Ordering::Relaxed);
        } else {
            self.ok[i].fetch_add(1, Ordering::Relaxed);
        }
        let mut g = lock(&self.rows[i]);
        let oldest = row
            .time_start_us
            .saturating_sub(history_ms.saturating_mul(1000));
        while g
            .front()
            .is_some_and(|r| r.time_start_us < oldest || g.len() >= MAX_ROWS)
        {
            g.pop_front();
        }
        g.push_back(row);
    }

    /// The rows of one kind, oldest first.
    pub fn rows(&self, kind: CheckKind) -> Vec<CheckRow> {
        lock(&self.rows[kind.index()]).iter().cloned().collect()
    }

    /// (check kind, successes, failures) of every kind, for the metrics endpoint.
    pub fn check_counts(&self) -> Vec<(&'static str, u64, u64)> {
        CheckKind::ALL
            .iter()
            .map(|k| {
                let i = k.index();
                (
                    k.name(),
                    self.ok[i].load(Ordering::Relaxed),
                    self.err[i].load(Ordering::Relaxed),
                )
            })
            .collect()
    }

    /// `<prefix>_<kind>_check_OK` / `_ERR` counters (prefix `MySQL_Monitor` or `PgSQL_Monitor`).
    pub fn counters(&self, prefix: &str) -> Vec<(String, String)> {
        let mut v = Vec::new();
        for k in CheckKind::ALL {
            let i = k.index();
            v.push((
                format!("{prefix}_{}_check_OK", k.name()),
                self.ok[i].load(Ordering::Relaxed).to_string(),
            ));
            v.push((
                format!("{prefix}_{}_check_ERR", k.name()),
                self.err[i].load(Ordering::Relaxed).to_string(),
            ));
        }
        v
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(t: u64, error: Option<&str>) -> CheckRow {
        CheckRow {
            server: ServerKey {
                hostname: "h".into(),
                port: 1,
            },
            time_start_us: t,
            success_time_us: 5,
            value: None,
            error: error.map(str::to_string),
            member: None,
            galera: None,
        }
    }

    #[test]
    fn history_bounds_and_counters() {
        let l = MonitorLog::default();
        for s in 0..10u64 {
            l.record(
                CheckKind::Ping,
                row(s * 1_000_000, (s % 2 == 0).then_some("timeout")),
                3_000,
            );
        }
        let rows = l.rows(CheckKind::Ping);
        assert_eq!(rows.len(), 4, "rows within 3 s of the newest: 6,7,8,9");
        assert_eq!(rows[0].time_start_us, 6_000_000);
        let c = l.counters("PgSQL_Monitor");
        assert!(c.contains(&("PgSQL_Monitor_ping_check_OK".into(), "5".into())));
        assert!(c.contains(&("PgSQL_Monitor_ping_check_ERR".into(), "5".into())));
        assert!(c.contains(&("PgSQL_Monitor_read_only_check_OK".into(), "0".into())));
        assert!(l.rows(CheckKind::Connect).is_empty());
    }
}

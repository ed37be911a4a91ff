//! The monitor's check logs (the `monitor.*_log` tables), bounded by `monitor_history` and a
//! row cap, and its OK/ERR counters (`MySQL_Monitor_*_check_OK/ERR`, `PgSQL_Monitor_*`).

use sluice_core::topology::{CheckKind, CheckRow};
use sluice_core::util::lock;
use std::collections::VecDeque;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

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
        let i = kind as usize;
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
        lock(&self.rows[kind as usize]).iter().cloned().collect()
    }

    /// (check kind, successes, failures) of every kind, for the metrics endpoint.
    pub fn check_counts(&self) -> Vec<(&'static str, u64, u64)> {
        CheckKind::ALL
            .iter()
            .map(|k| {
                let i = *k as usize;
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
            let i = k as usize;
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
    use sluice_core::runtime::ServerKey;

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

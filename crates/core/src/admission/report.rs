//! `stats_workload_classes` and the `sluice_workload_*` metrics.

use super::Admission;
use crate::admin::AdminRows;
use crate::config::WorkloadClass;
use crate::metrics::{Exposition, FINE_BUCKETS, FineSnapshot, fine_bound_s};
use std::sync::Arc;
use std::sync::atomic::Ordering;

/// `stats_workload_classes`' columns.
pub const STATS_COLUMNS: [&str; 20] = [
    "class",
    "priority",
    "active",
    "max_concurrency",
    "max_queue",
    "in_flight",
    "queued",
    "admitted",
    "waited",
    "shed_queue_full",
    "shed_queue_timeout",
    "shed_rate",
    "shed_guard",
    "guard_delayed",
    "guard_level",
    "cap",
    "queue_wait_p99_ms",
    "p50_ms",
    "p99_ms",
    "statements",
];

fn ms(v: Option<f64>) -> Option<String> {
    v.map(|v| format!("{v:.3}"))
}

impl Admission {
    /// One row per class of `classes` (the runtime's), counted since start; latencies are
    /// over the last minute.
    pub fn stats_rows(&self, classes: &Arc<Vec<WorkloadClass>>) -> AdminRows {
        let mut rows = Vec::new();
        for g in self.all(classes) {
            let now = g.now();
            let c = &g.counters;
            let recent = c.recent.window(60, g.epoch_seconds());
            let n = |v: u64| Some(v.to_string());
            let load = |a: &std::sync::atomic::AtomicU64| n(a.load(Ordering::Relaxed));
            rows.push(vec![
                Some(g.name().to_string()),
                Some(now.limits.priority.as_str().to_string()),
                n(u64::from(now.limits.active)),
                n(u64::from(now.limits.max_concurrency)),
                n(u64::from(now.limits.max_queue)),
                n(u64::from(now.in_flight)),
                n(u64::from(now.queued)),
                load(&c.admitted),
                load(&c.waited),
                load(&c.shed_queue_full),
                load(&c.shed_queue_timeout),
                load(&c.shed_rate),
                load(&c.shed_guard),
                load(&c.guard_delayed),
                Some(format!("{:.3}", now.guard_level)),
                n(u64::from(now.cap)),
                ms(c.queue_wait.snapshot().quantile_ms(0.99)),
                ms(recent.quantile_ms(0.5)),
                ms(recent.quantile_ms(0.99)),
                n(recent.count),
            ]);
        }
        AdminRows {
            columns: STATS_COLUMNS.iter().map(|c| c.to_string()).collect(),
            rows,
        }
    }

    /// Writes the `sluice_workload_*` families of `classes` (the runtime's).
    pub fn write_metrics(&self, out: &mut Exposition, classes: &Arc<Vec<WorkloadClass>>) {
        for g in self.all(classes) {
            let now = g.now();
            let c = &g.counters;
            let class = g.name().to_string();
            let labels = [("class", class.as_str())];
            out.gauge(
                "sluice_workload_inflight",
                "Statements (or transactions) of the class holding a slot.",
                &labels,
                f64::from(now.in_flight),
            );
            out.gauge(
                "sluice_workload_queued",
                "Statements of the class waiting for a slot.",
                &labels,
                f64::from(now.queued),
            );
            out.gauge(
                "sluice_workload_limit",
                "The class's slots now: max_concurrency, reduced by its guards (0: unlimited).",
                &labels,
                f64::from(now.cap),
            );
            out.counter(
                "sluice_workload_admitted_total",
                "Statements of the class admitted.",
                &labels,
                c.admitted.load(Ordering::Relaxed),
            );
            for (reason, v) in [
                ("queue_full", &c.shed_queue_full),
                ("queue_timeout", &c.shed_queue_timeout),
                ("rate", &c.shed_rate),
                ("guard", &c.shed_guard),
            ] {
                out.counter(
                    "sluice_workload_shed_total",
                    "Statements of the class refused, by reason.",
                    &[("class", class.as_str()), ("reason", reason)],
                    v.load(Ordering::Relaxed),
                );
            }
            fine(
                out,
                "sluice_workload_queue_wait_seconds",
                "Time statements of the class waited for a slot.",
                &labels,
                &c.queue_wait.snapshot(),
            );
            fine(
                out,
                "sluice_workload_latency_seconds",
                "Latency of the class's statements, from admission to the end of the reply.",
                &labels,
                &c.latency.snapshot(),
            );
        }
    }
}

fn fine(out: &mut Exposition, name: &str, help: &str, labels: &[(&str, &str)], s: &FineSnapshot) {
    let bounds = (0..FINE_BUCKETS).map(fine_bound_s);
    out.histogram_buckets(
        name,
        help,
        labels,
        bounds,
        &s.buckets,
        s.sum_seconds,
        s.count,
    );
}

//! Unit tests of the parent module.

use super::*;

#[test]
fn families_are_grouped_and_labels_escaped() {
    let mut e = Exposition::new();
    e.counter("a_total", "As.", &[("x", "1")], 3);
    e.gauge("b", "Bs.", &[], 1.5);
    e.counter("a_total", "As.", &[("x", "q\"uote")], 4);
    let text = e.finish();
    assert_eq!(
        text,
        "# HELP a_total As.\n# TYPE a_total counter\na_total{x=\"1\"} 3\na_total{x=\"q\\\"uote\"} 4\n\
         # HELP b Bs.\n# TYPE b gauge\nb 1.5\n"
    );
}

#[test]
fn histograms_are_cumulative_with_sum_and_count() {
    let h = LatencyHistogram::default();
    h.observe_us(50); // <= 0.0001
    h.observe_us(700); // <= 0.001
    h.observe_us(20_000_000); // +Inf
    let mut e = Exposition::new();
    e.histogram("d_seconds", "Ds.", &[("hg", "1")], &h.snapshot());
    let text = e.finish();
    assert!(
        text.contains("d_seconds_bucket{hg=\"1\",le=\"0.0001\"} 1\n"),
        "{text}"
    );
    assert!(
        text.contains("d_seconds_bucket{hg=\"1\",le=\"0.001\"} 2\n"),
        "{text}"
    );
    assert!(
        text.contains("d_seconds_bucket{hg=\"1\",le=\"10\"} 2\n"),
        "{text}"
    );
    assert!(
        text.contains("d_seconds_bucket{hg=\"1\",le=\"+Inf\"} 3\n"),
        "{text}"
    );
    assert!(
        text.contains("d_seconds_sum{hg=\"1\"} 20.00075\n"),
        "{text}"
    );
    assert!(text.contains("d_seconds_count{hg=\"1\"} 3\n"), "{text}");
}

#[test]
fn a_gauge_hold_is_released_on_drop_and_stats_count_slow_statements() {
    let s = FrontendStats::default();
    let held = s.active_transactions.hold();
    assert_eq!(s.active_transactions.get(), 1);
    drop(held);
    assert_eq!(s.active_transactions.get(), 0);
    s.statement(0, 500, 1_000_000);
    s.statement(0, 2_000_000, 1_000_000);
    s.statement(-1, 10, 1_000_000);
    assert_eq!(s.questions.get(), 3);
    assert_eq!(s.slow_queries.get(), 1);
    let by_hg = s.latency.snapshot();
    assert_eq!(
        by_hg
            .iter()
            .map(|(hg, h)| (*hg, h.count))
            .collect::<Vec<_>>(),
        [(-1, 1), (0, 2)]
    );
}

#[test]
fn statements_counted_on_many_threads_add_up_per_hostgroup() {
    let s = Arc::new(FrontendStats::default());
    let threads: Vec<_> = (0..6)
        .map(|_| {
            let s = s.clone();
            std::thread::spawn(move || {
                for i in 0..500 {
                    s.statement(i % 2, 100, 1_000_000);
                    s.transactions.add(i % 2, 1);
                }
            })
        })
        .collect();
    for t in threads {
        t.join().expect("thread");
    }
    assert_eq!(s.questions.get(), 3000);
    assert_eq!(s.statement_time_us.get(), 300_000);
    let by_hg = s.latency.snapshot();
    assert_eq!(
        by_hg
            .iter()
            .map(|(hg, h)| (*hg, h.count))
            .collect::<Vec<_>>(),
        [(0, 1500), (1, 1500)]
    );
    // Each thread's sum is converted to seconds before they are added: compare loosely.
    assert!(
        by_hg
            .iter()
            .all(|(_, h)| (h.sum_seconds - 0.15).abs() < 1e-9)
    );
    assert_eq!((s.transactions.get(0), s.transactions.get(1)), (1500, 1500));
}

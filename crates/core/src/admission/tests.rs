use super::*;
use crate::config::WorkloadGuard;
use std::time::Duration;
use std::time::Instant;

fn classes(max_concurrency: i64, max_queue: i64, queue_timeout_ms: i64) -> Arc<Vec<WorkloadClass>> {
    let mut c = WorkloadClass::new("vector");
    c.max_concurrency = max_concurrency;
    c.max_queue = max_queue;
    c.queue_timeout_ms = queue_timeout_ms;
    Arc::new(vec![c])
}

#[tokio::test]
async fn slots_then_queue_then_refusal() {
    let admission = Admission::default();
    let cls = classes(2, 1, 60_000);
    let gate = admission.gate(&cls, "vector").unwrap();
    let a = gate.admit().await.unwrap();
    let _b = gate.admit().await.unwrap();
    let waiting = tokio::spawn({
        let gate = gate.clone();
        async move { gate.admit().await }
    });
    while gate.now().queued == 0 {
        tokio::task::yield_now().await;
    }
    let full = gate.admit().await.unwrap_err();
    assert!(matches!(
        full.reason,
        ShedReason::QueueFull {
            in_flight: 2,
            queued: 1,
            max_queue: 1
        }
    ));
    drop(a);
    let third = waiting.await.unwrap().unwrap();
    assert_eq!(&**third.class(), "vector");
    assert_eq!(gate.now().in_flight, 2, "the freed slot went to the waiter");
    let rows = admission.stats_rows(&cls);
    assert_eq!(rows.rows[0][7].as_deref(), Some("3"), "admitted");
    assert_eq!(rows.rows[0][9].as_deref(), Some("1"), "shed_queue_full");
}

#[tokio::test(start_paused = true)]
async fn a_waiter_past_the_timeout_is_refused_and_leaves_the_queue() {
    let admission = Admission::default();
    let cls = classes(1, 4, 500);
    let gate = admission.gate(&cls, "vector").unwrap();
    let held = gate.admit().await.unwrap();
    let r = gate.admit().await.unwrap_err();
    assert_eq!(r.mysql_errno(), ERR_QUEUE_TIMEOUT);
    assert!(
        matches!(r.reason, ShedReason::QueueTimeout { waited_ms: 500, .. }),
        "{r:?}"
    );
    assert_eq!(gate.now().queued, 0);
    drop(held);
    assert_eq!(gate.now().in_flight, 0);
}

#[tokio::test(start_paused = true)]
async fn a_cancelled_waiter_gives_up_its_place() {
    let admission = Admission::default();
    let cls = classes(1, 4, 60_000);
    let gate = admission.gate(&cls, "vector").unwrap();
    let held = gate.admit().await.unwrap();
    let cancelled = tokio::time::timeout(Duration::from_millis(10), gate.admit()).await;
    assert!(cancelled.is_err());
    assert_eq!(gate.now().queued, 0);
    drop(held);
    assert_eq!(
        gate.now().in_flight,
        0,
        "no slot leaked to the cancelled waiter"
    );
}

#[tokio::test(start_paused = true)]
async fn the_rate_cap_spaces_admissions_and_refuses_beyond_the_timeout() {
    let admission = Admission::default();
    let mut c = WorkloadClass::new("ingest");
    c.max_qps = Some(10);
    c.queue_timeout_ms = 250;
    let cls = Arc::new(vec![c]);
    let gate = admission.gate(&cls, "ingest").unwrap();
    let start = tokio::time::Instant::now();
    for _ in 0..3 {
        drop(gate.admit().await.unwrap());
    }
    assert_eq!(start.elapsed(), Duration::from_millis(200));
    // Four turns are taken ahead (the last at +400 ms, the next at +500): 300 ms > 250 ms.
    let ahead: Vec<_> = (0..2).map(|_| gate.rate_turn_for_test()).collect();
    assert!(ahead.iter().all(Result::is_ok));
    let r = gate.admit().await.unwrap_err();
    assert!(
        matches!(r.reason, ShedReason::RateLimited { max_qps: 10, .. }),
        "{r:?}"
    );
}

#[tokio::test]
async fn a_load_keeps_the_gate_and_applies_new_limits() {
    let admission = Admission::default();
    let one = classes(1, 0, 1000);
    let gate = admission.gate(&one, "vector").unwrap();
    let _held = gate.admit().await.unwrap();
    assert!(gate.admit().await.is_err());
    let two = classes(2, 0, 1000);
    let same = admission.gate(&two, "vector").unwrap();
    assert!(Arc::ptr_eq(&gate, &same));
    assert!(
        same.admit().await.is_ok(),
        "the raised cap applies to the held gate"
    );
    assert!(admission.gate(&Arc::new(Vec::new()), "vector").is_none());
}

/// A guard row as an operator writes it in TOML.
fn guard_row(toml_text: &str) -> WorkloadGuard {
    toml::from_str(toml_text).expect("guard row")
}

/// Replica lag 10 s everywhere; no load readings.
struct Lagging;

impl GuardSignals for Lagging {
    fn replica_lag_s(&self, _: crate::Protocol, _: u32) -> Option<f64> {
        Some(10.0)
    }
    fn server_load(&self, _: crate::Protocol, _: u32, _: super::LoadSignal) -> Option<f64> {
        None
    }
}

#[tokio::test]
async fn an_operator_guard_denies_its_apps_before_any_signal_and_sheds_its_class() {
    let admission = Admission::default();
    let cls = Arc::new(vec![
        WorkloadClass::new("migration"),
        WorkloadClass::new("batch"),
    ]);
    let lag = guard_row(
        "guard_id = 1\nclasses = \"batch\"\nsignal = \"replica_lag\"\nhostgroup = 1\nlow = 1\nhigh = 3\nreject_above = 5\n",
    );
    let mut hand = guard_row(
        "guard_id = 9\nclasses = \"migration\"\nsignal = \"operator\"\nlow = 0\nhigh = 1\nreject_above = 1\napps = \"gh-ost\"\ncomment = \"drill\"\n",
    );
    assert_eq!(hand.check(|c| c == "migration"), Ok(()));
    let guards = vec![lag.clone(), hand.clone()];
    admission.evaluate_guards(&cls, &guards, &Lagging, Instant::now());

    let denied = admission.throttler_check(&guards, "gh-ost");
    assert_eq!(denied.status, 417, "{denied:?}");
    assert_eq!(
        denied.message,
        "app \"gh-ost\" denied by the operator (guard 9: drill)"
    );
    let lagging = admission.throttler_check(&guards, "pt-archiver");
    assert_eq!(lagging.status, 429, "the lag guard answers for every app");

    let refused = admission
        .gate(&cls, "migration")
        .unwrap()
        .admit()
        .await
        .unwrap_err();
    assert!(
        refused
            .to_string()
            .contains("held by the operator (guard 9: drill)"),
        "{refused}"
    );

    hand.active = crate::config::Flag(false);
    let guards = vec![lag, hand];
    admission.evaluate_guards(&cls, &guards, &Lagging, Instant::now());
    assert_eq!(admission.throttler_check(&guards, "gh-ost").status, 429);
    assert!(
        admission
            .gate(&cls, "migration")
            .unwrap()
            .try_admit()
            .is_some()
    );
}

#[test]
fn only_an_operator_guard_may_govern_no_class() {
    let row = |signal: &str| {
        guard_row(&format!(
            "guard_id = 2\nclasses = \"\"\nsignal = \"{signal}\"\nhostgroup = 1\nlow = 0\nhigh = 1\n"
        ))
    };
    assert_eq!(row("operator").check(|_| true), Ok(()));
    assert_eq!(
        row("replica_lag").check(|_| true),
        Err(crate::config::RowError::new(
            "classes",
            "name at least one workload class"
        ))
    );
}

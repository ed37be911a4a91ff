//! The guards of the runtime's `workload_guards`, evaluated on a tick: each reads its signal,
//! moves its state, and the strongest effect per class is handed to that class's gate. Every
//! state change is a log line with its cause.

use super::Admission;
use super::guard::{Effect, GuardLive, GuardSignals, GuardState, LoadSignal, operator_hand};
use crate::Protocol;
use crate::admin::AdminRows;
use crate::config::{WorkloadClass, WorkloadGuard};
use crate::metrics::Exposition;
use crate::util::{lock, unix_now};
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Instant;
use tracing::info;

/// `stats_workload_guards`' columns.
pub const GUARD_COLUMNS: [&str; 10] = [
    "guard_id",
    "signal",
    "classes",
    "value",
    "level",
    "state",
    "since",
    "changes",
    "last_cause",
    "apps",
];

/// What `/throttler/check` answers.
#[derive(Debug, Clone, PartialEq)]
pub struct ThrottleAnswer {
    /// 200 (go on), 429 (back off: a signal is over its threshold) or 417 (denied by the
    /// operator: an active `operator` guard answers for the app), as freno answers.
    pub status: u16,
    /// The worst signal among the guards that answer for the app (0 with none).
    pub value: f64,
    /// Its guard's `high`.
    pub threshold: f64,
    /// The guard's cause, or why nothing throttles.
    pub message: String,
}

impl Admission {
    /// Reads every active guard's signal and applies what follows to the classes' gates.
    pub fn evaluate_guards(
        &self,
        classes: &Arc<Vec<WorkloadClass>>,
        guards: &[WorkloadGuard],
        signals: &dyn GuardSignals,
        now: Instant,
    ) {
        let mut board = lock(&self.guards);
        board.retain(|id, _| guards.iter().any(|g| g.guard_id == *id && g.active.0));
        let mut effects: HashMap<&str, Effect> = HashMap::new();
        for g in guards.iter().filter(|g| g.active.0) {
            let reading = self.read_signal(classes, g, signals);
            let live = board
                .entry(g.guard_id)
                .or_insert_with(|| GuardLive::new(now));
            if let Some(left) = live.observe(g, reading, now) {
                info!(guard = g.guard_id, classes = %g.classes, "workload guard {}: {} -> {}: {}; {}",
                    g.guard_id, left.as_str(), live.state.as_str(), live.cause, what_it_does(g, live.state));
            }
            let e = live.effect(g);
            for c in g.class_names() {
                effects.entry(c).or_insert_with(Effect::none).merge(&e);
            }
        }
        // Effects land before the board is released: whoever reads a guard's new state from
        // `stats_workload_guards` finds its classes already acting on it.
        for c in classes.iter() {
            if let Some(gate) = self.gate(classes, &c.name) {
                gate.set_effect(effects.remove(c.name.as_str()).unwrap_or_else(Effect::none));
            }
        }
        drop(board);
    }

    fn read_signal(
        &self,
        classes: &Arc<Vec<WorkloadClass>>,
        g: &WorkloadGuard,
        signals: &dyn GuardSignals,
    ) -> Option<f64> {
        let protocol = if g.protocol == "pgsql" {
            Protocol::Pgsql
        } else {
            Protocol::Mysql
        };
        if let Some(load) = LoadSignal::of(&g.signal) {
            return signals.server_load(protocol, g.hostgroup?, load);
        }
        match g.signal.as_str() {
            "replica_lag" => signals.replica_lag_s(protocol, g.hostgroup?),
            // The operator's hand is on while the row is active.
            "operator" => Some(1.0),
            // No statement in the window: nothing is slow.
            _ => Some(
                self.gate(classes, g.watch_class.trim())
                    .and_then(|gate| gate.recent_p99_ms(g.window_s))
                    .unwrap_or(0.0),
            ),
        }
    }

    /// `stats_workload_guards` rows (guards not evaluated yet are `closed` with no value).
    pub fn guard_rows(&self, guards: &[WorkloadGuard]) -> AdminRows {
        let board = lock(&self.guards);
        let now = Instant::now();
        let rows = guards
            .iter()
            .map(|g| {
                let live = board.get(&g.guard_id);
                let since = live.map(|l| unix_now().saturating_sub((now - l.since).as_secs()));
                vec![
                    Some(g.guard_id.to_string()),
                    Some(g.signal.clone()),
                    Some(g.classes.clone()),
                    live.and_then(|l| l.value).map(|v| format!("{v:.3}")),
                    Some(format!("{:.3}", live.map_or(0.0, |l| l.level))),
                    Some(live.map_or("closed", |l| l.state.as_str()).to_string()),
                    since.map(|s| s.to_string()),
                    Some(live.map_or(0, |l| l.changes).to_string()),
                    Some(live.map(|l| l.cause.clone()).unwrap_or_default()),
                    Some(g.apps.clone()),
                ]
            })
            .collect();
        AdminRows {
            columns: GUARD_COLUMNS.iter().map(|c| c.to_string()).collect(),
            rows,
        }
    }

    /// `GET /throttler/check?app=NAME`: 417 when an active `operator` guard answers for `app`,
    /// else 429 when a guard that answers for `app` is open or at the top of its ramp, 200
    /// otherwise (freno's and Vitess's convention).
    pub fn throttler_check(&self, guards: &[WorkloadGuard], app: &str) -> ThrottleAnswer {
        let denied = guards
            .iter()
            .find(|g| g.active.0 && g.signal == "operator" && answers_for(g, app));
        if let Some(g) = denied {
            return ThrottleAnswer {
                status: 417,
                value: 1.0,
                threshold: 0.0,
                message: format!("app {app:?} denied by the operator ({})", operator_hand(g)),
            };
        }
        let board = lock(&self.guards);
        let mut answer = ThrottleAnswer {
            status: 200,
            value: 0.0,
            threshold: 0.0,
            message: format!("no workload guard answers for app {app:?}"),
        };
        for g in guards.iter().filter(|g| g.active.0 && answers_for(g, app)) {
            let Some(live) = board.get(&g.guard_id) else {
                continue;
            };
            let value = live.value.unwrap_or(f64::INFINITY);
            let throttled = live.state == GuardState::Open || live.level >= 1.0;
            if throttled || answer.status == 200 && value >= answer.value {
                answer = ThrottleAnswer {
                    status: if throttled { 429 } else { 200 },
                    value: if value.is_finite() { value } else { -1.0 },
                    threshold: g.high,
                    message: live.cause.clone(),
                };
            }
            if throttled {
                break;
            }
        }
        answer
    }

    /// `sluice_guard_*`.
    pub fn write_guard_metrics(&self, out: &mut Exposition, guards: &[WorkloadGuard]) {
        let board = lock(&self.guards);
        for g in guards {
            let Some(live) = board.get(&g.guard_id) else {
                continue;
            };
            let id = g.guard_id.to_string();
            let labels = [("guard", id.as_str()), ("signal", g.signal.as_str())];
            out.gauge(
                "sluice_guard_level",
                "The guard's level, 0 (no effect) to 1 (open or at the top of its ramp).",
                &labels,
                if live.state == GuardState::Open {
                    1.0
                } else {
                    live.level
                },
            );
            out.gauge(
                "sluice_guard_open",
                "1 while the guard sheds or reroutes.",
                &labels,
                f64::from(u8::from(live.state == GuardState::Open)),
            );
            if let Some(v) = live.value {
                out.gauge(
                    "sluice_guard_signal",
                    "The guard's signal (seconds of lag, or milliseconds of p99).",
                    &labels,
                    v,
                );
            }
            out.counter(
                "sluice_guard_changes_total",
                "State changes of the guard.",
                &labels,
                live.changes,
            );
        }
    }
}

fn answers_for(g: &WorkloadGuard, app: &str) -> bool {
    g.apps
        .split(',')
        .map(str::trim)
        .any(|a| a == "*" || a == app)
}

/// What a guard in `state` does, for the log line.
fn what_it_does(g: &WorkloadGuard, state: GuardState) -> String {
    match (state, g.mode.as_str()) {
        (GuardState::Closed, _) => format!("classes {} run unhindered", g.classes),
        (GuardState::Ramping, _) => format!(
            "classes {} are delayed (up to {} ms) and their caps reduced",
            g.classes, g.max_delay_ms
        ),
        (GuardState::Open, "reroute") => format!(
            "classes {} go to hostgroup {}",
            g.classes,
            g.fallback_hostgroup.unwrap_or(0)
        ),
        (GuardState::Open, _) => format!("new statements of classes {} are shed", g.classes),
    }
}

//! Guards: one mechanism for the breaker and the throttle. A guard watches a signal (a
//! hostgroup's replica lag, replica backlog or running statements, a class's p99) and sets a level from 0 to 1 for the classes it
//! governs. Between `low` and `high` the level ramps: a delay up to `max_delay_ms` before a
//! statement queues, and a concurrency cap that shrinks with it. At `reject_above` the guard
//! opens: statements are shed with a probability that grows with the signal (or rerouted),
//! until the signal falls below the hysteresis floor and the guard has been open
//! `min_open_ms`. An unknown signal counts as bad once it has been unknown `unknown_grace_ms`.
//! Guards act only where admission does: at a transaction's first statement.

use crate::Protocol;
use crate::config::WorkloadGuard;
use std::fmt;
use std::time::{Duration, Instant};

/// Where a guard's signal comes from, for the signals admission control does not keep itself.
pub trait GuardSignals: Send + Sync {
    /// The worst replication lag (seconds) among the servers of `hostgroup` the monitor
    /// measured; `None` when none was measured.
    fn replica_lag_s(&self, protocol: Protocol, hostgroup: u32) -> Option<f64>;
    /// The worst `signal` among the servers of `hostgroup` the monitor's load probe read
    /// lately; `None` when it has no fresh reading.
    fn server_load(&self, protocol: Protocol, hostgroup: u32, signal: LoadSignal) -> Option<f64>;
}

/// The load signals a guard can watch, read by the monitor's load probe.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LoadSignal {
    /// Statements running on the server (MySQL `Threads_running`; PostgreSQL active client
    /// backends).
    ThreadsRunning,
    /// Received but not yet applied on a replica: transactions (MariaDB) or WAL bytes
    /// (PostgreSQL).
    ReplicaBacklog,
    /// Milliseconds since the newest heartbeat the server holds was written on the writer.
    HeartbeatLag,
}

impl LoadSignal {
    /// The guard's `signal` column, when it names a load signal.
    pub fn of(signal: &str) -> Option<LoadSignal> {
        match signal {
            "threads_running" => Some(LoadSignal::ThreadsRunning),
            "replica_backlog" => Some(LoadSignal::ReplicaBacklog),
            "heartbeat_lag" => Some(LoadSignal::HeartbeatLag),
            _ => None,
        }
    }
}

/// The probability of shedding when a guard has just opened.
const SHED_FLOOR: f64 = 0.25;

/// A guard's state.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GuardState {
    /// The signal is below `low`: no effect.
    Closed,
    /// Between `low` and `reject_above`: delays and a smaller cap.
    Ramping,
    /// Over `reject_above` (or not yet back under the hysteresis floor): shedding or rerouting.
    Open,
}

impl GuardState {
    /// The name in `stats_workload_guards` and the logs.
    pub fn as_str(self) -> &'static str {
        match self {
            GuardState::Closed => "closed",
            GuardState::Ramping => "ramping",
            GuardState::Open => "open",
        }
    }
}

/// What the guards do to one class now (the strongest of its guards).
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct Effect {
    /// 0..=1.
    pub level: f64,
    /// Waited before queueing.
    pub delay: Duration,
    /// The share of `max_concurrency` left (1 = all).
    pub cap_share: f64,
    /// Shed with this probability, for this cause.
    pub shed: Option<(f64, u32, String)>,
    /// Send admitted statements to this hostgroup.
    pub reroute: Option<u32>,
}

impl Effect {
    pub(crate) fn none() -> Effect {
        Effect {
            cap_share: 1.0,
            ..Effect::default()
        }
    }

    /// Folds `other` in: the stronger of each part.
    pub(crate) fn merge(&mut self, other: &Effect) {
        self.level = self.level.max(other.level);
        self.delay = self.delay.max(other.delay);
        self.cap_share = self.cap_share.min(other.cap_share);
        if other.shed.as_ref().map(|s| s.0) > self.shed.as_ref().map(|s| s.0) {
            self.shed.clone_from(&other.shed);
        }
        self.reroute = self.reroute.or(other.reroute);
    }
}

/// One guard's live state.
#[derive(Debug, Clone)]
pub struct GuardLive {
    /// Its state.
    pub state: GuardState,
    /// Since when (the last change).
    pub since: Instant,
    /// The signal last read (`None`: unknown).
    pub value: Option<f64>,
    /// The level 0..=1.
    pub level: f64,
    /// The signal in words, with the threshold it was compared against.
    pub cause: String,
    /// State changes so far.
    pub changes: u64,
    unknown_since: Option<Instant>,
    /// When the last reading was taken (the level's release is paced from it).
    observed_at: Instant,
}

impl GuardLive {
    pub(crate) fn new(now: Instant) -> GuardLive {
        GuardLive {
            state: GuardState::Closed,
            since: now,
            value: None,
            level: 0.0,
            cause: String::new(),
            changes: 0,
            unknown_since: None,
            observed_at: now,
        }
    }

    /// Takes a new reading; returns the state it left when it changed.
    pub(crate) fn observe(
        &mut self,
        g: &WorkloadGuard,
        reading: Option<f64>,
        now: Instant,
    ) -> Option<GuardState> {
        let signal = self.effective(g, reading, now);
        self.value = reading;
        self.level = released(g, self.level, ramp(g, signal), now - self.observed_at);
        self.observed_at = now;
        let cause = describe(g, reading, signal, self.unknown_since.map(|t| now - t));
        let next = self.next_state(g, signal, now);
        // Held open (min_open_ms, the hysteresis floor) below its threshold, the guard keeps
        // the reading that opened it as its cause: a statement shed then is told why the guard
        // is open, not "0 ms < 150 ms" (the clean-clone CI failure of caf2d38).
        let held_open =
            self.state == GuardState::Open && next == GuardState::Open && signal < threshold(g);
        if !held_open {
            self.cause = cause;
        }
        (next != self.state).then(|| {
            let left = self.state;
            self.state = next;
            self.since = now;
            self.changes += 1;
            left
        })
    }

    /// The reading, or what an unknown reading counts as: bad after the grace period, the
    /// last known value before it.
    fn effective(&mut self, g: &WorkloadGuard, reading: Option<f64>, now: Instant) -> f64 {
        match reading {
            Some(v) => {
                self.unknown_since = None;
                v
            }
            None => {
                let since = *self.unknown_since.get_or_insert(now);
                if now - since >= Duration::from_millis(u64::from(g.unknown_grace_ms)) {
                    f64::INFINITY
                } else {
                    self.value.unwrap_or(0.0)
                }
            }
        }
    }

    fn next_state(&self, g: &WorkloadGuard, signal: f64, now: Instant) -> GuardState {
        let opens = g.mode != "reduce" && g.reject_above.is_some_and(|r| signal >= r);
        if self.state == GuardState::Open {
            let floor = g.low * (1.0 - f64::from(g.hysteresis_pct) / 100.0);
            let held = now - self.since >= Duration::from_millis(u64::from(g.min_open_ms));
            if opens || signal >= floor || !held {
                return GuardState::Open;
            }
        } else if opens {
            return GuardState::Open;
        }
        if self.level > 0.0 {
            GuardState::Ramping
        } else {
            GuardState::Closed
        }
    }

    /// What the guard does to its classes now.
    pub(crate) fn effect(&self, g: &WorkloadGuard) -> Effect {
        let mut e = Effect::none();
        if self.state == GuardState::Closed {
            return e;
        }
        e.level = self.level;
        e.delay = Duration::from_secs_f64(f64::from(g.max_delay_ms) * self.level / 1000.0);
        e.cap_share = 1.0 - self.level;
        if self.state == GuardState::Open {
            e.level = 1.0;
            match g.mode.as_str() {
                "reroute" => e.reroute = g.fallback_hostgroup,
                _ => e.shed = Some((self.shed_probability(g), g.guard_id, self.cause.clone())),
            }
        }
        e
    }

    /// From [`SHED_FLOOR`] at `reject_above` to 1 at `reject_above + reject_span`.
    fn shed_probability(&self, g: &WorkloadGuard) -> f64 {
        let r = g.reject_above.unwrap_or(g.high);
        if g.reject_span <= 0.0 {
            return 1.0;
        }
        let signal = self.value.unwrap_or(f64::INFINITY);
        let over = ((signal - r) / g.reject_span).clamp(0.0, 1.0);
        SHED_FLOOR + (1.0 - SHED_FLOOR) * over
    }
}

/// The level after `elapsed` when the signal asks for `target`: a rise is taken at once; a
/// fall at most `elapsed / release_ms` (the whole way from 1 to 0 takes `release_ms`), so a
/// cap the guard shrank grows back a slot at a time instead of all at once. Without it, the
/// level follows the signal both ways, and statements that run for seconds make it swing: the
/// cap opens fully the moment the signal is good, a flood of statements starts, and the
/// signal only shows it once they are all running.
fn released(g: &WorkloadGuard, level: f64, target: f64, elapsed: std::time::Duration) -> f64 {
    if target >= level || g.release_ms == 0 {
        return target;
    }
    let step = elapsed.as_secs_f64() * 1000.0 / f64::from(g.release_ms);
    (level - step).max(target)
}

/// The level for `signal`: 0 at `low`, 1 at `high`, linear between.
fn ramp(g: &WorkloadGuard, signal: f64) -> f64 {
    if signal <= g.low {
        return 0.0;
    }
    if g.high <= g.low || signal >= g.high {
        return 1.0;
    }
    ((signal - g.low) / (g.high - g.low)).clamp(0.0, 1.0)
}

/// `guard 3: gh-ost paused for the failover drill`: which operator guard, and its comment.
pub(crate) fn operator_hand(g: &WorkloadGuard) -> String {
    match g.comment.trim() {
        "" => format!("guard {}", g.guard_id),
        note => format!("guard {}: {note}", g.guard_id),
    }
}

struct Amount<'a>(&'a WorkloadGuard, f64);

impl fmt::Display for Amount<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (self.0.signal.as_str(), self.0.protocol.as_str()) {
            ("replica_lag", _) => write!(f, "{} s", trim(self.1)),
            ("threads_running", _) => write!(f, "{}", trim(self.1)),
            ("heartbeat_lag", _) => write!(f, "{} ms", trim(self.1)),
            ("operator", _) => write!(f, "{}", trim(self.1)),
            ("replica_backlog", "pgsql") => write!(f, "{} bytes", trim(self.1)),
            ("replica_backlog", _) => write!(f, "{} transactions", trim(self.1)),
            _ => write!(f, "{} ms", trim(self.1)),
        }
    }
}

fn trim(v: f64) -> String {
    if v.fract() == 0.0 && v.abs() < 1e12 {
        format!("{}", v as i64)
    } else {
        format!("{v:.1}")
    }
}

/// `replica lag 14 s >= 10 s on hostgroup 30`, `threads running 41 >= 32 on hostgroup 0`,
/// `replica backlog 5200 transactions >= 1000 transactions on hostgroup 1`,
/// `p99 of 'oltp' 84.2 ms >= 50 ms over 10 s`.
/// The reading a guard's cause compares with: `reject_above` (where it opens), or `high` for
/// `reduce` guards.
fn threshold(g: &WorkloadGuard) -> f64 {
    g.reject_above
        .filter(|_| g.mode != "reduce")
        .unwrap_or(g.high)
}

fn describe(
    g: &WorkloadGuard,
    reading: Option<f64>,
    signal: f64,
    unknown_for: Option<Duration>,
) -> String {
    let threshold = threshold(g);
    let cmp = if signal >= threshold { ">=" } else { "<" };
    let what = match reading {
        Some(v) => format!("{} {cmp} {}", Amount(g, v), Amount(g, threshold)),
        None => format!(
            "unknown for {} ms (counts as over {} after {} ms)",
            unknown_for.map_or(0, |d| d.as_millis()),
            Amount(g, threshold),
            g.unknown_grace_ms
        ),
    };
    let hostgroup = g.hostgroup.unwrap_or(0);
    match g.signal.as_str() {
        "operator" => format!("held by the operator ({})", operator_hand(g)),
        "replica_lag" => format!("replica lag {what} on hostgroup {hostgroup}"),
        "threads_running" => format!("threads running {what} on hostgroup {hostgroup}"),
        "replica_backlog" => format!("replica backlog {what} on hostgroup {hostgroup}"),
        "heartbeat_lag" => format!("heartbeat lag {what} on hostgroup {hostgroup}"),
        _ => format!("p99 of '{}' {what} over {} s", g.watch_class, g.window_s),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn guard() -> WorkloadGuard {
        WorkloadGuard {
            guard_id: 1,
            active: crate::config::Flag(true),
            classes: "batch".into(),
            signal: "replica_lag".into(),
            protocol: "mysql".into(),
            hostgroup: Some(1),
            watch_class: String::new(),
            window_s: 10,
            low: 1.0,
            high: 3.0,
            reject_above: Some(5.0),
            reject_span: 5.0,
            max_delay_ms: 400,
            mode: "shed".into(),
            fallback_hostgroup: None,
            hysteresis_pct: 50,
            min_open_ms: 1000,
            release_ms: 0,
            unknown_grace_ms: 2000,
            apps: "*".into(),
            comment: String::new(),
        }
    }

    #[test]
    fn ramps_opens_and_closes_only_below_the_floor_after_the_minimum_time() {
        let g = guard();
        let t0 = Instant::now();
        let mut live = GuardLive::new(t0);
        assert_eq!(live.observe(&g, Some(0.0), t0), None);
        assert_eq!(live.observe(&g, Some(2.0), t0), Some(GuardState::Closed));
        assert_eq!(live.state, GuardState::Ramping);
        let e = live.effect(&g);
        assert_eq!(e.delay, Duration::from_millis(200));
        assert!((e.cap_share - 0.5).abs() < 1e-9 && e.shed.is_none());
        live.observe(&g, Some(7.5), t0);
        assert_eq!(live.state, GuardState::Open);
        let (p, id, cause) = live.effect(&g).shed.expect("sheds");
        assert!((p - (SHED_FLOOR + 0.75 * 0.5)).abs() < 1e-9 && id == 1);
        assert_eq!(cause, "replica lag 7.5 s >= 5 s on hostgroup 1");
        // Under low but over the floor (0.5 s): still open, and still saying why it opened.
        live.observe(&g, Some(0.8), t0 + Duration::from_secs(2));
        assert_eq!(live.state, GuardState::Open);
        assert_eq!(live.cause, "replica lag 7.5 s >= 5 s on hostgroup 1");
        // Under the floor, but open for less than min_open_ms.
        let mut young = live.clone();
        young.since = t0 + Duration::from_millis(1900);
        young.observe(&g, Some(0.0), t0 + Duration::from_secs(2));
        assert_eq!(young.state, GuardState::Open);
        live.observe(&g, Some(0.0), t0 + Duration::from_secs(2));
        assert_eq!(live.state, GuardState::Closed);
        assert_eq!(live.cause, "replica lag 0 s < 5 s on hostgroup 1");
        assert_eq!(live.effect(&g), Effect::none());
    }

    #[test]
    fn an_unknown_signal_counts_as_bad_after_the_grace_period() {
        let g = guard();
        let t0 = Instant::now();
        let mut live = GuardLive::new(t0);
        live.observe(&g, Some(0.0), t0);
        live.observe(&g, None, t0 + Duration::from_millis(100));
        assert_eq!(live.state, GuardState::Closed, "within the grace period");
        live.observe(&g, None, t0 + Duration::from_millis(2200));
        assert_eq!(live.state, GuardState::Open);
        assert!(
            live.cause.starts_with("replica lag unknown for 2100 ms"),
            "{}",
            live.cause
        );
    }

    #[test]
    fn reduce_never_sheds_and_reroute_reroutes() {
        let mut g = guard();
        g.mode = "reduce".into();
        let t0 = Instant::now();
        let mut live = GuardLive::new(t0);
        live.observe(&g, Some(50.0), t0);
        assert_eq!(live.state, GuardState::Ramping);
        assert_eq!(live.effect(&g).cap_share, 0.0);
        g.mode = "reroute".into();
        g.fallback_hostgroup = Some(0);
        live.observe(&g, Some(50.0), t0);
        assert_eq!(live.effect(&g).reroute, Some(0));
        assert!(live.effect(&g).shed.is_none());
    }

    #[test]
    fn with_a_release_time_the_level_rises_at_once_and_falls_at_its_pace() {
        let mut g = guard();
        g.reject_above = None;
        g.release_ms = 2000;
        let t0 = Instant::now();
        let mut live = GuardLive::new(t0);
        live.observe(&g, Some(3.0), t0);
        assert_eq!(live.level, 1.0, "a rise is taken at once");
        // The signal is good again: the level falls by 0.25 per 500 ms, not to 0.
        let ms = |n| t0 + std::time::Duration::from_millis(n);
        live.observe(&g, Some(0.0), ms(500));
        assert!((live.level - 0.75).abs() < 1e-9, "{}", live.level);
        assert_eq!(live.state, GuardState::Ramping);
        assert!((live.effect(&g).cap_share - 0.25).abs() < 1e-9);
        // A worse reading meanwhile is taken at once again.
        live.observe(&g, Some(2.8), ms(600));
        assert!((live.level - 0.9).abs() < 1e-9, "{}", live.level);
        // Good for long enough: down to what the signal asks, and closed.
        live.observe(&g, Some(0.0), ms(2600));
        assert_eq!(live.level, 0.0);
        assert_eq!(live.state, GuardState::Closed);
        // Without a release time the level follows the signal down at once.
        g.release_ms = 0;
        live.observe(&g, Some(3.0), ms(2700));
        live.observe(&g, Some(0.0), ms(2800));
        assert_eq!(live.level, 0.0);
    }
}

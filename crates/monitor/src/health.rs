//! Per-server check outcomes → decisions, as pure state transitions: missed heartbeats shun a
//! server and an answered one brings it back; a read_only answer places it; too many failed
//! read_only checks make it assumed read-only (so a dead primary stops being a writer).

/// What the monitor remembers about one server between checks.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct ServerHealth {
    /// Heartbeats missed in a row.
    pub ping_failures: u32,
    /// When missed heartbeats shunned it (until it answers one).
    pub shunned_at: Option<std::time::Instant>,
    /// Last ping latency (µs).
    pub latency_us: Option<u64>,
    /// Last read_only verdict (answered or assumed).
    pub read_only: Option<bool>,
    /// read_only checks failed in a row.
    pub read_only_failures: u32,
    /// Last replication lag (s) read or assumed.
    pub lag: Option<u64>,
    /// Lag checks over the threshold in a row.
    pub lag_over: u32,
    /// Shunned for replication lag.
    pub lag_shunned: bool,
    /// Data-path connect errors of the last second (their times).
    pub connect_errors: std::collections::VecDeque<std::time::Instant>,
    /// When connect errors shunned it (until `shun_recovery_time_sec` later).
    pub error_shunned_at: Option<std::time::Instant>,
    /// Group Replication state last reported (or UNREACHABLE after failed checks).
    pub group: Option<sluice_core::topology::MemberState>,
    /// Group Replication checks failed in a row.
    pub group_failures: u32,
}

/// A change worth acting on (and logging).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Verdict {
    /// Missed `missed` heartbeats: shun it, kill its connections, pause its other checks.
    Shun {
        /// Heartbeats missed in a row.
        missed: u32,
    },
    /// Answered a heartbeat while shunned: back in service.
    Unshun,
    /// Lag over the threshold for `replication_lag_count` checks: out of rotation.
    ShunLag {
        /// Lag (s).
        lag: u64,
    },
    /// A Group Replication member's state or role changed.
    Group {
        /// Before.
        from: Option<sluice_core::topology::MemberState>,
        /// Now.
        to: sluice_core::topology::MemberState,
    },
    /// Lag back under the threshold.
    UnshunLag {
        /// Lag (s).
        lag: u64,
    },
    /// The read_only value changed.
    ReadOnly {
        /// The new value.
        value: bool,
        /// True when assumed after failed checks rather than answered.
        assumed: bool,
        /// The value before.
        previous: Option<bool>,
    },
}

impl ServerHealth {
    /// What the monitor last saw of the server, for the log line of a status or membership
    /// change ("read_only=1, replication lag 31 s"); empty when nothing is known yet.
    pub(crate) fn facts(&self) -> String {
        let mut f = Vec::new();
        if self.shunned_at.is_some() {
            f.push(format!("missed {} heartbeats", self.ping_failures));
        }
        if self.error_shunned_at.is_some() {
            f.push("shunned for connect errors".to_string());
        }
        if let Some(ro) = self.read_only {
            f.push(format!("read_only={}", u8::from(ro)));
        }
        if let Some(lag) = self.lag {
            f.push(format!("replication lag {lag} s"));
        }
        if let Some(g) = &self.group {
            f.push(format!(
                "member {} {}, {} transactions behind",
                g.state, g.role, g.transactions_behind
            ));
        }
        if let Some(us) = self.latency_us.filter(|_| self.ping_failures == 0) {
            f.push(format!("ping {} ms", us / 1000));
        }
        f.join(", ")
    }

    /// A heartbeat's outcome at `now`: `Ok(latency µs)` or a failure.
    pub(crate) fn ping(
        &mut self,
        now: std::time::Instant,
        outcome: Result<u64, ()>,
        max_failures: u32,
    ) -> Option<Verdict> {
        match outcome {
            Ok(us) => {
                self.ping_failures = 0;
                self.latency_us = Some(us);
                if self.shunned_at.take().is_some() {
                    return Some(Verdict::Unshun);
                }
                None
            }
            Err(()) => {
                self.ping_failures = self.ping_failures.saturating_add(1);
                if self.shunned_at.is_none() && self.ping_failures >= max_failures.max(1) {
                    self.shunned_at = Some(now);
                    return Some(Verdict::Shun {
                        missed: self.ping_failures,
                    });
                }
                None
            }
        }
    }

    /// A read_only check's outcome.
    pub(crate) fn read_only(
        &mut self,
        outcome: Result<bool, ()>,
        max_failures: u32,
    ) -> Option<Verdict> {
        let previous = self.read_only;
        match outcome {
            Ok(v) => {
                self.read_only_failures = 0;
                self.read_only = Some(v);
                (previous != Some(v)).then_some(Verdict::ReadOnly {
                    value: v,
                    assumed: false,
                    previous,
                })
            }
            Err(()) => {
                self.read_only_failures = self.read_only_failures.saturating_add(1);
                if self.read_only_failures >= max_failures.max(1) && previous != Some(true) {
                    self.read_only = Some(true);
                    return Some(Verdict::ReadOnly {
                        value: true,
                        assumed: true,
                        previous,
                    });
                }
                None
            }
        }
    }
}

impl ServerHealth {
    /// A Group Replication check's outcome; `max_failures` failed checks in a row make the
    /// member UNREACHABLE (it goes to the offline hostgroup).
    pub(crate) fn group_replication(
        &mut self,
        outcome: Result<sluice_core::topology::MemberState, ()>,
        max_failures: u32,
    ) -> Option<Verdict> {
        let next = match outcome {
            Ok(m) => {
                self.group_failures = 0;
                m
            }
            Err(()) => {
                self.group_failures = self.group_failures.saturating_add(1);
                if self.group_failures < max_failures.max(1) {
                    return None;
                }
                sluice_core::topology::MemberState {
                    state: "UNREACHABLE".into(),
                    role: self
                        .group
                        .as_ref()
                        .map(|g| g.role.clone())
                        .unwrap_or_default(),
                    transactions_behind: 0,
                }
            }
        };
        if self.group.as_ref() == Some(&next) {
            return None;
        }
        let from = self.group.replace(next.clone());
        Some(Verdict::Group { from, to: next })
    }
}

/// Lag thresholds and how to read a NULL.
#[derive(Debug, Clone, Copy)]
pub(crate) struct LagPolicy {
    /// `max_replication_lag` (s); 0 never shuns.
    pub max: u64,
    /// Checks over the limit in a row before the server is shunned
    /// (`monitor_replication_lag_count`).
    pub count: u32,
    /// The lag (s) assumed when the replica reports NULL (`monitor_slave_lag_when_null`).
    pub when_null: u64,
}

impl ServerHealth {
    /// A replication lag check's outcome: `Ok(Some(s))`, `Ok(None)` for NULL (replication not
    /// running), or a failure. A failed check changes nothing: unlike ProxySQL (which reads a
    /// timeout as "-2" and unshuns), a server that stopped answering stays out while lagging.
    pub(crate) fn replication_lag(
        &mut self,
        outcome: Result<Option<u64>, ()>,
        p: LagPolicy,
    ) -> Option<Verdict> {
        let Ok(value) = outcome else {
            return None;
        };
        let lag = value.unwrap_or(p.when_null);
        self.lag = Some(lag);
        if p.max == 0 || lag <= p.max {
            self.lag_over = 0;
            if self.lag_shunned {
                self.lag_shunned = false;
                return Some(Verdict::UnshunLag { lag });
            }
            return None;
        }
        self.lag_over = self.lag_over.saturating_add(1);
        if !self.lag_shunned && self.lag_over >= p.count.max(1) {
            self.lag_shunned = true;
            return Some(Verdict::ShunLag { lag });
        }
        None
    }
}

impl ServerHealth {
    /// A data-path connect error at `now`: `shun_on_failures` of them within one second shun
    /// the server. Returns the count that shunned it.
    pub(crate) fn connect_error(
        &mut self,
        now: std::time::Instant,
        shun_on_failures: u32,
    ) -> Option<u32> {
        let window = std::time::Duration::from_secs(1);
        while self
            .connect_errors
            .front()
            .is_some_and(|t| now.duration_since(*t) > window)
        {
            self.connect_errors.pop_front();
        }
        self.connect_errors.push_back(now);
        let limit = shun_on_failures.max(1) as usize;
        while self.connect_errors.len() > limit {
            self.connect_errors.pop_front();
        }
        if self.error_shunned_at.is_none() && self.connect_errors.len() >= limit {
            self.error_shunned_at = Some(now);
            self.connect_errors.clear();
            return Some(limit as u32);
        }
        None
    }

    /// True once an error shun is older than `recovery` and is lifted (the server gets traffic
    /// again; new errors shun it again).
    pub(crate) fn error_shun_expired(
        &mut self,
        now: std::time::Instant,
        recovery: std::time::Duration,
    ) -> bool {
        match self.error_shunned_at {
            Some(at) if now.duration_since(at) >= recovery => {
                self.error_shunned_at = None;
                true
            }
            _ => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn facts_say_what_the_monitor_saw() {
        assert_eq!(ServerHealth::default().facts(), "");
        let t0 = std::time::Instant::now();
        let mut h = ServerHealth::default();
        h.ping(t0, Ok(2_500), 3);
        h.read_only(Ok(true), 3);
        h.lag = Some(31);
        assert_eq!(h.facts(), "read_only=1, replication lag 31 s, ping 2 ms");
        for _ in 0..3 {
            h.ping(t0, Err(()), 3);
        }
        assert!(
            h.facts().starts_with("missed 3 heartbeats, read_only=1"),
            "{}",
            h.facts()
        );
    }

    #[test]
    fn heartbeats_shun_after_max_failures_and_recover_on_answer() {
        let t0 = std::time::Instant::now();
        let mut h = ServerHealth::default();
        assert_eq!(h.ping(t0, Err(()), 3), None);
        assert_eq!(h.ping(t0, Err(()), 3), None);
        assert_eq!(h.ping(t0, Err(()), 3), Some(Verdict::Shun { missed: 3 }));
        assert_eq!(h.shunned_at, Some(t0));
        assert_eq!(h.ping(t0, Err(()), 3), None, "shunned once, not again");
        assert_eq!(h.ping(t0, Ok(420), 3), Some(Verdict::Unshun));
        assert_eq!(
            (h.shunned_at, h.ping_failures, h.latency_us),
            (None, 0, Some(420))
        );
        assert_eq!(h.ping(t0, Ok(400), 3), None);
        // An answer in between resets the count.
        h.ping(t0, Err(()), 3);
        h.ping(t0, Err(()), 3);
        h.ping(t0, Ok(1), 3);
        assert_eq!(h.ping(t0, Err(()), 3), None);
    }

    #[test]
    fn connect_errors_shun_within_a_second_and_recover() {
        use std::time::{Duration, Instant};
        let t0 = Instant::now();
        let ms = |n: u64| t0 + Duration::from_millis(n);
        let mut h = ServerHealth::default();
        assert_eq!(h.connect_error(ms(0), 3), None);
        assert_eq!(h.connect_error(ms(100), 3), None);
        assert_eq!(
            h.connect_error(ms(1500), 3),
            None,
            "the first two are older than a second"
        );
        assert_eq!(h.connect_error(ms(1600), 3), None);
        assert_eq!(h.connect_error(ms(1700), 3), Some(3));
        assert_eq!(h.connect_error(ms(1800), 3), None, "already shunned");
        assert!(!h.error_shun_expired(ms(5000), Duration::from_secs(10)));
        assert!(h.error_shun_expired(ms(11_700), Duration::from_secs(10)));
        assert_eq!(h.error_shunned_at, None);
    }

    #[test]
    fn replication_lag_decisions() {
        let p = LagPolicy {
            max: 10,
            count: 2,
            when_null: 60,
        };
        let mut h = ServerHealth::default();
        assert_eq!(h.replication_lag(Ok(Some(3)), p), None);
        assert_eq!(
            h.replication_lag(Ok(Some(11)), p),
            None,
            "debounced: 1 of 2"
        );
        assert_eq!(
            h.replication_lag(Ok(Some(12)), p),
            Some(Verdict::ShunLag { lag: 12 })
        );
        assert_eq!(h.replication_lag(Ok(Some(30)), p), None, "already shunned");
        assert_eq!(
            h.replication_lag(Err(()), p),
            None,
            "a timeout never re-enables"
        );
        assert!(h.lag_shunned);
        assert_eq!(
            h.replication_lag(Ok(Some(10)), p),
            Some(Verdict::UnshunLag { lag: 10 }),
            "at the threshold is fine"
        );
        // NULL reads as slave_lag_when_null.
        h.replication_lag(Ok(None), p);
        assert_eq!(
            h.replication_lag(Ok(None), p),
            Some(Verdict::ShunLag { lag: 60 })
        );
        let lenient = LagPolicy { when_null: 0, ..p };
        assert_eq!(
            h.replication_lag(Ok(None), lenient),
            Some(Verdict::UnshunLag { lag: 0 })
        );
        // max_replication_lag = 0 never shuns, and lifts an earlier shun.
        let off = LagPolicy { max: 0, ..p };
        let mut h = ServerHealth::default();
        for _ in 0..5 {
            assert_eq!(h.replication_lag(Ok(Some(10_000)), off), None);
        }
        h.lag_shunned = true;
        assert_eq!(
            h.replication_lag(Ok(Some(10_000)), off),
            Some(Verdict::UnshunLag { lag: 10_000 })
        );
    }

    #[test]
    fn read_only_changes_and_assumption_after_failures() {
        let mut h = ServerHealth::default();
        let v = |value, assumed, previous| {
            Some(Verdict::ReadOnly {
                value,
                assumed,
                previous,
            })
        };
        assert_eq!(h.read_only(Ok(false), 3), v(false, false, None));
        assert_eq!(h.read_only(Ok(false), 3), None, "no change, nothing to do");
        assert_eq!(h.read_only(Err(()), 3), None);
        assert_eq!(h.read_only(Err(()), 3), None);
        assert_eq!(
            h.read_only(Err(()), 3),
            v(true, true, Some(false)),
            "assumed read-only"
        );
        assert_eq!(h.read_only(Err(()), 3), None, "already read-only");
        assert_eq!(
            h.read_only(Ok(false), 3),
            v(false, false, Some(true)),
            "promoted back"
        );
        assert_eq!(h.read_only(Ok(true), 3), v(true, false, Some(false)));
    }
}

//! Per-server check outcomes → decisions, as pure state transitions: missed heartbeats shun a
//! server and an answered one brings it back; a read_only answer places it; too many failed
//! read_only checks make it assumed read-only (so a dead primary stops being a writer).

/// What the monitor remembers about one server between checks.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ServerHealth {
    /// Heartbeats missed in a row.
    pub ping_failures: u32,
    /// Shunned by the heartbeat.
    pub shunned: bool,
    /// Last ping latency (µs).
    pub latency_us: Option<u64>,
    /// Last read_only verdict (answered or assumed).
    pub read_only: Option<bool>,
    /// read_only checks failed in a row.
    pub read_only_failures: u32,
}

/// A change worth acting on (and logging).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// Missed `missed` heartbeats: shun it, kill its connections, pause its other checks.
    Shun {
        /// Heartbeats missed in a row.
        missed: u32,
    },
    /// Answered a heartbeat while shunned: back in service.
    Unshun,
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
    /// A heartbeat's outcome: `Ok(latency µs)` or a failure.
    pub fn ping(&mut self, outcome: Result<u64, ()>, max_failures: u32) -> Option<Verdict> {
        match outcome {
            Ok(us) => {
                self.ping_failures = 0;
                self.latency_us = Some(us);
                if self.shunned {
                    self.shunned = false;
                    return Some(Verdict::Unshun);
                }
                None
            }
            Err(()) => {
                self.ping_failures = self.ping_failures.saturating_add(1);
                if !self.shunned && self.ping_failures >= max_failures.max(1) {
                    self.shunned = true;
                    return Some(Verdict::Shun {
                        missed: self.ping_failures,
                    });
                }
                None
            }
        }
    }

    /// A read_only check's outcome.
    pub fn read_only(&mut self, outcome: Result<bool, ()>, max_failures: u32) -> Option<Verdict> {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn heartbeats_shun_after_max_failures_and_recover_on_answer() {
        let mut h = ServerHealth::default();
        assert_eq!(h.ping(Err(()), 3), None);
        assert_eq!(h.ping(Err(()), 3), None);
        assert_eq!(h.ping(Err(()), 3), Some(Verdict::Shun { missed: 3 }));
        assert!(h.shunned);
        assert_eq!(h.ping(Err(()), 3), None, "shunned once, not again");
        assert_eq!(h.ping(Ok(420), 3), Some(Verdict::Unshun));
        assert_eq!(
            (h.shunned, h.ping_failures, h.latency_us),
            (false, 0, Some(420))
        );
        assert_eq!(h.ping(Ok(400), 3), None);
        // An answer in between resets the count.
        h.ping(Err(()), 3);
        h.ping(Err(()), 3);
        h.ping(Ok(1), 3);
        assert_eq!(h.ping(Err(()), 3), None);
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

//! One class's gate: a count of statements in flight, a bounded FIFO of waiters and an
//! optional rate cap. A waiter holds no backend connection: it waits here, before checkout.
//! A slot a finished statement gives back goes straight to the first waiter, so a newcomer
//! cannot overtake the queue.

use super::guard::Effect;
use super::refusal::{Refusal, ShedReason};
use crate::config::{Priority, WorkloadClass};
use crate::metrics::{FineHistogram, WindowedHistogram};
use crate::util::lock;
use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::oneshot;
use tokio::time::Instant;

/// A class's limits, from its `workload_classes` row.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Limits {
    pub active: bool,
    pub priority: Priority,
    /// 0: unlimited.
    pub max_concurrency: u32,
    pub max_queue: u32,
    pub queue_timeout: Duration,
    pub max_execution: Option<Duration>,
    pub max_qps: Option<u32>,
    pub mysql_errno: Option<u16>,
}

impl Limits {
    pub(crate) fn of(c: &WorkloadClass) -> Limits {
        let u = |v: i64| u32::try_from(v.max(0)).unwrap_or(u32::MAX);
        Limits {
            active: c.active.0,
            priority: c.priority(),
            max_concurrency: u(c.max_concurrency),
            max_queue: u(c.max_queue),
            queue_timeout: Duration::from_millis(c.queue_timeout_ms.max(0) as u64),
            max_execution: (c.max_execution_ms > 0)
                .then(|| Duration::from_millis(c.max_execution_ms as u64)),
            max_qps: c.max_qps.map(u).filter(|q| *q > 0),
            mysql_errno: c.mysql_errno.and_then(|e| u16::try_from(e).ok()),
        }
    }

    fn capped(&self) -> bool {
        self.active && self.max_concurrency > 0
    }
}

/// What the gate counts, for `stats_workload_classes` and the metrics.
#[derive(Debug, Default)]
pub(crate) struct ClassCounters {
    pub admitted: AtomicU64,
    pub waited: AtomicU64,
    pub shed_queue_full: AtomicU64,
    pub shed_queue_timeout: AtomicU64,
    pub shed_rate: AtomicU64,
    pub shed_guard: AtomicU64,
    /// Statements a guard delayed.
    pub guard_delayed: AtomicU64,
    /// Time from arrival to admission, of statements that waited.
    pub queue_wait: FineHistogram,
    /// Statement latency (admission to reply).
    pub latency: FineHistogram,
    /// The same, over the last minute.
    pub recent: WindowedHistogram,
}

struct Waiter {
    ticket: u64,
    wake: oneshot::Sender<()>,
}

struct GateState {
    limits: Limits,
    in_flight: u32,
    queue: VecDeque<Waiter>,
    next_ticket: u64,
    /// The rate cap's next free turn, as time since `epoch`.
    next_turn: Duration,
    /// What the class's guards do now.
    effect: Effect,
    /// The shed draw's generator (xorshift64).
    rng: u64,
}

impl GateState {
    /// Slots now: `max_concurrency` scaled by the guards' cap (at least 1); 0 = unlimited.
    fn cap(&self) -> u32 {
        if !self.limits.capped() {
            return 0;
        }
        let scaled = (f64::from(self.limits.max_concurrency) * self.effect.cap_share).ceil();
        (scaled as u32).clamp(1, self.limits.max_concurrency)
    }

    fn has_slot(&self) -> bool {
        let cap = self.cap();
        cap == 0 || self.in_flight < cap
    }

    /// A uniform draw in [0, 1).
    fn draw(&mut self) -> f64 {
        self.rng ^= self.rng << 13;
        self.rng ^= self.rng >> 7;
        self.rng ^= self.rng << 17;
        (self.rng >> 11) as f64 / (1u64 << 53) as f64
    }
}

/// One workload class's gate.
pub struct ClassGate {
    name: Arc<str>,
    state: Mutex<GateState>,
    pub(crate) counters: ClassCounters,
    epoch: Instant,
}

impl std::fmt::Debug for ClassGate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClassGate")
            .field("name", &self.name)
            .finish()
    }
}

/// A snapshot of a gate's state.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct GateNow {
    pub limits: Limits,
    pub in_flight: u32,
    pub queued: u32,
    /// Slots now, after the guards (0: unlimited).
    pub cap: u32,
    /// The guards' level 0..=1.
    pub guard_level: f64,
}

impl ClassGate {
    pub(crate) fn new(name: &str, limits: Limits) -> ClassGate {
        ClassGate {
            name: Arc::from(name),
            state: Mutex::new(GateState {
                limits,
                in_flight: 0,
                queue: VecDeque::new(),
                next_ticket: 0,
                next_turn: Duration::ZERO,
                effect: Effect::none(),
                rng: (0x9E37_79B9_7F4A_7C15 ^ (u64::from(std::process::id()) << 17)) | 1,
            }),
            counters: ClassCounters::default(),
            epoch: Instant::now(),
        }
    }

    /// Seconds since the gate was made (the clock of its sliding window).
    pub(crate) fn epoch_seconds(&self) -> u64 {
        self.epoch.elapsed().as_secs()
    }

    /// The class's p99 (ms) over the last `window_s` seconds; `None` with no statement.
    pub(crate) fn recent_p99_ms(&self, window_s: u32) -> Option<f64> {
        let now_s = self.epoch.elapsed().as_secs();
        self.counters
            .recent
            .window(u64::from(window_s), now_s)
            .quantile_ms(0.99)
    }

    /// The class's name.
    pub fn name(&self) -> &Arc<str> {
        &self.name
    }

    pub(crate) fn now(&self) -> GateNow {
        let st = lock(&self.state);
        GateNow {
            limits: st.limits.clone(),
            in_flight: st.in_flight,
            queued: st.queue.len() as u32,
            cap: st.cap(),
            guard_level: st.effect.level,
        }
    }

    /// New limits from a LOAD; a raised cap lets waiters in at once.
    pub(crate) fn reconfigure(&self, limits: Limits) {
        let mut st = lock(&self.state);
        st.limits = limits;
        Self::admit_waiters(&mut st);
    }

    /// What the guards do to the class from now on; a cap that grew lets waiters in.
    pub(crate) fn set_effect(&self, effect: Effect) {
        let mut st = lock(&self.state);
        if st.effect != effect {
            st.effect = effect;
            Self::admit_waiters(&mut st);
        }
    }

    fn admit_waiters(st: &mut GateState) {
        while st.has_slot() {
            let Some(w) = st.queue.pop_front() else { break };
            if w.wake.send(()).is_ok() {
                st.in_flight += 1;
            }
        }
    }

    fn refusal(&self, limits: &Limits, reason: ShedReason, retry_after_ms: u64) -> Refusal {
        let counter = match reason {
            ShedReason::QueueFull { .. } => &self.counters.shed_queue_full,
            ShedReason::QueueTimeout { .. } => &self.counters.shed_queue_timeout,
            ShedReason::RateLimited { .. } => &self.counters.shed_rate,
            ShedReason::GuardOpen { .. } => &self.counters.shed_guard,
        };
        counter.fetch_add(1, Ordering::Relaxed);
        Refusal {
            class: self.name.clone(),
            reason,
            queue_timeout_ms: limits.queue_timeout.as_millis() as u64,
            errno_override: limits.mysql_errno,
            retry_after_ms: retry_after_ms.max(1),
        }
    }

    /// The class's median latency over the last minute (ms), a fair wait before a retry.
    fn typical_ms(&self) -> u64 {
        let now_s = self.epoch.elapsed().as_secs();
        let p50 = self.counters.recent.window(60, now_s).quantile_ms(0.5);
        p50.map_or(100, |ms| ms.ceil() as u64)
    }

    /// Takes a turn under the rate cap: how long to wait for it, or the refusal when that is
    /// longer than the queue timeout (the turn is then not taken).
    fn rate_turn(&self, arrived: Instant) -> Result<Duration, Refusal> {
        let mut st = lock(&self.state);
        let Some(qps) = st.limits.max_qps.filter(|_| st.limits.active) else {
            return Ok(Duration::ZERO);
        };
        let now = arrived.duration_since(self.epoch);
        let turn = st.next_turn.max(now);
        let wait = turn - now;
        if wait > st.limits.queue_timeout {
            let limits = st.limits.clone();
            drop(st);
            let wait_ms = wait.as_millis() as u64;
            return Err(self.refusal(
                &limits,
                ShedReason::RateLimited {
                    max_qps: qps,
                    wait_ms,
                },
                wait_ms,
            ));
        }
        st.next_turn = turn + Duration::from_secs(1) / qps;
        Ok(wait)
    }

    #[cfg(test)]
    pub(crate) fn rate_turn_for_test(&self) -> Result<Duration, Refusal> {
        self.rate_turn(Instant::now())
    }

    /// Admits one statement (or transaction): at once when a slot is free, after a wait in the
    /// queue otherwise, or refused. Dropping the future while it waits leaves the queue.
    pub async fn admit(self: &Arc<Self>) -> Result<Permit, Refusal> {
        if let Some(p) = self.try_admit() {
            return Ok(p);
        }
        let arrived = Instant::now();
        let (delay, reroute) = self.guard_gate()?;
        if !delay.is_zero() {
            self.counters.guard_delayed.fetch_add(1, Ordering::Relaxed);
            tokio::time::sleep(delay).await;
        }
        let mut permit = self.take_slot(arrived).await?;
        permit.reroute = reroute;
        Ok(permit)
    }

    /// The common case in one lock and no clock read: a free slot, nobody waiting, no guard
    /// effect and no rate cap. `None`: take the full path ([`Self::admit`]).
    pub fn try_admit(self: &Arc<Self>) -> Option<Permit> {
        let mut st = lock(&self.state);
        let plain = st.effect.shed.is_none()
            && st.effect.delay.is_zero()
            && (st.limits.max_qps.is_none() || !st.limits.active)
            && st.queue.is_empty();
        if !(plain && st.has_slot()) {
            return None;
        }
        st.in_flight += 1;
        let (reroute, max_execution) = (st.effect.reroute, st.limits.max_execution);
        let priority = st.limits.priority;
        drop(st);
        self.counters.admitted.fetch_add(1, Ordering::Relaxed);
        Some(Permit {
            gate: self.clone(),
            reroute,
            max_execution,
            priority,
        })
    }

    /// The guards' say before anything else: shed (by a draw), or the delay to wait and where
    /// to reroute.
    fn guard_gate(&self) -> Result<(Duration, Option<u32>), Refusal> {
        let mut st = lock(&self.state);
        if let Some((p, guard_id, cause)) = st.effect.shed.clone()
            && st.draw() < p
        {
            let limits = st.limits.clone();
            let retry = st.effect.delay.as_millis() as u64;
            drop(st);
            let reason = ShedReason::GuardOpen { guard_id, cause };
            return Err(self.refusal(&limits, reason, retry.max(1000)));
        }
        Ok((st.effect.delay, st.effect.reroute))
    }

    /// A slot: at once, after a wait in the queue, or refused.
    async fn take_slot(self: &Arc<Self>, arrived: Instant) -> Result<Permit, Refusal> {
        let rate_wait = self.rate_turn(arrived)?;
        if !rate_wait.is_zero() {
            tokio::time::sleep(rate_wait).await;
        }
        let (ticket, mut woken, deadline, limits) = {
            let mut st = lock(&self.state);
            if st.has_slot() {
                st.in_flight += 1;
                drop(st);
                return Ok(self.admitted(arrived, !rate_wait.is_zero()));
            }
            if st.queue.len() as u32 >= st.limits.max_queue {
                let reason = ShedReason::QueueFull {
                    in_flight: st.in_flight,
                    queued: st.queue.len() as u32,
                    max_queue: st.limits.max_queue,
                };
                let limits = st.limits.clone();
                drop(st);
                return Err(self.refusal(&limits, reason, self.typical_ms()));
            }
            let ticket = st.next_ticket;
            st.next_ticket += 1;
            let (wake, woken) = oneshot::channel();
            st.queue.push_back(Waiter { ticket, wake });
            (
                ticket,
                woken,
                arrived + st.limits.queue_timeout,
                st.limits.clone(),
            )
        };
        let mut place = Place {
            gate: self,
            ticket,
            settled: false,
        };
        let woke = tokio::time::timeout_at(deadline, &mut woken).await;
        if matches!(woke, Ok(Ok(()))) || place.leave_or_own() {
            place.settled = true;
            return Ok(self.admitted(arrived, true));
        }
        place.settled = true;
        let reason = ShedReason::QueueTimeout {
            waited_ms: arrived.elapsed().as_millis() as u64,
            max_concurrency: limits.max_concurrency,
        };
        Err(self.refusal(&limits, reason, limits.queue_timeout.as_millis() as u64))
    }

    fn admitted(self: &Arc<Self>, arrived: Instant, waited: bool) -> Permit {
        self.counters.admitted.fetch_add(1, Ordering::Relaxed);
        if waited {
            self.counters.waited.fetch_add(1, Ordering::Relaxed);
            let us = u64::try_from(arrived.elapsed().as_micros()).unwrap_or(u64::MAX);
            self.counters.queue_wait.observe_us(us);
        }
        let st = lock(&self.state);
        Permit {
            gate: self.clone(),
            reroute: None,
            max_execution: st.limits.max_execution,
            priority: st.limits.priority,
        }
    }

    /// A slot comes back: to the first waiter still there, else to the pool of free slots.
    fn release(&self) {
        let mut st = lock(&self.state);
        st.in_flight = st.in_flight.saturating_sub(1);
        Self::admit_waiters(&mut st);
    }
}

/// A waiter's place in the queue, given up if its future is dropped.
struct Place<'a> {
    gate: &'a ClassGate,
    ticket: u64,
    /// The outcome is known (admitted or refused) and accounted for.
    settled: bool,
}

impl Place<'_> {
    /// Leaves the queue; `true` when that was too late because a slot had been handed over.
    fn leave_or_own(&self) -> bool {
        let mut st = lock(&self.gate.state);
        match st.queue.iter().position(|w| w.ticket == self.ticket) {
            Some(i) => {
                st.queue.remove(i);
                false
            }
            None => true,
        }
    }
}

impl Drop for Place<'_> {
    fn drop(&mut self) {
        if !self.settled && self.leave_or_own() {
            // Cancelled (the client went away) just after a slot was handed over: pass it on.
            self.gate.release();
        }
    }
}

/// A statement's (or transaction's) slot in its class; dropping it gives the slot back.
#[derive(Debug)]
pub struct Permit {
    gate: Arc<ClassGate>,
    reroute: Option<u32>,
    max_execution: Option<Duration>,
    priority: Priority,
}

impl Permit {
    /// The class.
    pub fn class(&self) -> &Arc<str> {
        &self.gate.name
    }

    /// The hostgroup an open `reroute` guard sends the statement to.
    pub fn reroute(&self) -> Option<u32> {
        self.reroute
    }

    /// The class's priority when the statement was admitted: the order in which it is served
    /// when sessions wait for a backend connection.
    pub fn priority(&self) -> Priority {
        self.priority
    }

    /// The class's statement time limit, if any.
    pub fn max_execution(&self) -> Option<Duration> {
        self.max_execution
    }

    /// Records one statement's latency under the class.
    pub fn observe_us(&self, us: u64) {
        let c = &self.gate.counters;
        let bucket = crate::metrics::bucket_of(us);
        c.latency.observe_in(bucket, us);
        c.recent
            .observe_in(bucket, us, self.gate.epoch.elapsed().as_secs());
    }
}

impl Drop for Permit {
    fn drop(&mut self) {
        self.gate.release();
    }
}

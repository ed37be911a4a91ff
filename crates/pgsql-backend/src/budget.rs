//! One server's `max_connections`, split between the session threads (`pgsql-threads`).
//!
//! With one budget for all threads, the session a released slot wakes is whichever waited
//! longest, usually on the other thread: the wake-up crosses threads (an eventfd write and a
//! wake of the other event loop) and the connection follows it (two `epoll_ctl`s to move its
//! socket). With 2,000 clients on 32 connections that happened on ~30–40 % of transactions.
//! Here each thread has a share of the slots and its sessions queue on their own share, so
//! under load a slot and its connection stay on one thread (ProxySQL's per-thread pools). The
//! shares are not fixed: a slot given back where nobody waits goes to a thread whose sessions
//! do, and a thread holding more slots than another that has waiters gives one up, so the
//! budget follows the load and no thread starves. The total never exceeds `max_connections`.
//!
//! A share's waiting sessions are served by their statement's workload-class priority, then
//! arrival, each overtaken a bounded number of times (`sluice_core::admission::by_priority`).

use sluice_core::admission::by_priority::{self, PriorityWaiter};
use sluice_core::config::Priority;
use sluice_core::pool::Headroom;
use sluice_core::util::lock;
use std::collections::VecDeque;
use std::sync::atomic::Ordering::{AcqRel, Acquire, SeqCst};
use std::sync::atomic::{AtomicU32, fence};
use std::sync::{Arc, Mutex};
use std::time::Instant;
use tokio::sync::oneshot;

/// A session waiting in a share's queue.
#[derive(Debug)]
struct QueuedSession {
    priority: Priority,
    overtaken: u32,
    /// Receives the slot.
    tx: oneshot::Sender<()>,
}

impl PriorityWaiter for QueuedSession {
    fn priority(&self) -> Priority {
        self.priority
    }
    fn overtaken(&mut self) -> &mut u32 {
        &mut self.overtaken
    }
}

/// One thread's part of the budget.
///
/// A free slot is taken without the lock (a compare-and-swap on `free`, the path of every
/// transaction while slots are free); slots are put back, and sessions queued, under the
/// `waiters` lock, so a session that queued because `free` was zero is always handed the next
/// slot put back. Free slots and waiting sessions never coexist.
#[derive(Debug)]
struct Share {
    /// Free slots of this share.
    free: AtomicU32,
    /// Sessions waiting for a slot of this share, by priority, then arrival.
    waiters: Mutex<VecDeque<QueuedSession>>,
    /// Slots this share owns, in use or free (they move between shares).
    owned: AtomicU32,
    /// Sessions of this thread waiting for a slot.
    waiting: AtomicU32,
}

impl Share {
    /// Takes a free slot of this share, if any.
    fn try_take(&self) -> bool {
        self.free
            .fetch_update(AcqRel, Acquire, |f| f.checked_sub(1))
            .is_ok()
    }

    /// A slot of this share is free: to its first waiting session still waiting, else free.
    fn release(&self) {
        let mut waiters = lock(&self.waiters);
        while let Some(w) = waiters.pop_front() {
            if w.tx.send(()).is_ok() {
                return;
            }
        }
        // Under the lock: a session queueing now either saw this slot or is handed the next.
        self.free.fetch_add(1, AcqRel);
    }
}

/// A server's slots, split between `threads` shares.
#[derive(Debug)]
pub(crate) struct Budget {
    /// `max_connections` the budget was made for.
    pub(crate) max: u32,
    shares: Vec<Share>,
}

/// A slot taken from a [`Budget`]; dropping it gives the slot back (to the share that needs
/// it most).
#[derive(Debug)]
pub(crate) struct Slot {
    budget: Arc<Budget>,
    share: usize,
}

/// Counts a session of share `.1` as waiting; however the wait ends (slot, timeout,
/// cancellation), the count goes down and, when it was the share's last waiter, free slots a
/// give-back moved here for it are offered to the shares whose sessions still wait.
struct Waiting<'a>(&'a Budget, usize);

impl<'a> Waiting<'a> {
    fn start(budget: &'a Budget, share: usize) -> Self {
        budget.shares[share].waiting.fetch_add(1, SeqCst);
        Waiting(budget, share)
    }
}

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        let Waiting(budget, share) = *self;
        if budget.shares[share].waiting.fetch_sub(1, SeqCst) == 1 {
            fence(SeqCst);
            budget.offer_free(share);
        }
    }
}

/// A session's place in a share's queue; a slot handed to it after it stopped waiting (timed
/// out, or its client left) is given back when the place is dropped.
struct Place<'a> {
    rx: oneshot::Receiver<()>,
    budget: &'a Budget,
    share: usize,
}

impl Place<'_> {
    /// Stops waiting: whether a slot was handed over meanwhile (it is then the caller's).
    fn leave(&mut self) -> bool {
        self.rx.close();
        self.rx.try_recv().is_ok()
    }
}

impl Drop for Place<'_> {
    fn drop(&mut self) {
        if self.leave() {
            self.budget.give_back(self.share);
        }
    }
}

impl Budget {
    /// `max` slots split as evenly as possible between `threads` shares (at least one).
    pub(crate) fn new(max: u32, threads: usize) -> Arc<Budget> {
        let n = threads.max(1);
        let shares = (0..n)
            .map(|i| {
                let part = max / n as u32 + u32::from((i as u32) < max % n as u32);
                Share {
                    free: AtomicU32::new(part),
                    waiters: Mutex::new(VecDeque::new()),
                    owned: AtomicU32::new(part),
                    waiting: AtomicU32::new(0),
                }
            })
            .collect();
        Arc::new(Budget { max, shares })
    }

    /// Slots in use now, all shares together.
    pub(crate) fn in_use(&self) -> u32 {
        let free: u32 = self.shares.iter().map(|s| s.free.load(Acquire)).sum();
        self.max.saturating_sub(free)
    }

    /// In use and the maximum, for the idle connections' choice (see [`Headroom`]).
    pub(crate) fn headroom(&self) -> Headroom {
        Headroom {
            in_use: self.in_use(),
            max: self.max,
        }
    }

    fn share_of(&self, thread: Option<usize>) -> usize {
        thread.map_or(0, |t| t % self.shares.len())
    }

    /// A free slot without waiting: the thread's own share first, then any other's.
    pub(crate) fn try_take(self: &Arc<Self>, thread: Option<usize>) -> Option<Slot> {
        let own = self.share_of(thread);
        let n = self.shares.len();
        (0..n)
            .map(|i| (own + i) % n)
            .find(|&s| self.shares[s].try_take())
            .map(|share| self.slot(share))
    }

    fn slot(self: &Arc<Self>, share: usize) -> Slot {
        Slot {
            budget: self.clone(),
            share,
        }
    }

    /// A slot, waiting in the thread's own queue (by `priority`, then arrival) until
    /// `deadline` if none is free (a free one is taken without arming a timer); `None` when
    /// the deadline passed first.
    pub(crate) async fn take(
        self: &Arc<Self>,
        thread: Option<usize>,
        priority: Priority,
        deadline: Instant,
    ) -> Option<Slot> {
        if let Some(s) = self.try_take(thread) {
            return Some(s);
        }
        let own = self.share_of(thread);
        let _waiting = Waiting::start(self, own);
        // Looked at again once this wait is visible: a slot given back between the first look
        // and the count went to a free list nobody would have taken it from. The giver looks
        // at the counts after its give-back (`give_back`), behind a fence like this one, so at
        // least one of the two looks sees the other.
        fence(SeqCst);
        if let Some(s) = self.try_take(thread) {
            return Some(s);
        }
        let rx = {
            let share = &self.shares[own];
            let mut waiters = lock(&share.waiters);
            if share.try_take() {
                return Some(self.slot(own));
            }
            let (tx, rx) = oneshot::channel();
            let session = QueuedSession {
                priority,
                overtaken: 0,
                tx,
            };
            by_priority::enqueue(&mut waiters, session);
            rx
        };
        let mut place = Place {
            rx,
            budget: self,
            share: own,
        };
        match tokio::time::timeout_at(deadline.into(), &mut place.rx).await {
            Ok(Ok(())) => Some(self.slot(own)),
            // A slot handed over just as the wait timed out is still this session's.
            _ => place.leave().then(|| self.slot(own)),
        }
    }

    /// Gives a slot of share `from` back: to a share whose sessions wait when [`receiver`]
    /// names one, else to `from`'s first waiting session or free list.
    ///
    /// [`receiver`]: Budget::receiver
    fn give_back(&self, from: usize) {
        if let Some(to) = self.receiver(from) {
            self.moved(from, to);
            return;
        }
        self.shares[from].release();
        // A session of another thread may have started waiting after the look above and
        // looked at the free lists before the slot was in one: it would sleep on its own
        // share with this slot free here. Looking again after the give-back (the waiter
        // fences between counting itself and its last look) closes that gap; CI once saw a
        // session wait out its 10 s connect timeout on a pool of one.
        fence(SeqCst);
        self.offer_free(from);
    }

    /// Moves free slots of `from` to shares whose sessions wait, as long as [`receiver`] says
    /// they should have them (a slot moved to a share whose waiter then gave up comes back
    /// out this way too).
    ///
    /// [`receiver`]: Budget::receiver
    fn offer_free(&self, from: usize) {
        while let Some(to) = self.receiver(from) {
            if !self.shares[from].try_take() {
                return;
            }
            self.moved(from, to);
        }
    }

    /// Books a slot taken out of `from` to `to` and frees it there.
    fn moved(&self, from: usize, to: usize) {
        self.shares[from].owned.fetch_sub(1, AcqRel);
        self.shares[to].owned.fetch_add(1, AcqRel);
        self.shares[to].release();
    }

    /// Where a slot of share `from` goes when given back: another share whose sessions wait,
    /// when nobody waits on `from` or `from` owns more slots than that share.
    fn receiver(&self, from: usize) -> Option<usize> {
        let here = &self.shares[from];
        let waiting_here = here.waiting.load(SeqCst) > 0;
        let owned_here = here.owned.load(Acquire);
        let n = self.shares.len();
        (1..n).map(|i| (from + i) % n).find(|&to| {
            let there = &self.shares[to];
            there.waiting.load(SeqCst) > 0
                && (!waiting_here || owned_here > there.owned.load(Acquire))
        })
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        self.budget.give_back(self.share);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn soon() -> Instant {
        Instant::now() + Duration::from_secs(5)
    }

    /// A session of `thread` waiting for a slot; its result is the share the slot came from.
    fn waiter(b: &Arc<Budget>, thread: usize) -> tokio::task::JoinHandle<Option<usize>> {
        let b = b.clone();
        tokio::spawn(async move {
            b.take(Some(thread), Priority::Regular, soon())
                .await
                .map(|s| s.share)
        })
    }

    /// Until sessions of each of `threads` are counted as waiting.
    async fn until_waiting(b: &Budget, threads: &[usize]) {
        while threads
            .iter()
            .any(|t| b.shares[*t].waiting.load(SeqCst) == 0)
        {
            tokio::task::yield_now().await;
        }
    }

    #[test]
    fn slots_are_split_between_threads() {
        let b = Budget::new(5, 2);
        let owned: Vec<u32> = b.shares.iter().map(|s| s.owned.load(SeqCst)).collect();
        assert_eq!(owned, [3, 2]);
        assert_eq!(
            Budget::new(1, 4)
                .shares
                .iter()
                .map(|s| s.owned.load(SeqCst))
                .sum::<u32>(),
            1
        );
    }

    #[test]
    fn a_thread_takes_another_threads_free_slot_before_waiting() {
        let b = Budget::new(2, 2);
        let s0 = b.try_take(Some(0)).expect("own");
        let s1 = b.try_take(Some(0)).expect("the other share's");
        assert_eq!((s0.share, s1.share), (0, 1));
        assert!(b.try_take(Some(1)).is_none(), "never more than max");
        assert_eq!(b.in_use(), 2);
        drop((s0, s1));
        assert_eq!(b.in_use(), 0);
    }

    #[tokio::test]
    async fn a_slot_given_back_where_nobody_waits_goes_to_a_waiting_thread() {
        let b = Budget::new(2, 2);
        let held: Vec<Slot> = (0..2).filter_map(|_| b.try_take(Some(0))).collect();
        assert_eq!(held.len(), 2);
        let waiter = waiter(&b, 1);
        until_waiting(&b, &[1]).await;
        // Thread 0 gives back its own share's slot; nobody of thread 0 waits.
        drop(held.into_iter().find(|s| s.share == 0));
        assert_eq!(waiter.await.expect("join"), Some(1));
        let owned: Vec<u32> = b.shares.iter().map(|s| s.owned.load(SeqCst)).collect();
        assert_eq!(owned, [0, 2], "the slot moved to the share that waited");
    }

    #[tokio::test]
    async fn a_thread_with_no_slots_left_is_not_starved() {
        // Thread 1 owns nothing (its slot moved away); thread 0 has waiters of its own too.
        let b = Budget::new(2, 2);
        let a = b.try_take(Some(0)).expect("slot");
        let c = b.try_take(Some(0)).expect("slot");
        let t0 = waiter(&b, 0);
        let t1 = waiter(&b, 1);
        until_waiting(&b, &[0, 1]).await;
        // Share 0 owns 1, share 1 owns 1: a give-back from share 0 stays with share 0's waiter
        // (not more than share 1), share 1's give-back serves share 1.
        drop(a);
        drop(c);
        let mut got = [t0.await.expect("join"), t1.await.expect("join")];
        got.sort();
        assert_eq!(got, [Some(0), Some(1)]);
        // Move both slots to share 0 (share 1's, given back while only thread 0 waits), then
        // let both threads wait: share 0 holds more, so it gives one up although its own
        // sessions wait too.
        let b = Budget::new(2, 2);
        let x = b.try_take(Some(0)).expect("slot");
        let y = b.try_take(Some(0)).expect("slot");
        assert_eq!(y.share, 1);
        let first = {
            let b = b.clone();
            tokio::spawn(async move { b.take(Some(0), Priority::Regular, soon()).await })
        };
        until_waiting(&b, &[0]).await;
        drop(y);
        let z = first.await.expect("join").expect("slot");
        let owned: Vec<u32> = b.shares.iter().map(|s| s.owned.load(SeqCst)).collect();
        assert_eq!(owned, [2, 0]);
        let w0 = waiter(&b, 0);
        let w1 = waiter(&b, 1);
        until_waiting(&b, &[0, 1]).await;
        drop(x);
        assert_eq!(
            w1.await.expect("join"),
            Some(1),
            "the share with none gets the first"
        );
        drop(z);
        assert_eq!(w0.await.expect("join"), Some(0));
    }

    #[tokio::test]
    async fn a_slot_moved_to_a_waiter_that_gave_up_goes_on_to_another_waiting_thread() {
        let b = Budget::new(1, 2);
        let held = b.try_take(Some(0)).expect("slot");
        let leaver = waiter(&b, 1);
        let stayer = waiter(&b, 0);
        until_waiting(&b, &[0, 1]).await;
        // Share 0 owns the slot and share 1 none: the give-back goes to share 1's session,
        // which is cancelled (its client left) before it runs.
        drop(held);
        leaver.abort();
        assert!(leaver.await.expect_err("cancelled").is_cancelled());
        assert_eq!(stayer.await.expect("join"), Some(0), "not left to time out");
        assert_eq!(b.in_use(), 0);
    }

    /// Two session threads, each on its own event loop, taking turns on one slot as fast as
    /// they can: every wait ends with the slot (a give-back racing a new waiter on the other
    /// thread once left the slot free in one share while the waiter slept on the other's).
    #[test]
    fn two_threads_alternating_on_one_slot_never_wait_out_their_deadline() {
        let b = Budget::new(1, 2);
        let rounds = 20_000;
        let threads: Vec<_> = (0..2)
            .map(|t| {
                let b = b.clone();
                std::thread::spawn(move || {
                    let rt = tokio::runtime::Builder::new_current_thread()
                        .enable_all()
                        .build()
                        .expect("runtime");
                    rt.block_on(async {
                        let mut timed_out = 0;
                        for _ in 0..rounds {
                            let deadline = Instant::now() + Duration::from_secs(1);
                            match b.take(Some(t), Priority::Regular, deadline).await {
                                Some(slot) => {
                                    tokio::task::yield_now().await;
                                    drop(slot);
                                }
                                None => timed_out += 1,
                            }
                        }
                        timed_out
                    })
                })
            })
            .collect();
        let timed_out: Vec<u32> = threads
            .into_iter()
            .map(|h| h.join().expect("thread"))
            .collect();
        assert_eq!(timed_out, [0, 0], "waits that ran out with a slot free");
        assert_eq!(b.in_use(), 0);
    }

    #[tokio::test]
    async fn a_wait_ends_at_its_deadline() {
        let b = Budget::new(1, 2);
        let _held = b.try_take(Some(0)).expect("slot");
        let t = Instant::now();
        assert!(
            b.take(
                Some(1),
                Priority::Regular,
                Instant::now() + Duration::from_millis(50)
            )
            .await
            .is_none()
        );
        assert!(t.elapsed() >= Duration::from_millis(50));
        assert_eq!(
            b.shares[1].waiting.load(SeqCst),
            0,
            "the wait is no longer counted"
        );
    }

    #[tokio::test]
    async fn a_shares_waiters_are_served_by_priority_then_arrival() {
        let b = Budget::new(1, 1);
        let held = b.try_take(Some(0)).expect("slot");
        let order = Arc::new(Mutex::new(Vec::new()));
        let mut tasks = Vec::new();
        for (i, p) in [Priority::Low, Priority::Regular, Priority::Critical]
            .into_iter()
            .enumerate()
        {
            let (budget, order) = (b.clone(), order.clone());
            tasks.push(tokio::spawn(async move {
                let slot = budget.take(Some(0), p, soon()).await.expect("slot");
                lock(&order).push(i);
                tokio::task::yield_now().await;
                drop(slot);
            }));
            // Queued in this order: each is counted before the next starts.
            while b.shares[0].waiting.load(SeqCst) < i as u32 + 1 {
                tokio::task::yield_now().await;
            }
        }
        drop(held);
        for t in tasks {
            t.await.expect("join");
        }
        assert_eq!(*lock(&order), [2, 1, 0]);
        assert_eq!(b.in_use(), 0);
    }
}

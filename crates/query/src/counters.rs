//! Counters kept per thread and summed when read. Every statement bumps a handful of
//! process-wide counters; with one shared atomic each, every core's increment pulls the cache
//! line away from the others (and a single hot digest's map entry serialised every session on
//! one lock). Here each thread writes its own cache-line-aligned slot and the readers (stats
//! tables, scrapes: rare) add the slots up. Threads beyond the slot count share slots, which
//! stays correct (the slots hold atomics or locks) and only costs some sharing.

use std::cell::Cell;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

/// Aligned to two cache lines so that neighbouring slots never share one (adjacent-line
/// prefetching pairs lines on x86).
#[repr(align(128))]
#[derive(Debug, Default)]
struct Padded<T>(T);

/// Slots of a [`PerThread`]: twice the CPUs, at least 16, so that the event-loop threads of
/// both protocols and tokio's workers rarely share one. A power of two ([`PerThread::local_index`]
/// masks with it).
fn slot_count() -> usize {
    let cpus = std::thread::available_parallelism().map_or(4, |n| n.get());
    (cpus * 2).next_power_of_two().clamp(16, 256)
}

/// This thread's slot number, dealt in order of first use. A thread-local, not configuration:
/// it names the calling thread and nothing else.
#[inline]
pub fn thread_slot() -> usize {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    thread_local! {
        static SLOT: Cell<usize> = const { Cell::new(usize::MAX) };
    }
    SLOT.with(|s| {
        let v = s.get();
        if v != usize::MAX {
            return v;
        }
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        s.set(n);
        n
    })
}

/// One `T` per thread slot: a thread updates [`PerThread::local`], readers visit
/// [`PerThread::iter`] and combine.
#[derive(Debug)]
pub struct PerThread<T> {
    slots: Box<[Padded<T>]>,
}

impl<T: Default> Default for PerThread<T> {
    fn default() -> Self {
        PerThread::new_with(T::default)
    }
}

impl<T> PerThread<T> {
    /// Slots made by `make`.
    pub fn new_with(make: impl Fn() -> T) -> Self {
        PerThread {
            slots: (0..slot_count()).map(|_| Padded(make())).collect(),
        }
    }

    /// How many slots there are.
    pub fn len(&self) -> usize {
        self.slots.len()
    }

    /// Always false: there is at least one slot.
    pub fn is_empty(&self) -> bool {
        self.slots.is_empty()
    }

    /// The calling thread's slot number (an index for [`PerThread::iter`]). The slot count is
    /// a power of two: a mask, not a division, on every counter update.
    #[inline]
    pub fn local_index(&self) -> usize {
        thread_slot() & (self.slots.len() - 1)
    }

    /// The calling thread's slot.
    #[inline]
    pub fn local(&self) -> &T {
        &self.slots[self.local_index()].0
    }

    /// Slot `i` (an index from [`PerThread::local_index`]).
    pub fn get(&self, i: usize) -> Option<&T> {
        self.slots.get(i).map(|p| &p.0)
    }

    /// Every slot, for readers that combine them.
    pub fn iter(&self) -> impl Iterator<Item = &T> {
        self.slots.iter().map(|p| &p.0)
    }
}

/// A counter that only goes up, written per thread and summed on read.
#[derive(Debug, Default)]
pub struct Counter(PerThread<AtomicU64>);

impl Counter {
    /// Adds `n`.
    #[inline]
    pub fn add(&self, n: u64) {
        self.0.local().fetch_add(n, Ordering::Relaxed);
    }

    /// The total of every thread's additions.
    pub fn get(&self) -> u64 {
        self.0
            .iter()
            .fold(0u64, |t, c| t.wrapping_add(c.load(Ordering::Relaxed)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn additions_from_many_threads_all_count() {
        let c = Arc::new(Counter::default());
        let threads: Vec<_> = (0..40)
            .map(|i| {
                let c = c.clone();
                std::thread::spawn(move || {
                    for _ in 0..1000 {
                        c.add(i);
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().expect("thread");
        }
        // 40 threads on at least 16 slots: shared slots still count every addition.
        assert_eq!(c.get(), 1000 * (0..40).sum::<u64>());
    }

    #[test]
    fn the_slot_count_is_a_power_of_two_the_mask_relies_on() {
        let n = slot_count();
        assert!(n.is_power_of_two() && (16..=256).contains(&n), "{n} slots");
        let c: PerThread<u8> = PerThread::default();
        assert!(c.local_index() < c.len());
    }

    #[test]
    fn a_thread_keeps_its_slot_and_threads_get_different_ones() {
        let here = thread_slot();
        assert_eq!(here, thread_slot());
        let there = std::thread::spawn(thread_slot).join().expect("thread");
        assert_ne!(here, there);
    }

    #[test]
    fn slots_do_not_share_cache_lines() {
        let p: PerThread<AtomicU64> = PerThread::default();
        let addrs: Vec<usize> = p.iter().map(|c| c as *const AtomicU64 as usize).collect();
        assert!(addrs.len() >= 16);
        assert!(addrs.windows(2).all(|w| w[1] - w[0] >= 128));
    }
}

//! Latency histograms fine enough for a percentile to mean something: 64 buckets spaced by a
//! factor of 2^(1/3) (26 %) from 50 µs to 105 s, where [`LATENCY_BUCKETS_S`](super::LATENCY_BUCKETS_S)
//! has 11. [`FineHistogram`] counts since start (for Prometheus); [`WindowedHistogram`] keeps
//! the last minute in one-second slots (for a p99 over a sliding window).

use crate::util::lock;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

/// Buckets with an upper bound; one more counts what lies above the largest.
pub const FINE_BUCKETS: usize = 64;
/// Upper bound of the first bucket, in microseconds.
const FIRST_BOUND_US: u64 = 50;
/// Slots (seconds) a [`WindowedHistogram`] keeps.
const WINDOW_SLOTS: usize = 60;

/// Upper bound of bucket `i`, in seconds.
pub fn fine_bound_s(i: usize) -> f64 {
    fine_bound_us(i) / 1e6
}

fn fine_bound_us(i: usize) -> f64 {
    BOUNDS_US[i.min(FINE_BUCKETS - 1)] as f64
}

/// The bounds in whole microseconds: 50 µs × 2^(i/3), with 2^(1/3) and 2^(2/3) as 1.260 and
/// 1.587, made at compile time so that finding a bucket is integer comparisons only.
const BOUNDS_US: [u64; FINE_BUCKETS] = {
    let mut b = [0u64; FINE_BUCKETS];
    let steps = [1000u64, 1260, 1587];
    let mut i = 0;
    while i < FINE_BUCKETS {
        b[i] = (FIRST_BOUND_US << (i / 3)) * steps[i % 3] / 1000;
        i += 1;
    }
    b
};

/// The bucket an observation of `us` microseconds falls in (binary search: 6 comparisons).
pub(crate) fn bucket_of(us: u64) -> usize {
    BOUNDS_US.partition_point(|b| *b < us)
}

/// Counts per bucket (not cumulative), their sum and count at one moment.
#[derive(Debug, Clone, PartialEq)]
pub struct FineSnapshot {
    /// Observations per bucket; the last is over the largest bound.
    pub buckets: [u64; FINE_BUCKETS + 1],
    /// Sum of all observations, in seconds.
    pub sum_seconds: f64,
    /// Observations.
    pub count: u64,
}

impl Default for FineSnapshot {
    fn default() -> Self {
        FineSnapshot {
            buckets: [0; FINE_BUCKETS + 1],
            sum_seconds: 0.0,
            count: 0,
        }
    }
}

impl FineSnapshot {
    /// The `q` quantile (0..=1) in milliseconds, interpolated inside its bucket; `None` with
    /// no observations.
    pub fn quantile_ms(&self, q: f64) -> Option<f64> {
        if self.count == 0 {
            return None;
        }
        let rank = (q.clamp(0.0, 1.0) * self.count as f64).ceil().max(1.0) as u64;
        let mut seen = 0u64;
        for (i, &c) in self.buckets.iter().enumerate() {
            if c == 0 {
                continue;
            }
            if seen + c >= rank {
                let low = if i == 0 { 0.0 } else { fine_bound_us(i - 1) };
                let high = fine_bound_us(i.min(FINE_BUCKETS - 1));
                let within = (rank - seen) as f64 / c as f64;
                return Some((low + (high - low) * within) / 1000.0);
            }
            seen += c;
        }
        Some(fine_bound_us(FINE_BUCKETS - 1) / 1000.0)
    }

    fn add(&mut self, bucket: usize, us: u64) {
        self.buckets[bucket] += 1;
        self.sum_seconds += us as f64 / 1e6;
        self.count += 1;
    }

    fn merge(&mut self, other: &FineSnapshot) {
        for (a, b) in self.buckets.iter_mut().zip(other.buckets) {
            *a += b;
        }
        self.sum_seconds += other.sum_seconds;
        self.count += other.count;
    }
}

/// A fine histogram since start, updated with relaxed atomics.
#[derive(Debug)]
pub struct FineHistogram {
    buckets: [AtomicU64; FINE_BUCKETS + 1],
    sum_us: AtomicU64,
    count: AtomicU64,
}

impl Default for FineHistogram {
    fn default() -> Self {
        FineHistogram {
            buckets: std::array::from_fn(|_| AtomicU64::new(0)),
            sum_us: AtomicU64::new(0),
            count: AtomicU64::new(0),
        }
    }
}

impl FineHistogram {
    /// Records one observation of `us` microseconds.
    pub fn observe_us(&self, us: u64) {
        self.observe_in(bucket_of(us), us);
    }

    /// [`Self::observe_us`] with its bucket already found.
    pub(crate) fn observe_in(&self, bucket: usize, us: u64) {
        self.buckets[bucket].fetch_add(1, Ordering::Relaxed);
        self.sum_us.fetch_add(us, Ordering::Relaxed);
        self.count.fetch_add(1, Ordering::Relaxed);
    }

    /// The buckets, sum and count now.
    pub fn snapshot(&self) -> FineSnapshot {
        let mut s = FineSnapshot::default();
        for (to, b) in s.buckets.iter_mut().zip(&self.buckets) {
            *to = b.load(Ordering::Relaxed);
        }
        s.sum_seconds = self.sum_us.load(Ordering::Relaxed) as f64 / 1e6;
        s.count = self.count.load(Ordering::Relaxed);
        s
    }
}

/// The last minute of observations in one-second slots: a percentile over a sliding window.
#[derive(Debug)]
pub struct WindowedHistogram {
    slots: Mutex<Vec<(u64, FineSnapshot)>>,
}

impl Default for WindowedHistogram {
    fn default() -> Self {
        WindowedHistogram {
            slots: Mutex::new(vec![(u64::MAX, FineSnapshot::default()); WINDOW_SLOTS]),
        }
    }
}

impl WindowedHistogram {
    /// Records `us` microseconds observed in second `now_s` (any monotonic second count).
    pub fn observe_us(&self, us: u64, now_s: u64) {
        self.observe_in(bucket_of(us), us, now_s);
    }

    /// [`Self::observe_us`] with its bucket already found.
    pub(crate) fn observe_in(&self, bucket: usize, us: u64, now_s: u64) {
        let mut slots = lock(&self.slots);
        let slot = &mut slots[(now_s % WINDOW_SLOTS as u64) as usize];
        if slot.0 != now_s {
            *slot = (now_s, FineSnapshot::default());
        }
        slot.1.add(bucket, us);
    }

    /// What was observed in the `window_s` seconds up to and including `now_s` (at most a
    /// minute).
    pub fn window(&self, window_s: u64, now_s: u64) -> FineSnapshot {
        let window_s = window_s.clamp(1, WINDOW_SLOTS as u64);
        let slots = lock(&self.slots);
        let mut out = FineSnapshot::default();
        for (at, s) in slots.iter() {
            if *at <= now_s && now_s - *at < window_s {
                out.merge(s);
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_value_lands_in_the_bucket_whose_bounds_hold_it() {
        for us in [
            0u64,
            1,
            50,
            51,
            63,
            64,
            100,
            1_000,
            49_999,
            50_000,
            1_000_000,
            u64::MAX / 2,
        ] {
            let i = bucket_of(us);
            if i < FINE_BUCKETS {
                assert!(us as f64 <= fine_bound_us(i), "{us} above bucket {i}");
            }
            if i > 0 {
                assert!(
                    us as f64 > fine_bound_us(i - 1),
                    "{us} fits bucket {}",
                    i - 1
                );
            }
        }
        assert!((fine_bound_s(FINE_BUCKETS - 1) - 104.857_6).abs() < 0.1);
        for w in BOUNDS_US.windows(2) {
            assert!(w[0] < w[1] && (w[1] as f64 / w[0] as f64) < 1.27);
        }
    }

    #[test]
    fn quantiles_are_within_a_bucket_of_the_truth() {
        let h = FineHistogram::default();
        for ms in 1..=1000u64 {
            h.observe_us(ms * 1000);
        }
        let s = h.snapshot();
        let p99 = s.quantile_ms(0.99).unwrap();
        let p50 = s.quantile_ms(0.50).unwrap();
        assert!((990.0 / 1.26..=990.0 * 1.26).contains(&p99), "p99 {p99}");
        assert!((500.0 / 1.26..=500.0 * 1.26).contains(&p50), "p50 {p50}");
        assert_eq!(FineSnapshot::default().quantile_ms(0.5), None);
    }

    #[test]
    fn the_window_forgets_old_seconds() {
        let w = WindowedHistogram::default();
        w.observe_us(100_000, 10);
        w.observe_us(1_000, 15);
        assert_eq!(w.window(10, 15).count, 2);
        assert_eq!(w.window(5, 15).count, 1);
        // Second 70 reuses second 10's slot; second 15 is still inside a minute.
        w.observe_us(2_000, 70);
        assert_eq!(w.window(60, 70).count, 2);
        assert_eq!(w.window(60, 80).count, 1);
        assert_eq!(
            w.window(1, 70).quantile_ms(1.0).map(|v| v < 3.0),
            Some(true)
        );
    }
}

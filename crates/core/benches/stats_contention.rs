//! What the per-statement statistics cost when every core updates them at once (issue 14):
//! the counters and the digest map as Sluice keeps them (one slot per thread, summed on read)
//! against the shared designs they replaced or could be replaced by — one atomic for everyone,
//! a `Mutex<HashMap>` sharded by key (what the digest map was) and a `DashMap`. Each sample runs
//! the same number of updates on two threads, as two sessions on two cores do with a hot
//! statement (`cargo xtask bench core`; numbers in docs/benchmarks.md).

use criterion::{Criterion, criterion_group, criterion_main};
use dashmap::DashMap;
use sluice_core::metrics::{Counter, FrontendStats, PerThread};
use sluice_core::query::stats::{DigestSample, DigestStats};
use std::collections::HashMap;
use std::hint::black_box;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Barrier, Mutex};
use std::time::{Duration, Instant};

const THREADS: usize = 2;

/// Runs `each(thread)` `iters` times on each of [`THREADS`] threads started together; the time
/// until all are done.
fn on_threads<S: Send + Sync + 'static>(
    shared: &Arc<S>,
    iters: u64,
    each: fn(&S, u64),
) -> Duration {
    let barrier = Arc::new(Barrier::new(THREADS + 1));
    let threads: Vec<_> = (0..THREADS as u64)
        .map(|t| {
            let (s, b) = (shared.clone(), barrier.clone());
            std::thread::spawn(move || {
                b.wait();
                for _ in 0..iters {
                    each(&s, t);
                }
            })
        })
        .collect();
    barrier.wait();
    let start = Instant::now();
    for t in threads {
        t.join().expect("bench thread");
    }
    start.elapsed()
}

fn sample(us: u64) -> DigestSample<'static> {
    DigestSample {
        hostgroup: 0,
        schema: "sbtest",
        user: "sbtest",
        client: "",
        digest: 0x5eed,
        text: "SELECT c FROM sbtest1 WHERE id=?",
        duration_us: us,
        rows_affected: 0,
        rows_sent: 1,
        now: 1_700_000_000,
    }
}

/// The payload of the plain-map rows: a count and a sum per key.
type PlainMap = Mutex<HashMap<u64, (u64, u64)>>;

/// The digest map's update path as it was: shards chosen by key, so a hot digest's updates
/// from every thread meet on one lock.
#[derive(Default)]
struct KeyShardedMap {
    shards: Vec<Mutex<HashMap<u64, (u64, u64)>>>,
}

impl KeyShardedMap {
    fn new() -> Self {
        KeyShardedMap {
            shards: (0..16).map(|_| Mutex::default()).collect(),
        }
    }

    fn record(&self, key: u64, us: u64) {
        let shard = (key.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 60) as usize % 16;
        let mut g = self.shards[shard].lock().unwrap_or_else(|p| p.into_inner());
        let e = g.entry(key).or_default();
        e.0 += 1;
        e.1 += us;
    }
}

fn counters(c: &mut Criterion) {
    let mut g = c.benchmark_group("2 threads, per update");
    g.bench_function("counter: one shared AtomicU64", |b| {
        let a = Arc::new(AtomicU64::new(0));
        b.iter_custom(|n| {
            on_threads(&a, n, |a, _| {
                a.fetch_add(1, Ordering::Relaxed);
            })
        })
    });
    g.bench_function("counter: per-thread Counter", |b| {
        let a = Arc::new(Counter::default());
        b.iter_custom(|n| on_threads(&a, n, |a, _| a.add(1)))
    });
    g.bench_function("statement stats: FrontendStats::statement", |b| {
        let s = Arc::new(FrontendStats::default());
        b.iter_custom(|n| on_threads(&s, n, |s, t| s.statement(black_box(0), 100 + t, 1_000_000)))
    });
    g.bench_function("hot digest: Mutex<HashMap> sharded by key", |b| {
        let m = Arc::new(KeyShardedMap::new());
        b.iter_custom(|n| on_threads(&m, n, |m, t| m.record(black_box(0x5eed), 100 + t)))
    });
    g.bench_function("hot digest: DashMap", |b| {
        let m: Arc<DashMap<u64, (u64, u64)>> = Arc::new(DashMap::new());
        b.iter_custom(|n| {
            on_threads(&m, n, |m, t| {
                let mut e = m.entry(black_box(0x5eed)).or_default();
                e.0 += 1;
                e.1 += 100 + t;
            })
        })
    });
    g.bench_function("hot digest: Mutex<HashMap> per thread (PerThread)", |b| {
        let m: Arc<PerThread<PlainMap>> = Arc::new(PerThread::default());
        b.iter_custom(|n| {
            on_threads(&m, n, |m, t| {
                let mut g = m.local().lock().unwrap_or_else(|p| p.into_inner());
                let e = g.entry(black_box(0x5eed)).or_default();
                e.0 += 1;
                e.1 += 100 + t;
            })
        })
    });
    g.bench_function("hot digest: DigestStats::record (per-thread shards)", |b| {
        let d = Arc::new(DigestStats::new(100_000));
        b.iter_custom(|n| on_threads(&d, n, |d, t| d.record(&sample(100 + t))))
    });
    g.finish();
    c.bench_function("one thread/DigestStats::record (hot digest)", |b| {
        let d = DigestStats::new(100_000);
        b.iter(|| d.record(black_box(&sample(100))))
    });
}

criterion_group!(benches, counters);
criterion_main!(benches);

//! Live query-processor statistics: the digest map behind `stats_*_query_digest` (bounded in
//! entries, coldest evicted and counted — ProxySQL's map grows without limit), rule hits for
//! `stats_*_query_rules`, and the delayed-query counter.

use super::digest::fnv1a;
use crate::counters::PerThread;
use crate::util::lock;
use std::collections::HashMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

/// The smallest bound `digests_max` can set.
const MIN_ENTRIES: usize = 16;
/// A shard with fewer entries than this makes room in the largest other shard rather than in
/// itself: the coldest eighth of a handful of entries is the thread's hot statement, so a
/// thread that started recording once the map was full would evict its own hot digest at
/// every new one (CI once saw a thread's every execution of a statement lost that way).
const OWN_EVICTION_MIN: usize = 8;

/// One executed query, as the digest map records it.
#[derive(Debug, Clone, Copy)]
pub struct DigestSample<'a> {
    /// Hostgroup it ran on (-1: answered by Sluice, e.g. from the cache or a rule).
    pub hostgroup: i64,
    /// Schema / database.
    pub schema: &'a str,
    /// The account that ran the statement.
    pub user: &'a str,
    /// Client address ('' unless `query_digests_track_hostname`).
    pub client: &'a str,
    /// Hash of the digest text (`stats_*_query_digest.digest`).
    pub digest: u64,
    /// The statement with literals replaced by `?`.
    pub text: &'a str,
    /// Time it took (µs).
    pub duration_us: u64,
    /// Rows the statement changed.
    pub rows_affected: u64,
    /// Rows the statement returned.
    pub rows_sent: u64,
    /// Unix time (s).
    pub now: u64,
}

/// One row of `stats_*_query_digest`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DigestRow {
    /// The hostgroup that ran it; -1 when Sluice answered itself.
    pub hostgroup: i64,
    /// Schema / database.
    pub schema: String,
    /// The account that ran it.
    pub user: String,
    /// The client's address (empty unless `query_digests_track_hostname`).
    pub client: String,
    /// Hash of the digest text.
    pub digest: u64,
    /// The statement with literals replaced by `?`.
    pub text: String,
    /// How many times it ran.
    pub count: u64,
    /// First execution (unix s).
    pub first_seen: u64,
    /// Last execution (unix s).
    pub last_seen: u64,
    /// Total time (µs).
    pub sum_time: u64,
    /// Its fastest run (µs).
    pub min_time: u64,
    /// Its slowest run (µs).
    pub max_time: u64,
    /// Rows changed, all runs together.
    pub rows_affected: u64,
    /// Rows returned, all runs together.
    pub rows_sent: u64,
}

struct Entry {
    row: DigestRow,
    tick: u64,
}

impl Entry {
    fn bytes(&self) -> usize {
        std::mem::size_of::<Entry>()
            + 16
            + self.row.schema.capacity()
            + self.row.user.capacity()
            + self.row.client.capacity()
            + self.row.text.capacity()
    }
}

#[derive(Default)]
struct Shard {
    /// By [`key_hash`], hashed again with foldhash (seeded per process, so clients cannot aim
    /// their statements at one bucket), where SipHash cost ~140 instructions per recorded
    /// statement.
    map: HashMap<u64, Entry, hashbrown::DefaultHashBuilder>,
    tick: u64,
    bytes: usize,
}

/// The bounded digest map. Each thread records into its own shard (a hot statement run by
/// every session would otherwise serialise them all on one lock); the shards share one entry
/// budget, and readers merge a digest's rows from every shard.
pub struct DigestStats {
    shards: PerThread<Mutex<Shard>>,
    max_entries: AtomicUsize,
    /// Entries held in all shards together (a digest recorded by two threads counts twice).
    entries: AtomicUsize,
    evicted: AtomicU64,
}

impl std::fmt::Debug for DigestStats {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DigestStats")
            .field("len", &self.len())
            .finish()
    }
}

impl Default for DigestStats {
    fn default() -> Self {
        DigestStats::new(100_000)
    }
}

fn key_hash(s: &DigestSample) -> u64 {
    let mut h = s.digest ^ (s.hostgroup as u64).rotate_left(32);
    for part in [s.schema, s.user, s.client] {
        h = h.rotate_left(13) ^ fnv1a(part.as_bytes());
    }
    h
}

/// Whether `row` is the entry of `s` (and not another key with the same hash).
fn same_key(row: &DigestRow, s: &DigestSample) -> bool {
    row.digest == s.digest
        && row.hostgroup == s.hostgroup
        && same_text(&row.user, s.user)
        && same_text(&row.schema, s.schema)
        && same_text(&row.client, s.client)
}

/// `a == b`, without calling `memcmp` for two empty strings: `client` is empty for every
/// statement by default, and glibc's AVX-512 `memcmp` given the dangling pointer of an empty
/// `String` took ~170 ns per call on the benchmark machine (masked loads from an unmapped
/// page; `cargo xtask bench core`, docs/benchmarks.md).
fn same_text(a: &str, b: &str) -> bool {
    a.len() == b.len() && (a.is_empty() || a == b)
}

impl DigestStats {
    /// A map holding at most `max_entries` digests.
    pub fn new(max_entries: usize) -> Self {
        DigestStats {
            shards: PerThread::default(),
            max_entries: AtomicUsize::new(max_entries.max(MIN_ENTRIES)),
            entries: AtomicUsize::new(0),
            evicted: AtomicU64::new(0),
        }
    }

    /// Changes the bound (the config may change at runtime); applies from the next record.
    pub fn set_max_entries(&self, n: usize) {
        // Called for every statement from every thread: a store each time would bounce the
        // cache line between cores although the value almost never changes.
        let n = n.max(MIN_ENTRIES);
        if self.max_entries.load(Ordering::Relaxed) != n {
            self.max_entries.store(n, Ordering::Relaxed);
        }
    }

    /// Records one execution.
    pub fn record(&self, s: &DigestSample) {
        let k = key_hash(s);
        let own = self.shards.local_index();
        {
            let mut g = lock(self.shard(own));
            g.tick += 1;
            let tick = g.tick;
            if let Some(e) = g.map.get_mut(&k)
                && same_key(&e.row, s)
            {
                e.add(s, tick);
                return;
            }
            let full =
                self.entries.load(Ordering::Relaxed) >= self.max_entries.load(Ordering::Relaxed);
            if !full || g.map.len() >= OWN_EVICTION_MIN {
                if full {
                    let evicted = self.evict_coldest(&mut g);
                    self.evicted.fetch_add(evicted as u64, Ordering::Relaxed);
                }
                self.insert(&mut g, k, s, tick);
                return;
            }
        }
        // The budget is spent by other threads' shards and this one holds too little to evict
        // from: make room in the largest (locking one shard at a time, never two).
        self.evict_elsewhere(own);
        let mut g = lock(self.shard(own));
        g.tick += 1;
        let tick = g.tick;
        self.insert(&mut g, k, s, tick);
    }

    fn shard(&self, i: usize) -> &Mutex<Shard> {
        self.shards.get(i).unwrap_or_else(|| self.shards.local())
    }

    fn insert(&self, g: &mut Shard, k: u64, s: &DigestSample, tick: u64) {
        let e = Entry::new(s, tick);
        g.bytes += e.bytes();
        match g.map.insert(k, e) {
            // A colliding key's entry was replaced: the count of entries is unchanged.
            Some(old) => g.bytes = g.bytes.saturating_sub(old.bytes()),
            None => {
                self.entries.fetch_add(1, Ordering::Relaxed);
            }
        }
    }

    /// Removes the coldest eighth of a shard (at least one entry); amortised O(1) per record.
    fn evict_coldest(&self, g: &mut Shard) -> usize {
        let n = (g.map.len() / 8).max(1).min(g.map.len());
        let mut ticks: Vec<(u64, u64)> = g.map.iter().map(|(k, e)| (e.tick, *k)).collect();
        if n < ticks.len() {
            ticks.select_nth_unstable(n - 1);
        }
        let mut removed = 0;
        for (_, k) in ticks.into_iter().take(n) {
            if let Some(e) = g.map.remove(&k) {
                g.bytes = g.bytes.saturating_sub(e.bytes());
                removed += 1;
            }
        }
        self.entries.fetch_sub(removed, Ordering::Relaxed);
        removed
    }

    fn evict_elsewhere(&self, own: usize) {
        let largest = self
            .shards
            .iter()
            .enumerate()
            .filter(|(i, _)| *i != own)
            .map(|(i, m)| (lock(m).map.len(), i))
            .max();
        if let Some((len, i)) = largest
            && len > 0
        {
            let evicted = self.evict_coldest(&mut lock(self.shard(i)));
            self.evicted.fetch_add(evicted as u64, Ordering::Relaxed);
        }
    }

    /// Every row (for `stats_*_query_digest`), a digest's rows from every thread merged.
    pub fn rows(&self) -> Vec<DigestRow> {
        let mut merged = RowMerge::default();
        for s in self.shards.iter() {
            for e in lock(s).map.values() {
                merged.add(e.row.clone());
            }
        }
        merged.rows
    }

    /// Every row, emptying the map (for `stats_*_query_digest_reset`).
    pub fn take_rows(&self) -> Vec<DigestRow> {
        let mut merged = RowMerge::default();
        for s in self.shards.iter() {
            let mut g = lock(s);
            let n = g.map.len();
            for (_, e) in g.map.drain() {
                merged.add(e.row);
            }
            g.bytes = 0;
            self.entries.fetch_sub(n, Ordering::Relaxed);
        }
        merged.rows
    }

    /// Distinct digests held now (a digest kept by several threads counts once; counted by
    /// key hash, without copying any row).
    pub fn len(&self) -> usize {
        let mut keys = std::collections::HashSet::new();
        for s in self.shards.iter() {
            keys.extend(lock(s).map.keys().copied());
        }
        keys.len()
    }

    /// True when empty.
    pub fn is_empty(&self) -> bool {
        self.entries.load(Ordering::Relaxed) == 0
    }

    /// Digests evicted to stay under the bound since start.
    pub fn evicted(&self) -> u64 {
        self.evicted.load(Ordering::Relaxed)
    }

    /// Bytes the entries account for (strings and fixed parts; the hash table's own slack
    /// is bounded by the entry count).
    pub fn memory_bytes(&self) -> usize {
        self.shards.iter().map(|s| lock(s).bytes).sum()
    }
}

impl Entry {
    fn new(s: &DigestSample, tick: u64) -> Entry {
        Entry {
            row: DigestRow {
                hostgroup: s.hostgroup,
                schema: s.schema.to_string(),
                user: s.user.to_string(),
                client: s.client.to_string(),
                digest: s.digest,
                text: s.text.to_string(),
                count: 1,
                first_seen: s.now,
                last_seen: s.now,
                sum_time: s.duration_us,
                min_time: s.duration_us,
                max_time: s.duration_us,
                rows_affected: s.rows_affected,
                rows_sent: s.rows_sent,
            },
            tick,
        }
    }

    fn add(&mut self, s: &DigestSample, tick: u64) {
        let r = &mut self.row;
        r.count += 1;
        r.last_seen = s.now;
        r.sum_time += s.duration_us;
        r.min_time = r.min_time.min(s.duration_us);
        r.max_time = r.max_time.max(s.duration_us);
        r.rows_affected += s.rows_affected;
        r.rows_sent += s.rows_sent;
        self.tick = tick;
    }
}

/// Rows of one digest kept by several threads, combined into one.
#[derive(Default)]
struct RowMerge {
    rows: Vec<DigestRow>,
    index: HashMap<(i64, u64, String, String, String), usize>,
}

impl RowMerge {
    fn add(&mut self, row: DigestRow) {
        let key = (
            row.hostgroup,
            row.digest,
            row.schema.clone(),
            row.user.clone(),
            row.client.clone(),
        );
        match self.index.get(&key) {
            Some(&i) => {
                let r = &mut self.rows[i];
                r.count += row.count;
                r.first_seen = r.first_seen.min(row.first_seen);
                r.last_seen = r.last_seen.max(row.last_seen);
                r.sum_time += row.sum_time;
                r.min_time = r.min_time.min(row.min_time);
                r.max_time = r.max_time.max(row.max_time);
                r.rows_affected += row.rows_affected;
                r.rows_sent += row.rows_sent;
            }
            None => {
                self.index.insert(key, self.rows.len());
                self.rows.push(row);
            }
        }
    }
}

/// Rule hits and other query-processor counters of one protocol.
#[derive(Debug, Default)]
pub struct QueryProcessorStats {
    /// The digest map.
    pub digests: DigestStats,
    /// Per thread slot: every statement that matches a rule counts a hit.
    hits: PerThread<Mutex<HashMap<u32, u64>>>,
    /// Queries held by a delay (global or per rule).
    pub delayed: AtomicU64,
    /// Queries blocked by `error_msg`.
    pub blocked: AtomicU64,
    /// Queries answered by `OK_msg`.
    pub ok_answered: AtomicU64,
    /// Queries rewritten by `replace_pattern`.
    pub rewritten: AtomicU64,
    /// Mirror copies sent / dropped because the queue was full.
    pub mirrored: AtomicU64,
    /// Mirror copies dropped.
    pub mirror_dropped: AtomicU64,
    /// Queries killed by a timeout.
    pub killed_by_timeout: AtomicU64,
}

impl QueryProcessorStats {
    /// Counts one hit for each rule id.
    pub fn hit(&self, rules: &[u32]) {
        if rules.is_empty() {
            return;
        }
        let mut g = lock(self.hits.local());
        for r in rules {
            *g.entry(*r).or_insert(0) += 1;
        }
    }

    /// (rule_id, hits), ordered by rule id.
    pub fn rule_hits(&self) -> Vec<(u32, u64)> {
        let mut all: std::collections::BTreeMap<u32, u64> = std::collections::BTreeMap::new();
        for h in self.hits.iter() {
            for (k, v) in lock(h).iter() {
                *all.entry(*k).or_insert(0) += *v;
            }
        }
        all.into_iter().collect()
    }

    /// Forgets rule hits (a new rule set was loaded).
    pub fn reset_hits(&self) {
        for h in self.hits.iter() {
            lock(h).clear();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(d: u64, text: &str, us: u64) -> DigestSample<'_> {
        DigestSample {
            hostgroup: 1,
            schema: "db",
            user: "u",
            client: "",
            digest: d,
            text,
            duration_us: us,
            rows_affected: 0,
            rows_sent: 2,
            now: 100,
        }
    }

    #[test]
    fn aggregates_per_key() {
        let s = DigestStats::new(1000);
        s.record(&sample(7, "SELECT ?", 10));
        s.record(&sample(7, "SELECT ?", 30));
        s.record(&DigestSample {
            hostgroup: 2,
            ..sample(7, "SELECT ?", 5)
        });
        let rows = s.rows();
        assert_eq!(rows.len(), 2);
        let r = rows.iter().find(|r| r.hostgroup == 1).expect("hg 1");
        assert_eq!(
            (r.count, r.sum_time, r.min_time, r.max_time, r.rows_sent),
            (2, 40, 10, 30, 4)
        );
        assert_eq!(s.take_rows().len(), 2);
        assert!(s.is_empty());
    }

    #[test]
    fn a_million_digests_stay_under_the_bound() {
        let max = 10_000;
        let s = DigestStats::new(max);
        let text = "SELECT c FROM sbtest1 WHERE id = ? AND k IN (?,...) ORDER BY c LIMIT ?";
        for i in 0..1_000_000u64 {
            s.record(&sample(i, text, 1));
        }
        let per_entry = std::mem::size_of::<Entry>() + 16 + 2 + 1 + text.len() + 8;
        assert!(s.len() <= max, "{} entries", s.len());
        assert!(s.len() >= max / 2, "{} entries kept", s.len());
        assert!(
            s.memory_bytes() <= max * per_entry,
            "{} bytes",
            s.memory_bytes()
        );
        assert!(s.evicted() >= 1_000_000 - max as u64);
        s.record(&sample(42, text, 1));
        s.record(&sample(42, text, 1));
        assert!(
            s.rows().iter().any(|r| r.digest == 42 && r.count == 2),
            "hot entry kept"
        );
    }

    #[test]
    fn threads_recording_one_digest_make_one_row_and_share_the_bound() {
        let s = std::sync::Arc::new(DigestStats::new(1000));
        let threads: Vec<_> = (0..4u64)
            .map(|t| {
                let s = s.clone();
                std::thread::spawn(move || {
                    for i in 0..1000u64 {
                        s.record(&DigestSample {
                            now: 100 + t,
                            ..sample(7, "SELECT ?", 10 + t)
                        });
                        // Every thread also fills the map with digests of its own.
                        s.record(&sample(1_000_000 * (t + 1) + i, "SELECT ?", 1));
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().expect("thread");
        }
        let rows = s.rows();
        let hot: Vec<&DigestRow> = rows.iter().filter(|r| r.digest == 7).collect();
        assert_eq!(hot.len(), 1, "one row for the digest every thread ran");
        let r = hot[0];
        assert_eq!(
            (r.count, r.min_time, r.max_time, r.first_seen, r.last_seen),
            (4000, 10, 13, 100, 103)
        );
        assert!(s.len() <= 1000, "{} rows over a bound of 1000", s.len());
        assert!(s.evicted() >= 4000 - 1000);
    }

    #[test]
    fn a_thread_starting_on_a_full_map_keeps_its_hot_digest() {
        let s = std::sync::Arc::new(DigestStats::new(100));
        let mut next = 1_000u64;
        // Up to the bound exactly, as a busy thread keeps it.
        let mut fill = |s: &DigestStats| {
            while s.entries.load(Ordering::Relaxed) < 100 {
                next += 1;
                s.record(&sample(next, "SELECT ?", 1));
            }
        };
        fill(&s);
        // Another thread runs its hot statement and a new one in turn while this one keeps the
        // map full in between (as busy threads do).
        let (ran, wait_ran) = std::sync::mpsc::channel();
        let (filled, wait_filled) = std::sync::mpsc::channel::<()>();
        let late = s.clone();
        let t = std::thread::spawn(move || {
            for i in 0..50u64 {
                late.record(&sample(7, "SELECT ?", 5));
                let _ = ran.send(());
                let _ = wait_filled.recv();
                late.record(&sample(2_000_000 + i, "SELECT ?", 1));
            }
        });
        while wait_ran.recv().is_ok() {
            fill(&s);
            let _ = filled.send(());
        }
        t.join().expect("thread");
        let rows = s.rows();
        let hot: Vec<&DigestRow> = rows.iter().filter(|r| r.digest == 7).collect();
        assert_eq!(hot.len(), 1, "the hot digest has its row");
        assert_eq!(hot[0].count, 50, "and every execution in it");
        assert!(s.len() <= 100, "{} rows over a bound of 100", s.len());
    }

    #[test]
    fn hits_per_rule() {
        let q = QueryProcessorStats::default();
        q.hit(&[10, 20]);
        q.hit(&[10]);
        assert_eq!(q.rule_hits(), vec![(10, 2), (20, 1)]);
    }
}

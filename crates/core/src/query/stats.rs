//! Live query-processor statistics: the digest map behind `stats_*_query_digest` (bounded in
//! entries, coldest evicted and counted — ProxySQL's map grows without limit), rule hits for
//! `stats_*_query_rules`, and the delayed-query counter.

use super::digest::fnv1a;
use crate::util::lock;
use std::collections::HashMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

const SHARDS: usize = 16;

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
    map: HashMap<u64, Entry>,
    tick: u64,
    bytes: usize,
}

/// The bounded digest map.
pub struct DigestStats {
    shards: Vec<Mutex<Shard>>,
    max_entries: AtomicUsize,
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

impl DigestStats {
    /// A map holding at most `max_entries` digests.
    pub fn new(max_entries: usize) -> Self {
        DigestStats {
            shards: (0..SHARDS).map(|_| Mutex::default()).collect(),
            max_entries: AtomicUsize::new(max_entries.max(SHARDS)),
            evicted: AtomicU64::new(0),
        }
    }

    /// Changes the bound (the config may change at runtime); applies from the next record.
    pub fn set_max_entries(&self, n: usize) {
        // Called for every statement from every thread: a store each time would bounce the
        // cache line between cores although the value almost never changes.
        let n = n.max(SHARDS);
        if self.max_entries.load(Ordering::Relaxed) != n {
            self.max_entries.store(n, Ordering::Relaxed);
        }
    }

    /// Records one execution.
    pub fn record(&self, s: &DigestSample) {
        let k = key_hash(s);
        let cap = self.max_entries.load(Ordering::Relaxed) / SHARDS;
        // The key hash's low bits vary little between digests; spread with a multiplicative mix.
        let shard = (k.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 60) as usize % SHARDS;
        let mut g = lock(&self.shards[shard]);
        g.tick += 1;
        let tick = g.tick;
        if let Some(e) = g.map.get_mut(&k)
            && e.row.digest == s.digest
            && e.row.hostgroup == s.hostgroup
            && e.row.user == s.user
            && e.row.schema == s.schema
            && e.row.client == s.client
        {
            let r = &mut e.row;
            r.count += 1;
            r.last_seen = s.now;
            r.sum_time += s.duration_us;
            r.min_time = r.min_time.min(s.duration_us);
            r.max_time = r.max_time.max(s.duration_us);
            r.rows_affected += s.rows_affected;
            r.rows_sent += s.rows_sent;
            e.tick = tick;
            return;
        }
        if g.map.len() >= cap {
            let evicted = evict_coldest(&mut g, cap);
            self.evicted.fetch_add(evicted as u64, Ordering::Relaxed);
        }
        let e = Entry {
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
        };
        g.bytes += e.bytes();
        if let Some(old) = g.map.insert(k, e) {
            g.bytes = g.bytes.saturating_sub(old.bytes());
        }
    }

    /// Every row (for `stats_*_query_digest`).
    pub fn rows(&self) -> Vec<DigestRow> {
        let mut out = Vec::new();
        for s in &self.shards {
            out.extend(lock(s).map.values().map(|e| e.row.clone()));
        }
        out
    }

    /// Every row, emptying the map (for `stats_*_query_digest_reset`).
    pub fn take_rows(&self) -> Vec<DigestRow> {
        let mut out = Vec::new();
        for s in &self.shards {
            let mut g = lock(s);
            out.extend(g.map.drain().map(|(_, e)| e.row));
            g.bytes = 0;
        }
        out
    }

    /// Distinct digests held now.
    pub fn len(&self) -> usize {
        self.shards.iter().map(|s| lock(s).map.len()).sum()
    }

    /// True when empty.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
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

/// Removes the coldest eighth of a full shard (at least one entry); amortised O(1) per record.
fn evict_coldest(g: &mut Shard, cap: usize) -> usize {
    let n = (cap / 8).max(1).min(g.map.len());
    let mut ticks: Vec<(u64, u64)> = g.map.iter().map(|(k, e)| (e.tick, *k)).collect();
    if n < ticks.len() {
        ticks.select_nth_unstable(n - 1);
    }
    for (_, k) in ticks.into_iter().take(n) {
        if let Some(e) = g.map.remove(&k) {
            g.bytes = g.bytes.saturating_sub(e.bytes());
        }
    }
    n
}

/// Rule hits and other query-processor counters of one protocol.
#[derive(Debug, Default)]
pub struct QueryProcessorStats {
    /// The digest map.
    pub digests: DigestStats,
    hits: Mutex<HashMap<u32, u64>>,
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
        let mut g = lock(&self.hits);
        for r in rules {
            *g.entry(*r).or_insert(0) += 1;
        }
    }

    /// (rule_id, hits), ordered by rule id.
    pub fn rule_hits(&self) -> Vec<(u32, u64)> {
        let g = lock(&self.hits);
        let mut v: Vec<(u32, u64)> = g.iter().map(|(k, v)| (*k, *v)).collect();
        v.sort_unstable();
        v
    }

    /// Forgets rule hits (a new rule set was loaded).
    pub fn reset_hits(&self) {
        lock(&self.hits).clear();
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
    fn hits_per_rule() {
        let q = QueryProcessorStats::default();
        q.hit(&[10, 20]);
        q.hit(&[10]);
        assert_eq!(q.rule_hits(), vec![(10, 2), (20, 1)]);
    }
}

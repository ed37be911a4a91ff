//! The query cache: raw result bytes of SELECTs, keyed by (user, schema, query text, a
//! protocol-specific variant such as the reply format), held for a TTL, bounded in bytes
//! (oldest first out), and — beyond ProxySQL's TTL-only cache — invalidated when a write through
//! Sluice touches a table the cached query read.

use super::digest::fnv1a;
use crate::util::lock;
use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

/// Identifies a cached result.
#[derive(Debug, Clone, Copy)]
pub struct CacheKey<'a> {
    /// The account asking: cached results are never shared across accounts.
    pub user: &'a str,
    /// Schema / database.
    pub schema: &'a str,
    /// Query text as sent.
    pub query: &'a str,
    /// What else shapes the reply bytes (capabilities, charset, session settings).
    pub variant: u64,
}

impl CacheKey<'_> {
    fn hash(&self) -> u64 {
        let mut h = fnv1a(self.user.as_bytes());
        h = h.rotate_left(17) ^ fnv1a(self.schema.as_bytes());
        h = h.rotate_left(17) ^ fnv1a(self.query.as_bytes());
        h.rotate_left(17) ^ self.variant
    }
}

struct Entry {
    user: String,
    schema: String,
    query: String,
    variant: u64,
    tables: Vec<String>,
    payload: Arc<[u8]>,
    expires: Instant,
    seq: u64,
}

impl Entry {
    fn size(&self) -> usize {
        self.payload.len() + self.query.len() + self.user.len() + self.schema.len() + 96
    }

    fn is(&self, k: &CacheKey) -> bool {
        self.variant == k.variant
            && self.query == k.query
            && self.user == k.user
            && self.schema == k.schema
    }
}

#[derive(Default)]
struct Inner {
    map: HashMap<u64, Entry>,
    order: VecDeque<(u64, u64)>,
    by_table: HashMap<String, HashSet<u64>>,
    bytes: usize,
    seq: u64,
}

impl Inner {
    fn remove(&mut self, h: u64) -> bool {
        let Some(e) = self.map.remove(&h) else {
            return false;
        };
        self.bytes = self.bytes.saturating_sub(e.size());
        for t in &e.tables {
            if let Some(set) = self.by_table.get_mut(t) {
                set.remove(&h);
                if set.is_empty() {
                    self.by_table.remove(t);
                }
            }
        }
        true
    }
}

/// Counters shown in `stats_*_global` (ProxySQL's `Query_Cache_*` names).
#[derive(Debug, Default)]
pub struct CacheCounters {
    /// Lookups in the cache (hits and misses).
    pub get: AtomicU64,
    /// Lookups that returned a result.
    pub get_ok: AtomicU64,
    /// Results put in the cache.
    pub set: AtomicU64,
    /// Bytes put in the cache.
    pub bytes_in: AtomicU64,
    /// Bytes served from the cache.
    pub bytes_out: AtomicU64,
    /// Entries removed (expired, evicted for space, flushed).
    pub purged: AtomicU64,
    /// Entries removed because a write touched their tables (Sluice).
    pub invalidated: AtomicU64,
}

/// A bounded, thread-safe result cache.
#[derive(Default)]
pub struct QueryCache {
    inner: Mutex<Inner>,
    entries: AtomicUsize,
    /// Lookups, hits, stores and purges (`stats_*_global` Query_Cache_*).
    pub counters: CacheCounters,
}

impl std::fmt::Debug for QueryCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("QueryCache")
            .field("entries", &self.entries.load(Ordering::Relaxed))
            .finish()
    }
}

impl QueryCache {
    /// An empty cache.
    pub fn new() -> Self {
        QueryCache::default()
    }

    /// The cached reply for `key`, if present and not expired.
    pub fn get(&self, key: &CacheKey, now: Instant) -> Option<Arc<[u8]>> {
        self.counters.get.fetch_add(1, Ordering::Relaxed);
        if self.entries.load(Ordering::Relaxed) == 0 {
            return None;
        }
        let h = key.hash();
        let mut g = lock(&self.inner);
        let e = g.map.get(&h)?;
        if !e.is(key) {
            return None;
        }
        if e.expires <= now {
            g.remove(h);
            self.entries.store(g.map.len(), Ordering::Relaxed);
            self.counters.purged.fetch_add(1, Ordering::Relaxed);
            return None;
        }
        let p = e.payload.clone();
        drop(g);
        self.counters.get_ok.fetch_add(1, Ordering::Relaxed);
        self.counters
            .bytes_out
            .fetch_add(p.len() as u64, Ordering::Relaxed);
        Some(p)
    }

    /// Stores a reply for `ttl`, evicting expired then oldest entries to stay under `max_bytes`.
    /// A reply larger than a quarter of the bound is not stored.
    pub fn put(
        &self,
        key: &CacheKey,
        tables: &[String],
        payload: &[u8],
        ttl: Duration,
        max_bytes: usize,
        now: Instant,
    ) {
        let e = Entry {
            user: key.user.to_string(),
            schema: key.schema.to_string(),
            query: key.query.to_string(),
            variant: key.variant,
            tables: tables.to_vec(),
            payload: Arc::from(payload),
            expires: now + ttl,
            seq: 0,
        };
        let size = e.size();
        if size > max_bytes / 4 {
            return;
        }
        let h = key.hash();
        let mut g = lock(&self.inner);
        g.remove(h);
        let mut purged = 0u64;
        if g.bytes + size > max_bytes {
            let expired: Vec<u64> = g
                .map
                .iter()
                .filter(|(_, e)| e.expires <= now)
                .map(|(h, _)| *h)
                .collect();
            for x in expired {
                purged += u64::from(g.remove(x));
            }
        }
        while g.bytes + size > max_bytes {
            let Some((old, seq)) = g.order.pop_front() else {
                break;
            };
            if g.map.get(&old).is_some_and(|e| e.seq == seq) {
                purged += u64::from(g.remove(old));
            }
        }
        g.seq += 1;
        let seq = g.seq;
        for t in tables {
            g.by_table.entry(t.clone()).or_default().insert(h);
        }
        g.bytes += size;
        g.order.push_back((h, seq));
        g.map.insert(h, Entry { seq, ..e });
        if g.order.len() > g.map.len() * 2 + 64 {
            // Drop order records of entries that are gone, so the queue stays proportional.
            let Inner { order, map, .. } = &mut *g;
            order.retain(|(h, s)| map.get(h).is_some_and(|e| e.seq == *s));
        }
        self.entries.store(g.map.len(), Ordering::Relaxed);
        drop(g);
        self.counters.set.fetch_add(1, Ordering::Relaxed);
        self.counters
            .bytes_in
            .fetch_add(payload.len() as u64, Ordering::Relaxed);
        self.counters.purged.fetch_add(purged, Ordering::Relaxed);
    }

    /// A write touched `tables`: drops every result that read one of them. With an incomplete
    /// table list (`complete == false`) everything goes. Returns how many entries went.
    pub fn invalidate(&self, tables: &[String], complete: bool) -> usize {
        if self.entries.load(Ordering::Relaxed) == 0 {
            return 0;
        }
        if !complete {
            return self.flush();
        }
        let mut g = lock(&self.inner);
        let mut victims: Vec<u64> = Vec::new();
        for t in tables {
            if let Some(set) = g.by_table.get(t) {
                victims.extend(set.iter().copied());
            }
        }
        let mut n = 0;
        for h in victims {
            n += usize::from(g.remove(h));
        }
        self.entries.store(g.map.len(), Ordering::Relaxed);
        drop(g);
        self.counters
            .invalidated
            .fetch_add(n as u64, Ordering::Relaxed);
        n
    }

    /// Empties the cache (`PROXYSQL FLUSH QUERY CACHE`); returns how many entries went.
    pub fn flush(&self) -> usize {
        let mut g = lock(&self.inner);
        let n = g.map.len();
        *g = Inner::default();
        self.entries.store(0, Ordering::Relaxed);
        drop(g);
        self.counters.purged.fetch_add(n as u64, Ordering::Relaxed);
        n
    }

    /// Results held now.
    pub fn len(&self) -> usize {
        self.entries.load(Ordering::Relaxed)
    }

    /// True when nothing is cached.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Bytes accounted to the entries held.
    pub fn memory_bytes(&self) -> usize {
        lock(&self.inner).bytes
    }

    /// `Query_Cache_*` rows for `stats_*_global`.
    pub fn global_rows(&self) -> Vec<(String, String)> {
        let c = &self.counters;
        let l = |a: &AtomicU64| a.load(Ordering::Relaxed).to_string();
        vec![
            (
                "Query_Cache_Memory_bytes".into(),
                self.memory_bytes().to_string(),
            ),
            ("Query_Cache_count_GET".into(), l(&c.get)),
            ("Query_Cache_count_GET_OK".into(), l(&c.get_ok)),
            ("Query_Cache_count_SET".into(), l(&c.set)),
            ("Query_Cache_bytes_IN".into(), l(&c.bytes_in)),
            ("Query_Cache_bytes_OUT".into(), l(&c.bytes_out)),
            ("Query_Cache_Purged".into(), l(&c.purged)),
            ("Query_Cache_Entries".into(), self.len().to_string()),
            ("Query_Cache_Invalidated".into(), l(&c.invalidated)),
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(q: &str) -> CacheKey<'_> {
        CacheKey {
            user: "u",
            schema: "db",
            query: q,
            variant: 1,
        }
    }

    #[test]
    fn hit_expiry_and_variant() {
        let c = QueryCache::new();
        let now = Instant::now();
        c.put(
            &key("SELECT 1"),
            &[],
            b"abc",
            Duration::from_millis(100),
            1 << 20,
            now,
        );
        assert_eq!(c.get(&key("SELECT 1"), now).as_deref(), Some(&b"abc"[..]));
        let other = CacheKey {
            variant: 2,
            ..key("SELECT 1")
        };
        assert!(c.get(&other, now).is_none(), "another reply format misses");
        assert!(
            c.get(&key("SELECT 1"), now + Duration::from_millis(101))
                .is_none()
        );
        assert!(c.is_empty(), "expired entry purged on lookup");
    }

    #[test]
    fn invalidation_by_table_and_flush() {
        let c = QueryCache::new();
        let now = Instant::now();
        let ttl = Duration::from_secs(60);
        c.put(&key("q1"), &["t1".into()], b"1", ttl, 1 << 20, now);
        c.put(
            &key("q2"),
            &["t2".into(), "t1".into()],
            b"2",
            ttl,
            1 << 20,
            now,
        );
        c.put(&key("q3"), &["t3".into()], b"3", ttl, 1 << 20, now);
        assert_eq!(c.invalidate(&["t1".into()], true), 2);
        assert!(c.get(&key("q1"), now).is_none() && c.get(&key("q2"), now).is_none());
        assert!(c.get(&key("q3"), now).is_some());
        assert_eq!(
            c.invalidate(&[], false),
            1,
            "unknown tables flush everything"
        );
        c.put(&key("q4"), &[], b"4", ttl, 1 << 20, now);
        assert_eq!(c.flush(), 1);
        assert_eq!(c.memory_bytes(), 0);
    }

    #[test]
    fn stays_under_its_byte_bound() {
        let c = QueryCache::new();
        let now = Instant::now();
        let max = 64 * 1024;
        for i in 0..10_000 {
            let q = format!("SELECT {i}");
            c.put(
                &key(&q),
                &[format!("t{}", i % 7)],
                &[0u8; 200],
                Duration::from_secs(60),
                max,
                now,
            );
            assert!(c.memory_bytes() <= max);
        }
        assert!(c.len() > 100, "{}", c.len());
        assert!(c.get(&key("SELECT 9999"), now).is_some(), "newest kept");
        assert!(c.get(&key("SELECT 0"), now).is_none(), "oldest evicted");
        c.put(
            &key("huge"),
            &[],
            &vec![0u8; max],
            Duration::from_secs(60),
            max,
            now,
        );
        assert!(
            c.get(&key("huge"), now).is_none(),
            "oversized replies are not cached"
        );
    }
}

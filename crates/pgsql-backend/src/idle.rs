//! Idle server connections by (hostgroup, server, user, database). Checkout and release run for
//! every transaction, so a lookup hashes the borrowed fields into a fingerprint and allocates
//! nothing; the key is built once per distinct pool and shared afterwards.

use crate::conn::PgConn;
use crate::pool::PgKey;
use sluice_core::runtime::ServerKey;
use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};
use std::sync::Arc;

/// How many of the most recently used idle connections are searched for the asking session's
/// own: a bounded scan per checkout, however large the pool.
const AFFINITY_SCAN: usize = 64;

/// One pool: its key and its idle connections (most recently used last). Boxed: a connection
/// (its buffers, prepared statements and settings) moves in and out of the pool at every
/// transaction, and moving a box copies a pointer where moving the connection copied all of
/// it several times over (a third of a PostgreSQL statement's `memcpy`, callgrind).
#[derive(Debug)]
#[allow(clippy::vec_box)] // the point: see above
struct Bucket {
    key: Arc<PgKey>,
    conns: Vec<Box<PgConn>>,
}

/// Every pool's idle connections. Buckets sharing a fingerprint (a hash collision) sit side by
/// side and are told apart by their keys.
#[derive(Debug, Default)]
pub(crate) struct IdleConns {
    map: HashMap<u64, Vec<Bucket>, PassThrough>,
}

/// The hasher of the pool's maps looked up at every checkout and release, whose keys need no
/// hashing: the idle map's are fingerprints already (a fold over the pool's fields), the
/// budgets' are hostgroup ids (few, and told apart by comparison). SipHash on them cost ~140
/// instructions a lookup.
pub(crate) type PassThrough = BuildHasherDefault<PassThroughHasher>;

/// See [`PassThrough`].
#[derive(Debug, Default)]
pub(crate) struct PassThroughHasher(u64);

impl Hasher for PassThroughHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        // Not reached for `u64` and `u32` keys; any other input is folded in FNV-1a's way.
        for b in bytes {
            self.0 = (self.0 ^ u64::from(*b)).wrapping_mul(0x0000_0100_0000_01b3);
        }
    }

    fn write_u64(&mut self, fingerprint: u64) {
        self.0 = fingerprint;
    }

    fn write_u32(&mut self, hostgroup: u32) {
        self.0 = u64::from(hostgroup);
    }
}

/// The fields a pool is keyed by, borrowed from the request.
#[derive(Debug, Clone, Copy)]
pub(crate) struct KeyRef<'a> {
    pub hostgroup: u32,
    pub server: &'a ServerKey,
    pub user: &'a str,
    pub database: &'a str,
}

impl KeyRef<'_> {
    /// A hash of the fields, eight bytes at a step (each field led by its length, so that
    /// `ab`+`c` and `a`+`bc` differ): run at every checkout and release, where FNV-1a's byte at
    /// a time cost ~200 instructions a lookup. A collision only costs a comparison of keys.
    fn fingerprint(&self) -> u64 {
        let mut h = Fold(0);
        h.word(u64::from(self.hostgroup) | u64::from(self.server.port) << 32);
        for field in [
            self.server.hostname.as_bytes(),
            self.user.as_bytes(),
            self.database.as_bytes(),
        ] {
            h.bytes(field);
        }
        h.0
    }

    fn matches(&self, k: &PgKey) -> bool {
        k.hostgroup == self.hostgroup
            && k.server == *self.server
            && k.user == self.user
            && k.database == self.database
    }
}

/// A multiply-rotate fold over 64-bit words (FxHash's step).
struct Fold(u64);

impl Fold {
    fn word(&mut self, w: u64) {
        self.0 = (self.0.rotate_left(5) ^ w).wrapping_mul(0x517c_c1b7_2722_0a95);
    }

    fn bytes(&mut self, b: &[u8]) {
        self.word(b.len() as u64);
        let mut words = b.chunks_exact(8);
        for w in &mut words {
            self.word(<[u8; 8]>::try_from(w).map_or(0, u64::from_le_bytes));
        }
        let rest = words.remainder();
        if !rest.is_empty() {
            let mut last = [0u8; 8];
            last[..rest.len()].copy_from_slice(rest);
            self.word(u64::from_le_bytes(last));
        }
    }
}

/// The server's connection budget as the asking session sees it, holding its slot: whether its
/// thread may open a connection of its own rather than move one of another thread's.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Headroom {
    /// Connections in use, the asking session's slot included.
    pub in_use: u32,
    /// The server's `max_connections`.
    pub max: u32,
}

impl Headroom {
    /// Whether one more connection fits beside those in use and the pool's `idle` ones.
    fn fits_another(self, idle: usize) -> bool {
        (self.in_use as usize).saturating_add(idle) < self.max as usize
    }
}

impl IdleConns {
    /// The shared key of the pool `k` names (created, with an empty pool, the first time) and
    /// an idle connection, if any: among the most recently used, the one session `owner` used
    /// last (nothing to reset); else one opened on session thread `home` (no socket to move);
    /// else none when `room` lets the thread open one of its own, and the most recently used
    /// only when it does not. Moving a connection costs two `epoll_ctl` calls and a
    /// registration, and with fewer idle connections than busy threads one connection would
    /// move at every transaction; opening one costs a login, once.
    pub(crate) fn take(
        &mut self,
        k: KeyRef<'_>,
        home: Option<usize>,
        owner: Option<u64>,
        room: Headroom,
    ) -> (Arc<PgKey>, Option<Box<PgConn>>) {
        let buckets = self.map.entry(k.fingerprint()).or_default();
        if let Some(b) = buckets.iter_mut().find(|b| k.matches(&b.key)) {
            let recent = b.conns.len().saturating_sub(AFFINITY_SCAN);
            let own = owner.and_then(|o| {
                b.conns[recent..]
                    .iter()
                    .rposition(|c| c.owner == Some(o) && c.home == home)
                    .map(|i| recent + i)
            });
            let conn = match (own, b.conns.last()) {
                (Some(i), _) => Some(b.conns.remove(i)),
                (None, Some(c)) if c.home != home => {
                    match b.conns.iter().rposition(|c| c.home == home) {
                        Some(i) => Some(b.conns.remove(i)),
                        None if room.fits_another(b.conns.len()) => None,
                        None => b.conns.pop(),
                    }
                }
                _ => b.conns.pop(),
            };
            return (b.key.clone(), conn);
        }
        let key = Arc::new(PgKey {
            hostgroup: k.hostgroup,
            server: k.server.clone(),
            user: k.user.to_string(),
            database: k.database.to_string(),
        });
        buckets.push(Bucket {
            key: key.clone(),
            conns: Vec::new(),
        });
        (key, None)
    }

    /// Puts `conn` back into the pool of `key`.
    pub(crate) fn put(&mut self, key: &Arc<PgKey>, conn: Box<PgConn>) {
        let k = KeyRef {
            hostgroup: key.hostgroup,
            server: &key.server,
            user: &key.user,
            database: &key.database,
        };
        let buckets = self.map.entry(k.fingerprint()).or_default();
        match buckets.iter_mut().find(|b| k.matches(&b.key)) {
            Some(b) => b.conns.push(conn),
            None => buckets.push(Bucket {
                key: key.clone(),
                conns: vec![conn],
            }),
        }
    }

    /// Every pool with its idle connections.
    pub(crate) fn iter(&self) -> impl Iterator<Item = (&PgKey, &[Box<PgConn>])> {
        self.map
            .values()
            .flatten()
            .map(|b| (b.key.as_ref(), b.conns.as_slice()))
    }

    /// Takes out every idle connection to `server`.
    #[allow(clippy::vec_box)] // the idle connections as they are kept (see `Bucket`)
    pub(crate) fn remove_server(&mut self, server: &ServerKey) -> Vec<Box<PgConn>> {
        let mut out = Vec::new();
        for buckets in self.map.values_mut() {
            for b in buckets.iter_mut().filter(|b| &b.key.server == server) {
                out.append(&mut b.conns);
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn server(port: u16) -> ServerKey {
        ServerKey {
            hostname: "127.0.0.1".into(),
            port,
        }
    }

    impl IdleConns {
        fn take_any(&mut self, k: KeyRef<'_>) -> (Arc<PgKey>, Option<Box<PgConn>>) {
            let room = Headroom { in_use: 1, max: 1 };
            self.take(k, None, None, room)
        }
    }

    #[test]
    fn pools_are_told_apart_and_keys_shared() {
        let s1 = server(1);
        let s2 = server(2);
        let mut idle = IdleConns::default();
        let k = |server, user, database| KeyRef {
            hostgroup: 0,
            server,
            user,
            database,
        };
        let (a, none) = idle.take_any(k(&s1, "u", "db"));
        assert!(none.is_none());
        let (a2, _) = idle.take_any(k(&s1, "u", "db"));
        assert!(Arc::ptr_eq(&a, &a2), "the key is built once per pool");
        let (b, _) = idle.take_any(k(&s2, "u", "db"));
        let (c, _) = idle.take_any(k(&s1, "u", "db2"));
        // Field boundaries count: ("ab", "c") is not ("a", "bc").
        let (d, _) = idle.take_any(k(&s1, "ab", "c"));
        let (e, _) = idle.take_any(k(&s1, "a", "bc"));
        for other in [&b, &c, &d, &e] {
            assert!(!Arc::ptr_eq(&a, other));
        }
        assert!(!Arc::ptr_eq(&d, &e));
        let room = Headroom { in_use: 2, max: 4 };
        assert!(room.fits_another(1), "2 in use + 1 idle + 1 new <= 4");
        assert!(!room.fits_another(2), "2 in use + 2 idle leave no room");
        assert_eq!(idle.iter().count(), 5);
        assert!(idle.remove_server(&s1).is_empty());
    }
}

//! Idle server connections per pool key, and which one a checkout takes. Checkout and release
//! run for every transaction or statement that is not pinned, so a lookup hashes the request's
//! borrowed fields and allocates nothing; a pool's key is built once, the first time it is
//! seen, and shared by its connections afterwards.

use hashbrown::{Equivalent, HashMap};
use std::hash::Hash;
use std::sync::Arc;

/// How many of the most recently used idle connections are searched for the asking session's
/// own: a bounded scan per checkout, however large the pool.
const AFFINITY_SCAN: usize = 64;

/// An idle connection as the lists read it.
pub trait IdleConnection {
    /// The session thread it was opened on (its socket is registered with that thread's poll).
    fn home(&self) -> Option<usize>;

    /// The session that used it last, when its protocol resets connections lazily (a session
    /// that finds its own connection again has nothing to reset). `None` by default.
    fn owner(&self) -> Option<u64> {
        None
    }
}

/// A pool key made of the request's borrowed fields: it must hash and compare as the owned
/// key `K` it stands for (same fields, same order, `&str` for `String`).
pub trait BorrowedKey<K>: Hash + Equivalent<Arc<K>> {
    /// The owned key, built the first time its pool is seen.
    fn to_key(&self) -> K;
}

/// The server's connection budget as the asking session sees it: whether its thread may open a
/// connection of its own rather than take one opened on another thread.
#[derive(Debug, Clone, Copy)]
pub struct Headroom {
    /// Connections in use, the asking session's included.
    pub in_use: u32,
    /// The server's `max_connections`.
    pub max: u32,
}

impl Headroom {
    /// No room to open one: an idle connection of another thread is taken rather than none.
    pub const NONE: Headroom = Headroom { in_use: 0, max: 0 };

    /// Whether one more connection fits beside those in use and the pool's `idle` ones.
    pub fn fits_another(self, idle: usize) -> bool {
        (self.in_use as usize).saturating_add(idle) < self.max as usize
    }
}

/// Every pool's idle connections, most recently used last. Boxed: a connection (its buffers,
/// prepared statements and settings) moves in and out of the pool at every transaction, and
/// moving a box copies a pointer where moving the connection copied all of it several times
/// over.
#[derive(Debug)]
pub struct IdleLists<K, C> {
    #[allow(clippy::vec_box)] // the point: see above
    map: HashMap<Arc<K>, Vec<Box<C>>>,
}

impl<K, C> Default for IdleLists<K, C> {
    fn default() -> Self {
        IdleLists {
            map: HashMap::default(),
        }
    }
}

impl<K: Hash + Eq, C: IdleConnection> IdleLists<K, C> {
    /// The shared key of the pool `wanted` names (its list created, empty, the first time) and
    /// an idle connection of it, if any: among the most recently used, the one session `owner`
    /// used last (nothing to reset); else one opened on session thread `home` (no socket to
    /// move); else none when `room` lets the thread open one of its own, and the most recently
    /// used one when it does not. Moving a connection costs two `epoll_ctl` calls and a
    /// registration, and with fewer idle connections than busy threads one connection would
    /// move at every transaction; opening one costs a login, once.
    pub fn take<Q: BorrowedKey<K>>(
        &mut self,
        wanted: &Q,
        home: Option<usize>,
        owner: Option<u64>,
        room: Headroom,
    ) -> (Arc<K>, Option<Box<C>>) {
        let Some((key, conns)) = self.map.get_key_value_mut(wanted) else {
            let key = Arc::new(wanted.to_key());
            self.map.insert(key.clone(), Vec::new());
            return (key, None);
        };
        let recent = conns.len().saturating_sub(AFFINITY_SCAN);
        let own = owner.and_then(|o| {
            conns[recent..]
                .iter()
                .rposition(|c| c.owner() == Some(o) && c.home() == home)
                .map(|i| recent + i)
        });
        let conn = match (own, conns.last()) {
            (Some(i), _) => Some(conns.remove(i)),
            (None, Some(c)) if c.home() != home => {
                match conns.iter().rposition(|c| c.home() == home) {
                    Some(i) => Some(conns.remove(i)),
                    None if room.fits_another(conns.len()) => None,
                    None => conns.pop(),
                }
            }
            _ => conns.pop(),
        };
        (key.clone(), conn)
    }

    /// The shared key of the pool `wanted` names (its list created, empty, the first time):
    /// the key a new connection of that pool is filed under.
    pub fn key_of<Q: BorrowedKey<K>>(&mut self, wanted: &Q) -> Arc<K> {
        if let Some((key, _)) = self.map.get_key_value(wanted) {
            return key.clone();
        }
        let key = Arc::new(wanted.to_key());
        self.map.insert(key.clone(), Vec::new());
        key
    }

    /// Puts `conn` back into the pool of `key`.
    pub fn put(&mut self, key: &Arc<K>, conn: Box<C>) {
        match self.map.get_mut(key.as_ref()) {
            Some(conns) => conns.push(conn),
            None => {
                self.map.insert(key.clone(), vec![conn]);
            }
        }
    }

    /// Every pool with its idle connections.
    pub fn iter(&self) -> impl Iterator<Item = (&K, &[Box<C>])> {
        self.map.iter().map(|(k, v)| (k.as_ref(), v.as_slice()))
    }

    /// How many idle connections the pools `of` selects hold.
    pub fn count(&self, of: impl Fn(&K) -> bool) -> usize {
        self.iter()
            .filter(|(k, _)| of(k))
            .map(|(_, v)| v.len())
            .sum()
    }

    /// Takes out every idle connection of the pools `of` selects, with its key, and forgets
    /// those pools (a server gone from the configuration leaves no key behind; a connection
    /// still checked out files its key again when it comes back).
    pub fn remove(&mut self, of: impl Fn(&K) -> bool) -> Vec<(Arc<K>, Box<C>)> {
        let mut out = Vec::new();
        self.map.retain(|k, conns| {
            if !of(k) {
                return true;
            }
            out.extend(conns.drain(..).map(|c| (k.clone(), c)));
            false
        });
        out
    }

    /// Takes out the most recently used idle connection of the first pool `of` selects that
    /// has one (to close it and open another pool's connection in its place).
    pub fn pop_any(&mut self, of: impl Fn(&K) -> bool) -> Option<(Arc<K>, Box<C>)> {
        self.map
            .iter_mut()
            .filter(|(k, _)| of(k))
            .find_map(|(k, conns)| conns.pop().map(|c| (k.clone(), c)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, Clone, PartialEq, Eq, Hash)]
    struct Key {
        server: u16,
        user: String,
    }

    #[derive(Hash)]
    struct KeyRef<'a> {
        server: u16,
        user: &'a str,
    }

    impl Equivalent<Arc<Key>> for KeyRef<'_> {
        fn equivalent(&self, k: &Arc<Key>) -> bool {
            self.server == k.server && self.user == k.user
        }
    }

    impl BorrowedKey<Key> for KeyRef<'_> {
        fn to_key(&self) -> Key {
            Key {
                server: self.server,
                user: self.user.to_string(),
            }
        }
    }

    #[derive(Debug, PartialEq)]
    struct Conn {
        id: u32,
        home: Option<usize>,
        owner: Option<u64>,
    }

    impl IdleConnection for Conn {
        fn home(&self) -> Option<usize> {
            self.home
        }
        fn owner(&self) -> Option<u64> {
            self.owner
        }
    }

    fn conn(id: u32, home: usize, owner: u64) -> Box<Conn> {
        Box::new(Conn {
            id,
            home: Some(home),
            owner: Some(owner),
        })
    }

    fn taken(t: (Arc<Key>, Option<Box<Conn>>)) -> Option<u32> {
        t.1.map(|c| c.id)
    }

    #[test]
    fn pools_are_told_apart_and_keys_shared() {
        let mut idle: IdleLists<Key, Conn> = IdleLists::default();
        let k = |server, user| KeyRef { server, user };
        let (a, none) = idle.take(&k(1, "u"), None, None, Headroom::NONE);
        assert!(none.is_none());
        let (a2, _) = idle.take(&k(1, "u"), None, None, Headroom::NONE);
        assert!(Arc::ptr_eq(&a, &a2), "the key is built once per pool");
        let (b, _) = idle.take(&k(2, "u"), None, None, Headroom::NONE);
        let (c, _) = idle.take(&k(1, "v"), None, None, Headroom::NONE);
        assert!(!Arc::ptr_eq(&a, &b) && !Arc::ptr_eq(&a, &c));
        idle.put(&a, conn(7, 0, 0));
        assert_eq!(idle.count(|k| k.server == 1), 1);
        assert_eq!(idle.count(|k| k.server == 2), 0);
        assert_eq!(
            taken(idle.take(&k(1, "v"), None, None, Headroom::NONE)),
            None
        );
        assert_eq!(
            taken(idle.take(&k(1, "u"), None, None, Headroom::NONE)),
            Some(7)
        );
    }

    #[test]
    fn the_sessions_own_then_its_threads_then_room_decides() {
        let mut idle: IdleLists<Key, Conn> = IdleLists::default();
        let want = KeyRef {
            server: 1,
            user: "u",
        };
        let (key, _) = idle.take(&want, None, None, Headroom::NONE);
        for c in [
            conn(1, 0, 10),
            conn(2, 1, 20),
            conn(3, 0, 30),
            conn(4, 1, 40),
        ] {
            idle.put(&key, c);
        }
        let room = Headroom { in_use: 1, max: 10 };
        // Session 10's own connection on its thread, though not the most recent.
        assert_eq!(taken(idle.take(&want, Some(0), Some(10), room)), Some(1));
        // No own one: the most recent of the thread.
        assert_eq!(taken(idle.take(&want, Some(0), Some(99), room)), Some(3));
        // Thread 0 has none left: with room it opens its own ...
        assert_eq!(taken(idle.take(&want, Some(0), None, room)), None);
        // ... without, it takes the most recent of another thread.
        assert_eq!(
            taken(idle.take(&want, Some(0), None, Headroom::NONE)),
            Some(4)
        );
        let room = Headroom { in_use: 2, max: 4 };
        assert!(room.fits_another(1), "2 in use + 1 idle + 1 new <= 4");
        assert!(!room.fits_another(2), "2 in use + 2 idle leave no room");
    }

    #[test]
    fn pools_are_emptied_by_selection() {
        let mut idle: IdleLists<Key, Conn> = IdleLists::default();
        let (a, _) = idle.take(
            &KeyRef {
                server: 1,
                user: "u",
            },
            None,
            None,
            Headroom::NONE,
        );
        let (b, _) = idle.take(
            &KeyRef {
                server: 2,
                user: "u",
            },
            None,
            None,
            Headroom::NONE,
        );
        idle.put(&a, conn(1, 0, 0));
        idle.put(&a, conn(2, 0, 0));
        idle.put(&b, conn(3, 0, 0));
        let (k, c) = idle.pop_any(|k| k.server == 2).expect("server 2 has one");
        assert_eq!((k.server, c.id), (2, 3));
        assert!(idle.pop_any(|k| k.server == 2).is_none());
        let gone: Vec<u32> = idle
            .remove(|k| k.server == 1)
            .iter()
            .map(|(_, c)| c.id)
            .collect();
        assert_eq!(gone, [1, 2]);
        assert_eq!(idle.count(|_| true), 0);
        assert_eq!(
            idle.iter().count(),
            1,
            "server 1's pool forgotten, server 2's kept"
        );
        idle.put(&a, conn(4, 0, 0));
        assert_eq!(
            idle.count(|k| k.server == 1),
            1,
            "a returning connection refiles its key"
        );
    }
}

//! The live backend connections of each server, held weakly, so that shunning a server can kill
//! every connection to it — idle or in the middle of a query — without the data path doing any
//! bookkeeping per query. A connection registers once when it is opened; when it is dropped its
//! entry simply stops upgrading. Generic over the handle, because `core` knows no sockets.

use crate::runtime::ServerKey;
use crate::util::lock;
use std::collections::HashMap;
use std::sync::{Arc, Mutex, Weak};
use tracing::info;

/// A handle that ends its connection from outside the session that owns it (the backend
/// crates shut the socket down).
pub trait Kill {
    /// Ends the connection; whoever is reading from it gets an error or end of stream.
    fn kill(&self);
}

/// Weak handles of the open connections, per server.
pub struct KillRegistry<T> {
    by_server: Mutex<HashMap<ServerKey, Vec<Weak<T>>>>,
}

impl<T> Default for KillRegistry<T> {
    fn default() -> Self {
        KillRegistry {
            by_server: Mutex::new(HashMap::new()),
        }
    }
}

impl<T> std::fmt::Debug for KillRegistry<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("KillRegistry")
    }
}

impl<T> KillRegistry<T> {
    /// Records a newly opened connection's handle (and forgets the server's closed ones).
    pub fn register(&self, server: &ServerKey, handle: &Arc<T>) {
        let mut g = lock(&self.by_server);
        let v = g.entry(server.clone()).or_default();
        v.retain(|w| w.strong_count() > 0);
        v.push(Arc::downgrade(handle));
    }

    /// The handles of the server's connections that are still open.
    pub fn live(&self, server: &ServerKey) -> Vec<Arc<T>> {
        let mut g = lock(&self.by_server);
        let Some(v) = g.get_mut(server) else {
            return Vec::new();
        };
        v.retain(|w| w.strong_count() > 0);
        v.iter().filter_map(Weak::upgrade).collect()
    }
}

impl<T: Kill> KillRegistry<T> {
    /// Kills every open connection to `server`, idle or in use, and logs how many for
    /// `protocol` ("MySQL", "PostgreSQL"). Returns the count.
    pub fn kill_server(&self, server: &ServerKey, protocol: &str) -> usize {
        let live = self.live(server);
        for h in &live {
            h.kill();
        }
        if !live.is_empty() {
            info!(
                "Killed {} {protocol} connection(s) to shunned server {server}, idle and in use",
                live.len()
            );
        }
        live.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(port: u16) -> ServerKey {
        ServerKey {
            hostname: "h".into(),
            port,
        }
    }

    struct Flag(std::sync::atomic::AtomicBool);

    impl Kill for Flag {
        fn kill(&self) {
            self.0.store(true, std::sync::atomic::Ordering::SeqCst);
        }
    }

    #[test]
    fn kill_server_kills_that_servers_open_connections_only() {
        let r = KillRegistry::<Flag>::default();
        let flag = || Arc::new(Flag(false.into()));
        let (a, b, c) = (flag(), flag(), flag());
        r.register(&key(1), &a);
        r.register(&key(1), &b);
        r.register(&key(2), &c);
        drop(b);
        assert_eq!(r.kill_server(&key(1), "MySQL"), 1);
        let killed = |f: &Flag| f.0.load(std::sync::atomic::Ordering::SeqCst);
        assert!(killed(&a) && !killed(&c));
        assert_eq!(r.kill_server(&key(3), "MySQL"), 0);
    }

    #[test]
    fn only_open_connections_of_that_server_are_returned() {
        let r = KillRegistry::<u32>::default();
        let (a, b, c) = (Arc::new(1), Arc::new(2), Arc::new(3));
        r.register(&key(1), &a);
        r.register(&key(1), &b);
        r.register(&key(2), &c);
        drop(a);
        let live: Vec<u32> = r.live(&key(1)).iter().map(|x| **x).collect();
        assert_eq!(live, vec![2]);
        assert!(r.live(&key(3)).is_empty());
        drop(b);
        assert!(r.live(&key(1)).is_empty());
        assert_eq!(r.live(&key(2)).len(), 1);
    }
}

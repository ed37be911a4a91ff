//! Sessions waiting for a connection when every server of their hostgroup is at
//! `max_connections`. A freed connection goes to the longest-waiting session that can use it,
//! so a busy session that releases and immediately wants a connection again cannot starve the
//! others. A connection no waiter can use (another user's) is closed and its slot handed on.
//!
//! On session threads (`mysql-threads`) one exception: a connection goes to the longest-waiting
//! session *of the thread it was opened on*, when one waits, so its replies wake the thread
//! that serves them instead of crossing to another one on every handoff. The longest-waiting
//! session overall is passed over at most [`MAX_PASSES`] times that way, then served whatever
//! the thread: a session's extra wait is bounded by a few handoffs, never starved.
//!
//! The queue is ordered by the waiting statement's workload-class priority, then arrival
//! ([`enqueue`]): a `critical` session that starts waiting goes ahead of `regular`, `low` and
//! `background` ones, a bounded number of times (`sluice_core::admission::by_priority`).

use super::{Inner, PoolKey};
use crate::conn::BackendConn;
use sluice_core::admission::by_priority::{self, PriorityWaiter};
use sluice_core::config::Priority;
use sluice_core::runtime::ServerKey;
use std::sync::Arc;
use tokio::sync::oneshot;
use tracing::debug;

/// What a waiting session receives.
#[derive(Debug)]
pub(super) enum Handoff {
    /// A live connection, ready to use.
    Conn(Arc<PoolKey>, Box<BackendConn>),
    /// The right to open a new connection to this server (already counted as open).
    Slot(ServerKey),
}

/// How often the longest-waiting session may be passed over for a session of the freed
/// connection's own thread.
pub(super) const MAX_PASSES: u32 = 4;

/// A session in the queue.
#[derive(Debug)]
pub(super) struct Waiter {
    /// The key of any connection it can use, except the server.
    pub key: PoolKey,
    /// Servers of its hostgroup it accepts.
    pub servers: Vec<ServerKey>,
    pub tx: oneshot::Sender<Handoff>,
    /// The session thread it waits on (`CheckoutRequest::worker`).
    pub worker: Option<usize>,
    /// Times a connection went to a session of another thread while this one was first in line.
    pub passed: u32,
    /// The workload class's priority of the statement it waits for.
    pub priority: Priority,
    /// Times a later, more urgent waiter was queued ahead of it.
    pub overtaken: u32,
}

impl Waiter {
    /// A session that has waited for nothing yet.
    pub(super) fn new(
        key: PoolKey,
        servers: Vec<ServerKey>,
        tx: oneshot::Sender<Handoff>,
        worker: Option<usize>,
        priority: Priority,
    ) -> Waiter {
        Waiter {
            key,
            servers,
            tx,
            worker,
            passed: 0,
            priority,
            overtaken: 0,
        }
    }
}

impl PriorityWaiter for Waiter {
    fn priority(&self) -> Priority {
        self.priority
    }
    fn overtaken(&mut self) -> &mut u32 {
        &mut self.overtaken
    }
}

/// Queues `w` by priority, then arrival ([`by_priority::enqueue`]).
pub(super) fn enqueue(g: &mut Inner, w: Waiter) {
    by_priority::enqueue(&mut g.waiters, w);
}

impl Waiter {
    fn can_use(&self, k: &PoolKey) -> bool {
        k.hostgroup == self.key.hostgroup
            && k.user == self.key.user
            && k.caps == self.key.caps
            && k.charset == self.key.charset
            && self.servers.contains(&k.server)
    }

    fn wants_server(&self, hostgroup: u32, server: &ServerKey) -> bool {
        hostgroup == self.key.hostgroup && self.servers.contains(server)
    }
}

/// Gives a freed connection of pool `key` to a waiter; returns it when nobody waits for it.
pub(super) fn give_conn(
    g: &mut Inner,
    key: &Arc<PoolKey>,
    conn: Box<BackendConn>,
) -> Option<Box<BackendConn>> {
    g.waiters.retain(|w| !w.tx.is_closed());
    if g.waiters.is_empty() {
        // The usual case, and no allocation for it.
        return Some(conn);
    }
    let own_thread = own_thread_waiter(g, key, conn.home);
    let mut item = Handoff::Conn(key.clone(), conn);
    if let Some((first, own)) = own_thread
        && let Some(w) = g.waiters.remove(own)
    {
        match w.tx.send(item) {
            Ok(()) => {
                g.waiters[first].passed += 1;
                return None;
            }
            // The session stopped waiting meanwhile: first come, first served, as usual.
            Err(back) => item = back,
        }
    }
    let mut i = 0;
    while i < g.waiters.len() {
        let Handoff::Conn(k, _) = &item else { break };
        let usable = g.waiters[i].can_use(k);
        let slot_for = !usable && g.waiters[i].wants_server(k.hostgroup, &k.server);
        if !usable && !slot_for {
            i += 1;
            continue;
        }
        let Some(w) = g.waiters.remove(i) else { break };
        if slot_for {
            // Another user's connection: close it, hand its slot over.
            let Handoff::Conn(k, c) = item else { break };
            debug!(server = %k.server, "closing a free connection of another user for a waiting session");
            tokio::spawn(c.quit());
            return match w.tx.send(Handoff::Slot(k.server.clone())) {
                Ok(()) => None,
                Err(_) => {
                    give_slot_or_free(g, k.hostgroup, &k.server);
                    None
                }
            };
        }
        match w.tx.send(item) {
            Ok(()) => return None,
            Err(back) => item = back,
        }
    }
    match item {
        Handoff::Conn(_, c) => Some(c),
        Handoff::Slot(_) => None,
    }
}

/// When the session first in line for a connection of `key` opened on thread `home` waits on
/// another thread, and has not been passed over [`MAX_PASSES`] times yet: its index and that of
/// the longest-waiting session of `home`'s thread that can use the connection, if any.
fn own_thread_waiter(g: &Inner, key: &PoolKey, home: Option<usize>) -> Option<(usize, usize)> {
    let home = home?;
    // The first in line: the first waiter the FIFO handoff would serve (it can use the
    // connection, or would take its slot).
    let first = g
        .waiters
        .iter()
        .position(|w| w.can_use(key) || w.wants_server(key.hostgroup, &key.server))?;
    let front = &g.waiters[first];
    if front.worker == Some(home) || !front.can_use(key) || front.passed >= MAX_PASSES {
        return None;
    }
    let own =
        g.waiters.iter().skip(first + 1).position(|w| {
            w.worker == Some(home) && w.can_use(key) && w.priority <= front.priority
        })?;
    Some((first, first + 1 + own))
}

/// Gives a freed slot to a waiter for that server; false when nobody waits for it.
pub(super) fn give_slot(g: &mut Inner, hostgroup: u32, server: &ServerKey) -> bool {
    g.waiters.retain(|w| !w.tx.is_closed());
    while let Some(i) = g
        .waiters
        .iter()
        .position(|w| w.wants_server(hostgroup, server))
    {
        let Some(w) = g.waiters.remove(i) else {
            return false;
        };
        if w.tx.send(Handoff::Slot(server.clone())).is_ok() {
            return true;
        }
    }
    false
}

fn give_slot_or_free(g: &mut Inner, hostgroup: u32, server: &ServerKey) {
    if !give_slot(g, hostgroup, server)
        && let Some(n) = g.open_mut(hostgroup, server)
    {
        *n = n.saturating_sub(1);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key() -> PoolKey {
        PoolKey {
            hostgroup: 0,
            server: ServerKey {
                hostname: "db".into(),
                port: 3306,
            },
            user: "app".into(),
            caps: 0,
            charset: 45,
            tls: false,
        }
    }

    /// A queue of sessions waiting on threads `threads`, first in line first.
    fn queue(threads: &[usize]) -> (Inner, Vec<oneshot::Receiver<Handoff>>) {
        let mut g = Inner::default();
        let mut rxs = Vec::new();
        for &t in threads {
            let (tx, rx) = oneshot::channel();
            rxs.push(rx);
            g.waiters.push_back(Waiter::new(
                key(),
                vec![key().server],
                tx,
                Some(t),
                Priority::Regular,
            ));
        }
        (g, rxs)
    }

    #[test]
    fn a_connection_goes_to_its_own_thread_but_the_first_in_line_is_not_passed_over_forever() {
        let (mut g, _rx) = queue(&[1, 0, 1, 0]);
        // A connection of thread 0: the first in line waits on thread 1, the next session of
        // thread 0 (second in line) gets it.
        assert_eq!(own_thread_waiter(&g, &key(), Some(0)), Some((0, 1)));
        // A connection of thread 1 goes to the first in line, who is on thread 1.
        assert_eq!(own_thread_waiter(&g, &key(), Some(1)), None);
        // Off the session threads: first come, first served.
        assert_eq!(own_thread_waiter(&g, &key(), None), None);
        // Passed over MAX_PASSES times, the first in line is served whatever the thread.
        g.waiters[0].passed = MAX_PASSES;
        assert_eq!(own_thread_waiter(&g, &key(), Some(0)), None);
        // No session of the connection's thread waits: first come, first served.
        let (g, _rx) = queue(&[1, 1]);
        assert_eq!(own_thread_waiter(&g, &key(), Some(0)), None);
    }

    #[test]
    fn a_connection_of_its_thread_never_goes_to_a_less_urgent_waiter() {
        let mut g = Inner::default();
        let mut rxs = Vec::new();
        for (t, p) in [(1, Priority::Critical), (0, Priority::Low)] {
            let (tx, rx) = oneshot::channel();
            rxs.push(rx);
            enqueue(
                &mut g,
                Waiter::new(key(), vec![key().server], tx, Some(t), p),
            );
        }
        assert_eq!(own_thread_waiter(&g, &key(), Some(0)), None);
    }
}

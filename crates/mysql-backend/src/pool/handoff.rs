//! Sessions waiting for a connection when every server of their hostgroup is at
//! `max_connections`. A freed connection goes to the longest-waiting session that can use it,
//! so a busy session that releases and immediately wants a connection again cannot starve the
//! others. A connection no waiter can use (another user's) is closed and its slot handed on.

use super::{Inner, PoolKey};
use crate::conn::BackendConn;
use sluice_core::runtime::ServerKey;
use tokio::sync::oneshot;
use tracing::debug;

/// What a waiting session receives.
#[derive(Debug)]
pub(super) enum Handoff {
    /// A live connection, ready to use.
    Conn(PoolKey, Box<BackendConn>),
    /// The right to open a new connection to this server (already counted as open).
    Slot(ServerKey),
}

/// A session in the queue.
#[derive(Debug)]
pub(super) struct Waiter {
    /// The key of any connection it can use, except the server.
    pub key: PoolKey,
    /// Servers of its hostgroup it accepts.
    pub servers: Vec<ServerKey>,
    pub tx: oneshot::Sender<Handoff>,
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

/// Gives a freed connection to a waiter; returns it when nobody waits for it.
pub(super) fn give_conn(
    g: &mut Inner,
    key: PoolKey,
    conn: BackendConn,
) -> Option<(PoolKey, BackendConn)> {
    g.waiters.retain(|w| !w.tx.is_closed());
    if g.waiters.is_empty() {
        // The usual case, and no allocation for it.
        return Some((key, conn));
    }
    let mut item = Handoff::Conn(key, Box::new(conn));
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
        Handoff::Conn(k, c) => Some((k, *c)),
        Handoff::Slot(_) => None,
    }
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

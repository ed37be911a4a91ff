//! The listener connections and who listens to what: one [`Listener`] per writer hostgroup and
//! database, its channels with their subscribed sessions' mailboxes. Sessions subscribe and
//! unsubscribe here; the listener task (`listener.rs`) reconciles its connection's LISTENs with
//! what is subscribed and fans notifications out.

use super::mailbox::{ChannelCounters, Mailbox};
use crate::frontend::PgFrontend;
use sluice_core::live::{ListenChannelRow, ListenerRow};
use sluice_core::util::lock;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use tokio::sync::{Notify, oneshot};

/// Which listener connection: the writer hostgroup and the database.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) struct ListenerKey {
    pub(crate) hostgroup: u32,
    pub(crate) database: String,
}

/// The server's refusal of a LISTEN, passed to every session waiting for it.
#[derive(Debug, Clone)]
pub(crate) struct Refused {
    pub(crate) code: String,
    pub(crate) message: String,
}

/// What a session waits on for its new channel: live, or why not.
pub(crate) type Ack = oneshot::Receiver<Result<(), Refused>>;

/// One channel of a listener connection.
pub(crate) struct Channel {
    /// Subscribed sessions' mailboxes, by subscription id.
    pub(crate) subscribers: HashMap<u64, Arc<Mailbox>>,
    /// The listener connection's LISTEN completed (since its last reconnect).
    pub(crate) live: bool,
    /// Sessions waiting for it to become live.
    pub(crate) waiters: Vec<oneshot::Sender<Result<(), Refused>>>,
    pub(crate) counters: Arc<ChannelCounters>,
    pub(crate) name: Arc<str>,
}

/// What `stats_pgsql_listeners` shows of a listener connection.
#[derive(Debug, Clone, Default)]
pub(crate) struct ListenerStatus {
    pub(crate) server: Option<Arc<str>>,
    pub(crate) backend_pid: Option<u32>,
    pub(crate) reconnects: u64,
    pub(crate) last_error: Option<String>,
}

/// One listener connection's shared state.
pub(crate) struct Listener {
    pub(crate) key: ListenerKey,
    pub(crate) channels: Mutex<HashMap<Arc<str>, Channel>>,
    /// Subscriptions changed: the task reconciles.
    pub(crate) wake: Notify,
    pub(crate) status: Mutex<ListenerStatus>,
    /// Sessions waiting for a sync round trip (see [`ListenHub::sync`]).
    pub(crate) syncs: Mutex<Vec<oneshot::Sender<()>>>,
}

/// The role a listener connection logs in as: the first subscriber's.
pub(crate) struct ListenerLogin {
    pub(crate) user: String,
    pub(crate) secret: sluice_pgsql_proto::scram::ClientSecret,
    pub(crate) worker: Option<usize>,
}

/// Every listener connection of a frontend.
#[derive(Default)]
pub(crate) struct ListenHub {
    listeners: Mutex<HashMap<ListenerKey, Arc<Listener>>>,
    /// How many listeners there are, read without the lock on every statement.
    open: AtomicUsize,
    next_id: AtomicU64,
}

impl ListenHub {
    /// A new subscription id (one per session that listens).
    pub(crate) fn subscriber_id(&self) -> u64 {
        self.next_id.fetch_add(1, Relaxed)
    }

    /// Subscribes mailbox `id` to `channel` on the listener of `key`, starting that listener
    /// (logged in as `login`) when there is none. `None`: the channel is live already;
    /// otherwise the receiver says when it is.
    pub(crate) fn subscribe(
        self: &Arc<Self>,
        fe: &PgFrontend,
        (key, login): (&ListenerKey, impl FnOnce() -> ListenerLogin),
        (id, mailbox): (u64, &Arc<Mailbox>),
        channel: &str,
    ) -> Option<Ack> {
        let mut listeners = lock(&self.listeners);
        let listener = match listeners.get(key) {
            Some(l) => l.clone(),
            None => {
                let l = Arc::new(Listener {
                    key: key.clone(),
                    channels: Mutex::default(),
                    wake: Notify::new(),
                    status: Mutex::default(),
                    syncs: Mutex::default(),
                });
                listeners.insert(key.clone(), l.clone());
                self.open.fetch_add(1, Relaxed);
                super::listener::spawn(fe, self.clone(), l.clone(), login());
                l
            }
        };
        let mut channels = lock(&listener.channels);
        let ch = channels.entry(channel.into()).or_insert_with(|| Channel {
            subscribers: HashMap::new(),
            live: false,
            waiters: Vec::new(),
            counters: Default::default(),
            name: channel.into(),
        });
        ch.subscribers.insert(id, mailbox.clone());
        if ch.live {
            return None;
        }
        let (tx, rx) = oneshot::channel();
        ch.waiters.push(tx);
        drop(channels);
        listener.wake.notify_one();
        Some(rx)
    }

    /// Whether any listener connection is open: only then are NOTIFYs looked for.
    pub(crate) fn active(&self) -> bool {
        self.open.load(Relaxed) > 0
    }

    /// After a transaction that sent notifications committed: a receiver told once the
    /// listener of `key` has fanned out every notification committed before now (a round trip
    /// on its connection), `None` when nobody listens there. So a NOTIFY is acknowledged only
    /// once the listening sessions have it, and a session that notifies itself hears it before
    /// its ReadyForQuery, as from PostgreSQL.
    pub(crate) fn sync(&self, key: &ListenerKey) -> Option<oneshot::Receiver<()>> {
        let listener = lock(&self.listeners).get(key).cloned()?;
        let (tx, rx) = oneshot::channel();
        lock(&listener.syncs).push(tx);
        listener.wake.notify_one();
        Some(rx)
    }

    /// Takes mailbox `id` off `channel`; the listener connection UNLISTENs a channel nobody
    /// listens to any more.
    pub(crate) fn unsubscribe(&self, key: &ListenerKey, id: u64, channel: &str) {
        let Some(listener) = lock(&self.listeners).get(key).cloned() else {
            return;
        };
        let mut channels = lock(&listener.channels);
        let emptied = channels.get_mut(channel).is_some_and(|ch| {
            ch.subscribers.remove(&id);
            ch.subscribers.is_empty()
        });
        if emptied {
            channels.remove(channel);
            drop(channels);
            listener.wake.notify_one();
        }
    }

    /// Removes `listener` when nobody listens to anything on it: true when it is gone (its
    /// task ends). Under the hub's lock, so a subscribe either finds it with its channel or
    /// starts a new one.
    pub(crate) fn retire_if_idle(&self, listener: &Arc<Listener>) -> bool {
        let mut listeners = lock(&self.listeners);
        if !lock(&listener.channels).is_empty() {
            return false;
        }
        listeners.remove(&listener.key);
        self.open.fetch_sub(1, Relaxed);
        true
    }

    /// Every listener, by key.
    pub(crate) fn listeners(&self) -> Vec<Arc<Listener>> {
        let mut v: Vec<Arc<Listener>> = lock(&self.listeners).values().cloned().collect();
        v.sort_by(|a, b| a.key.cmp(&b.key));
        v
    }
}

impl ListenHub {
    /// `stats_pgsql_listen_channels`, by database and channel.
    pub(crate) fn channel_rows(&self) -> Vec<ListenChannelRow> {
        let mut rows = Vec::new();
        for l in self.listeners() {
            for ch in lock(&l.channels).values() {
                rows.push(ListenChannelRow {
                    database: l.key.database.clone(),
                    channel: ch.name.to_string(),
                    listeners: ch.subscribers.len(),
                    received: ch.counters.received.load(Relaxed),
                    delivered: ch.counters.delivered.load(Relaxed),
                    dropped: ch.counters.dropped.load(Relaxed),
                });
            }
        }
        rows.sort_by(|a, b| (&a.database, &a.channel).cmp(&(&b.database, &b.channel)));
        rows
    }

    /// `stats_pgsql_listeners`.
    pub(crate) fn listener_rows(&self) -> Vec<ListenerRow> {
        self.listeners()
            .iter()
            .map(|l| {
                let s = lock(&l.status).clone();
                ListenerRow {
                    hostgroup: l.key.hostgroup,
                    server: s.server.map(|s| s.to_string()),
                    database: l.key.database.clone(),
                    backend_pid: s.backend_pid,
                    channels: lock(&l.channels).len(),
                    reconnects: s.reconnects,
                    last_error: s.last_error,
                }
            })
            .collect()
    }
}

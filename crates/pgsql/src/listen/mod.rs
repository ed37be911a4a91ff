//! LISTEN/NOTIFY under transaction pooling (`pgsql-listen_mode=fanout`): a session's LISTEN
//! subscribes it on a listener connection shared by every session of the writer hostgroup and
//! database, so listening costs no server connection per client. NOTIFY and `pg_notify()` are
//! not touched: they run in the client's own transaction, so atomicity with its data, commit
//! order and de-duplication stay PostgreSQL's. A LISTEN or UNLISTEN inside a transaction takes
//! effect when it commits; notifications wait in the session's mailbox while it is inside a
//! transaction and are written once it is idle.

mod hub;
mod listener;
mod mailbox;
mod statement;

pub(crate) use hub::{ListenHub, ListenerKey, Refused};
pub(crate) use mailbox::{Mail, Overflow};
pub use sluice_core::live::{ListenChannelRow, ListenerRow};
pub(crate) use statement::{
    ListenRequest, ListenStatement, may_notify, parse, quoted as quoted_identifier,
    sends_notification,
};

use crate::frontend::PgFrontend;
use crate::login::Login;
use hub::ListenerLogin;
use mailbox::Mailbox;
use std::collections::{BTreeSet, VecDeque};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// A session's channels and its mailbox.
pub(crate) struct Subscriptions {
    hub: Arc<ListenHub>,
    key: ListenerKey,
    id: u64,
    mailbox: Arc<Mailbox>,
    stats: Arc<sluice_core::metrics::NotifyStats>,
    /// Channels listened to, as committed.
    committed: BTreeSet<String>,
    /// Channels subscribed on the listener: the committed ones and those a LISTEN of the open
    /// transaction added.
    subscribed: BTreeSet<String>,
    /// The open transaction's LISTENs and UNLISTENs, in order.
    staged: Vec<ListenStatement>,
    /// When the session last sent the server a message while statements were staged: the
    /// COMMIT, once the transaction ended. Notifications that arrived earlier on a channel it
    /// made new were sent before this session listened, as PostgreSQL sees it.
    last_sent: Option<Instant>,
    /// The last transaction-ending CommandComplete said COMMIT (not ROLLBACK).
    committing: bool,
}

impl Subscriptions {
    /// No channels yet, for the session `l` on `fe` (the listener: its default hostgroup, its
    /// database).
    pub(crate) fn new(fe: &PgFrontend, l: &Login) -> Subscriptions {
        let rt = fe.config.load();
        let limits = &rt.pgsql.variables.listen;
        Subscriptions {
            hub: fe.listen.clone(),
            key: ListenerKey {
                hostgroup: l.user.default_hostgroup.0,
                database: l.database.clone(),
            },
            id: fe.listen.subscriber_id(),
            mailbox: Arc::new(Mailbox::new(limits.queue_max, limits.queue_max_bytes)),
            stats: fe.stats.notify.clone(),
            committed: BTreeSet::new(),
            subscribed: BTreeSet::new(),
            staged: Vec::new(),
            last_sent: None,
            committing: false,
        }
    }

    /// The channels listened to (the processlist's `listening: …`).
    pub(crate) fn channels(&self) -> Vec<String> {
        self.committed.iter().cloned().collect()
    }

    /// Whether any channel is listened to (committed).
    pub(crate) fn is_listening(&self) -> bool {
        !self.committed.is_empty()
    }

    /// Subscribes to `channel` on the listener, waiting until its LISTEN is live there.
    async fn subscribe(
        &mut self,
        fe: &PgFrontend,
        l: &Login,
        channel: &str,
    ) -> Result<(), Refused> {
        if self.subscribed.contains(channel) {
            return Ok(());
        }
        let login = || ListenerLogin {
            user: l.user.username.clone(),
            secret: l.secret.clone(),
            worker: l.worker,
        };
        let ack = self
            .hub
            .subscribe(fe, (&self.key, login), (self.id, &self.mailbox), channel);
        self.subscribed.insert(channel.to_string());
        let Some(ack) = ack else { return Ok(()) };
        let wait = Duration::from_millis(fe.config.load().pgsql.variables.listen.ack_timeout_ms);
        let refused = match tokio::time::timeout(wait, ack).await {
            Ok(Ok(Ok(()))) => return Ok(()),
            Ok(Ok(Err(r))) => r,
            Ok(Err(_)) => Refused {
                code: "08006".into(),
                message: "the listener connection went away before its LISTEN completed".into(),
            },
            Err(_) => Refused {
                code: "57014".into(),
                message: format!(
                    "LISTEN {channel}: the listener connection did not confirm it within {} ms (pgsql-listen_ack_timeout_ms)",
                    wait.as_millis()
                ),
            },
        };
        self.unsubscribe(channel);
        Err(refused)
    }

    fn unsubscribe(&mut self, channel: &str) {
        if self.subscribed.remove(channel) {
            self.hub.unsubscribe(&self.key, self.id, channel);
        }
        self.mailbox.retain(|m| &*m.channel != channel);
    }

    /// Runs `stmt` outside a transaction: it takes effect at once.
    pub(crate) async fn run(
        &mut self,
        fe: &PgFrontend,
        l: &Login,
        stmt: &ListenStatement,
    ) -> Result<(), Refused> {
        match stmt {
            ListenStatement::Listen(ch) => {
                self.subscribe(fe, l, ch).await?;
                self.committed.insert(ch.clone());
            }
            ListenStatement::Unlisten(ch) => {
                self.committed.remove(ch);
                self.unsubscribe(ch);
            }
            ListenStatement::UnlistenAll => self.unlisten_all(),
        }
        Ok(())
    }

    /// Every channel given up (`UNLISTEN *`, `DISCARD ALL`).
    pub(crate) fn unlisten_all(&mut self) {
        self.committed.clear();
        for ch in std::mem::take(&mut self.subscribed) {
            self.hub.unsubscribe(&self.key, self.id, &ch);
        }
        self.mailbox.retain(|_| false);
    }

    /// Notes `stmt` inside a transaction, to take effect if it commits. A LISTEN subscribes at
    /// once (so a notification its own transaction sends is not missed); what arrives before
    /// the commit is sorted out when the transaction ends.
    pub(crate) async fn stage(
        &mut self,
        fe: &PgFrontend,
        l: &Login,
        stmt: ListenStatement,
    ) -> Result<(), Refused> {
        if let ListenStatement::Listen(ch) = &stmt {
            self.subscribe(fe, l, ch).await?;
        }
        self.staged.push(stmt);
        Ok(())
    }

    /// The session sends the server a message (possibly the COMMIT).
    pub(crate) fn sent(&mut self) {
        if !self.staged.is_empty() {
            self.last_sent = Some(Instant::now());
        }
    }

    /// A CommandComplete of the held connection: COMMIT or ROLLBACK decide the staged
    /// statements' fate.
    pub(crate) fn saw_tag(&mut self, tag: &[u8]) {
        if tag.starts_with(b"COMMIT") {
            self.committing = true;
        } else if tag.starts_with(b"ROLLBACK") {
            self.committing = false;
        }
    }

    /// The transaction ended (ReadyForQuery idle): its LISTENs and UNLISTENs take effect if it
    /// committed, and are forgotten if not.
    /// True when it had any.
    pub(crate) fn transaction_ended(&mut self) -> bool {
        if self.staged.is_empty() {
            return false;
        }
        let before = self.committed.clone();
        if std::mem::take(&mut self.committing) {
            for stmt in std::mem::take(&mut self.staged) {
                match stmt {
                    ListenStatement::Listen(ch) => {
                        self.committed.insert(ch);
                    }
                    ListenStatement::Unlisten(ch) => {
                        self.committed.remove(&ch);
                    }
                    ListenStatement::UnlistenAll => self.committed.clear(),
                }
            }
        }
        self.staged.clear();
        let since = self.last_sent.take();
        for ch in self.subscribed.clone() {
            if !self.committed.contains(&ch) {
                self.unsubscribe(&ch);
            }
        }
        let committed = &self.committed;
        self.mailbox.retain(|m| {
            let new = !before.contains(&*m.channel);
            committed.contains(&*m.channel) && (!new || since.is_none_or(|t| m.arrived >= t))
        });
        true
    }

    /// Everything waiting for delivery, counted as delivered (the caller writes it).
    pub(crate) fn take_mail(&self) -> VecDeque<Mail> {
        let mail = self.mailbox.take();
        for m in &mail {
            m.counters
                .delivered
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            self.stats.delivered.add(1);
            let us = u64::try_from(m.arrived.elapsed().as_micros()).unwrap_or(u64::MAX);
            self.stats.delay.observe_us(us);
        }
        mail
    }

    /// Returns once mail is waiting.
    pub(crate) async fn mail(&self) {
        self.mailbox.ready().await
    }

    /// Returns once the mailbox overflowed.
    pub(crate) async fn overflowed(&self) -> Overflow {
        self.mailbox.overflowed().await
    }
}

impl Drop for Subscriptions {
    fn drop(&mut self) {
        for ch in std::mem::take(&mut self.subscribed) {
            self.hub.unsubscribe(&self.key, self.id, &ch);
        }
        let lost = self.mailbox.drop_all();
        self.stats.dropped.add(lost as u64);
    }
}

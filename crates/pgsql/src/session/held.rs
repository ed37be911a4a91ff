//! The server side of a session as a type: [`Backend::Idle`] between transactions, or
//! [`Backend::Held`] with a server connection and everything that belongs to holding it (its
//! replies, an open extended batch, the statement timer, a cache fill). All of it begins with
//! the checkout and ends with the release, so none of it can outlive the connection.

use crate::session::begin::CacheFill;
use sluice_pgsql_backend::PgPooled;
use sluice_pgsql_proto::reply::ReplyTracker;
use sluice_pgsql_proto::tag::status;

/// Whether the session holds a server connection.
// The session lives in one heap block for its life (see `PgSession::run`), so an idle one pays
// nothing for the room; boxing `Held` would be an allocation per transaction.
#[allow(clippy::large_enum_variant)]
pub(crate) enum Backend {
    /// Between transactions: no server connection.
    Idle,
    /// A server connection held until its transaction is over (or for good, when pinned).
    Held(Held),
}

/// A server connection held by a session, and what belongs to holding it.
pub(crate) struct Held {
    /// The connection.
    pub(crate) conn: PgPooled,
    /// Its replies: outstanding syncs, transaction status, handoff, SETs.
    pub(crate) replies: ReplyTracker,
    /// An extended-protocol batch runs until its Sync: the connection stays with the session.
    pub(crate) batch_open: bool,
    /// The statement timeout's timer.
    pub(crate) timer: Option<tokio::task::JoinHandle<()>>,
    /// The reply being copied into the query cache.
    pub(crate) fill: Option<CacheFill>,
}

impl Held {
    /// A connection just checked out: `handoff` of Sluice's own Query messages are staged
    /// ahead of the client's (their replies are not the client's).
    pub(crate) fn new(
        conn: PgPooled,
        handoff: u8,
        timer: Option<tokio::task::JoinHandle<()>>,
        fill: Option<CacheFill>,
    ) -> Held {
        let mut replies = ReplyTracker::default();
        replies.expect_handoff(handoff);
        Held {
            conn,
            replies,
            batch_open: false,
            timer,
            fill,
        }
    }

    /// Nothing in flight, no transaction and no batch open: the client may hear from Sluice
    /// (notifications) and the connection could go back.
    pub(crate) fn quiet(&self) -> bool {
        self.replies.at_rest() && !self.batch_open
    }

    /// Stops the statement timer, if one runs.
    pub(crate) fn stop_timer(&mut self) {
        if let Some(t) = self.timer.take() {
            t.abort();
        }
    }
}

impl Backend {
    /// The held connection, if any.
    pub(crate) fn held(&mut self) -> Option<&mut Held> {
        match self {
            Backend::Idle => None,
            Backend::Held(h) => Some(h),
        }
    }

    /// Gives up the held connection (to release or close it); the session is idle after.
    pub(crate) fn take(&mut self) -> Option<Held> {
        match std::mem::replace(self, Backend::Idle) {
            Backend::Idle => None,
            Backend::Held(h) => Some(h),
        }
    }

    /// The transaction status the client was last told (`I` between transactions).
    pub(crate) fn status(&self) -> u8 {
        match self {
            Backend::Idle => status::IDLE,
            Backend::Held(h) => h.replies.status(),
        }
    }

    /// Nothing in flight: idle, or holding a [quiet](Held::quiet) connection.
    pub(crate) fn quiet(&self) -> bool {
        match self {
            Backend::Idle => true,
            Backend::Held(h) => h.quiet(),
        }
    }
}

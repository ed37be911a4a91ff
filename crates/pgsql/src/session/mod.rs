//! One logged-in PostgreSQL client under transaction pooling: [`PgSession`] holds a server
//! connection from the first message of a transaction until the server reports ReadyForQuery
//! "idle" with nothing outstanding, then gives it back. Client messages and server frames are
//! forwarded raw, pipelined in both directions; the session only notes what pooling needs
//! (pins, `SET`s, prepared statements, the reply tracker of `sluice-pgsql-proto`).

mod admit;
pub(crate) mod begin;
pub(crate) mod causal;
mod causal_read;
pub(crate) mod checkout;
pub(crate) mod forward;
pub(crate) mod handoff;
pub(crate) mod hook;
mod listening;
pub(crate) mod pins;
pub(crate) mod processor;
mod server_replies;
pub(crate) mod sets;
pub(crate) mod signals;
pub(crate) mod sql_prepare;
pub(crate) mod statements;

use crate::Error;
use crate::error::error_for;
use crate::frontend::PgFrontend;
use crate::login::Login;
use crate::session::begin::{CacheFill, Forward, Start};
use crate::session::forward::{Flow, SessionIo, forward};
use crate::session::pins::PinSet;
use crate::session::sets::{Change, SessionVars};
use crate::session::signals::{Outcome, SessionHandle};
use bytes::Bytes;
use checkout::checkout;
use signals::set_target;
use sluice_core::RuntimeConfig;
use sluice_core::config::Priority;
use sluice_pgsql_backend::PgPooled;
use sluice_pgsql_proto::frame::{Reader, error_response, message, ready};
use sluice_pgsql_proto::reply::ReplyTracker;
use std::time::Instant;
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt};
use tracing::{info, warn};

/// The pin reason a query rule with `multiplex=0` / `sticky_conn=1` gives a session.
pub(crate) const RULE_PIN: &str = "query rule (multiplex=0)";

/// How long a session without a transaction waits for its client before it gives its (empty)
/// read buffer back.
const IDLE_BUFFER_RELEASE: std::time::Duration = std::time::Duration::from_secs(1);

/// Whether the session goes on after a step.
enum Step {
    Continue,
    End,
}

/// What a session step handles.
enum Input {
    /// A client message while the session holds no server connection.
    Idle(Bytes),
    /// What woke the session while it holds one.
    Held(Ev),
    /// Notifications are waiting for the client.
    Mail,
    /// The session's notification queue overflowed.
    Overflow(crate::listen::Overflow),
}

/// What woke a session that holds a server connection.
enum Ev {
    Client(Result<Bytes, Error>),
    Server(Result<(), Error>),
    /// `pg_terminate_backend` from another session.
    Terminated,
}

/// One client session: its streams, its bookkeeping and the server connection it holds.
pub(crate) struct PgSession<'a, S> {
    fe: &'a PgFrontend,
    l: &'a Login,
    tcp: &'a mut S,
    reader: &'a mut Reader,
    handle: &'a SessionHandle,
    io: SessionIo<'a>,
    /// The session's settings: startup parameters and committed SETs.
    vars: SessionVars,
    /// SET/RESET changes of the current transaction, kept when it commits.
    pending: Vec<Change>,
    backend: Option<PgPooled>,
    /// The held connection's replies: outstanding syncs, transaction status, handoff, SETs.
    replies: ReplyTracker,
    /// An extended batch whose statement a rule blocked: its messages are dropped until Sync.
    skip_until_sync: bool,
    /// The reply being copied into the query cache.
    fill: Option<CacheFill>,
    /// The statement timeout's timer.
    timer: Option<tokio::task::JoinHandle<()>>,
    /// An extended-protocol batch runs until its Sync: the connection stays with the session.
    batch_open: bool,
    pinned: PinSet,
    /// The pin reason last shown in the processlist.
    published: Option<&'static str>,
    /// Held while the session is inside a transaction (`Active_Transactions`).
    in_transaction: Option<sluice_core::metrics::GaugeHold>,
    /// The slot admission control gave the transaction under way, and when its current
    /// round of messages went out (for the class's latency).
    admission: Option<(sluice_core::admission::Permit, Instant)>,
    /// The session's identity towards the pool (connection owner): its cancel key.
    owner: u64,
    /// The server's ErrorResponse for the request in flight reached the client (a terminated
    /// backend says why before it closes): a lost connection then adds only ReadyForQuery,
    /// since a second error would be a second result for one command.
    error_forwarded: bool,
    /// The LSN of the session's own last write, with the hostgroup it went to
    /// (read-your-writes, `causal_reads = local`).
    causal_token: Option<(u32, sluice_core::causal::Position)>,
    /// The channels the session listens to through the listener connection, and its
    /// notifications waiting for delivery (`pgsql-listen_mode=fanout`).
    listen: Option<Box<crate::listen::Subscriptions>>,
    /// The transaction under way may have sent notifications (someone listens through Sluice).
    notified: bool,
}

impl<'a, S: AsyncRead + AsyncWrite + Unpin> PgSession<'a, S> {
    /// A session for a client that logged in, with its startup settings in `vars`.
    pub(crate) fn new(
        (fe, l, handle): (&'a PgFrontend, &'a Login, &'a SessionHandle),
        tcp: &'a mut S,
        reader: &'a mut Reader,
        io: SessionIo<'a>,
        vars: SessionVars,
    ) -> Self {
        let owner = io.stmts.session_key();
        PgSession {
            fe,
            l,
            tcp,
            reader,
            handle,
            io,
            vars,
            pending: Vec::new(),
            backend: None,
            replies: ReplyTracker::default(),
            skip_until_sync: false,
            fill: None,
            timer: None,
            batch_open: false,
            pinned: PinSet::with_sticky(l.user.fast_forward.0.then_some("session pooling")),
            error_forwarded: false,
            published: None,
            in_transaction: None,
            admission: None,
            owner,
            causal_token: None,
            listen: None,
            notified: false,
        }
    }

    /// Forwards client messages and server replies until the client leaves, Sluice stops or
    /// the session is terminated.
    pub(crate) async fn run(self) -> Result<(), Error>
    where
        S: Send,
    {
        let (fe, handle) = (self.fe, self.handle);
        let terminated = handle.terminate.cancelled();
        tokio::pin!(terminated);
        // One registration for the session's life, not one per transaction.
        let shutdown = fe.shutdown.cancelled();
        tokio::pin!(shutdown);
        // A step's state lives in the session's step block, not in its task (memory per idle
        // client), reused from step to step (no allocation per message) and given back with
        // the read buffer once the client goes idle.
        let mut steps: sluice_net::StepBlock<'a, (Box<Self>, Result<Step, Error>)> =
            Default::default();
        // One timer for the session's life, moved later at every idle wait: tokio moves a
        // pending timer later with a compare-and-swap, where a new timer per wait locks the
        // timer wheel to insert it and again to remove it.
        let release = tokio::time::sleep(IDLE_BUFFER_RELEASE);
        tokio::pin!(release);
        // On the heap, so that handing it to a step and back moves a pointer, not the session
        // (a copy of its every byte twice per step, 12 % of a simple Query's instructions).
        let mut s = Box::new(self);
        loop {
            s.publish_pin();
            let input = match s.backend.as_mut() {
                None => {
                    // Idle between transactions: wait for the client only.
                    let idle_buffer = s.reader.has_idle_buffer();
                    if idle_buffer {
                        release
                            .as_mut()
                            .reset(tokio::time::Instant::now() + IDLE_BUFFER_RELEASE);
                    }
                    tokio::select! {
                        _ = &mut shutdown => return Ok(()),
                        _ = &mut terminated => return terminate(s.tcp).await.map(drop),
                        m = s.reader.message(s.tcp) => Input::Idle(m?),
                        _ = &mut release, if idle_buffer => {
                            // Reading is cancel-safe: an empty buffer is given back, so an
                            // idle client costs none; a busy one keeps its buffer.
                            s.reader.release_if_empty();
                            steps.release();
                            continue;
                        }
                        _ = listening::mail(&s.listen) => Input::Mail,
                        o = listening::overflowed(&s.listen) => Input::Overflow(o),
                    }
                }
                Some(b) => {
                    let conn = b.conn();
                    // On a connection it keeps, a client with nothing in flight is idle too.
                    let deliver = s.listen.is_some() && s.replies.at_rest() && !s.batch_open;
                    tokio::select! {
                        m = s.reader.message(s.tcp) => Input::Held(Ev::Client(m.map_err(Error::Client))),
                        r = conn.reader.fill(&mut conn.stream) => Input::Held(Ev::Server(r.map_err(Error::server_wire))),
                        _ = &mut terminated => Input::Held(Ev::Terminated),
                        _ = listening::mail(&s.listen), if deliver => Input::Mail,
                        o = listening::overflowed(&s.listen) => Input::Overflow(o),
                    }
                }
            };
            let outcome;
            (s, outcome) = steps.run(s.step(input)).await;
            if let Step::End = outcome? {
                return Ok(());
            }
        }
    }

    /// Handles one input; the (boxed) session is handed in and back so the step's future
    /// borrows nothing and can live in the reused block of [`Self::run`]. An `async` block
    /// rather than an `async fn`: the latter keeps the session twice in its future (the argument
    /// and the binding it is moved to), and the future is copied into the block at every step.
    #[allow(clippy::manual_async_fn)] // the point: see above
    fn step(
        mut self: Box<Self>,
        input: Input,
    ) -> impl Future<Output = (Box<Self>, Result<Step, Error>)> {
        async move {
            let outcome = match input {
                Input::Idle(m) => self.idle_message(m).await,
                Input::Held(ev) => self.event(ev).await,
                Input::Mail => self.deliver().await,
                Input::Overflow(o) => self.overflowed(o).await,
            };
            (self, outcome)
        }
    }

    /// Shows why the session holds its connection in the processlist, when that changed.
    fn publish_pin(&mut self) {
        let reason = self
            .pinned
            .reason()
            .or((self.replies.status() != b'I').then_some("transaction"));
        if reason != self.published {
            self.io.entry.set_pin(reason);
            self.published = reason;
            if let Some(r) = reason {
                self.fe.stats.pinned(r);
            }
        }
        let in_trans = self.replies.status() != b'I';
        if in_trans != self.in_transaction.is_some() {
            self.in_transaction = in_trans.then(|| self.fe.stats.active_transactions.hold());
        }
    }

    /// A client message while the session holds no server connection.
    async fn idle_message(&mut self, m: Bytes) -> Result<Step, Error> {
        if m[0] == b'X' {
            return Ok(Step::End);
        }
        if self.skip_until_sync {
            if m[0] == b'S' {
                self.skip_until_sync = false;
                self.tcp.write_all(&ready(b'I')).await?;
            }
            return Ok(Step::Continue);
        }
        if self.terminates_itself(&m, false) {
            return terminate(self.tcp).await;
        }
        // Answered without a server connection (see `SessionStatements::define_locally`): with
        // no connection held there is no transaction and nothing outstanding, so the replies are
        // in order.
        if self.io.stmts.define_locally(&m) {
            self.tcp.write_all(&message(b'1', b"")).await?;
            return Ok(Step::Continue);
        }
        match m[0] {
            b'S' => {
                self.tcp.write_all(&ready(b'I')).await?;
                return Ok(Step::Continue);
            }
            b'H' => return Ok(Step::Continue),
            _ => {}
        }
        if let Some((stmt, mode)) = self.intercepted_listen(&m) {
            return self.listen_statement(stmt, mode).await;
        }
        if m[0] == b'Q'
            && let Some(sig) = crate::session::signals::parse(&m[5..])
        {
            let me = (self.l.user.username.as_str(), self.own_pid());
            match crate::session::signals::carry_out(&self.fe.cancels, me, sig).await {
                Outcome::Reply(reply) => {
                    self.tcp.write_all(&reply).await?;
                    return Ok(Step::Continue);
                }
                Outcome::OwnTerminate => return terminate(self.tcp).await,
                Outcome::NotOurs => {}
            }
        }
        self.note_notify(&m);
        self.begin_transaction(m).await?;
        Ok(Step::Continue)
    }

    /// The first message of a transaction: the query processor decides, a server connection is
    /// taken and handed to the session, and the message goes out.
    async fn begin_transaction(&mut self, m: Bytes) -> Result<(), Error> {
        let fe = self.fe;
        // One snapshot for the whole start of the transaction.
        let rt = fe.config.load();
        let who = (self.l.user.as_ref(), self.l.database.as_str());
        let f = match crate::session::begin::start(fe, &rt, who, &mut self.io, self.vars.want(), m)
            .await
        {
            Start::Answered {
                reply,
                skip_until_sync,
            } => {
                self.skip_until_sync = skip_until_sync;
                self.tcp.write_all(&reply).await?;
                return Ok(());
            }
            Start::Forward(f) => f,
        };
        // Its own future: the query processor's and the checkout's never share one layout.
        self.open_transaction(&rt, f).await
    }

    /// A transaction the query processor sends on (`f`): its class's slot, a server
    /// connection handed to the session, and the message out.
    async fn open_transaction(&mut self, rt: &RuntimeConfig, f: Forward) -> Result<(), Error> {
        let fe = self.fe;
        let Forward {
            message: m,
            hostgroup,
            digest: decided,
            timeout,
            fill,
            pin,
            admit,
            causal,
        } = f;
        // No class configured (or a statement that never waits): no admission future at all.
        let taken = if admit.waits {
            crate::session::admit::take(&fe.admission, &rt.workload_classes, self.io.entry, &admit)
                .await
        } else {
            Ok(None)
        };
        let permit = match taken {
            Ok(p) => p,
            Err(refused) => {
                let simple = matches!(m[0], b'Q' | b'F');
                // The refusal is dropped here, not held in the step's state across the write.
                let reply =
                    crate::session::admit::refusal_reply(&refused, &self.l.user.username, simple);
                drop(refused);
                // An extended batch's other messages are dropped up to its Sync.
                self.skip_until_sync = !simple;
                self.tcp.write_all(&reply).await?;
                return Ok(());
            }
        };
        let (timeout, hostgroup) = self.admitted(permit, (timeout, hostgroup), fill, pin);
        let waiting = Instant::now();
        // Waiting for a server connection, the class's priority orders the queue.
        let priority = self
            .admission
            .as_ref()
            .map_or(Priority::Regular, |(p, _)| p.priority());
        let user = (
            self.l.user.username.as_str(),
            self.l.user.default_hostgroup.0,
        );
        let gate = causal.and_then(|wants| {
            crate::session::causal::plan(fe, rt, user, &mut self.causal_token, hostgroup, &wants)
        });
        let checked_out = checkout(fe, rt, self.l, hostgroup, self.owner, priority).await;
        let hg = i64::from(hostgroup);
        let waited = u64::try_from(waiting.elapsed().as_micros()).unwrap_or(u64::MAX);
        fe.stats.wait_us.add(hg, waited);
        fe.stats.transactions.add(hg, 1);
        let mut c = match checked_out {
            Ok(c) => c,
            Err(e) => return self.checkout_failed(&e, m[0]).await,
        };
        if let Some(gate) = gate {
            // Boxed: a gated read is rare next to every other transaction start.
            match Box::pin(self.causal_read(rt, gate, c, priority, m[0])).await? {
                Some(ready) => c = ready,
                None => return Ok(()),
            }
        }
        let conn = c.conn();
        // Staged ahead of the client's messages, in the same write.
        self.io.out.clear();
        let staged = crate::session::handoff::stage(
            conn,
            (self.owner, self.vars.want(), &self.io.stmts.sql),
            rt.pgsql.variables.handoff_reset_all,
            &fe.cancels,
            &mut self.io.out,
        );
        self.replies.expect_handoff(staged);
        let target = Some((conn.server.clone(), conn.key.0, conn.key.1));
        set_target(&self.handle.target, target);
        if let Some(after) = timeout {
            let server = conn.server.to_string();
            self.timer = Some(crate::session::begin::arm_timeout(
                fe, server, conn.key, after,
            ));
        }
        let flow = Flow {
            batch_open: &mut self.batch_open,
            pinned: &mut self.pinned,
            pending: &mut self.pending,
            replies: &mut self.replies,
        };
        forward(fe, rt, conn, &mut self.io, self.reader, &m, decided, flow).await?;
        self.backend = Some(c);
        Ok(())
    }

    /// The transaction was admitted (with `permit` when its class has a gate): the permit's
    /// limits applied — the shorter of the two timeouts, a `reroute` guard's hostgroup — the
    /// cache fill and the rule's pin kept. Returns the timeout and hostgroup it runs with.
    fn admitted(
        &mut self,
        permit: Option<sluice_core::admission::Permit>,
        (timeout, hostgroup): (Option<std::time::Duration>, u32),
        fill: Option<CacheFill>,
        pin: Option<bool>,
    ) -> (Option<std::time::Duration>, u32) {
        let timeout = match (timeout, permit.as_ref().and_then(|p| p.max_execution())) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        // An open `reroute` guard sends the transaction to its fallback hostgroup.
        let hostgroup = permit
            .as_ref()
            .and_then(|p| p.reroute())
            .unwrap_or(hostgroup);
        self.admission = permit.map(|p| (p, Instant::now()));
        self.fill = fill;
        match pin {
            Some(true) => self.pinned.sticky = Some(RULE_PIN),
            Some(false) if self.pinned.sticky == Some(RULE_PIN) => self.pinned.sticky = None,
            _ => {}
        }
        self.io.qp.hostgroup = i64::from(hostgroup);
        (timeout, hostgroup)
    }

    /// No server connection for the transaction: the client gets the error and the class's
    /// slot goes back at once.
    async fn checkout_failed(
        &mut self,
        e: &sluice_pgsql_backend::Error,
        first: u8,
    ) -> Result<(), Error> {
        self.admission = None;
        warn!(user = %self.l.user.username, "pgsql: {e}");
        let mut out = error_for(e);
        if matches!(first, b'Q' | b'S' | b'F') {
            out.extend(ready(b'I'));
        }
        self.tcp.write_all(&out).await?;
        Ok(())
    }

    /// What woke the session while it holds a server connection.
    async fn event(&mut self, ev: Ev) -> Result<Step, Error> {
        match ev {
            Ev::Terminated => {
                // The terminator cancelled the statement; the connection is closed.
                set_target(&self.handle.target, None);
                drop(self.backend.take());
                terminate(self.tcp).await?;
                Ok(Step::End)
            }
            Ev::Client(Err(e)) => {
                // The client went away with the connection mid-use: it is closed (dropped).
                drop(self.backend.take());
                Err(e)
            }
            Ev::Client(Ok(m)) => self.client_message(m).await,
            Ev::Server(Err(e)) => self.server_lost(e).await,
            Ev::Server(Ok(())) => self.server_frames().await,
        }
    }

    /// The pid the session's client was given (BackendKeyData).
    fn own_pid(&self) -> u32 {
        (self.owner >> 32) as u32
    }

    /// Whether `m` ends the session as PostgreSQL ends a backend that signals itself (FATAL
    /// 57P01): a Bind of `pg_terminate_backend($1)` with the session's own pid, or, with
    /// `query_too`, such a Query (on an idle session the Query is carried out with the other
    /// signals). Parses of such statements are noted here, so every Parse passes by.
    fn terminates_itself(&mut self, m: &[u8], query_too: bool) -> bool {
        let own = self.own_pid();
        match m[0] {
            b'P' => {
                self.io.stmts.signals.parsed(m);
                false
            }
            b'B' => self.io.stmts.signals.bound_pid(m) == Some(own),
            b'Q' if query_too => matches!(
                crate::session::signals::parse(&m[5..]),
                Some((crate::session::signals::Signal::Terminate, pid)) if pid == own
            ),
            _ => false,
        }
    }

    /// A client message while the session holds a server connection.
    async fn client_message(&mut self, m: Bytes) -> Result<Step, Error> {
        if self.terminates_itself(&m, true) {
            // What was sent on the server connection is abandoned with it.
            set_target(&self.handle.target, None);
            drop(self.backend.take());
            return terminate(self.tcp).await;
        }
        if m[0] == b'X' {
            if let Some(b) = self.backend.take() {
                if !self.replies.at_rest() {
                    // Replies still in flight or a transaction open: `DISCARD ALL` would fail
                    // or be read as the answer to what is in flight, leaving its own answer in
                    // the socket for the next session (the soak saw clients get "DISCARD ALL
                    // cannot run inside a transaction block"). The connection is closed.
                    drop(b);
                } else if self.pinned.reason().is_some() {
                    b.release_discard();
                } else {
                    b.release_clean();
                }
            }
            return Ok(Step::End);
        }
        // Nothing in flight: Sluice's answer cannot overtake the server's.
        if self.replies.outstanding() == 0
            && !self.batch_open
            && let Some((stmt, mode)) = self.intercepted_listen(&m)
        {
            return self.listen_statement(stmt, mode).await;
        }
        if let Some(l) = self.listen.as_mut() {
            l.sent();
        }
        self.note_notify(&m);
        // Another session terminated from inside a transaction (psycopg's `test_identify_closure`).
        let own = self.own_pid();
        let rewritten = match (m[0], self.backend.as_mut()) {
            (b'B', Some(b)) => match self.io.stmts.signals.bound_pid(&m) {
                Some(pid) if pid != own => {
                    let who = (self.l.user.username.as_str(), &b.conn().server);
                    crate::session::signals::terminate_bound(&self.fe.cancels, who, &m, pid)
                }
                _ => None,
            },
            _ => None,
        };
        let m = rewritten.map_or(m, Bytes::from);
        if let Some(b) = self.backend.as_mut() {
            let flow = Flow {
                batch_open: &mut self.batch_open,
                pinned: &mut self.pinned,
                pending: &mut self.pending,
                replies: &mut self.replies,
            };
            let rt = self.fe.config.load();
            forward(
                self.fe,
                &rt,
                b.conn(),
                &mut self.io,
                self.reader,
                &m,
                None,
                flow,
            )
            .await?;
        }
        Ok(Step::Continue)
    }
}

/// Ends a session terminated with `pg_terminate_backend`, as PostgreSQL does.
async fn terminate<S: AsyncWrite + Unpin>(tcp: &mut S) -> Result<Step, Error> {
    let msg = "terminating connection due to administrator command";
    tcp.write_all(&error_response("FATAL", "57P01", msg))
        .await?;
    info!("pgsql session ended by pg_terminate_backend()");
    Ok(Step::End)
}

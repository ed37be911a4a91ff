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
mod held;
pub(crate) mod hook;
mod idle;
mod listening;
pub(crate) mod pins;
pub(crate) mod processor;
mod server_replies;
pub(crate) mod sets;
pub(crate) mod signals;
pub(crate) mod sql_prepare;
pub(crate) mod statements;

use crate::Error;
use crate::frontend::PgFrontend;
use crate::login::Login;
use crate::pids::SessionHandle;
use crate::session::forward::SessionIo;
use crate::session::sets::SessionVars;
use bytes::Bytes;
use held::Backend;
use sluice_net::Signal;
use sluice_pgsql_proto::frame::{Reader, error_response};
use sluice_pgsql_proto::tag::status;
use std::time::Instant;
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt};
use tracing::info;

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
    /// The server connection the session holds, if any, with what belongs to holding it.
    backend: Backend,
    /// An extended batch whose statement a rule blocked: its messages are dropped until Sync.
    skip_until_sync: bool,
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
            backend: Backend::Idle,
            skip_until_sync: false,
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
    /// the session is terminated. Boxed by the caller: an `async fn`'s future keeps its
    /// arguments for its whole life, so a session passed by value would stay in the task (where
    /// every idle client holds it) beside the box the loop runs it in.
    pub(crate) async fn run(self: Box<Self>) -> Result<(), Error>
    where
        S: Send,
    {
        // pg_terminate_backend and shutdown (see `sluice_net::signals`).
        let signal = self.handle.signal.clone();
        // A step's state lives in the session's step block, not in its task (memory per idle
        // client), reused from step to step (no allocation per message) and given back with
        // the read buffer once the client goes idle.
        let mut steps = sluice_net::StepBlock::default();
        // One timer for the session's life, moved only when it fires (moving it at every wait
        // cost a clock reading and a timer-wheel update per statement): it gives the read
        // buffer back if the session has not woken since it was set, else it is set again, so
        // an idle client's buffer goes back 1–2 × IDLE_BUFFER_RELEASE after its last message.
        let release = tokio::time::sleep(IDLE_BUFFER_RELEASE);
        tokio::pin!(release);
        // The wait the timer was set in, while it is set.
        let mut release_set_in: Option<u32> = None;
        // Waits so far (wrapping): the release timer's measure of whether the session woke.
        let mut waits: u32 = 0;
        // On the heap, so that handing it to a step and back moves a pointer, not the session
        // (a copy of its every byte twice per step, 12 % of a simple Query's instructions).
        let mut s = self;
        // The signals are looked at before the sockets (an atomic load each); the `select!`s
        // poll them after the sockets (`biased`) only to leave the task's waker with them.
        loop {
            s.publish_pin();
            waits = waits.wrapping_add(1);
            let input = match &mut s.backend {
                Backend::Idle => {
                    // Idle between transactions: wait for the client only.
                    if signal.is_raised(Signal::Shutdown) {
                        return terminate(s.tcp, Ended::Shutdown).await.map(drop);
                    }
                    if signal.is_raised(Signal::End) {
                        return terminate(s.tcp, Ended::Terminated).await.map(drop);
                    }
                    let idle_buffer = s.reader.has_idle_buffer();
                    if idle_buffer && release_set_in.is_none() {
                        release
                            .as_mut()
                            .reset(tokio::time::Instant::now() + IDLE_BUFFER_RELEASE);
                        release_set_in = Some(waits);
                    }
                    tokio::select! {
                        biased;
                        m = s.reader.message(s.tcp) => Input::Idle(m?),
                        _ = listening::mail(&s.listen) => Input::Mail,
                        o = listening::overflowed(&s.listen) => Input::Overflow(o),
                        _ = signal.raised(Signal::Shutdown) => return terminate(s.tcp, Ended::Shutdown).await.map(drop),
                        _ = signal.raised(Signal::End) => return terminate(s.tcp, Ended::Terminated).await.map(drop),
                        _ = &mut release, if idle_buffer => {
                            // Idle since the timer was set: reading is cancel-safe, an empty
                            // buffer is given back, so an idle client costs none; a busy one
                            // keeps its buffer. Woken since: the next wait sets it again.
                            if release_set_in.take() == Some(waits) {
                                s.reader.release_if_empty();
                                steps.release();
                            }
                            continue;
                        }
                    }
                }
                Backend::Held(_) if signal.is_raised(Signal::End) => Input::Held(Ev::Terminated),
                Backend::Held(h) => {
                    // On a connection it keeps, a client with nothing in flight is idle too.
                    let deliver = s.listen.is_some() && h.quiet();
                    let conn = h.conn.conn();
                    tokio::select! {
                        biased;
                        r = conn.reader.fill(&mut conn.stream) => Input::Held(Ev::Server(r.map_err(Error::server_wire))),
                        m = s.reader.message(s.tcp) => Input::Held(Ev::Client(m.map_err(Error::Client))),
                        _ = listening::mail(&s.listen), if deliver => Input::Mail,
                        o = listening::overflowed(&s.listen) => Input::Overflow(o),
                        _ = signal.raised(Signal::End) => Input::Held(Ev::Terminated),
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
            .io
            .pinned
            .reason()
            .or((self.backend.status() != status::IDLE).then_some("transaction"));
        if reason != self.published {
            self.io.entry.set_pin(reason);
            self.published = reason;
            if let Some(r) = reason {
                self.fe.stats.pinned(r);
            }
        }
        let in_trans = self.backend.status() != status::IDLE;
        if in_trans != self.in_transaction.is_some() {
            self.in_transaction = in_trans.then(|| self.fe.stats.active_transactions.hold());
        }
    }
}

/// Why an administrator ended a session.
#[derive(Debug, Clone, Copy)]
enum Ended {
    /// `pg_terminate_backend()` (or `KILL CONNECTION` through the admin).
    Terminated,
    /// Sluice is shutting down and the session was idle.
    Shutdown,
}

/// Ends a session an administrator ended, as PostgreSQL does for `pg_terminate_backend` and
/// for its own shutdown: FATAL 57P01, then the close.
async fn terminate<S: AsyncWrite + Unpin>(tcp: &mut S, why: Ended) -> Result<Step, Error> {
    let msg = "terminating connection due to administrator command";
    tcp.write_all(&error_response("FATAL", "57P01", msg))
        .await?;
    match why {
        Ended::Terminated => info!("pgsql session ended by pg_terminate_backend()"),
        Ended::Shutdown => info!("pgsql session closed with FATAL 57P01: Sluice is shutting down"),
    }
    Ok(Step::End)
}

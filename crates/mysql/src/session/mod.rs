//! The command loop of one logged-in client.
//!
//! Each command that needs a server takes a backend connection from the pool, brings it to the
//! client's session state (only the differences), forwards the raw command and relays the raw
//! reply. Afterwards the connection goes back to the pool unless something pins it ([`pins`]).
//! Prepared statements go through the global registry ([`prepared`]); a few queries and
//! `COM_PING` are answered by Sluice itself ([`answer`]).

mod admit;
mod answer;
mod causal;
mod change_user;
pub(crate) mod execute;
mod forward;
mod hook;
mod kill;
mod local_infile;
pub(crate) mod pins;
mod prepared;
mod processor;
mod query;

use crate::error::Error;
use crate::handshake::{ClientIo, LoggedIn, fail};
use crate::listener::MysqlFrontend;
use crate::registry::SessionSlot;
use hashbrown::HashMap;
use pins::Pins;
use sluice_core::RuntimeConfig;
use sluice_mysql_backend::{PooledConn, SessionState};
use sluice_mysql_proto::consts::com;
use sluice_mysql_proto::framing::Packet;
use sluice_mysql_proto::packets::{err_payload, ok_payload};
use sluice_mysql_proto::reply::ReplyKind;
use sluice_net::{SessionSignal, Signal};
use std::pin::Pin;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tracing::{debug, info, warn};

/// How long a session waits for its client's next command before it gives its (empty) read
/// buffer back: busy clients keep theirs (no allocation per command), idle ones cost none.
const IDLE_BUFFER_RELEASE: Duration = Duration::from_secs(1);

/// A client's handle on a registered prepared statement.
#[derive(Debug, Clone)]
struct ClientStmt {
    meta: Arc<crate::stmt_registry::StmtMeta>,
    /// Parameter types from the client's last execute with new-params-bound=1.
    types: Option<bytes::Bytes>,
}

/// One client session after login.
pub(crate) struct Session {
    id: u32,
    io: ClientIo,
    login: LoggedIn,
    /// The session state the client expects on whatever backend connection serves it.
    state: SessionState,
    backend: Option<PooledConn>,
    /// True from checkout until the first command on that connection completes: a failure
    /// before any reply byte can then be retried on a new connection without the client noticing.
    backend_fresh: bool,
    pins: Pins,
    /// Prepared statements by client statement id.
    stmts: HashMap<u32, ClientStmt>,
    next_stmt_id: u32,
    /// The auto-increment id of the session's last insert (its OK packet), for LAST_INSERT_ID()
    /// answered after the session left that connection.
    last_insert_id: u64,
    /// The backend connection (server, thread id) that insert ran on: while the session still
    /// holds it, `SELECT LAST_INSERT_ID()` goes to the server, which alone knows whether the id
    /// was generated (an explicit value, even -1, fills the OK packet too: mariadb-test
    /// auto_increment).
    last_insert_conn: Option<(String, u32)>,
    /// The client's `SET wait_timeout`, in ms.
    client_wait_timeout: Option<u64>,
    /// Set when writing to the client failed: the session ends.
    client_gone: bool,
    /// The client changed a server option (COM_SET_OPTION) that COM_RESET_CONNECTION may not
    /// restore, so the backend connection is closed instead of pooled.
    backend_tainted: bool,
    /// The pin reason last published to the processlist.
    published_reason: Option<&'static str>,
    fe: Arc<MysqlFrontend>,
    slot: SessionSlot,
    /// The flag the next query starts the rules with (`next_query_flagIN`).
    next_flag_in: u32,
    /// Where the current command goes when the session holds no backend connection.
    route_hostgroup: u32,
    /// Set while a reply is being copied for the query cache.
    capture: Option<Vec<u8>>,
    /// Client IP, as rules and digests see it.
    client_ip: String,
    /// Sluice IP the client connected to.
    local_ip: String,
    /// Dead pooled connections the current command may replace (`retries` of a rule).
    query_retries: u32,
    /// Held while the session is inside a transaction (`Active_Transactions`).
    in_transaction: Option<sluice_core::metrics::GaugeHold>,
    /// The last statement's digest, whose buffers the next one is written into.
    spare_digest: sluice_core::query::Digest,
    /// The last text query and its digest once it repeated (a text digested once per run of
    /// the same statement).
    digest_memo: sluice_core::query::DigestMemo,
    /// Where COM_STMT_EXECUTE packets are rewritten for the server, kept between executes.
    execute_buf: Vec<u8>,
    /// The slot admission control gave the statement (or the transaction) under way.
    admission: Option<sluice_core::admission::Permit>,
    /// The GTID position of the session's own writes, with the hostgroup they went to
    /// (read-your-writes, `causal_reads = local`).
    causal_token: Option<(u32, sluice_core::causal::Position)>,
}

/// How a command ended for the session loop.
enum Next {
    Continue,
    Close,
}

/// What ended a session's wait for its client.
enum Woke {
    /// A packet from the client, or why none could be read.
    Read(Result<sluice_mysql_proto::framing::Packet, Error>),
    /// The wait's timer: `wait_timeout`, a hold running out or the idle buffer's release.
    Timer,
    /// Sluice is shutting down and the session is outside a transaction.
    Shutdown,
    /// `KILL CONNECTION`.
    Killed,
}

impl Session {
    /// A session for a client that just logged in.
    pub(crate) fn new(
        id: u32,
        io: ClientIo,
        login: LoggedIn,
        fe: Arc<MysqlFrontend>,
        slot: SessionSlot,
    ) -> Self {
        let state = SessionState {
            schema: Some(login.schema.clone()),
            ..SessionState::default()
        };
        let mut pins = Pins::default();
        pins.clear();
        let route_hostgroup = login.user.default_hostgroup.0;
        let client_ip = io.peer.ip().to_string();
        let local_ip = io.local.ip().to_string();
        let mut s = Session {
            id,
            io,
            login,
            state,
            backend: None,
            backend_fresh: false,
            pins,
            stmts: HashMap::new(),
            next_stmt_id: 1,
            last_insert_id: 0,
            last_insert_conn: None,
            client_wait_timeout: None,
            client_gone: false,
            backend_tainted: false,
            published_reason: None,
            next_flag_in: 0,
            route_hostgroup,
            capture: None,
            client_ip,
            local_ip,
            query_retries: forward::DEFAULT_RETRIES,
            in_transaction: None,
            spare_digest: Default::default(),
            digest_memo: Default::default(),
            execute_buf: Vec::new(),
            admission: None,
            causal_token: None,
            fe,
            slot,
        };
        s.refresh_multiplexing_setting();
        s.publish();
        s
    }

    fn refresh_multiplexing_setting(&mut self) {
        let rt = self.fe.config.load();
        self.pins.disabled = !rt
            .mysql
            .multiplexing_allowed(&self.login.user, self.login.user.default_hostgroup.0);
    }

    /// Publishes user, schema and pin reason to the processlist when they changed.
    fn publish(&mut self) {
        let reason = self.pins.reason();
        if let Some(r) = reason {
            self.fe.counters.stats.pinned(r);
        }
        self.slot.update(
            &self.login.user.username,
            self.state.schema.as_deref().unwrap_or(""),
            reason,
        );
        self.published_reason = reason;
    }

    /// How long the session may wait for its client (`wait_timeout`) in the snapshot `rt`.
    fn idle_timeout(&self, rt: &RuntimeConfig) -> Duration {
        let global = rt.mysql.variables.wait_timeout;
        let ms = self.client_wait_timeout.map_or(global, |c| c.min(global));
        Duration::from_millis(ms.max(1))
    }

    /// Runs commands until the client quits, the connection breaks, it idles past wait_timeout
    /// or Sluice shuts down. On the heap, so that handing it to a command's step and back moves
    /// a pointer, not the session (a copy of its every byte twice per command); boxed by the
    /// caller, because an `async fn`'s future keeps its arguments for its whole life: a session
    /// passed by value would stay in the task (where every idle client holds it) beside its box.
    pub(crate) async fn run(mut self: Box<Self>) {
        // KILL and shutdown (see `sluice_net::signals`).
        let signal = self.slot.signal().clone();
        let mut waiting_since = Instant::now();
        let mut steps = sluice_net::StepBlock::default();
        // One timer for the session's life. It is moved only to an earlier instant, or once it
        // has fired: moving it later at every wait cost a timer-wheel update per command, and
        // a timer that fires early only makes the loop look at its deadlines and set it again.
        let timer = tokio::time::sleep_until(waiting_since.into());
        tokio::pin!(timer);
        let mut idle = self.idle_timeout(&self.fe.config.load());
        loop {
            let idle_deadline = waiting_since + idle;
            // One timer per wait, at the earliest of: wait_timeout, a time-bounded hold running
            // out, and the moment an idle session gives its read buffer back.
            let release_at = self
                .io
                .reader
                .has_idle_buffer()
                .then_some(waiting_since + IDLE_BUFFER_RELEASE);
            let wake = [Some(idle_deadline), self.pins.hold_deadline(), release_at]
                .into_iter()
                .flatten()
                .min()
                .unwrap_or(idle_deadline);
            if timer.is_elapsed() || wake < timer.deadline().into_std() {
                timer.as_mut().reset(wake.into());
            }
            let read = match self.wait(&signal, timer.as_mut()).await {
                Woke::Read(r) => Some(r),
                Woke::Timer => None,
                Woke::Shutdown => {
                    debug!(session = self.id, "closing idle session: shutting down");
                    break;
                }
                Woke::Killed => {
                    info!(session = self.id, user = %self.login.user.username, "session killed (KILL CONNECTION from the admin or a client)");
                    break;
                }
            };
            let Some(read) = read else {
                let now = Instant::now();
                if now >= idle_deadline {
                    self.close_idle(idle).await;
                    break;
                }
                if release_at.is_some_and(|r| now >= r) {
                    // Reading is cancel-safe: whatever arrived stays buffered and the buffer is
                    // kept; only an empty one is given back.
                    self.io.reader.release_if_empty();
                    self.execute_buf = Vec::new();
                    steps.release();
                }
                self.expire_holds(now);
                idle = self.idle_timeout(&self.fe.config.load());
                continue;
            };
            let pk = match read {
                Ok(p) => p,
                Err(Error::Protocol(sluice_mysql_proto::Error::Closed)) => break,
                Err(e @ Error::Protocol(sluice_mysql_proto::Error::TooLarge { .. })) => {
                    warn!(session = self.id, user = %self.login.user.username, client = %self.io.peer,
                        "closing client session: {e} (mysql-max_allowed_packet)");
                    let _ = fail::<()>(&mut self.io, 1, e).await;
                    break;
                }
                Err(e) => {
                    warn!(session = self.id, user = %self.login.user.username, client = %self.io.peer,
                        "closing client session: {e}");
                    break;
                }
            };
            let started = Instant::now();
            let command = match pk.payload.first() {
                Some(&com::QUERY) => Some(crate::counters::query_command(&pk.payload[1..])),
                Some(&com::STMT_EXECUTE) => Some(const { crate::counters::named("EXECUTE") }),
                Some(&com::STMT_PREPARE) => Some(const { crate::counters::named("PREPARE") }),
                _ => None,
            };
            // The command's state lives in the session's step block, not in its task (memory
            // per idle client), reused from command to command (no allocation per command).
            let next;
            (self, next) = steps.run(self.step(pk, started)).await;
            // One clock read for the command's time and the next wait's start.
            waiting_since = Instant::now();
            // One snapshot for the command's statistics and the next wait.
            let rt = self.fe.config.load();
            if let Some(c) = command {
                self.count_command(&rt, c, waiting_since.saturating_duration_since(started));
            }
            self.after_command();
            idle = self.idle_timeout(&rt);
            drop(rt);
            if matches!(next, Next::Close) || self.client_gone {
                break;
            }
        }
        self.finish();
    }

    /// The session's wait: the client's next packet, the wait's timer, or a signal — shutdown,
    /// KILL. The signals are looked at first (an atomic load each), so a client that never
    /// stops sending cannot hold them off; the `select!` polls them after the client's socket
    /// only to leave its waker with them (see `sluice_net::signals`).
    async fn wait(&mut self, signal: &SessionSignal, timer: Pin<&mut tokio::time::Sleep>) -> Woke {
        // A transaction ends first (COMMIT or ROLLBACK from the client), up to the shutdown
        // timeout.
        let idle_now = !self.pins.in_transaction();
        if idle_now && signal.is_raised(Signal::Shutdown) {
            return Woke::Shutdown;
        }
        if signal.is_raised(Signal::End) {
            return Woke::Killed;
        }
        tokio::select! {
            biased;
            r = self.io.read() => Woke::Read(r),
            _ = signal.raised(Signal::Shutdown), if idle_now => Woke::Shutdown,
            _ = signal.raised(Signal::End) => Woke::Killed,
            _ = timer => Woke::Timer,
        }
    }

    /// The client said nothing for `wait_timeout`: it gets error 4031, as from MySQL 8.
    async fn close_idle(&mut self, idle: Duration) {
        info!(session = self.id, user = %self.login.user.username, client = %self.io.peer,
            "closing client session idle for {}s (wait_timeout)", idle.as_secs());
        let msg = "The client was disconnected by the server because of inactivity. \
                   See wait_timeout and interactive_timeout for configuring this behavior.";
        let _ = self.io.write(0, &err_payload(4031, "HY000", msg)).await;
    }

    /// A time-bounded hold ran out while the client was quiet: the connection goes back to the
    /// pool now rather than at the next command.
    fn expire_holds(&mut self, now: Instant) {
        if self.pins.hold_deadline().is_some_and(|h| now >= h) {
            self.pins.expire_holds(now);
            self.after_idle_change();
        }
    }

    /// A command's time (`took`) in `stats_mysql_commands_counters` and the statement
    /// statistics.
    fn count_command(&self, rt: &RuntimeConfig, command: usize, took: Duration) {
        self.fe.counters.commands.record(command, took);
        let slow_us = rt.mysql.variables.query.long_query_time * 1000;
        let us = u64::try_from(took.as_micros()).unwrap_or(u64::MAX);
        let hostgroup = i64::from(self.route_hostgroup);
        self.fe.counters.stats.statement(hostgroup, us, slow_us);
    }

    fn finish(mut self) {
        self.admission = None;
        self.release_backend();
        drop(self.slot);
        debug!(session = self.id, "session ended");
    }

    /// Gives the backend connection back: as it is when nothing but replayable state is on it,
    /// reset when it holds session-scoped state, closed when a reset may not undo it.
    pub(super) fn release_backend(&mut self) {
        if let Some(b) = self.backend.take() {
            if self.backend_tainted || self.pins.outlives_reset() {
                drop(b);
            } else if self.pins.dirty() {
                b.release();
            } else {
                b.release_clean();
            }
        }
        self.backend_tainted = false;
    }

    /// After every command: back to the pool unless pinned; processlist update.
    fn after_command(&mut self) {
        self.pins.tick_statement();
        self.after_idle_change();
        let in_trans = self.pins.in_transaction();
        if in_trans != self.in_transaction.is_some() {
            self.in_transaction =
                in_trans.then(|| self.fe.counters.stats.active_transactions.hold());
        }
        if !in_trans {
            // The statement (or its transaction) ended: its class's slot goes back.
            self.admission = None;
        }
    }

    /// Releases the backend connection when nothing pins it; publishes the pin reason.
    fn after_idle_change(&mut self) {
        self.pins.expire_holds(std::time::Instant::now());
        if self.pins.reason().is_none()
            && !self.backend_tainted
            && let Some(b) = self.backend.take()
        {
            b.release_clean();
        }
        if self.pins.reason() != self.published_reason {
            self.publish();
        }
    }

    async fn reply_ok(&mut self, seq: u8) -> Next {
        let st = self.pins.status;
        match self.io.write(seq, &ok_payload(0, 0, st, 0)).await {
            Ok(()) => Next::Continue,
            Err(_) => Next::Close,
        }
    }

    /// Runs one command; the session is handed in and back so the command's future borrows
    /// nothing and can live in the reused block of [`Self::run`]. An `async` block rather than
    /// an `async fn`: the latter keeps the session twice in its future (the argument and the
    /// binding it is moved to), and the future is copied into the block at every statement.
    #[allow(clippy::manual_async_fn)] // the point: see above (1,488 bytes less to copy)
    /// `started`: when the command was read (its statement is timed from it).
    fn step(
        mut self: Box<Self>,
        pk: Packet,
        started: Instant,
    ) -> impl Future<Output = (Box<Session>, Next)> + Send + 'static {
        async move {
            let next = self.dispatch(pk, started).await;
            (self, next)
        }
    }

    async fn dispatch(&mut self, pk: Packet, started: Instant) -> Next {
        let Some(&cmd) = pk.payload.first() else {
            warn!(session = self.id, client = %self.io.peer, "closing client session: empty command packet");
            return Next::Close;
        };
        let reply_seq = pk.seq.wrapping_add(1);
        self.route_hostgroup = self.login.user.default_hostgroup.0;
        match cmd {
            com::QUIT => Next::Close,
            com::PING => self.reply_ok(reply_seq).await,
            com::QUERY => self.query(&pk, started).await,
            com::INIT_DB => {
                let t = self.forward(&pk, ReplyKind::Single).await;
                if t.as_ref().is_some_and(|t| !t.error) {
                    let name = String::from_utf8_lossy(&pk.payload[1..]).into_owned();
                    self.state.schema = Some(name);
                    self.sync_conn_state();
                }
                Next::Continue
            }
            com::STMT_PREPARE => self.stmt_prepare(&pk).await,
            com::STMT_EXECUTE => self.stmt_execute(&pk, started).await,
            com::STMT_SEND_LONG_DATA => self.stmt_send_long_data(&pk).await,
            com::STMT_RESET => self.stmt_reset(&pk).await,
            com::STMT_CLOSE => {
                self.stmt_close(&pk);
                Next::Continue
            }
            com::STMT_FETCH => self.stmt_fetch(&pk).await,
            com::FIELD_LIST => {
                self.forward(&pk, ReplyKind::FieldList).await;
                Next::Continue
            }
            com::STATISTICS => {
                self.forward(&pk, ReplyKind::Single).await;
                Next::Continue
            }
            com::SET_OPTION => {
                self.forward(&pk, ReplyKind::Single).await;
                // The multi-statement option lives on the server connection: keep that one.
                self.backend_tainted = self.backend.is_some();
                self.pins.untrackable = Some("COM_SET_OPTION");
                Next::Continue
            }
            com::RESET_CONNECTION => {
                self.reset_session().await;
                self.reply_ok(reply_seq).await
            }
            com::CHANGE_USER => self.change_user(pk).await,
            com::PROCESS_KILL => self.process_kill(reply_seq, &pk.payload).await,
            other => {
                let msg = format!("Unknown command {other:#04x}");
                match self
                    .io
                    .write(reply_seq, &err_payload(1047, "08S01", &msg))
                    .await
                {
                    Ok(()) => Next::Continue,
                    Err(_) => Next::Close,
                }
            }
        }
    }

    /// COM_RESET_CONNECTION: the client's session state goes back to a fresh login's.
    async fn reset_session(&mut self) {
        if let Some(b) = self.backend.as_mut()
            && !matches!(b.conn().reset().await, Ok(true))
        {
            self.backend = None;
        }
        for (_, s) in self.stmts.drain() {
            s.meta
                .client_refs
                .fetch_sub(1, std::sync::atomic::Ordering::Relaxed);
        }
        self.state = self.state.reset_keep_schema();
        self.pins.clear();
        self.last_insert_id = 0;
        self.last_insert_conn = None;
        self.client_wait_timeout = None;
    }
}

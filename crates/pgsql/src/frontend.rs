//! The PostgreSQL data port (6133): accepting clients (startup and authentication are in
//! `login.rs`) and transaction pooling — a session holds a server connection from its first
//! message until the server reports ReadyForQuery "idle" with nothing outstanding, then gives it
//! back. Client and server messages are forwarded as raw frames, pipelined in both directions.

use crate::forward::SessionIo;
use crate::login::{Login, Opening, fail, login, opening};
use crate::processor::{Identity, SessionProcessor};
use crate::session::PgSession;
use crate::session_sets::SessionVars;
use crate::signals::CancelTarget;
use crate::statements::SessionStatements;
use sluice_core::ConfigHandle;
use sluice_core::Protocol;
use sluice_core::config::Priority;
use sluice_core::login_throttle::{Admission, LoginGate, LoginThrottle};
use sluice_core::query::StatementHook;
use sluice_core::util::lock;
use sluice_pgsql_backend::Error as PgError;
use sluice_pgsql_backend::{PgCheckout, PgPool, PgPooled};
use sluice_pgsql_proto::frame::{Reader, error_response, message, parameter_status, ready};
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::Ordering::Relaxed;
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tracing::{debug, info, warn};

/// The PostgreSQL data port: what its sessions share. Build it with [`PgFrontend::new`], adjust
/// it with the `with_*` methods, and run it with [`serve`].
///
/// ```no_run
/// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
/// use sluice_core::{ConfigHandle, RuntimeConfig, config::Config};
/// use sluice_pgsql::PgFrontend;
/// use sluice_pgsql_backend::PgPool;
/// use std::sync::Arc;
///
/// let config = Config::parse(r#"
/// [[pgsql_servers]]
/// hostgroup_id = 0
/// hostname = "127.0.0.1"
/// port = 5432
/// [[pgsql_users]]
/// username = "app"
/// password = "app"
/// "#)?;
/// let handle = ConfigHandle::new(RuntimeConfig::build(&config));
/// let frontend = Arc::new(PgFrontend::new(handle, PgPool::new(None)));
/// let listeners = sluice_net::bind_all("127.0.0.1:6133", "PostgreSQL clients").await?;
/// sluice_pgsql::serve(frontend, listeners).await;
/// # Ok(()) }
/// ```
pub struct PgFrontend {
    /// Runtime configuration.
    pub(crate) config: ConfigHandle,
    /// Server connection pools.
    pub(crate) pool: Arc<PgPool>,
    /// Logged-in clients, for `max_connections` caps.
    pub(crate) clients: Arc<crate::limits::ClientCounts>,
    /// Answers SSLRequest with TLS when set (`pgsql-have_ssl`).
    pub(crate) tls: Option<Arc<sluice_net::tls::ReloadableAcceptor>>,
    /// Cancelled when Sluice stops.
    pub(crate) shutdown: CancellationToken,
    /// Cancelled when the listeners stop accepting: at shutdown, or earlier when a new process
    /// took the listeners over (`sluice --takeover`) while these sessions drain.
    pub(crate) accepting: CancellationToken,
    /// Session tasks.
    pub(crate) tasks: TaskTracker,
    /// Logged-in sessions by the pid Sluice gave them: cancel requests, `pg_cancel_backend` /
    /// `pg_terminate_backend` with those pids, the notifying session's pid in notifications.
    pub(crate) cancels: Arc<crate::signals::SessionSignals>,
    /// Digests, rule hits and query-processor counters.
    pub(crate) query: Arc<sluice_core::query::QueryProcessorStats>,
    /// The query cache (simple-protocol SELECTs).
    pub(crate) cache: sluice_core::query::QueryCache,
    /// `stats_pgsql_commands_counters`.
    pub(crate) commands: sluice_core::query::commands::CommandCounters,
    /// Logged-in sessions (`stats_pgsql_processlist`).
    pub(crate) sessions: Arc<crate::sessions::PgSessions>,
    /// Statements per (hostgroup, server) and the servers' errors (`stats_pgsql_errors`).
    pub(crate) server_stats: crate::sessions::ServerStats,
    /// The session threads (`pgsql-threads`); `None` runs sessions on the caller's runtime.
    pub(crate) workers: Option<Arc<sluice_net::Workers>>,
    /// Set by the admin's `PROXYSQL PAUSE` (shared with the MySQL frontend): new connections
    /// wait until `RESUME`.
    pub(crate) paused: Arc<std::sync::atomic::AtomicBool>,
    /// The embedding service's statement hook, if any.
    pub(crate) hook: Option<Arc<dyn StatementHook>>,
    /// Clients, logins, statements, transactions, latency per hostgroup, pins.
    pub(crate) stats: sluice_core::metrics::FrontendStats,
    /// Failed logins per client address (`pgsql-client_host_*`).
    pub(crate) login: LoginGate,
    /// Admission control's gates (shared with the MySQL frontend in Sluice).
    pub(crate) admission: Arc<sluice_core::admission::Admission>,
    /// LISTEN/NOTIFY fan-out: the listener connections and their subscribers.
    pub(crate) listen: Arc<crate::listen::ListenHub>,
}

impl PgFrontend {
    /// A frontend serving the users and servers of `config` through `pool`: no TLS, sessions on
    /// the caller's runtime, its own shutdown token and task tracker, no hook.
    pub fn new(config: ConfigHandle, pool: Arc<PgPool>) -> PgFrontend {
        let login = LoginGate::new(Default::default(), config.clone(), Protocol::Pgsql);
        let shutdown = CancellationToken::new();
        PgFrontend {
            login,
            config,
            pool,
            clients: Default::default(),
            tls: None,
            accepting: shutdown.child_token(),
            shutdown,
            tasks: TaskTracker::new(),
            cancels: Default::default(),
            query: Default::default(),
            cache: Default::default(),
            commands: Default::default(),
            sessions: Default::default(),
            server_stats: Default::default(),
            workers: None,
            paused: Default::default(),
            hook: None,
            stats: Default::default(),
            admission: Default::default(),
            listen: Default::default(),
        }
    }

    /// Admits statements through `admission` (by default the frontend has gates of its own;
    /// share one with the MySQL frontend so that one class's limits cover both).
    pub fn with_admission(
        mut self,
        admission: Arc<sluice_core::admission::Admission>,
    ) -> PgFrontend {
        self.admission = admission;
        self
    }

    /// Admission control's gates.
    pub fn admission(&self) -> &Arc<sluice_core::admission::Admission> {
        &self.admission
    }

    /// Shares the failed-login table with other ports of the protocol (the admin's), so an
    /// address guessing passwords on any of them is throttled on all.
    pub fn with_login_throttle(mut self, throttle: Arc<LoginThrottle>) -> PgFrontend {
        self.login = LoginGate::new(throttle, self.config.clone(), Protocol::Pgsql);
        self
    }

    /// The failed-login gate of this port (its table feeds `stats_pgsql_client_host_cache`).
    pub fn login_gate(&self) -> &LoginGate {
        &self.login
    }

    /// Answers SSLRequest with TLS (see [`sluice_net::tls::ReloadableAcceptor`]).
    pub fn with_tls(mut self, tls: Arc<sluice_net::tls::ReloadableAcceptor>) -> PgFrontend {
        self.tls = Some(tls);
        self
    }

    /// The TLS acceptor, for `PROXYSQL RELOAD TLS`.
    pub fn tls(&self) -> Option<&Arc<sluice_net::tls::ReloadableAcceptor>> {
        self.tls.as_ref()
    }

    /// Runs each session on one of `workers`' single-threaded event loops (`pgsql-threads`)
    /// instead of the caller's runtime; each server's `max_connections` is split between them
    /// (see [`PgPool::set_session_threads`]).
    pub fn with_workers(mut self, workers: Arc<sluice_net::Workers>) -> PgFrontend {
        self.pool.set_session_threads(workers.len());
        self.workers = Some(workers);
        self
    }

    /// Stops with `shutdown` and tracks session tasks in `tasks`, so the caller can wait for them.
    pub fn with_shutdown(mut self, shutdown: CancellationToken, tasks: TaskTracker) -> PgFrontend {
        self.accepting = shutdown.child_token();
        self.shutdown = shutdown;
        self.tasks = tasks;
        self
    }

    /// Shares the `PROXYSQL PAUSE` flag with other listeners: while it is set new connections
    /// wait.
    pub fn with_pause(mut self, paused: Arc<std::sync::atomic::AtomicBool>) -> PgFrontend {
        self.paused = paused;
        self
    }

    /// Shows the statement that begins each transaction to `hook` before the query rules (see
    /// [`StatementHook`]).
    pub fn with_hook(mut self, hook: Arc<dyn StatementHook>) -> PgFrontend {
        self.hook = Some(hook);
        self
    }

    /// The runtime configuration the sessions read.
    pub fn config(&self) -> &ConfigHandle {
        &self.config
    }

    /// The server pools.
    pub fn pool(&self) -> &Arc<PgPool> {
        &self.pool
    }

    /// Digests, rule hits and query-processor counters (`stats_pgsql_query_digest`, ...).
    pub fn query_stats(&self) -> &Arc<sluice_core::query::QueryProcessorStats> {
        &self.query
    }

    /// The query cache.
    pub fn cache(&self) -> &sluice_core::query::QueryCache {
        &self.cache
    }

    /// `stats_pgsql_commands_counters`.
    pub fn commands(&self) -> &sluice_core::query::commands::CommandCounters {
        &self.commands
    }

    /// `stats_pgsql_listen_channels`: every channel some session listens to.
    pub fn listen_channels(&self) -> Vec<crate::listen::ListenChannelRow> {
        self.listen.channel_rows()
    }

    /// `stats_pgsql_listeners`: the listener connections.
    pub fn listeners(&self) -> Vec<crate::listen::ListenerRow> {
        self.listen.listener_rows()
    }

    /// Logged-in sessions (`stats_pgsql_processlist`).
    pub fn sessions(&self) -> &Arc<crate::sessions::PgSessions> {
        &self.sessions
    }

    /// Statements and errors per server (`stats_pgsql_connection_pool`, `stats_pgsql_errors`).
    pub fn server_stats(&self) -> &crate::sessions::ServerStats {
        &self.server_stats
    }

    /// Clients, logins, statements, transactions, latency per hostgroup, pins.
    pub fn stats(&self) -> &sluice_core::metrics::FrontendStats {
        &self.stats
    }

    /// Cancelled when the frontend stops.
    pub fn shutdown(&self) -> &CancellationToken {
        &self.shutdown
    }

    /// Cancelling it stops accepting new clients; connected sessions go on until they end or
    /// shutdown (a takeover's drain).
    pub fn stop_accepting_token(&self) -> CancellationToken {
        self.accepting.clone()
    }
}

/// Records which server connection runs the session's statements now (for cancels).
pub(crate) fn set_target(t: &CancelTarget, v: Option<(Arc<str>, u32, u32)>) {
    *lock(t) = v;
}

/// Forwards a client's CancelRequest to the server running its query (no-op otherwise).
pub(crate) async fn cancel(fe: &PgFrontend, pid: u32, secret: u32) {
    let Some((server, bpid, bsecret)) = fe.cancels.cancel_target(pid, secret) else {
        return;
    };
    if sluice_pgsql_backend::send_cancel(&server, bpid, bsecret).await {
        info!(server = %server, "forwarded a client's cancel request");
    }
}

/// Accepts PostgreSQL clients until shutdown, each session on the session thread it is dealt
/// to; new connections wait while `PROXYSQL PAUSE` is in force.
pub async fn serve(fe: Arc<PgFrontend>, listeners: Vec<TcpListener>) {
    let ctl = sluice_net::AcceptControl {
        name: "PostgreSQL",
        shutdown: fe.accepting.clone(),
        paused: Some(fe.paused.clone()),
        tasks: fe.tasks.clone(),
        workers: fe.workers.clone(),
    };
    sluice_net::serve(listeners, ctl, move |tcp, peer, worker| {
        session(fe.clone(), tcp, peer, worker)
    })
    .await;
}

/// Gets a server connection for the session.
pub(crate) async fn checkout(
    fe: &PgFrontend,
    rt: &sluice_core::runtime::RuntimeConfig,
    l: &Login,
    hg: u32,
    session: u64,
    priority: Priority,
) -> Result<PgPooled, PgError> {
    let servers = rt
        .pgsql
        .hostgroups
        .get(&hg)
        .map(Vec::as_slice)
        .unwrap_or(&[]);
    let v = &rt.pgsql.variables;
    let req = PgCheckout {
        hostgroup: hg,
        servers,
        user: &l.user.username,
        secret: &l.secret,
        database: &l.database,
        session: Some(session),
        worker: l.worker,
        connect_timeout: Duration::from_millis(v.connect_timeout_server),
        connect_timeout_max: Duration::from_millis(v.connect_timeout_server_max),
        config: Some(&fe.config),
        priority,
    };
    match fe.pool.try_checkout_idle(&req) {
        Some(c) => Ok(c),
        // Boxed: opening a connection or waiting for a slot is rare next to reusing an idle
        // one, and its retry state would otherwise be part of every step's future, which the
        // session moves into its reused block for every message.
        None => Box::pin(fe.pool.checkout(&req)).await,
    }
}

/// The ErrorResponse a client gets for a failed server connection.
pub(crate) fn error_for(e: &PgError) -> Vec<u8> {
    match e {
        PgError::Server { code, message } => error_response("FATAL", code, message),
        PgError::ConnectTimeout { .. } => error_response("ERROR", "08001", &e.to_string()),
        other => error_response(
            "ERROR",
            "08006",
            &format!("backend connection failed: {other}"),
        ),
    }
}

/// One client connection, from its first bytes to its close; `worker` is the session thread
/// serving it, if any.
async fn session(fe: Arc<PgFrontend>, tcp: TcpStream, peer: SocketAddr, worker: Option<usize>) {
    let mut reader = Reader::default();
    let local = tcp.local_addr().unwrap_or(peer);
    let ends = (peer, local);
    match opening(&fe, tcp, &mut reader).await {
        Opening::Startup(tcp, slice) => {
            // A copy of its own: the slice would keep the reader's whole first buffer alive
            // for the session, so an idle session could not give it back.
            let startup = bytes::Bytes::copy_from_slice(&slice);
            drop(slice);
            run(fe, tcp, reader, &startup, false, ends, worker).await
        }
        Opening::Tls(mut tls) => {
            // The SSLRequest's reader emptied, not a second one beside it: that kept its
            // 16 KiB buffer for the whole session (dhat: an idle TLS client's largest).
            reader = Reader::default();
            match reader.startup(&mut tls).await {
                Ok(slice) if slice.len() >= 8 && slice[4..8] == 196_608u32.to_be_bytes() => {
                    let p = bytes::Bytes::copy_from_slice(&slice);
                    drop(slice);
                    // Boxed: the TLS stream's state is large; plain sessions' tasks stay small.
                    Box::pin(run(fe, *tls, reader, &p, true, ends, worker)).await
                }
                Ok(_) => fail(&mut tls, "08P01", "expected a StartupMessage after TLS").await,
                Err(e) => debug!(client = %peer, "pgsql session ended during startup: {e}"),
            }
        }
        Opening::Done => {}
    }
}

/// Counts a login that did not complete, by its reason (`Access_Denied_*`).
fn count_refusal(stats: &sluice_core::metrics::FrontendStats, e: &crate::Error) {
    use std::sync::atomic::Ordering::Relaxed;
    stats.client_connections_aborted.fetch_add(1, Relaxed);
    let crate::Error::LoginRefused { sqlstate, message } = e else {
        return;
    };
    let counter = match *sqlstate {
        "28P01" => &stats.access_denied_wrong_password,
        "53300" if message.starts_with("too many connections for role") => {
            &stats.access_denied_max_user_connections
        }
        "53300" => &stats.access_denied_max_connections,
        _ => return,
    };
    counter.fetch_add(1, Relaxed);
}

/// Waits the client address's turn when its failed logins throttle it; false (and the client
/// told why) when its queue is full.
async fn admitted<S: AsyncWrite + Unpin>(fe: &PgFrontend, io: &mut S, peer: SocketAddr) -> bool {
    match fe.login.admit(peer.ip()) {
        Admission::Now => true,
        Admission::After(wait) => {
            tokio::time::sleep(wait).await;
            true
        }
        Admission::Refused => {
            fe.stats.client_connections_aborted.fetch_add(1, Relaxed);
            let msg = format!("too many failed logins from {}; retry later", peer.ip());
            fail(io, "28000", &msg).await;
            false
        }
    }
}

/// Counts a login that did not complete; a wrong password also counts against the address
/// (failed-login throttling).
fn login_failed(fe: &PgFrontend, peer: SocketAddr, e: &crate::Error) {
    if matches!(
        e,
        crate::Error::LoginRefused {
            sqlstate: "28P01",
            ..
        }
    ) {
        fe.login.failed(peer.ip(), "PostgreSQL client", e);
    }
    count_refusal(&fe.stats, e);
    debug!(client = %peer, "pgsql login ended: {e}");
}

/// A logged-in session: announce the server's parameters, then pump messages until the end.
async fn run<S: AsyncRead + AsyncWrite + Unpin + Send>(
    fe: Arc<PgFrontend>,
    mut io: S,
    mut reader: Reader,
    startup: &[u8],
    tls: bool,
    (peer, local): (SocketAddr, SocketAddr),
    worker: Option<usize>,
) {
    if !admitted(&fe, &mut io, peer).await {
        return;
    }
    // The login, first checkout and handoff are boxed: their state lives only while they run,
    // so the task an idle session leaves behind is small (memory per idle client).
    let l = match Box::pin(login(&fe, &mut io, &mut reader, startup, tls, peer)).await {
        Ok(mut l) => {
            fe.login.succeeded(peer.ip());
            l.worker = worker;
            l
        }
        Err(e) => {
            login_failed(&fe, peer, &e);
            return;
        }
    };
    fe.stats
        .client_connections_created
        .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    // The cancel key doubles as the session's identity towards the pool (connection owner).
    let (pid, secret, handle) = fe.cancels.register(&l.user.username);
    let key = (u64::from(pid) << 32) | u64::from(secret);
    let vars = SessionVars::new(&l.settings);
    let Some(hello) = Box::pin(server_hello(&fe, &l, key, &vars, peer, &mut io)).await else {
        fe.cancels.remove(pid);
        return;
    };
    if io.write_all(&hello).await.is_ok() {
        info!(client = %peer, user = %l.user.username, database = %l.database, tls, "pgsql client logged in");
        let mut stmts = SessionStatements::new(key);
        let mut qp = SessionProcessor::new(Identity {
            user: l.user.username.clone(),
            database: l.database.clone(),
            client_ip: peer.ip().to_string(),
            local_ip: local.ip().to_string(),
            local_port: local.port(),
        });
        let entry = fe.sessions.enter(crate::sessions::PgSessionInfo {
            id: 0,
            user: l.user.username.clone(),
            database: l.database.clone(),
            client: peer.to_string(),
            hostgroup: l.user.default_hostgroup.0,
            pin_reason: None,
            pinned_since: None,
            waiting: None,
            thread: l.worker,
            listening: Vec::new(),
        });
        let s = SessionIo {
            stmts: &mut stmts,
            qp: &mut qp,
            entry: &entry,
            out: Vec::new(),
        };
        let session = PgSession::new((&fe, &l, &handle), &mut io, &mut reader, s, vars);
        match session.run().await {
            Ok(()) => {}
            Err(crate::Error::Client(
                e @ (sluice_pgsql_proto::Error::Malformed(_)
                | sluice_pgsql_proto::Error::TooLarge(_)),
            )) => {
                // A protocol violation costs this session only: the client is told why.
                warn!(client = %peer, user = %l.user.username, "closing client session: {e}");
                let msg = format!("invalid message from the client: {e}");
                let _ = io.write_all(&error_response("FATAL", "08P01", &msg)).await;
            }
            Err(e) => debug!(client = %peer, "pgsql session ended: {e}"),
        }
    }
    fe.cancels.remove(pid);
}

/// Checks out a server connection with the login's startup settings applied and returns the
/// client's greeting: the server's ParameterStatus values (so clients see what a direct
/// connection shows), BackendKeyData and ReadyForQuery. `None` when the client has been told why
/// not (no server, or the server refused a startup parameter).
async fn server_hello<S: AsyncWrite + Unpin>(
    fe: &PgFrontend,
    l: &Login,
    key: u64,
    vars: &SessionVars,
    peer: SocketAddr,
    io: &mut S,
) -> Option<Vec<u8>> {
    let rt = fe.config.load();
    let mut first = match Box::pin(checkout(
        fe,
        &rt,
        l,
        l.user.default_hostgroup.0,
        key,
        Priority::Regular,
    ))
    .await
    {
        Ok(c) => c,
        Err(e) => {
            warn!(client = %peer, user = %l.user.username, "no PostgreSQL backend for the login: {e}");
            let _ = io.write_all(&error_for(&e)).await;
            return None;
        }
    };
    let reported = match Box::pin(crate::handoff::at_login(
        first.conn(),
        key,
        vars.want(),
        &fe.cancels,
    ))
    .await
    {
        Ok(r) => r,
        Err(e) => {
            // The server refused a startup parameter: the client gets the server's error at
            // login, as from a direct connection. The connection is closed (state unknown).
            info!(client = %peer, user = %l.user.username, "pgsql login refused: a startup parameter failed on the server: {e}");
            let out = match &e {
                PgError::Server { code, message } => error_response("FATAL", code, message),
                other => error_for(other),
            };
            let _ = io.write_all(&out).await;
            return None;
        }
    };
    let mut hello = Vec::new();
    for (k, v) in crate::handoff::login_parameters(&first.conn().params, reported) {
        hello.extend(parameter_status(&k, &v));
    }
    hello.extend(message(b'K', &key.to_be_bytes()));
    hello.extend(ready(b'I'));
    first.release_clean();
    Some(hello)
}

#[cfg(test)]
mod task_size {
    use super::*;
    use sluice_core::config::Config;
    use sluice_core::{ConfigHandle, RuntimeConfig};

    /// Every client holds its session task for as long as it is connected, idle or not: the
    /// task is the size of its largest state, so the login, each message's handling and the
    /// TLS stream are boxed and live only while they run. Was 10.4 KiB before.
    #[tokio::test]
    async fn an_idle_session_task_stays_small() {
        let cfg = Config::parse("").expect("an empty config is valid");
        let fe = Arc::new(PgFrontend::new(
            ConfigHandle::new(RuntimeConfig::build(&cfg)),
            sluice_pgsql_backend::PgPool::new(None),
        ));
        let l = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = l.local_addr().expect("addr");
        let tcp = TcpStream::connect(addr).await.expect("connect");
        let task = session(fe, tcp, addr, None);
        let size = std::mem::size_of_val(&task);
        assert!(
            size <= 6 * 1024,
            "a PostgreSQL session task takes {size} bytes"
        );
    }
}

//! Accepting MySQL clients: one task per connection, the global connection cap, graceful stop.

use crate::handshake::connection_phase;
use crate::registry::SessionRegistry;
use crate::session::Session;
use sluice_core::ConfigHandle;
use sluice_core::login_throttle::Admission;
use sluice_core::query::StatementHook;
use sluice_mysql_backend::MysqlPool;
use sluice_mysql_proto::framing::packet;
use sluice_mysql_proto::packets::err_payload;
use std::sync::Arc;
use std::sync::atomic::Ordering::Relaxed;
use std::time::Duration;
use tokio::io::AsyncWriteExt;
use tokio::net::{TcpListener, TcpStream};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tracing::{debug, info, warn};

/// The MySQL data port: what its sessions share. Build it with [`MysqlFrontend::builder`] and
/// run it with [`serve`].
///
/// ```no_run
/// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
/// use sluice_core::{ConfigHandle, RuntimeConfig, config::Config};
/// use sluice_mysql::MysqlFrontend;
/// use sluice_mysql_backend::MysqlPool;
/// use std::sync::Arc;
///
/// let config = Config::parse(r#"
/// [[mysql_servers]]
/// hostgroup_id = 0
/// hostname = "127.0.0.1"
/// port = 3306
/// [[mysql_users]]
/// username = "app"
/// password = "app"
/// "#)?;
/// let handle = ConfigHandle::new(RuntimeConfig::build(&config));
/// let frontend = MysqlFrontend::builder(handle, MysqlPool::new(None)).build();
/// let listeners = sluice_net::bind_all("127.0.0.1:6033", "MySQL clients").await?;
/// sluice_mysql::serve(frontend, listeners)
///     .with_graceful_shutdown(async { tokio::signal::ctrl_c().await.unwrap_or(()) })
///     .await;
/// # Ok(()) }
/// ```
pub struct MysqlFrontend {
    /// The runtime config.
    pub(crate) config: ConfigHandle,
    /// Backend connection pools.
    pub(crate) pool: Arc<MysqlPool>,
    /// TLS for clients that ask for it (`mysql-have_ssl`).
    pub(crate) tls: Option<Arc<sluice_net::tls::ReloadableAcceptor>>,
    /// Connected clients.
    pub(crate) registry: Arc<SessionRegistry>,
    /// Cancelled when Sluice stops: listeners stop accepting, idle sessions close.
    pub(crate) shutdown: CancellationToken,
    /// Cancelled when the listeners stop accepting: at shutdown, or earlier when a new process
    /// took the listeners over (`sluice --takeover`) while these sessions drain.
    pub(crate) accepting: CancellationToken,
    /// Every session task, so shutdown can wait for them.
    pub(crate) tasks: TaskTracker,
    /// The global prepared-statement registry.
    pub(crate) statements: Arc<crate::stmt_registry::StmtRegistry>,
    /// Counters for the admin views.
    pub(crate) counters: Arc<FrontendCounters>,
    /// Statement shapes digested lately, one cache per thread (see `sluice_query::ShapeCache`).
    pub(crate) shapes: sluice_core::query::SharedShapes,
    /// Set by the admin's `PROXYSQL PAUSE`: new connections wait until `RESUME`.
    pub(crate) paused: Arc<std::sync::atomic::AtomicBool>,
    /// The embedding service's statement hook, if any.
    pub(crate) hook: Option<Arc<dyn StatementHook>>,
    /// Failed logins per client address (`mysql-client_host_*`).
    pub(crate) login: sluice_core::login_throttle::LoginGate,
    /// The event-loop threads sessions run on (`mysql-threads`); `None` runs them on the
    /// runtime that accepts.
    pub(crate) workers: Option<Arc<sluice_net::Workers>>,
    /// Admission control's gates (shared with the PostgreSQL frontend in Sluice).
    pub(crate) admission: Arc<sluice_core::admission::Admission>,
}

impl MysqlFrontend {
    /// A builder for a frontend serving the users and servers of `config` through `pool`; as
    /// built without more: no TLS, its own shutdown token and task tracker, a prepared-statement
    /// registry sized by `mysql-max_stmts_cache`, sessions on the runtime that accepts, no hook.
    pub fn builder(config: ConfigHandle, pool: Arc<MysqlPool>) -> MysqlFrontendBuilder {
        let max_stmts = config.load().mysql.variables.max_stmts_cache as usize;
        let login = sluice_core::login_throttle::LoginGate::new(
            Default::default(),
            config.clone(),
            sluice_core::Protocol::Mysql,
        );
        let shutdown = CancellationToken::new();
        MysqlFrontendBuilder(MysqlFrontend {
            login,
            config,
            pool,
            tls: None,
            registry: SessionRegistry::new(),
            accepting: shutdown.child_token(),
            shutdown,
            tasks: TaskTracker::new(),
            statements: crate::stmt_registry::StmtRegistry::new(max_stmts),
            counters: Default::default(),
            shapes: Default::default(),
            paused: Default::default(),
            hook: None,
            workers: None,
            admission: Default::default(),
        })
    }

    /// The TLS acceptor, for `PROXYSQL RELOAD TLS`.
    pub fn tls(&self) -> Option<&Arc<sluice_net::tls::ReloadableAcceptor>> {
        self.tls.as_ref()
    }

    /// The failed-login gate of this port (its table feeds `stats_mysql_client_host_cache`).
    pub fn login_gate(&self) -> &sluice_core::login_throttle::LoginGate {
        &self.login
    }

    /// Admission control's gates.
    pub fn admission(&self) -> &Arc<sluice_core::admission::Admission> {
        &self.admission
    }

    /// The runtime configuration the sessions read.
    pub fn config(&self) -> &ConfigHandle {
        &self.config
    }

    /// The backend pools.
    pub fn pool(&self) -> &Arc<MysqlPool> {
        &self.pool
    }

    /// Connected clients (`stats_mysql_processlist`, `KILL`).
    pub fn registry(&self) -> &Arc<SessionRegistry> {
        &self.registry
    }

    /// Prepared statements shared by all sessions (`stats_mysql_prepared_statements_info`).
    pub fn statements(&self) -> &crate::stmt_registry::StmtRegistry {
        &self.statements
    }

    /// Counters for the admin's stats tables.
    pub fn counters(&self) -> &FrontendCounters {
        &self.counters
    }

    /// The `PROXYSQL PAUSE` flag.
    pub fn paused(&self) -> &Arc<std::sync::atomic::AtomicBool> {
        &self.paused
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

/// Builds a [`MysqlFrontend`] (from [`MysqlFrontend::builder`]).
#[must_use = "a builder does nothing until built"]
pub struct MysqlFrontendBuilder(MysqlFrontend);

impl MysqlFrontendBuilder {
    /// Runs each session on one of `workers`' single-threaded event loops (`mysql-threads`,
    /// ProxySQL's worker threads) instead of the caller's runtime.
    pub fn workers(mut self, workers: Arc<sluice_net::Workers>) -> Self {
        self.0.workers = Some(workers);
        self
    }

    /// Offers TLS to clients that ask for it (see [`sluice_net::tls::ReloadableAcceptor`];
    /// `ReloadableAcceptor::fixed` wraps an acceptor built elsewhere).
    pub fn tls(mut self, tls: Arc<sluice_net::tls::ReloadableAcceptor>) -> Self {
        self.0.tls = Some(tls);
        self
    }

    /// Stops with `shutdown` (listeners stop accepting, idle sessions close) and tracks session
    /// tasks in `tasks`, so the caller can wait for them.
    pub fn shutdown(mut self, shutdown: CancellationToken, tasks: TaskTracker) -> Self {
        self.0.accepting = shutdown.child_token();
        self.0.shutdown = shutdown;
        self.0.tasks = tasks;
        self
    }

    /// Shares the failed-login table with other ports of the protocol (the admin's), so an
    /// address guessing passwords on any of them is throttled on all.
    pub fn login_throttle(
        mut self,
        throttle: Arc<sluice_core::login_throttle::LoginThrottle>,
    ) -> Self {
        self.0.login = sluice_core::login_throttle::LoginGate::new(
            throttle,
            self.0.config.clone(),
            sluice_core::Protocol::Mysql,
        );
        self
    }

    /// Shares the `PROXYSQL PAUSE` flag with other listeners: while it is set new connections
    /// wait.
    pub fn pause(mut self, paused: Arc<std::sync::atomic::AtomicBool>) -> Self {
        self.0.paused = paused;
        self
    }

    /// Admits statements through `admission` (by default the frontend has gates of its own;
    /// share one with the PostgreSQL frontend so that one class's limits cover both).
    pub fn admission(mut self, admission: Arc<sluice_core::admission::Admission>) -> Self {
        self.0.admission = admission;
        self
    }

    /// Shows every `COM_QUERY` to `hook` before the query rules (see [`StatementHook`]).
    pub fn hook(mut self, hook: Arc<dyn StatementHook>) -> Self {
        self.0.hook = Some(hook);
        self
    }

    /// The frontend, ready for [`serve`].
    pub fn build(self) -> Arc<MysqlFrontend> {
        Arc::new(self.0)
    }
}

/// Counters kept by the MySQL frontend.
#[derive(Debug, Default)]
pub struct FrontendCounters {
    /// SET statements Sluice could not parse (each pinned its session).
    pub unparsed_set: std::sync::atomic::AtomicU64,
    /// Per-command counts and latencies, backend errors.
    pub commands: crate::counters::CommandCounters,
    /// Digests, rule hits and query-processor counters.
    pub query: sluice_core::query::QueryProcessorStats,
    /// The query cache.
    pub cache: sluice_core::query::QueryCache,
    /// Clients, logins, statements, transactions, latency per hostgroup, pins.
    pub stats: sluice_core::metrics::FrontendStats,
    /// Mirror copies running now (bounded).
    pub mirrors_in_flight: std::sync::atomic::AtomicUsize,
}

/// Accepts clients on `listeners`; new connections wait while `PROXYSQL PAUSE` is in force.
/// Awaited, it serves until the frontend's shutdown; `.with_graceful_shutdown(signal)` also
/// stops on `signal` and waits for the sessions to end (see [`sluice_net::Serve`]).
pub fn serve(
    fe: Arc<MysqlFrontend>,
    listeners: Vec<TcpListener>,
) -> sluice_net::Serve<impl Future<Output = ()> + Send + 'static> {
    let ctl = sluice_net::AcceptControl {
        name: "MySQL",
        shutdown: fe.accepting.clone(),
        paused: Some(fe.paused.clone()),
        tasks: fe.tasks.clone(),
        workers: fe.workers.clone(),
    };
    let (shutdown, tasks) = (fe.shutdown.clone(), fe.tasks.clone());
    let registry = fe.registry.clone();
    let accepting = sluice_net::serve(listeners, ctl, move |tcp, peer, worker| {
        handle(fe.clone(), tcp, peer, worker)
    });
    let serving = sluice_net::with_shutdown_fanned_out(accepting, (&shutdown, &tasks), move || {
        registry.shut_down_all()
    });
    sluice_net::Serve::new(serving, shutdown, tasks)
}

/// True when the client went away before logging in without a word — closed or reset the
/// connection: what TCP health checks of load balancers do every second, not worth a warning.
pub(crate) fn left_silently(e: &crate::Error) -> bool {
    use std::io::ErrorKind::{BrokenPipe, ConnectionAborted, ConnectionReset, UnexpectedEof};
    match e {
        crate::Error::Protocol(sluice_mysql_proto::Error::Closed) => true,
        crate::Error::Protocol(sluice_mysql_proto::Error::Io(io)) => matches!(
            io.kind(),
            ConnectionReset | ConnectionAborted | BrokenPipe | UnexpectedEof
        ),
        _ => false,
    }
}

/// Counts a refused login by its reason (`Access_Denied_*`).
fn count_refusal(stats: &sluice_core::metrics::FrontendStats, e: &crate::Error) {
    let counter = match e {
        crate::Error::AccessDenied { .. } => &stats.access_denied_wrong_password,
        crate::Error::TooManyConnections => &stats.access_denied_max_user_connections,
        _ => return,
    };
    counter.fetch_add(1, Relaxed);
}

/// One client connection, from its first bytes to its close; `worker` is the session thread
/// it runs on (`None` without `mysql-threads` workers).
async fn handle(
    fe: Arc<MysqlFrontend>,
    mut tcp: TcpStream,
    peer: std::net::SocketAddr,
    worker: Option<usize>,
) {
    let rt = fe.config.load();
    let vars = &rt.mysql.variables;
    // Before taking a place: a throttled address's queued attempts hold no client slot.
    match fe.login.admit(peer.ip()) {
        Admission::Now => {}
        Admission::After(wait) => tokio::time::sleep(wait).await,
        Admission::Refused => {
            fe.counters
                .stats
                .client_connections_aborted
                .fetch_add(1, Relaxed);
            let msg = format!(
                "Host '{}' is blocked because of many connection errors; retry later",
                peer.ip()
            );
            let _ = tcp
                .write_all(&packet(0, &err_payload(1129, "HY000", &msg)))
                .await;
            return;
        }
    }
    let id = fe.registry.next_id();
    let Some(mut slot) = fe
        .registry
        .enter(vars.max_connections, id, &peer.to_string())
    else {
        let stats = &fe.counters.stats;
        stats.access_denied_max_connections.fetch_add(1, Relaxed);
        stats.client_connections_aborted.fetch_add(1, Relaxed);
        warn!(client = %peer, max = vars.max_connections, "refusing client: mysql-max_connections reached");
        let _ = tcp
            .write_all(&packet(
                0,
                &err_payload(1040, "08004", "Too many connections"),
            ))
            .await;
        return;
    };
    slot.set_thread(worker);
    let timeout = Duration::from_millis(vars.connect_timeout_client);
    // The acceptor of this moment: a TLS reload affects later handshakes only.
    let acceptor = fe.tls.as_ref().map(|t| t.current());
    // Boxed: the handshake's state lives only while it runs; the session task that stays
    // behind for an idle client is small (memory per idle client).
    let phase = tokio::time::timeout(
        timeout,
        Box::pin(connection_phase(
            tcp,
            peer,
            &rt,
            acceptor.as_deref(),
            id,
            &mut slot,
        )),
    )
    .await;
    let stats = &fe.counters.stats;
    let (io, mut login) = match phase {
        Ok(Ok(v)) => {
            stats.client_connections_created.fetch_add(1, Relaxed);
            fe.login.succeeded(peer.ip());
            v
        }
        Ok(Err(e)) if left_silently(&e) => {
            stats.client_connections_aborted.fetch_add(1, Relaxed);
            // TCP health checks connect and close without a word; not worth a warning.
            debug!(session = id, client = %peer, "client closed the connection before logging in");
            return;
        }
        Ok(Err(e)) => {
            stats.client_connections_aborted.fetch_add(1, Relaxed);
            count_refusal(stats, &e);
            if matches!(e, crate::Error::AccessDenied { .. }) {
                fe.login.failed(peer.ip(), "MySQL client", &e);
            } else {
                warn!(session = id, client = %peer, "client login failed: {e}");
            }
            return;
        }
        Err(_) => {
            stats.client_connections_aborted.fetch_add(1, Relaxed);
            warn!(session = id, client = %peer, "client did not complete the handshake within mysql-connect_timeout_client ({}ms)", timeout.as_millis());
            return;
        }
    };
    info!(session = id, user = %login.user.username, client = %peer, tls = io.stream.get_ref().is_tls(), compressed = io.stream.is_compressed(), schema = %login.schema, "client logged in");
    drop(rt);
    login.worker = worker;
    Box::new(Session::new(id, io, login, fe, slot)).run().await;
}

#[cfg(test)]
mod task_size {
    use super::*;
    use sluice_core::config::Config;
    use sluice_core::{ConfigHandle, RuntimeConfig};

    /// Every client holds its session task for as long as it is connected, idle or not: the
    /// task is the size of its largest state, so the handshake and each command's handling are
    /// boxed and live only while they run, and the session runs boxed. Was 10.4 KiB before, 3,048
    /// bytes (debug build) before the session was boxed by its caller.
    #[tokio::test]
    async fn an_idle_session_task_stays_small() {
        let cfg = Config::parse("").expect("an empty config is valid");
        let fe = MysqlFrontend::builder(
            ConfigHandle::new(RuntimeConfig::build(&cfg)),
            sluice_mysql_backend::MysqlPool::new(None),
        )
        .build();
        let l = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = l.local_addr().expect("addr");
        let tcp = TcpStream::connect(addr).await.expect("connect");
        let task = handle(fe, tcp, addr, None);
        let size = std::mem::size_of_val(&task);
        assert!(size <= 2048, "a MySQL session task takes {size} bytes");
    }
}

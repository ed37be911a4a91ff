//! The PostgreSQL data port's shared state, [`PgFrontend`], and its builder methods. The accept
//! side is `listener.rs`, the login `login/`, a logged-in client's session `session/`.

use sluice_core::ConfigHandle;
use sluice_core::Protocol;
use sluice_core::login_throttle::{LoginGate, LoginThrottle};
use sluice_core::query::StatementHook;
use sluice_pgsql_backend::PgPool;
use std::sync::Arc;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

/// The PostgreSQL data port: what its sessions share. Build it with [`PgFrontend::builder`] and
/// run it with [`serve`](crate::serve).
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
/// let frontend = PgFrontend::builder(handle, PgPool::new(None)).build();
/// let listeners = sluice_net::bind_all("127.0.0.1:6133", "PostgreSQL clients").await?;
/// sluice_pgsql::serve(frontend, listeners)
///     .with_graceful_shutdown(async { tokio::signal::ctrl_c().await.unwrap_or(()) })
///     .await;
/// # Ok(()) }
/// ```
pub struct PgFrontend {
    /// Runtime configuration.
    pub(crate) config: ConfigHandle,
    /// Server connection pools.
    pub(crate) pool: Arc<PgPool>,
    /// Logged-in clients, for `max_connections` caps.
    pub(crate) clients: Arc<crate::login::limits::ClientCounts>,
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
    pub(crate) cancels: Arc<crate::pids::SessionSignals>,
    /// Digests, rule hits and query-processor counters.
    pub(crate) query: Arc<sluice_core::query::QueryProcessorStats>,
    /// The query cache (simple-protocol SELECTs).
    pub(crate) cache: sluice_core::query::QueryCache,
    /// Statement shapes digested lately, one cache per thread (see `sluice_query::ShapeCache`).
    pub(crate) shapes: sluice_core::query::SharedShapes,
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
    /// A builder for a frontend serving the users and servers of `config` through `pool`; as
    /// built without more: no TLS, sessions on the caller's runtime, its own shutdown token and
    /// task tracker, no hook.
    pub fn builder(config: ConfigHandle, pool: Arc<PgPool>) -> PgFrontendBuilder {
        let login = LoginGate::new(Default::default(), config.clone(), Protocol::Pgsql);
        let shutdown = CancellationToken::new();
        PgFrontendBuilder(PgFrontend {
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
            shapes: Default::default(),
            commands: Default::default(),
            sessions: Default::default(),
            server_stats: Default::default(),
            workers: None,
            paused: Default::default(),
            hook: None,
            stats: Default::default(),
            admission: Default::default(),
            listen: Default::default(),
        })
    }

    /// Admission control's gates.
    pub fn admission(&self) -> &Arc<sluice_core::admission::Admission> {
        &self.admission
    }

    /// The failed-login gate of this port (its table feeds `stats_pgsql_client_host_cache`).
    pub fn login_gate(&self) -> &LoginGate {
        &self.login
    }

    /// The TLS acceptor, for `PROXYSQL RELOAD TLS`.
    pub fn tls(&self) -> Option<&Arc<sluice_net::tls::ReloadableAcceptor>> {
        self.tls.as_ref()
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

/// Builds a [`PgFrontend`] (from [`PgFrontend::builder`]).
#[must_use = "a builder does nothing until built"]
pub struct PgFrontendBuilder(PgFrontend);

impl PgFrontendBuilder {
    /// Admits statements through `admission` (by default the frontend has gates of its own;
    /// share one with the MySQL frontend so that one class's limits cover both).
    pub fn admission(mut self, admission: Arc<sluice_core::admission::Admission>) -> Self {
        self.0.admission = admission;
        self
    }

    /// Shares the failed-login table with other ports of the protocol (the admin's), so an
    /// address guessing passwords on any of them is throttled on all.
    pub fn login_throttle(mut self, throttle: Arc<LoginThrottle>) -> Self {
        self.0.login = LoginGate::new(throttle, self.0.config.clone(), Protocol::Pgsql);
        self
    }

    /// Answers SSLRequest with TLS (see [`sluice_net::tls::ReloadableAcceptor`]).
    pub fn tls(mut self, tls: Arc<sluice_net::tls::ReloadableAcceptor>) -> Self {
        self.0.tls = Some(tls);
        self
    }

    /// Runs each session on one of `workers`' single-threaded event loops (`pgsql-threads`)
    /// instead of the caller's runtime; each server's `max_connections` is split between them
    /// (see [`PgPool::set_session_threads`]).
    pub fn workers(mut self, workers: Arc<sluice_net::Workers>) -> Self {
        self.0.pool.set_session_threads(workers.len());
        self.0.workers = Some(workers);
        self
    }

    /// Stops with `shutdown` and tracks session tasks in `tasks`, so the caller can wait for them.
    pub fn shutdown(mut self, shutdown: CancellationToken, tasks: TaskTracker) -> Self {
        self.0.accepting = shutdown.child_token();
        self.0.shutdown = shutdown;
        self.0.tasks = tasks;
        self
    }

    /// Shares the `PROXYSQL PAUSE` flag with other listeners: while it is set new connections
    /// wait.
    pub fn pause(mut self, paused: Arc<std::sync::atomic::AtomicBool>) -> Self {
        self.0.paused = paused;
        self
    }

    /// Shows the statement that begins each transaction to `hook` before the query rules (see
    /// [`StatementHook`]).
    pub fn hook(mut self, hook: Arc<dyn StatementHook>) -> Self {
        self.0.hook = Some(hook);
        self
    }

    /// The frontend, ready for [`serve`](crate::serve).
    pub fn build(self) -> Arc<PgFrontend> {
        Arc::new(self.0)
    }
}

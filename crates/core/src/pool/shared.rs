//! What every pool keeps beside its idle connections, and the one path a new server
//! connection is opened on.

use super::PoolOptions;
use crate::Protocol;
use crate::kill_registry::{Kill, KillRegistry};
use crate::metrics::{PoolStats, ServerTraffic, TrafficRegistry};
use crate::runtime::{HostgroupServer, ServerKey};
use std::fmt::Display;
use std::future::Future;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};
use tracing::{debug, warn};

/// Called by the pools after each connect attempt: the server and whether it worked (the
/// monitor's error shunning, and its lifting when a shunned server answers again).
#[derive(Clone)]
pub struct ConnectErrorHook(pub Arc<ConnectOutcomeFn>);

/// The function behind a [`ConnectErrorHook`]: (server, connected?).
pub type ConnectOutcomeFn = dyn Fn(&ServerKey, bool) + Send + Sync;

impl std::fmt::Debug for ConnectErrorHook {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ConnectErrorHook")
    }
}

/// A server connection as the pool core handles it.
pub trait ServerConnection {
    /// What ends the connection from outside (shutting its socket down).
    type KillHandle: Kill;

    /// The connection's kill handle, registered when it is opened.
    fn kill_handle(&self) -> &Arc<Self::KillHandle>;

    /// The server's id for the connection (MySQL's thread id, PostgreSQL's backend pid).
    fn backend_id(&self) -> u64;

    /// Settles a new connection in: the counters of its server's traffic and the session
    /// thread it was opened on.
    fn settle(&mut self, traffic: Arc<ServerTraffic>, home: Option<usize>);
}

/// A connect error as the pool core reads it.
pub trait ConnectFailure: Display {
    /// Whether another attempt (on this server or another) may succeed; a refused login or a
    /// TLS misconfiguration would fail the same way everywhere.
    fn is_retryable(&self) -> bool;
}

/// A pool's bookkeeping besides its idle connections: the hook the monitor listens on, every
/// open connection's kill handle, the checkout counters and the traffic per server.
#[derive(Debug)]
pub struct PoolShared<H> {
    protocol: Protocol,
    connect_errors: OnceLock<ConnectErrorHook>,
    sockets: KillRegistry<H>,
    stats: PoolStats,
    traffic: TrafficRegistry,
}

impl<H: Kill> PoolShared<H> {
    /// Empty bookkeeping for `protocol`'s pool.
    pub fn new(protocol: Protocol) -> Self {
        PoolShared {
            protocol,
            connect_errors: OnceLock::new(),
            sockets: KillRegistry::default(),
            stats: PoolStats::default(),
            traffic: TrafficRegistry::default(),
        }
    }

    /// Installs the hook told about failed connects (once; later calls are ignored).
    pub fn on_connect_error(&self, hook: ConnectErrorHook) {
        let _ = self.connect_errors.set(hook);
    }

    /// Kills every connection to `server`, idle or busy, by shutting its socket down: a query
    /// in flight ends with an error instead of waiting on a server that stopped answering.
    /// Returns how many were killed.
    pub fn kill_server(&self, server: &ServerKey) -> usize {
        self.sockets.kill_server(server, self.protocol.name())
    }

    /// Connections opened and refused, checkouts and their waits (`proxysql_connpool_*`).
    pub fn stats(&self) -> &PoolStats {
        &self.stats
    }

    /// Statements and bytes per (hostgroup, server) (`stats_*_connection_pool`).
    pub fn traffic(&self) -> &TrafficRegistry {
        &self.traffic
    }

    /// Opens a connection to `server` for `hostgroup` with `dial`, given the time one attempt
    /// may take (`connect_timeout`, cut to what is left before `deadline`). The connection is
    /// counted, registered for killing and settled on the asking session thread; a failure is
    /// counted and logged, and a retryable one is told to the monitor's hook.
    pub async fn open<C, E, F>(
        &self,
        server: &HostgroupServer,
        hostgroup: u32,
        opts: &PoolOptions<'_>,
        deadline: Instant,
        dial: impl FnOnce(Duration) -> F,
    ) -> Result<C, E>
    where
        C: ServerConnection<KillHandle = H>,
        E: ConnectFailure,
        F: Future<Output = Result<C, E>>,
    {
        let timeout = opts
            .connect_timeout
            .min(deadline.saturating_duration_since(Instant::now()))
            .max(Duration::from_millis(1));
        let protocol = self.protocol.name();
        let server_name = server.key.to_string();
        // Boxed: opening a connection is rare next to the statements that reuse one, and the
        // login's state (TLS included) would otherwise be part of every step's future, which
        // a session moves into its reused block for every message.
        match Box::pin(dial(timeout)).await {
            Ok(mut conn) => {
                let traffic = self.traffic.count_connect(hostgroup, &server_name, true);
                conn.settle(traffic, opts.worker);
                debug!(protocol, server = %server.key, hostgroup, backend_id = conn.backend_id(), session_thread = ?opts.worker, "opened backend connection");
                self.sockets.register(&server.key, conn.kill_handle());
                self.connect_outcome(&server.key, true);
                Ok(conn)
            }
            Err(e) => {
                self.traffic.count_connect(hostgroup, &server_name, false);
                if e.is_retryable() {
                    warn!(protocol, server = %server.key, hostgroup, "error connecting to backend: {e}; trying again");
                    self.connect_outcome(&server.key, false);
                } else {
                    warn!(protocol, server = %server.key, hostgroup, "backend refused the login: {e}");
                }
                Err(e)
            }
        }
    }

    /// Counts a connect and tells the monitor's hook how it went.
    fn connect_outcome(&self, server: &ServerKey, ok: bool) {
        let counter = if ok {
            &self.stats.connections_created
        } else {
            &self.stats.connections_aborted
        };
        counter.fetch_add(1, Relaxed);
        if let Some(h) = self.connect_errors.get() {
            (h.0)(server, ok);
        }
    }
}

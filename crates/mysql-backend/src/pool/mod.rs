//! Backend connection pools: idle connections per (hostgroup, server, user, capability class,
//! collation, TLS), a per-(hostgroup, server) count of open connections checked against
//! `max_connections`, the connect-retry loop bounded by `connect_timeout_server_max`
//! ([`checkout`]), and a first-come-first-served queue of sessions waiting for a connection
//! when every server is at `max_connections` ([`handoff`]).

mod checkout;
mod handoff;

use crate::conn::{BackendConn, BackendSecret, REPLY_SHAPING_CAPS};
use crate::stream::KillHandle;
use hashbrown::{Equivalent, HashMap};
use sluice_core::Protocol;
use sluice_core::live::FreeConnection;
use sluice_core::metrics::{PoolStats, ServerTraffic, TrafficRegistry};
use sluice_core::pool::{
    BorrowedKey, ConnectFailure, IdleConnection, IdleLists, PoolOptions, PoolShared,
    ServerConnection,
};
use sluice_core::runtime::{HostgroupServer, ServerKey};
use sluice_core::util::lock;
use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use tracing::debug;

/// Which idle connections can serve a client: same server, user and reply-shaping settings.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct PoolKey {
    /// Hostgroup the connection was opened for.
    pub hostgroup: u32,
    /// The server the connection is open to.
    pub server: ServerKey,
    /// The account the connection is logged in as; connections are never shared across accounts.
    pub user: String,
    /// Reply-shaping capability bits.
    pub caps: u64,
    /// The connection's character set (collation id): replies are encoded in it, so it is part of
    /// the key.
    pub charset: u8,
    /// Whether the connection runs over TLS (`use_ssl` of the server row).
    pub tls: bool,
}

/// A [`PoolKey`] made of borrowed parts: it hashes and compares as the owned key (the field
/// order and types match, `&str` hashes as `String`), so finding a pool clones no strings.
#[derive(Hash)]
struct PoolKeyRef<'a> {
    hostgroup: u32,
    server: &'a ServerKey,
    user: &'a str,
    caps: u64,
    charset: u8,
    tls: bool,
}

impl Equivalent<Arc<PoolKey>> for PoolKeyRef<'_> {
    fn equivalent(&self, k: &Arc<PoolKey>) -> bool {
        self.hostgroup == k.hostgroup
            && *self.server == k.server
            && self.user == k.user
            && self.caps == k.caps
            && self.charset == k.charset
            && self.tls == k.tls
    }
}

impl BorrowedKey<PoolKey> for PoolKeyRef<'_> {
    fn to_key(&self) -> PoolKey {
        PoolKey {
            hostgroup: self.hostgroup,
            server: self.server.clone(),
            user: self.user.to_string(),
            caps: self.caps,
            charset: self.charset,
            tls: self.tls,
        }
    }
}

/// `(hostgroup, &server)` for looking up the open-connection counts without cloning the server.
#[derive(Hash)]
struct ServerSlot<'a>(u32, &'a ServerKey);

impl Equivalent<(u32, ServerKey)> for ServerSlot<'_> {
    fn equivalent(&self, k: &(u32, ServerKey)) -> bool {
        self.0 == k.0 && *self.1 == k.1
    }
}

#[derive(Debug, Default)]
struct Inner {
    idle: IdleLists<PoolKey, BackendConn>,
    open: HashMap<(u32, ServerKey), u32>,
    waiters: VecDeque<handoff::Waiter>,
}

impl Inner {
    /// Open connections to `server` in `hostgroup` (idle and in use).
    fn open_count(&self, hostgroup: u32, server: &ServerKey) -> u32 {
        self.open
            .get(&ServerSlot(hostgroup, server))
            .copied()
            .unwrap_or(0)
    }

    /// The open-connection count of `server` in `hostgroup`, when there is one.
    fn open_mut(&mut self, hostgroup: u32, server: &ServerKey) -> Option<&mut u32> {
        self.open.get_mut(&ServerSlot(hostgroup, server))
    }
}

/// All backend pools of the process.
#[derive(Debug)]
pub struct MysqlPool {
    inner: Mutex<Inner>,
    tls: Option<Arc<sluice_net::client_tls::TlsSource>>,
    /// The connect hook, kill registry and counters.
    shared: PoolShared<KillHandle>,
    /// When a client's `SET GLOBAL` last changed a server's defaults: connections opened before
    /// carry the old values in their session and are closed instead of pooled again, so a
    /// client that comes later sees the new defaults, as on a direct connection.
    globals_changed: Mutex<HashMap<ServerKey, std::time::Instant>>,
    /// True once any server's globals changed (the common case checks nothing else).
    any_globals_changed: std::sync::atomic::AtomicBool,
}

/// What a session asks for.
#[derive(Debug, Clone)]
pub struct CheckoutRequest<'a> {
    /// The hostgroup to take a connection from.
    pub hostgroup: u32,
    /// Its servers (from the runtime snapshot).
    pub servers: &'a [HostgroupServer],
    /// The account to log in to servers as.
    pub user: &'a str,
    /// Backend password material.
    pub secret: &'a BackendSecret,
    /// Client collation id.
    pub charset: u8,
    /// Client capabilities (only the bits that shape replies, e.g. `CLIENT_DEPRECATE_EOF`, matter).
    pub client_caps: u64,
    /// Largest packet accepted from the server.
    pub max_packet: usize,
    /// Timeouts (`mysql-connect_timeout_server`, `…_max`), `mysql-connect_retries_delay`, the
    /// session thread (an idle connection opened on it is taken before one of another thread,
    /// whose poll would have to wake that thread for every reply), the priority (waiting
    /// sessions are served by it when every server is at `max_connections`) and the failover
    /// re-read.
    pub options: PoolOptions<'a>,
}

impl CheckoutRequest<'_> {
    /// The pool of this request on server `s`, borrowed (for lookups).
    fn key_ref<'s>(&'s self, s: &'s HostgroupServer) -> PoolKeyRef<'s> {
        PoolKeyRef {
            hostgroup: self.hostgroup,
            server: &s.key,
            user: self.user,
            caps: self.client_caps & REPLY_SHAPING_CAPS,
            charset: self.charset,
            tls: s.use_ssl,
        }
    }
}

/// Open/idle counts of one (hostgroup, server), for stats.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerPoolStats {
    /// The hostgroup these connections serve.
    pub hostgroup: u32,
    /// The server they are open to.
    pub server: ServerKey,
    /// Open connections (in use + idle).
    pub open: u32,
    /// Connections open and waiting in the pool, not used by a session.
    pub idle: u32,
}

impl MysqlPool {
    /// The TLS configurations towards servers with `use_ssl=1` (the monitor uses them too).
    pub fn tls(&self) -> Option<&Arc<sluice_net::client_tls::TlsSource>> {
        self.tls.as_ref()
    }

    /// A pool set; `tls` serves servers with `use_ssl=1` (per server, with its
    /// `mysql_servers_ssl_params`).
    pub fn new(tls: Option<Arc<sluice_net::client_tls::TlsSource>>) -> Arc<Self> {
        Arc::new(MysqlPool {
            inner: Mutex::new(Inner::default()),
            tls,
            shared: PoolShared::new(Protocol::Mysql),
            globals_changed: Mutex::default(),
            any_globals_changed: Default::default(),
        })
    }

    /// A client's `SET GLOBAL` ran on `server`: its idle connections are closed now, and those
    /// in use when they come back.
    pub fn globals_changed(&self, server: &ServerKey) {
        lock(&self.globals_changed).insert(server.clone(), std::time::Instant::now());
        self.any_globals_changed
            .store(true, std::sync::atomic::Ordering::Relaxed);
        self.purge_idle(|_, k| k != server);
    }

    /// Whether `conn` was opened before its server's globals last changed.
    fn opened_before_globals_changed(&self, server: &ServerKey, conn: &BackendConn) -> bool {
        self.any_globals_changed
            .load(std::sync::atomic::Ordering::Relaxed)
            && lock(&self.globals_changed)
                .get(server)
                .is_some_and(|t| conn.created < *t)
    }

    /// Kills every connection to `server`, idle or busy, by shutting its socket down: a query
    /// in flight ends with a lost-connection error instead of waiting on a server that stopped
    /// answering. Returns how many were killed.
    pub fn kill_server(&self, server: &ServerKey) -> usize {
        self.shared.kill_server(server)
    }

    /// Installs the hook told about failed connects (once; later calls are ignored).
    pub fn on_connect_error(&self, hook: sluice_core::pool::ConnectErrorHook) {
        self.shared.on_connect_error(hook);
    }

    /// Connections opened and refused, checkouts and their waits (`proxysql_connpool_*`).
    pub fn pool_stats(&self) -> &PoolStats {
        self.shared.stats()
    }

    /// Statements and bytes per (hostgroup, server) (`stats_mysql_connection_pool`).
    pub fn traffic(&self) -> &TrafficRegistry {
        self.shared.traffic()
    }

    /// Per-server counts, for stats and tests.
    pub fn stats(&self) -> Vec<ServerPoolStats> {
        let g = lock(&self.inner);
        let mut out: Vec<ServerPoolStats> = g
            .open
            .iter()
            .map(|((hg, server), open)| ServerPoolStats {
                hostgroup: *hg,
                server: server.clone(),
                open: *open,
                idle: g.idle.count(|k| k.hostgroup == *hg && &k.server == server) as u32,
            })
            .collect();
        out.sort_by(|a, b| (a.hostgroup, &a.server).cmp(&(b.hostgroup, &b.server)));
        out
    }

    /// A connection to `server` closed: its slot goes to the first session waiting for that
    /// server, or back to the count.
    fn release_slot(&self, hostgroup: u32, server: &ServerKey) {
        let mut g = lock(&self.inner);
        if handoff::give_slot(&mut g, hostgroup, server) {
            return;
        }
        if let Some(n) = g.open_mut(hostgroup, server) {
            *n = n.saturating_sub(1);
        }
    }

    /// A connection is free: to the first waiting session that can use it, else idle.
    fn put_idle(&self, key: &Arc<PoolKey>, conn: Box<BackendConn>) {
        if self.opened_before_globals_changed(&key.server, &conn) {
            debug!(server = %conn.server, "closing a backend connection opened before a SET GLOBAL");
            self.release_slot(key.hostgroup, &key.server);
            tokio::spawn(conn.quit());
            return;
        }
        let mut g = lock(&self.inner);
        let Some(mut conn) = handoff::give_conn(&mut g, key, conn) else {
            return;
        };
        conn.idle_since = Some(std::time::Instant::now());
        g.idle.put(key, conn);
    }

    /// The idle connections, for `stats_mysql_free_connections`.
    pub fn free_connections(&self) -> Vec<FreeConnection> {
        let g = lock(&self.inner);
        let mut out = Vec::new();
        for (k, conns) in g.idle.iter() {
            for c in conns {
                out.push(FreeConnection {
                    backend_id: c.thread_id,
                    hostgroup: k.hostgroup,
                    server: k.server.clone(),
                    user: k.user.clone(),
                    database: c.state.schema.clone(),
                    time_zone: c.state.vars.get("time_zone").cloned(),
                    sql_mode: c.state.vars.get("sql_mode").cloned(),
                    autocommit: c.state.vars.get("autocommit").cloned(),
                    idle_ms: c.idle_since.map_or(0, |t| t.elapsed().as_millis() as u64),
                });
            }
        }
        out.sort_by_key(|f| f.backend_id);
        out
    }

    /// Closes idle connections to servers `keep` rejects (removed or OFFLINE_HARD after a reload).
    pub fn purge_idle(&self, keep: impl Fn(u32, &ServerKey) -> bool) {
        let closed = self.remove_idle(|k| !keep(k.hostgroup, &k.server));
        for (_, c) in closed {
            debug!(server = %c.server, "closing idle connection to a server no longer in service");
            tokio::spawn(c.quit());
        }
    }

    /// Closes every idle connection (used at shutdown).
    pub async fn close_idle(&self) {
        for (_, c) in self.remove_idle(|_| true) {
            c.quit().await;
        }
    }

    /// Takes the idle connections of the pools `of` selects out of the pool and the counts.
    fn remove_idle(&self, of: impl Fn(&PoolKey) -> bool) -> Vec<(Arc<PoolKey>, Box<BackendConn>)> {
        let mut g = lock(&self.inner);
        let removed = g.idle.remove(of);
        for (k, _) in &removed {
            if let Some(n) = g.open_mut(k.hostgroup, &k.server) {
                *n = n.saturating_sub(1);
            }
        }
        removed
    }
}

/// A checked-out connection. Dropping it discards the connection; [`PooledConn::release`] resets
/// it and returns it to the pool.
#[derive(Debug)]
pub struct PooledConn {
    conn: Option<Box<BackendConn>>,
    key: Arc<PoolKey>,
    pool: Arc<MysqlPool>,
    /// True when it came from the idle list (it may have died while idle).
    pub reused: bool,
}

impl PooledConn {
    fn new(conn: Box<BackendConn>, key: Arc<PoolKey>, pool: Arc<MysqlPool>, reused: bool) -> Self {
        PooledConn {
            conn: Some(conn),
            key,
            pool,
            reused,
        }
    }

    /// The statement and byte counters of the connection's server.
    pub fn traffic(&self) -> Option<&sluice_core::metrics::ServerTraffic> {
        self.conn.as_ref().map(|c| &*c.traffic)
    }

    /// The server connection, to send commands on and relay replies from.
    pub fn conn(&mut self) -> &mut BackendConn {
        // Invariant: `conn` is only taken by the release methods, which consume self.
        self.conn
            .as_mut()
            .unwrap_or_else(|| unreachable!("PooledConn used after release"))
    }

    /// The pool key (server, user, …).
    pub fn key(&self) -> &PoolKey {
        &self.key
    }

    /// Returns the connection as it is, session state included: the next user brings it to its
    /// own state (only the differences). For connections without pinned state.
    pub fn release_clean(mut self) {
        if let Some(conn) = self.conn.take() {
            self.pool.put_idle(&self.key, conn);
        }
    }

    /// Resets the connection in the background and returns it to the pool when the reset
    /// succeeds; otherwise it is closed.
    pub fn release(mut self) {
        let Some(mut conn) = self.conn.take() else {
            return;
        };
        let pool = self.pool.clone();
        let key = self.key.clone();
        tokio::spawn(async move {
            match conn.reset().await {
                Ok(true) => pool.put_idle(&key, conn),
                Ok(false) | Err(_) => {
                    debug!(server = %conn.server, "backend connection failed to reset; closing it");
                    pool.release_slot(key.hostgroup, &key.server);
                }
            }
        });
    }
}

impl Drop for PooledConn {
    fn drop(&mut self) {
        if self.conn.take().is_some() {
            self.pool.release_slot(self.key.hostgroup, &self.key.server);
        }
    }
}

impl IdleConnection for BackendConn {
    fn home(&self) -> Option<usize> {
        self.home
    }
}

impl ServerConnection for BackendConn {
    type KillHandle = KillHandle;

    fn kill_handle(&self) -> &Arc<KillHandle> {
        &self.kill_handle
    }

    fn backend_id(&self) -> u64 {
        u64::from(self.thread_id)
    }

    fn settle(&mut self, traffic: Arc<ServerTraffic>, home: Option<usize>) {
        self.traffic = traffic;
        self.home = home;
    }
}

impl ConnectFailure for crate::Error {
    fn is_retryable(&self) -> bool {
        crate::Error::is_retryable(self)
    }
}

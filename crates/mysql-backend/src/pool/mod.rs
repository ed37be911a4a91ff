//! Backend connection pools: idle connections per (hostgroup, server, user, capability class,
//! collation, TLS), a per-(hostgroup, server) count of open connections checked against
//! `max_connections`, the connect-retry loop bounded by `connect_timeout_server_max`
//! ([`checkout`]), and a first-come-first-served queue of sessions waiting for a connection
//! when every server is at `max_connections` ([`handoff`]).

mod checkout;
mod handoff;

use crate::conn::{BackendConn, BackendSecret, REPLY_SHAPING_CAPS};
use hashbrown::{Equivalent, HashMap};
use sluice_core::kill_registry::KillRegistry;
use sluice_core::live::FreeConnection;
use sluice_core::metrics::{PoolStats, TrafficRegistry};
use sluice_core::runtime::{HostgroupServer, ServerKey};
use sluice_core::util::lock;
use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::Duration;
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

impl PoolKey {
    /// A key that owns nothing (empty strings do not allocate): what a released
    /// [`PooledConn`] leaves behind when its key moves back to the pool.
    fn placeholder() -> Self {
        PoolKey {
            hostgroup: 0,
            server: ServerKey {
                hostname: String::new(),
                port: 0,
            },
            user: String::new(),
            caps: 0,
            charset: 0,
            tls: false,
        }
    }
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

impl Equivalent<PoolKey> for PoolKeyRef<'_> {
    fn equivalent(&self, k: &PoolKey) -> bool {
        self.hostgroup == k.hostgroup
            && *self.server == k.server
            && self.user == k.user
            && self.caps == k.caps
            && self.charset == k.charset
            && self.tls == k.tls
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

/// An idle connection with its key, which goes with it to the next session (so a checkout
/// does not build one). Boxed, here and checked out: a connection moves in and out of the pool
/// at every statement that is not pinned, and moving a box copies a pointer where moving the
/// connection copied its every byte several times over.
#[derive(Debug)]
struct IdleConn {
    key: PoolKey,
    conn: Box<BackendConn>,
}

#[derive(Debug, Default)]
struct Inner {
    idle: HashMap<PoolKey, Vec<IdleConn>>,
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

    /// Takes an idle connection of `key`'s pool: the most recently used one opened on
    /// `worker`'s thread, else the most recently used one.
    fn pop_idle(&mut self, key: &PoolKeyRef<'_>, worker: Option<usize>) -> Option<IdleConn> {
        let list = self.idle.get_mut(key)?;
        let last = list.len().checked_sub(1)?;
        let at = match worker {
            Some(w) if list[last].conn.home != Some(w) => list
                .iter()
                .rposition(|i| i.conn.home == Some(w))
                .unwrap_or(last),
            _ => last,
        };
        Some(list.remove(at))
    }
}

/// All backend pools of the process.
#[derive(Debug)]
pub struct MysqlPool {
    inner: Mutex<Inner>,
    tls: Option<Arc<sluice_net::client_tls::TlsSource>>,
    /// Told about each failed connect (not refused logins): the monitor's error shunning.
    connect_errors: std::sync::OnceLock<sluice_monitor::ConnectErrorHook>,
    /// Every open connection's socket, by server, to kill them when the server is shunned.
    sockets: KillRegistry<crate::stream::KillHandle>,
    /// Connections opened and refused, checkouts and their waits.
    stats: PoolStats,
    /// Statements and bytes per (hostgroup, server).
    traffic: TrafficRegistry,
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
    /// `mysql-connect_timeout_server` (per attempt).
    pub connect_timeout: Duration,
    /// `mysql-connect_timeout_server_max` (whole budget).
    pub connect_timeout_max: Duration,
    /// Pause between rounds over the hostgroup's servers when none could be used
    /// (`mysql-connect_retries_delay`).
    pub retry_delay: Duration,
    /// Largest packet accepted from the server.
    pub max_packet: usize,
    /// Where to re-read the hostgroup's servers after a round in which all failed: the monitor
    /// may have moved a new writer in meanwhile (failover). `None` keeps `servers`.
    pub config: Option<&'a sluice_core::runtime::ConfigHandle>,
    /// The session thread asking (`mysql-threads`): an idle connection opened on it is taken
    /// before one of another thread, whose poll would have to wake that thread for every reply.
    /// `None` off the worker threads.
    pub worker: Option<usize>,
    /// The workload-class priority of the statement asking: when every server is at
    /// `max_connections`, waiting sessions are served by priority, then arrival (a waiter is
    /// overtaken a bounded number of times).
    pub priority: sluice_core::config::Priority,
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

    /// The pool of this request on server `s`, owned (for a new connection or a new pool).
    fn key_for(&self, s: &HostgroupServer) -> PoolKey {
        PoolKey {
            hostgroup: self.hostgroup,
            server: s.key.clone(),
            user: self.user.to_string(),
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
            connect_errors: std::sync::OnceLock::new(),
            sockets: KillRegistry::default(),
            stats: PoolStats::default(),
            traffic: TrafficRegistry::default(),
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
        self.sockets.kill_server(server, "MySQL")
    }

    /// Installs the hook told about failed connects (once; later calls are ignored).
    pub fn on_connect_error(&self, hook: sluice_monitor::ConnectErrorHook) {
        let _ = self.connect_errors.set(hook);
    }

    fn connect_outcome(&self, server: &ServerKey, ok: bool) {
        let counter = if ok {
            &self.stats.connections_created
        } else {
            &self.stats.connections_aborted
        };
        counter.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        if let Some(h) = self.connect_errors.get() {
            (h.0)(server, ok);
        }
    }

    /// Connections opened and refused, checkouts and their waits (`proxysql_connpool_*`).
    pub fn pool_stats(&self) -> &PoolStats {
        &self.stats
    }

    /// Statements and bytes per (hostgroup, server) (`stats_mysql_connection_pool`).
    pub fn traffic(&self) -> &TrafficRegistry {
        &self.traffic
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
                idle: g
                    .idle
                    .iter()
                    .filter(|(k, _)| k.hostgroup == *hg && &k.server == server)
                    .map(|(_, v)| v.len() as u32)
                    .sum(),
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
    fn put_idle(&self, key: PoolKey, conn: Box<BackendConn>) {
        if self.opened_before_globals_changed(&key.server, &conn) {
            debug!(server = %conn.server, "closing a backend connection opened before a SET GLOBAL");
            self.release_slot(key.hostgroup, &key.server);
            tokio::spawn(conn.quit());
            return;
        }
        let mut g = lock(&self.inner);
        let Some((key, mut conn)) = handoff::give_conn(&mut g, key, conn) else {
            return;
        };
        conn.idle_since = Some(std::time::Instant::now());
        match g.idle.get_mut(&key) {
            Some(list) => list.push(IdleConn { key, conn }),
            None => {
                // The pool's first connection: the only time a key is copied.
                let list = vec![IdleConn {
                    key: key.clone(),
                    conn,
                }];
                g.idle.insert(key, list);
            }
        }
    }

    /// The idle connections, for `stats_mysql_free_connections`.
    pub fn free_connections(&self) -> Vec<FreeConnection> {
        let g = lock(&self.inner);
        let mut out = Vec::new();
        for (k, conns) in &g.idle {
            for IdleConn { conn: c, .. } in conns {
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
        let mut closed = Vec::new();
        {
            let mut g = lock(&self.inner);
            let doomed: Vec<PoolKey> = g
                .idle
                .keys()
                .filter(|k| !keep(k.hostgroup, &k.server))
                .cloned()
                .collect();
            for k in doomed {
                if let Some(v) = g.idle.remove(&k) {
                    if let Some(n) = g.open_mut(k.hostgroup, &k.server) {
                        *n = n.saturating_sub(v.len() as u32);
                    }
                    closed.extend(v.into_iter().map(|i| i.conn));
                }
            }
        }
        for c in closed {
            debug!(server = %c.server, "closing idle connection to a server no longer in service");
            tokio::spawn(c.quit());
        }
    }

    /// Closes every idle connection (used at shutdown).
    pub async fn close_idle(&self) {
        let conns: Vec<IdleConn> = {
            let mut g = lock(&self.inner);
            let drained: Vec<IdleConn> = g.idle.drain().flat_map(|(_, v)| v).collect();
            for i in &drained {
                if let Some(n) = g.open_mut(i.key.hostgroup, &i.key.server) {
                    *n = n.saturating_sub(1);
                }
            }
            drained
        };
        for i in conns {
            i.conn.quit().await;
        }
    }
}

/// A checked-out connection. Dropping it discards the connection; [`PooledConn::release`] resets
/// it and returns it to the pool.
#[derive(Debug)]
pub struct PooledConn {
    conn: Option<Box<BackendConn>>,
    key: PoolKey,
    pool: Arc<MysqlPool>,
    /// True when it came from the idle list (it may have died while idle).
    pub reused: bool,
}

impl PooledConn {
    fn new(conn: Box<BackendConn>, key: PoolKey, pool: Arc<MysqlPool>, reused: bool) -> Self {
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
            let key = std::mem::replace(&mut self.key, PoolKey::placeholder());
            self.pool.put_idle(key, conn);
        }
    }

    /// Resets the connection in the background and returns it to the pool when the reset
    /// succeeds; otherwise it is closed.
    pub fn release(mut self) {
        let Some(mut conn) = self.conn.take() else {
            return;
        };
        let pool = self.pool.clone();
        let key = std::mem::replace(&mut self.key, PoolKey::placeholder());
        tokio::spawn(async move {
            match conn.reset().await {
                Ok(true) => pool.put_idle(key, conn),
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

//! Server connections per (hostgroup, server, user, database). `max_connections` per server caps
//! the connections in use at once through a budget of slots split between the session threads
//! (the `budget` module; sessions of a thread queue first come, first served): a session takes a
//! slot, then an idle connection or a new one, and gives both back when done.

use crate::Error;
use crate::budget::{Budget, Slot};
use crate::conn::{ConnectParams, PgConn};
use crate::idle::{KeyRef, PassThrough};
use crate::stream::KillHandle;
use sluice_core::Protocol;
use sluice_core::checkout::{Attempt, CheckoutBudget};
use sluice_core::hostgroup::{NoServer, balance_random, pick};
use sluice_core::live::FreeConnection;
use sluice_core::metrics::{PoolStats, TrafficRegistry};
use sluice_core::pool::{ConnectFailure, Headroom, IdleLists, PoolOptions, PoolShared};
use sluice_core::runtime::{HostgroupServer, ServerKey};
use sluice_core::util::lock;
use sluice_net::client_tls::TlsSource;
use std::cell::RefCell;
use std::collections::{HashMap, HashSet};
use std::sync::atomic::AtomicUsize;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tracing::{info, warn};

/// Which idle connections can serve a client.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct PgKey {
    /// The hostgroup the connection serves.
    pub hostgroup: u32,
    /// The server it is open to.
    pub server: ServerKey,
    /// The role it is logged in as; connections are never shared across roles.
    pub user: String,
    /// The database it is connected to; never shared across databases.
    pub database: String,
}

/// Per hostgroup, each server's connection budget (its `max_connections` split between the
/// session threads). A hostgroup has few servers; a scan finds one without building a key.
type Slots = HashMap<u32, Vec<(ServerKey, Arc<Budget>)>, PassThrough>;

/// All PostgreSQL pools.
#[derive(Debug)]
pub struct PgPool {
    idle: Mutex<IdleLists<PgKey, PgConn>>,
    slots: Mutex<Slots>,
    /// Session threads the budgets are split between (0 until told: one share).
    session_threads: AtomicUsize,
    /// TLS for servers with `use_ssl=1`.
    tls: Option<Arc<TlsSource>>,
    /// The connect hook, kill registry and counters.
    shared: PoolShared<KillHandle>,
}

/// Pause between checkout rounds when no server is usable (PostgreSQL has no
/// `connect_retries_delay`).
pub const ROUND_PAUSE: Duration = Duration::from_millis(50);

/// The options of a checkout under `vars` (their connect timeouts, [`ROUND_PAUSE`]), for a
/// caller to add its session thread, priority and failover re-read to.
pub fn pool_options(vars: &sluice_core::config::PgsqlVariables) -> PoolOptions<'static> {
    PoolOptions::with_timeouts(
        Duration::from_millis(vars.connect_timeout_server),
        Duration::from_millis(vars.connect_timeout_server_max),
        ROUND_PAUSE,
    )
}

/// What a session asks for.
#[derive(Debug, Clone)]
pub struct PgCheckout<'a> {
    /// The hostgroup to take a connection from.
    pub hostgroup: u32,
    /// The hostgroup's servers as the caller's runtime snapshot has them.
    pub servers: &'a [HostgroupServer],
    /// The role to log in as.
    pub user: &'a str,
    /// Its password, or the SCRAM keys its client revealed (users stored as a verifier).
    pub secret: &'a sluice_pgsql_proto::scram::ClientSecret,
    /// The database to connect to.
    pub database: &'a str,
    /// The session asking (its cancel key), when it has one: an idle connection it used last
    /// is preferred, so its settings need not be reset and applied again. Server connections
    /// are opened with neutral startup parameters (only user and database): a session's own
    /// settings are applied by the frontend, never baked into a pooled connection.
    pub session: Option<u64>,
    /// Timeouts, session thread (connections opened there are preferred and others are moved
    /// to its poll; `None` on a shared runtime), priority (a session thread's waiting sessions
    /// are served by it when the server is at `max_connections`) and failover re-read.
    pub options: PoolOptions<'a>,
}

impl PgCheckout<'_> {
    /// The pool this request draws from on `server`, borrowed (for lookups).
    fn key_ref<'s>(&'s self, server: &'s HostgroupServer) -> KeyRef<'s> {
        KeyRef {
            hostgroup: self.hostgroup,
            server: &server.key,
            user: self.user,
            database: self.database,
        }
    }
}

/// A checked-out connection; dropping it closes the connection.
#[derive(Debug)]
pub struct PgPooled {
    conn: Option<Box<PgConn>>,
    permit: Option<Slot>,
    key: Arc<PgKey>,
    pool: Arc<PgPool>,
}

impl PgPool {
    /// The TLS configurations towards servers with `use_ssl=1` (the monitor uses them too).
    pub fn tls(&self) -> Option<&Arc<TlsSource>> {
        self.tls.as_ref()
    }

    /// An empty pool set; `tls` serves servers with `use_ssl=1` (per server, with its
    /// `pgsql_servers_ssl_params`).
    pub fn new(tls: Option<Arc<TlsSource>>) -> Arc<Self> {
        Arc::new(PgPool {
            idle: Mutex::default(),
            slots: Mutex::default(),
            session_threads: AtomicUsize::new(0),
            tls,
            shared: PoolShared::new(Protocol::Pgsql),
        })
    }

    /// Splits every server's `max_connections` between `threads` session threads from now on
    /// (`pgsql-threads`): each thread's sessions queue for their own share, so a slot and its
    /// connection stay on one thread under load. Budgets made before keep their split.
    pub fn set_session_threads(&self, threads: usize) {
        self.session_threads.store(threads, Relaxed);
    }

    fn budget(&self, hg: u32, s: &HostgroupServer) -> Arc<Budget> {
        let mut g = lock(&self.slots);
        let servers = g.entry(hg).or_default();
        let fresh = || Budget::new(s.max_connections, self.session_threads.load(Relaxed));
        match servers.iter_mut().find(|(k, _)| *k == s.key) {
            Some((_, budget)) => {
                if budget.max != s.max_connections {
                    // max_connections changed at runtime: a fresh budget for new connections.
                    *budget = fresh();
                }
                budget.clone()
            }
            None => {
                let budget = fresh();
                servers.push((s.key.clone(), budget.clone()));
                budget
            }
        }
    }

    /// (hostgroup, server, in use, idle) for every server the pool has seen.
    pub fn stats(&self) -> Vec<(u32, ServerKey, u32, u32)> {
        let idle = lock(&self.idle);
        lock(&self.slots)
            .iter()
            .flat_map(|(hg, servers)| servers.iter().map(move |s| (*hg, s)))
            .map(|(hg, (server, budget))| {
                let used = budget.in_use();
                let free = idle.count(|k| k.hostgroup == hg && &k.server == server);
                (hg, server.clone(), used, free as u32)
            })
            .collect()
    }

    /// The idle connections, for `stats_pgsql_free_connections` and PgBouncer's `SHOW SERVERS`.
    pub fn free_connections(&self) -> Vec<FreeConnection> {
        lock(&self.idle)
            .iter()
            .flat_map(|(k, v)| {
                v.iter().map(move |c| FreeConnection {
                    backend_id: c.key.0,
                    hostgroup: k.hostgroup,
                    server: k.server.clone(),
                    user: k.user.clone(),
                    database: Some(k.database.clone()),
                    time_zone: None,
                    sql_mode: None,
                    autocommit: None,
                    idle_ms: c.idle_since.elapsed().as_millis() as u64,
                })
            })
            .collect()
    }

    /// Connections opened and refused, checkouts and their waits (`proxysql_connpool_*`).
    pub fn pool_stats(&self) -> &PoolStats {
        self.shared.stats()
    }

    /// Statements and bytes per (hostgroup, server) (`stats_pgsql_connection_pool`).
    pub fn traffic(&self) -> &TrafficRegistry {
        self.shared.traffic()
    }

    /// Installs the hook told about failed connects (once; later calls are ignored).
    pub fn on_connect_error(&self, hook: sluice_core::pool::ConnectErrorHook) {
        self.shared.on_connect_error(hook);
    }

    /// Closes the idle connections to `server` (it was shunned: they are likely dead).
    pub fn purge_idle(&self, server: &ServerKey) {
        let doomed = lock(&self.idle).remove(|k| &k.server == server);
        if !doomed.is_empty() {
            info!(server = %server, closed = doomed.len(), "closed idle PostgreSQL connections to a shunned server");
        }
    }

    /// Kills every connection to `server`, idle or busy, by shutting its socket down: a query
    /// in flight ends with an error instead of waiting on a server that stopped answering.
    /// Returns how many were killed.
    pub fn kill_server(&self, server: &ServerKey) -> usize {
        self.shared.kill_server(server)
    }

    /// Gets a connection for the request: an idle one when possible, else a new one under the
    /// server's `max_connections` (waiting in line for a slot); servers that fail are skipped
    /// and retried until `connect_timeout_max` is spent.
    pub async fn checkout(self: &Arc<Self>, req: &PgCheckout<'_>) -> Result<PgPooled, Error> {
        let opts = &req.options;
        let budget = CheckoutBudget::starting_now(opts.connect_timeout_max, opts.retry_delay);
        let attempts = PgAttempts { pool: self, req };
        sluice_core::checkout::checkout(&attempts, req.servers, budget).await
    }

    /// An idle connection for `req` at once, when the server the balancer picks has a free slot
    /// and an idle connection; `None` otherwise, and then [`PgPool::checkout`] opens one or
    /// waits. This is a busy pool's common case, and it needs none of the checkout's retry and
    /// waiting state, which a session would otherwise carry in every step's future.
    pub fn try_checkout_idle(self: &Arc<Self>, req: &PgCheckout<'_>) -> Option<PgPooled> {
        self.try_checkout_idle_at(req, Instant::now())
    }

    /// [`PgPool::try_checkout_idle`] for a caller that read the clock (`now`) just before: a
    /// session's statement reads it once for its start, its checkout and its send.
    pub fn try_checkout_idle_at(
        self: &Arc<Self>,
        req: &PgCheckout<'_>,
        now: Instant,
    ) -> Option<PgPooled> {
        let (server, budget) = self.pick(req.hostgroup, req.servers, |_| false).ok()?;
        let permit = budget.try_take(req.options.worker)?;
        let wanted = req.key_ref(server);
        let room = budget.headroom();
        let (key, idle) = self.take_idle(wanted, req, room, now);
        // No idle connection: the slot goes back (to a waiting session first) and the full
        // checkout opens one.
        let conn = idle?;
        let stats = self.shared.stats();
        stats.get_conn_immediate.add(1);
        stats.get_conn_success.add(1);
        Some(PgPooled {
            conn: Some(conn),
            permit: Some(permit),
            key,
            pool: self.clone(),
        })
    }

    /// The server the balancer picks among `servers` by their connections in use (skipping
    /// those `skip` names), with its budget. The budget the balancer read last is kept: on a
    /// hostgroup of one server — a writer's — a checkout looks its budget up once, not twice.
    fn pick<'s>(
        &self,
        hostgroup: u32,
        servers: &'s [HostgroupServer],
        skip: impl Fn(&HostgroupServer) -> bool,
    ) -> Result<(&'s HostgroupServer, Arc<Budget>), NoServer> {
        let last_read: RefCell<Option<(*const HostgroupServer, Arc<Budget>)>> = RefCell::default();
        let in_use = |s: &HostgroupServer| {
            let budget = self.budget(hostgroup, s);
            let used = budget.in_use();
            *last_read.borrow_mut() = Some((s, budget));
            used
        };
        let server = pick(servers, in_use, skip, balance_random, Instant::now)?;
        let budget = match last_read.into_inner() {
            Some((read, budget)) if std::ptr::eq(read, server) => budget,
            _ => self.budget(hostgroup, server),
        };
        Ok((server, budget))
    }

    /// A connection from the pool or a new one, for `server` whose `permit` the session holds.
    async fn connection_on(
        self: &Arc<Self>,
        req: &PgCheckout<'_>,
        server: &HostgroupServer,
        permit: Slot,
        deadline: Instant,
    ) -> Attempt<PgPooled, Error> {
        let wanted = req.key_ref(server);
        let room = self.budget(req.hostgroup, server).headroom();
        let (key, idle) = self.take_idle(wanted, req, room, Instant::now());
        let pooled = |conn| PgPooled {
            conn: Some(conn),
            permit: Some(permit),
            key,
            pool: self.clone(),
        };
        if let Some(conn) = idle {
            self.shared.stats().get_conn_immediate.add(1);
            return Attempt::Ready(pooled(conn));
        }
        let tls = match TlsSource::for_server(self.tls.as_deref(), server, req.user) {
            Ok(tls) => tls,
            Err(source) => {
                let server = server.key.to_string();
                return Attempt::Fatal(Error::Tls { server, source });
            }
        };
        let dial = |timeout| {
            let params = ConnectParams {
                host: server.key.hostname.clone(),
                port: server.key.port,
                user: req.user.to_string(),
                secret: req.secret.clone(),
                database: req.database.to_string(),
                options: Vec::new(),
                timeout,
                tls,
            };
            async move { PgConn::connect(&params).await }
        };
        let opened = self
            .shared
            .open(server, req.hostgroup, &req.options, deadline, dial)
            .await;
        match opened {
            Ok(conn) => Attempt::Ready(pooled(Box::new(conn))),
            // A server refusing the login, or a login Sluice cannot perform (a SCRAM verifier
            // the server does not share, a method it cannot answer): retrying another
            // connection would fail the same way; the client is told why at once.
            Err(e) if !e.is_retryable() => Attempt::Fatal(e),
            Err(e) => Attempt::Failed {
                server: server.key.clone(),
                error: e.to_string(),
            },
        }
    }

    /// An idle connection for `wanted`, checked and moved to the asking session thread; dead
    /// ones are dropped on the way. Also the pool key a new connection is filed under.
    fn take_idle(
        &self,
        wanted: KeyRef<'_>,
        req: &PgCheckout<'_>,
        room: Headroom,
        now: Instant,
    ) -> (Arc<PgKey>, Option<Box<PgConn>>) {
        let (worker, session) = (req.options.worker, req.session);
        loop {
            let (key, c) = lock(&self.idle).take(&wanted, worker, session, room);
            let Some(mut c) = c else { return (key, None) };
            // Like PgBouncer's server_check_delay: a connection used moments ago is trusted
            // without the extra syscall; one idle longer is checked for a server-side close.
            if now.saturating_duration_since(c.idle_since) >= RECHECK_AFTER_IDLE && c.looks_dead() {
                info!(server = %c.server, "dropping an idle PostgreSQL connection the server closed");
                continue;
            }
            if let Some(w) = worker
                && c.home != Some(w)
            {
                c = match c.rehomed(w) {
                    Ok(c) => c,
                    Err(e) => {
                        warn!(server = %wanted.server, "closing a PostgreSQL connection that could not move to session thread {w}: {e}");
                        continue;
                    }
                };
            }
            return (key, Some(c));
        }
    }
}

/// One checkout's attempts, for the shared loop.
struct PgAttempts<'a> {
    pool: &'a Arc<PgPool>,
    req: &'a PgCheckout<'a>,
}

impl sluice_core::checkout::Connector for PgAttempts<'_> {
    type Conn = PgPooled;
    type Error = Error;

    async fn attempt(
        &self,
        servers: &[HostgroupServer],
        failed: &HashSet<ServerKey>,
        deadline: Instant,
    ) -> Attempt<PgPooled, Error> {
        let (pool, req) = (self.pool, self.req);
        let skip = |s: &HostgroupServer| failed.contains(&s.key);
        // Prefer a server with room; when all are full, queue on a random usable one.
        let server = pool.pick(req.hostgroup, servers, skip).or_else(|_| {
            let server = pick(servers, |_| 0, skip, balance_random, Instant::now)?;
            Ok::<_, NoServer>((server, pool.budget(req.hostgroup, server)))
        });
        let Ok((server, budget)) = server else {
            return Attempt::Exhausted;
        };
        let opts = &req.options;
        let permit = match budget.try_take(opts.worker) {
            Some(slot) => Some(slot),
            None => {
                let _waiting = pool.shared.stats().waiting();
                budget.take(opts.worker, opts.priority, deadline).await
            }
        };
        let Some(permit) = permit else {
            return Attempt::Again;
        };
        pool.connection_on(req, server, permit, deadline).await
    }

    fn reread(&self) -> Option<Vec<HostgroupServer>> {
        let cfg = self.req.options.config?;
        Some(cfg.hostgroup_servers(Protocol::Pgsql, self.req.hostgroup))
    }

    fn stats(&self) -> &PoolStats {
        self.pool.shared.stats()
    }

    fn timed_out(&self, elapsed: Duration, last_error: Option<String>) -> Error {
        Error::ConnectTimeout {
            hostgroup: self.req.hostgroup,
            elapsed_ms: elapsed.as_millis() as u64,
            last_error,
        }
    }
}

/// Idle time after which a pooled connection is checked for a server-side close before reuse.
const RECHECK_AFTER_IDLE: Duration = Duration::from_millis(500);

impl PgPooled {
    /// The server connection, to forward messages on and read replies from.
    pub fn conn(&mut self) -> &mut PgConn {
        // Invariant: only the release methods take it, and they consume self.
        self.conn
            .as_deref_mut()
            .unwrap_or_else(|| unreachable!("PgPooled used after release"))
    }

    /// Back to the pool as it is (the client left it idle, outside a transaction).
    pub fn release_clean(self) {
        self.release_clean_at(Instant::now());
    }

    /// [`PgPooled::release_clean`] for a caller that read the clock just now.
    pub fn release_clean_at(mut self, now: Instant) {
        if let Some(mut c) = self.conn.take() {
            c.idle_since = now;
            lock(&self.pool.idle).put(&self.key, c);
        }
        // The permit is dropped after the connection is idle, so the next session finds it.
        self.permit.take();
    }

    /// `DISCARD ALL` in the background, then back to the pool (closed if that fails).
    pub fn release_discard(mut self) {
        let (Some(mut c), Some(p)) = (self.conn.take(), self.permit.take()) else {
            return;
        };
        let pool = self.pool.clone();
        let key = self.key.clone();
        tokio::spawn(async move {
            if c.discard_all().await {
                c.idle_since = Instant::now();
                lock(&pool.idle).put(&key, c);
            }
            drop(p);
        });
    }
}

impl ConnectFailure for Error {
    fn is_retryable(&self) -> bool {
        Error::is_retryable(self)
    }
}

//! Backend connection pools: idle connections per (hostgroup, server, user, capability class,
//! collation, TLS), a per-(hostgroup, server) count of open connections checked against
//! `max_connections`, and the connect-retry loop bounded by `connect_timeout_server_max`.

use crate::conn::{BackendConn, BackendSecret, ConnectParams, REPLY_SHAPING_CAPS};
use crate::error::Error;
use sluice_core::hostgroup::{NoServer, pick, random_u64};
use sluice_core::runtime::{HostgroupServer, ServerKey};
use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};
use tracing::{debug, warn};

/// Which idle connections can serve a client: same server, user and reply-shaping settings.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct PoolKey {
    /// Hostgroup the connection was opened for.
    pub hostgroup: u32,
    /// The server.
    pub server: ServerKey,
    /// Backend user.
    pub user: String,
    /// Reply-shaping capability bits.
    pub caps: u32,
    /// Collation id.
    pub charset: u8,
    /// TLS.
    pub tls: bool,
}

#[derive(Debug, Default)]
struct Inner {
    idle: HashMap<PoolKey, Vec<BackendConn>>,
    open: HashMap<(u32, ServerKey), u32>,
}

/// All backend pools of the process.
#[derive(Debug)]
pub struct MysqlPool {
    inner: Mutex<Inner>,
    tls: Option<Arc<rustls::ClientConfig>>,
    /// Woken when a connection becomes idle or a slot frees up.
    freed: tokio::sync::Notify,
}

/// What a session asks for.
#[derive(Debug, Clone)]
pub struct CheckoutRequest<'a> {
    /// Target hostgroup.
    pub hostgroup: u32,
    /// Its servers (from the runtime snapshot).
    pub servers: &'a [HostgroupServer],
    /// Backend user.
    pub user: &'a str,
    /// Backend password material.
    pub secret: &'a BackendSecret,
    /// Client collation id.
    pub charset: u8,
    /// Client capabilities (only [`REPLY_SHAPING_CAPS`] matter).
    pub client_caps: u32,
    /// `mysql-connect_timeout_server` (per attempt).
    pub connect_timeout: Duration,
    /// `mysql-connect_timeout_server_max` (whole budget).
    pub connect_timeout_max: Duration,
    /// `mysql-connect_retries_delay`.
    pub retry_delay: Duration,
    /// Largest packet accepted from the server.
    pub max_packet: usize,
}

/// Open/idle counts of one (hostgroup, server), for stats.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerPoolStats {
    /// Hostgroup.
    pub hostgroup: u32,
    /// Server.
    pub server: ServerKey,
    /// Open connections (in use + idle).
    pub open: u32,
    /// Idle connections.
    pub idle: u32,
}

fn lock(m: &Mutex<Inner>) -> MutexGuard<'_, Inner> {
    // A panic while holding this lock cannot leave counts half-updated in a way worse than
    // refusing all further service, so keep going with the data.
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl MysqlPool {
    /// A pool set; `tls` is used for servers with `use_ssl=1`.
    pub fn new(tls: Option<Arc<rustls::ClientConfig>>) -> Arc<Self> {
        Arc::new(MysqlPool {
            inner: Mutex::new(Inner::default()),
            tls,
            freed: tokio::sync::Notify::new(),
        })
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

    fn release_slot(&self, hostgroup: u32, server: &ServerKey) {
        {
            let mut g = lock(&self.inner);
            if let Some(n) = g.open.get_mut(&(hostgroup, server.clone())) {
                *n = n.saturating_sub(1);
            }
        }
        self.freed.notify_one();
    }

    /// Gets a connection: an idle one when possible, else a new one, retrying other servers of
    /// the hostgroup until `connect_timeout_max` is spent.
    pub async fn checkout(
        self: &Arc<Self>,
        req: &CheckoutRequest<'_>,
    ) -> Result<PooledConn, Error> {
        let start = Instant::now();
        let deadline = start + req.connect_timeout_max;
        let mut failed: HashSet<ServerKey> = HashSet::new();
        let mut last_error: Option<String> = None;
        loop {
            let decision = {
                let mut g = lock(&self.inner);
                let picked = pick(
                    req.servers,
                    |s| {
                        g.open
                            .get(&(req.hostgroup, s.key.clone()))
                            .copied()
                            .unwrap_or(0)
                    },
                    |s| failed.contains(&s.key),
                    random_u64(),
                );
                match picked {
                    Ok(s) => {
                        let key = self.key_for(req, s);
                        match g.idle.get_mut(&key).and_then(Vec::pop) {
                            Some(conn) => Decision::Reuse(s.clone(), conn),
                            None => {
                                *g.open.entry((req.hostgroup, s.key.clone())).or_insert(0) += 1;
                                Decision::Connect(s.clone())
                            }
                        }
                    }
                    // Servers at max_connections may still hold idle connections: ours to reuse,
                    // or another user's to close so that ours can be opened.
                    Err(NoServer::AllAtMaxConnections) => {
                        let reuse = req.servers.iter().find_map(|s| {
                            let conn = g.idle.get_mut(&self.key_for(req, s)).and_then(Vec::pop)?;
                            Some(Decision::Reuse(s.clone(), conn))
                        });
                        reuse.unwrap_or_else(|| {
                            let victim = req
                                .servers
                                .iter()
                                .filter(|s| !failed.contains(&s.key))
                                .find_map(|s| {
                                    let key = g
                                        .idle
                                        .iter()
                                        .find(|(k, v)| {
                                            k.hostgroup == req.hostgroup
                                                && k.server == s.key
                                                && !v.is_empty()
                                        })
                                        .map(|(k, _)| k.clone())?;
                                    let conn = g.idle.get_mut(&key).and_then(Vec::pop)?;
                                    Some((s.clone(), conn))
                                });
                            match victim {
                                // The victim's slot passes to the new connection.
                                Some((s, old)) => Decision::Replace(s, old),
                                None => Decision::WaitForFree,
                            }
                        })
                    }
                    Err(_) => Decision::Wait,
                }
            };
            let decision = match decision {
                Decision::Replace(server, old) => {
                    debug!(server = %server.key, "closing an idle connection of another user to make room");
                    tokio::spawn(old.quit());
                    Decision::Connect(server)
                }
                other => other,
            };
            let waiting_for_free = matches!(decision, Decision::WaitForFree);
            if let Decision::Reuse(server, conn) = decision {
                if conn.looks_dead() {
                    debug!(server = %server.key, "dropping idle backend connection closed by the server");
                    self.release_slot(req.hostgroup, &server.key);
                    continue;
                }
                return Ok(PooledConn::new(
                    conn,
                    self.key_for(req, &server),
                    self.clone(),
                    true,
                ));
            }
            if let Decision::Connect(server) = decision {
                let key = self.key_for(req, &server);
                let remaining = deadline.saturating_duration_since(Instant::now());
                let params = ConnectParams {
                    host: server.key.hostname.clone(),
                    port: server.key.port,
                    user: req.user.to_string(),
                    secret: req.secret.clone(),
                    schema: None,
                    charset: req.charset,
                    client_caps: req.client_caps & REPLY_SHAPING_CAPS,
                    tls: if server.use_ssl {
                        self.tls.clone()
                    } else {
                        None
                    },
                    timeout: req
                        .connect_timeout
                        .min(remaining)
                        .max(Duration::from_millis(1)),
                    max_packet: req.max_packet,
                };
                if server.use_ssl && self.tls.is_none() {
                    self.release_slot(req.hostgroup, &server.key);
                    return Err(Error::Tls {
                        server: server.key.to_string(),
                        why: "no TLS client configuration".into(),
                    });
                }
                match BackendConn::connect(&params).await {
                    Ok(conn) => {
                        debug!(server = %server.key, hostgroup = req.hostgroup, thread_id = conn.thread_id, "opened backend connection");
                        return Ok(PooledConn::new(conn, key, self.clone(), false));
                    }
                    Err(e) => {
                        self.release_slot(req.hostgroup, &server.key);
                        if e.is_access_denied() || matches!(e, Error::AuthUnsupported { .. }) {
                            warn!(server = %server.key, hostgroup = req.hostgroup, user = req.user, "backend refused the login: {e}");
                            return Err(e);
                        }
                        warn!(server = %server.key, hostgroup = req.hostgroup, "error connecting to backend: {e}; trying again");
                        failed.insert(server.key.clone());
                        last_error = Some(e.to_string());
                    }
                }
            } else if !failed.is_empty() {
                // Every server failed once in this round: try them all again after the pause.
                failed.clear();
            }
            if Instant::now() >= deadline {
                return Err(Error::ConnectTimeout {
                    hostgroup: req.hostgroup,
                    elapsed_ms: start.elapsed().as_millis() as u64,
                    last_error,
                });
            }
            let remaining = deadline.saturating_duration_since(Instant::now());
            if waiting_for_free {
                // Every server is at max_connections: wait for a connection to come back.
                let _ = tokio::time::timeout(
                    remaining.min(Duration::from_millis(50)),
                    self.freed.notified(),
                )
                .await;
            } else {
                tokio::time::sleep(
                    req.retry_delay
                        .max(Duration::from_millis(10))
                        .min(remaining),
                )
                .await;
            }
        }
    }

    fn key_for(&self, req: &CheckoutRequest<'_>, s: &HostgroupServer) -> PoolKey {
        PoolKey {
            hostgroup: req.hostgroup,
            server: s.key.clone(),
            user: req.user.to_string(),
            caps: req.client_caps & REPLY_SHAPING_CAPS,
            charset: req.charset,
            tls: s.use_ssl,
        }
    }

    fn put_idle(&self, key: PoolKey, conn: BackendConn) {
        lock(&self.inner).idle.entry(key).or_default().push(conn);
        self.freed.notify_one();
    }

    /// Closes every idle connection (used at shutdown).
    pub async fn close_idle(&self) {
        let conns: Vec<(PoolKey, BackendConn)> = {
            let mut g = lock(&self.inner);
            let drained: Vec<(PoolKey, BackendConn)> = g
                .idle
                .drain()
                .flat_map(|(k, v)| v.into_iter().map(move |c| (k.clone(), c)))
                .collect();
            for (k, _) in &drained {
                if let Some(n) = g.open.get_mut(&(k.hostgroup, k.server.clone())) {
                    *n = n.saturating_sub(1);
                }
            }
            drained
        };
        for (_, c) in conns {
            c.quit().await;
        }
    }
}

enum Decision {
    Reuse(HostgroupServer, BackendConn),
    Connect(HostgroupServer),
    Replace(HostgroupServer, BackendConn),
    WaitForFree,
    Wait,
}

/// A checked-out connection. Dropping it discards the connection; [`PooledConn::release`] resets
/// it and returns it to the pool.
#[derive(Debug)]
pub struct PooledConn {
    conn: Option<BackendConn>,
    key: PoolKey,
    pool: Arc<MysqlPool>,
    /// True when it came from the idle list (it may have died while idle).
    pub reused: bool,
}

impl PooledConn {
    fn new(conn: BackendConn, key: PoolKey, pool: Arc<MysqlPool>, reused: bool) -> Self {
        PooledConn {
            conn: Some(conn),
            key,
            pool,
            reused,
        }
    }

    /// The connection.
    pub fn conn(&mut self) -> &mut BackendConn {
        // Invariant: `conn` is only taken by `release`, which consumes self.
        self.conn
            .as_mut()
            .unwrap_or_else(|| unreachable!("PooledConn used after release"))
    }

    /// The pool key (server, user, …).
    pub fn key(&self) -> &PoolKey {
        &self.key
    }

    /// Returns the connection to the idle list as it is, session state included: the next user
    /// brings it to its own state (only the differences). For connections without pinned state.
    pub fn release_clean(mut self) {
        if let Some(conn) = self.conn.take() {
            self.pool.put_idle(self.key.clone(), conn);
        }
    }

    /// Resets the connection in the background and returns it to the idle list when the reset
    /// succeeds; otherwise it is closed.
    pub fn release(mut self) {
        let Some(mut conn) = self.conn.take() else {
            return;
        };
        let pool = self.pool.clone();
        let key = self.key.clone();
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

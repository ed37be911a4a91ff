//! Getting a connection for a session: reuse an idle one, open a new one under the server's
//! `max_connections`, or queue for one; retry other servers until the budget is spent.

use super::handoff::{self, Handoff, Waiter};
use super::{CheckoutRequest, MysqlPool, PooledConn, lock};
use crate::conn::{BackendConn, ConnectParams, REPLY_SHAPING_CAPS};
use crate::error::Error;
use sluice_core::Protocol;
use sluice_core::checkout::{Attempt, CheckoutBudget, Connector};
use sluice_core::hostgroup::{NoServer, pick, random_u64};
use sluice_core::runtime::{HostgroupServer, ServerKey};
use std::collections::HashSet;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::oneshot;
use tracing::{debug, warn};

// A value of one checkout on the stack: boxing the connection would allocate per checkout.
#[allow(clippy::large_enum_variant)]
enum Decision {
    Reuse(super::IdleConn),
    /// A slot is counted for this server: open a connection.
    Connect(HostgroupServer),
    /// Queued (every server at max_connections).
    Wait(oneshot::Receiver<Handoff>),
    /// Nothing usable now (servers offline or failing): pause and try again.
    Retry,
}

impl MysqlPool {
    fn decide(&self, req: &CheckoutRequest<'_>, failed: &HashSet<ServerKey>) -> Decision {
        let mut g = lock(&self.inner);
        let picked = pick(
            req.servers,
            |s| g.open_count(req.hostgroup, &s.key),
            |s| failed.contains(&s.key),
            random_u64(),
            std::time::Instant::now(),
        );
        match picked {
            Ok(s) => match g.pop_idle(&req.key_ref(s), req.worker) {
                Some(idle) => Decision::Reuse(idle),
                None => {
                    *g.open.entry((req.hostgroup, s.key.clone())).or_insert(0) += 1;
                    Decision::Connect(s.clone())
                }
            },
            Err(NoServer::AllAtMaxConnections) => {
                // Servers at max_connections may still hold idle connections: ours to reuse,
                // or another user's to close so that ours can be opened in its slot.
                for s in req.servers {
                    if let Some(idle) = g.pop_idle(&req.key_ref(s), req.worker) {
                        return Decision::Reuse(idle);
                    }
                }
                for s in req.servers.iter().filter(|s| !failed.contains(&s.key)) {
                    let victim = g
                        .idle
                        .iter_mut()
                        .find(|(k, v)| {
                            k.hostgroup == req.hostgroup && k.server == s.key && !v.is_empty()
                        })
                        .and_then(|(_, v)| v.pop())
                        .map(|i| i.conn);
                    if let Some(old) = victim {
                        debug!(server = %s.key, "closing an idle connection of another user to make room");
                        tokio::spawn(old.quit());
                        return Decision::Connect(s.clone());
                    }
                }
                let (tx, rx) = oneshot::channel();
                let servers = req
                    .servers
                    .iter()
                    .filter(|s| !failed.contains(&s.key))
                    .map(|s| s.key.clone())
                    .collect();
                let key = req.key_for(&req.servers[0]);
                handoff::enqueue(
                    &mut g,
                    Waiter::new(key, servers, tx, req.worker, req.priority),
                );
                Decision::Wait(rx)
            }
            Err(_) => Decision::Retry,
        }
    }

    /// Opens a connection to `server`, whose slot is already counted; frees the slot on failure.
    async fn connect_on(
        self: &Arc<Self>,
        req: &CheckoutRequest<'_>,
        server: &HostgroupServer,
        deadline: Instant,
    ) -> Result<PooledConn, Error> {
        let tls = match (server.use_ssl, &self.tls) {
            (false, _) => None,
            (true, Some(src)) => match src.config_for(&server.ssl_params, req.user) {
                Ok(c) => Some(c),
                Err(e) => {
                    self.release_slot(req.hostgroup, &server.key);
                    return Err(Error::Tls {
                        server: server.key.to_string(),
                        why: e.to_string(),
                    });
                }
            },
            (true, None) => {
                self.release_slot(req.hostgroup, &server.key);
                return Err(Error::Tls {
                    server: server.key.to_string(),
                    why: "no TLS client configuration".into(),
                });
            }
        };
        let remaining = deadline.saturating_duration_since(Instant::now());
        let params = ConnectParams {
            host: server.key.hostname.clone(),
            port: server.key.port,
            user: req.user.to_string(),
            secret: req.secret.clone(),
            schema: None,
            charset: req.charset,
            client_caps: req.client_caps & REPLY_SHAPING_CAPS,
            tls,
            compress: server.compression,
            timeout: req
                .connect_timeout
                .min(remaining)
                .max(Duration::from_millis(1)),
            max_packet: req.max_packet,
            multi_statements: true,
            track_gtid: true,
        };
        // Boxed: opening a connection is rare next to the statements that reuse one, and the
        // login's state (TLS included) would otherwise be part of every command's future, which
        // the session moves into its reused block for every statement.
        match Box::pin(BackendConn::connect(&params)).await {
            Ok(mut conn) => {
                let server_name = server.key.to_string();
                conn.traffic = self
                    .traffic
                    .count_connect(req.hostgroup, &server_name, true);
                conn.home = req.worker;
                debug!(server = %server.key, hostgroup = req.hostgroup, thread_id = conn.thread_id, session_thread = ?req.worker, "opened backend connection");
                self.connect_outcome(&server.key, true);
                self.sockets.register(&server.key, &conn.kill_handle);
                Ok(PooledConn::new(
                    Box::new(conn),
                    req.key_for(server),
                    self.clone(),
                    false,
                ))
            }
            Err(e) => {
                self.release_slot(req.hostgroup, &server.key);
                let server_name = server.key.to_string();
                self.traffic
                    .count_connect(req.hostgroup, &server_name, false);
                if !e.is_retryable() {
                    warn!(server = %server.key, hostgroup = req.hostgroup, user = req.user, "backend refused the login: {e}");
                } else {
                    warn!(server = %server.key, hostgroup = req.hostgroup, "error connecting to backend: {e}; trying again");
                    self.connect_outcome(&server.key, false);
                }
                Err(e)
            }
        }
    }

    /// An idle connection for `req` at once, when the server the balancer picks has one; `None`
    /// when it has none (or it died while idle): then [`MysqlPool::checkout`] opens one or
    /// queues. This is a busy pool's common case, and it needs none of the checkout's retry
    /// and queueing state, which a session would otherwise carry in every statement's future.
    pub fn try_checkout_idle(self: &Arc<Self>, req: &CheckoutRequest<'_>) -> Option<PooledConn> {
        let idle = {
            let mut g = lock(&self.inner);
            let picked = pick(
                req.servers,
                |s| g.open_count(req.hostgroup, &s.key),
                |_| false,
                random_u64(),
                Instant::now(),
            )
            .ok()?;
            g.pop_idle(&req.key_ref(picked), req.worker)?
        };
        if idle.conn.looks_dead() {
            debug!(server = %idle.key.server, "dropping idle backend connection closed by the server");
            self.release_slot(req.hostgroup, &idle.key.server);
            return None;
        }
        self.stats.get_conn_immediate.add(1);
        self.stats.get_conn_success.add(1);
        Some(PooledConn::new(idle.conn, idle.key, self.clone(), true))
    }

    /// Gets a connection: an idle one when possible, else a new one, else a place in the queue;
    /// servers that fail are skipped and retried until `connect_timeout_max` is spent.
    pub async fn checkout(
        self: &Arc<Self>,
        req: &CheckoutRequest<'_>,
    ) -> Result<PooledConn, Error> {
        let budget = CheckoutBudget::starting_now(req.connect_timeout_max, req.retry_delay);
        let attempts = MysqlAttempts { pool: self, req };
        sluice_core::checkout::checkout(&attempts, req.servers, budget).await
    }

    /// Opens a connection to `server` (its slot counted) as one attempt's outcome.
    async fn connect_attempt(
        self: &Arc<Self>,
        req: &CheckoutRequest<'_>,
        server: &HostgroupServer,
        deadline: Instant,
    ) -> Attempt<PooledConn, Error> {
        match self.connect_on(req, server, deadline).await {
            Ok(p) => Attempt::Ready(p),
            Err(e) if !e.is_retryable() => Attempt::Fatal(e),
            Err(e) => Attempt::Failed {
                server: server.key.clone(),
                error: e.to_string(),
            },
        }
    }

    /// Waits in the queue until a connection or a slot is handed over, or `deadline`.
    async fn wait_in_line(
        self: &Arc<Self>,
        req: &CheckoutRequest<'_>,
        mut rx: oneshot::Receiver<Handoff>,
        deadline: Instant,
    ) -> Attempt<PooledConn, Error> {
        let remaining = deadline.saturating_duration_since(Instant::now());
        let waiting = self.stats.waiting();
        let handed = match tokio::time::timeout(remaining, &mut rx).await {
            Ok(r) => r.ok(),
            // A connection or slot handed over just as the wait timed out is still ours: take
            // it rather than lose it (its slot would stay counted).
            Err(_) => {
                rx.close();
                rx.try_recv().ok()
            }
        };
        drop(waiting);
        match handed {
            Some(Handoff::Conn(key, conn)) => {
                Attempt::Ready(PooledConn::new(conn, key, self.clone(), false))
            }
            Some(Handoff::Slot(sk)) => match req.servers.iter().find(|s| s.key == sk) {
                Some(s) => self.connect_attempt(req, s, deadline).await,
                None => {
                    self.release_slot(req.hostgroup, &sk);
                    Attempt::Again
                }
            },
            None => Attempt::Again,
        }
    }
}

/// One checkout's attempts, for the shared loop.
struct MysqlAttempts<'a> {
    pool: &'a Arc<MysqlPool>,
    req: &'a CheckoutRequest<'a>,
}

impl Connector for MysqlAttempts<'_> {
    type Conn = PooledConn;
    type Error = Error;

    async fn attempt(
        &self,
        servers: &[HostgroupServer],
        failed: &HashSet<ServerKey>,
        deadline: Instant,
    ) -> Attempt<PooledConn, Error> {
        let pool = self.pool;
        let req = &CheckoutRequest {
            servers,
            ..self.req.clone()
        };
        match pool.decide(req, failed) {
            Decision::Reuse(idle) if idle.conn.looks_dead() => {
                debug!(server = %idle.key.server, "dropping idle backend connection closed by the server");
                pool.release_slot(req.hostgroup, &idle.key.server);
                Attempt::Again
            }
            Decision::Reuse(idle) => {
                pool.stats.get_conn_immediate.add(1);
                Attempt::Ready(PooledConn::new(idle.conn, idle.key, pool.clone(), true))
            }
            Decision::Connect(server) => pool.connect_attempt(req, &server, deadline).await,
            Decision::Wait(rx) => pool.wait_in_line(req, rx, deadline).await,
            // Every usable server failed once in this round.
            Decision::Retry => Attempt::Exhausted,
        }
    }

    fn reread(&self) -> Option<Vec<HostgroupServer>> {
        let cfg = self.req.config?;
        Some(cfg.hostgroup_servers(Protocol::Mysql, self.req.hostgroup))
    }

    fn stats(&self) -> &sluice_core::metrics::PoolStats {
        &self.pool.stats
    }

    fn timed_out(&self, elapsed: Duration, last_error: Option<String>) -> Error {
        Error::ConnectTimeout {
            hostgroup: self.req.hostgroup,
            elapsed_ms: elapsed.as_millis() as u64,
            last_error,
        }
    }
}

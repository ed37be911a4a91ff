//! Getting a connection for a session: reuse an idle one, open a new one under the server's
//! `max_connections`, or queue for one; retry other servers until the budget is spent.

use super::handoff::{self, Handoff, Waiter};
use super::{CheckoutRequest, MysqlPool, PoolKey, PooledConn, lock};
use crate::conn::{BackendConn, ConnectParams, REPLY_SHAPING_CAPS};
use crate::error::Error;
use sluice_core::Protocol;
use sluice_core::checkout::{Attempt, CheckoutBudget, Connector};
use sluice_core::hostgroup::{NoServer, balance_random, pick};
use sluice_core::pool::{BorrowedKey, Headroom};
use sluice_core::runtime::{HostgroupServer, ServerKey};
use sluice_net::client_tls::TlsSource;
use std::collections::HashSet;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::oneshot;
use tracing::debug;

/// An idle connection taken out of the pool, with its pool's key.
type Idle = (Arc<PoolKey>, Box<BackendConn>);

// A value of one checkout on the stack: boxing the server would allocate per checkout.
#[allow(clippy::large_enum_variant)]
enum Decision {
    Reuse(Idle),
    /// A slot is counted for this server: open a connection.
    Connect(HostgroupServer),
    /// Queued (every server at max_connections).
    Wait(oneshot::Receiver<Handoff>),
    /// Nothing usable now (servers offline or failing): pause and try again.
    Retry,
}

impl super::Inner {
    /// An idle connection of the pool `req` asks for on `server`: the most recently used one
    /// opened on the asking session thread, else the most recently used one.
    fn take_idle(&mut self, req: &CheckoutRequest<'_>, server: &HostgroupServer) -> Option<Idle> {
        let worker = req.options.worker;
        let (key, conn) = self
            .idle
            .take(&req.key_ref(server), worker, None, Headroom::NONE);
        Some((key, conn?))
    }
}

impl MysqlPool {
    fn decide(&self, req: &CheckoutRequest<'_>, failed: &HashSet<ServerKey>) -> Decision {
        let mut g = lock(&self.inner);
        let picked = pick(
            req.servers,
            |s| g.open_count(req.hostgroup, &s.key),
            |s| failed.contains(&s.key),
            balance_random,
            std::time::Instant::now,
        );
        match picked {
            Ok(s) => match g.take_idle(req, s) {
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
                    if let Some(idle) = g.take_idle(req, s) {
                        return Decision::Reuse(idle);
                    }
                }
                for s in req.servers.iter().filter(|s| !failed.contains(&s.key)) {
                    let victim = g
                        .idle
                        .pop_any(|k| k.hostgroup == req.hostgroup && k.server == s.key);
                    if let Some((_, old)) = victim {
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
                let key = req.key_ref(&req.servers[0]).to_key();
                let (worker, priority) = (req.options.worker, req.options.priority);
                handoff::enqueue(&mut g, Waiter::new(key, servers, tx, worker, priority));
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
        let tls = match TlsSource::for_server(self.tls.as_deref(), server, req.user) {
            Ok(tls) => tls,
            Err(e) => {
                self.release_slot(req.hostgroup, &server.key);
                return Err(Error::Tls {
                    server: server.key.to_string(),
                    why: e.to_string(),
                });
            }
        };
        let dial = |timeout| {
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
                timeout,
                max_packet: req.max_packet,
                multi_statements: true,
                track_gtid: true,
            };
            async move { BackendConn::connect(&params).await }
        };
        let opened = self
            .shared
            .open(server, req.hostgroup, &req.options, deadline, dial)
            .await;
        match opened {
            Ok(conn) => {
                let key = lock(&self.inner).idle.key_of(&req.key_ref(server));
                Ok(PooledConn::new(Box::new(conn), key, self.clone(), false))
            }
            Err(e) => {
                self.release_slot(req.hostgroup, &server.key);
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
                balance_random,
                Instant::now,
            )
            .ok()?;
            g.take_idle(req, picked)?
        };
        let (key, conn) = idle;
        if conn.looks_dead() {
            debug!(server = %key.server, "dropping idle backend connection closed by the server");
            self.release_slot(req.hostgroup, &key.server);
            return None;
        }
        let stats = self.shared.stats();
        stats.get_conn_immediate.add(1);
        stats.get_conn_success.add(1);
        Some(PooledConn::new(conn, key, self.clone(), true))
    }

    /// Gets a connection: an idle one when possible, else a new one, else a place in the queue;
    /// servers that fail are skipped and retried until `connect_timeout_max` is spent.
    pub async fn checkout(
        self: &Arc<Self>,
        req: &CheckoutRequest<'_>,
    ) -> Result<PooledConn, Error> {
        let opts = &req.options;
        let budget = CheckoutBudget::starting_now(opts.connect_timeout_max, opts.retry_delay);
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
        let waiting = self.shared.stats().waiting();
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
            Decision::Reuse((key, conn)) if conn.looks_dead() => {
                debug!(server = %key.server, "dropping idle backend connection closed by the server");
                pool.release_slot(req.hostgroup, &key.server);
                Attempt::Again
            }
            Decision::Reuse((key, conn)) => {
                pool.shared.stats().get_conn_immediate.add(1);
                Attempt::Ready(PooledConn::new(conn, key, pool.clone(), true))
            }
            Decision::Connect(server) => pool.connect_attempt(req, &server, deadline).await,
            Decision::Wait(rx) => pool.wait_in_line(req, rx, deadline).await,
            // Every usable server failed once in this round.
            Decision::Retry => Attempt::Exhausted,
        }
    }

    fn reread(&self) -> Option<Vec<HostgroupServer>> {
        let cfg = self.req.options.config?;
        Some(cfg.hostgroup_servers(Protocol::Mysql, self.req.hostgroup))
    }

    fn stats(&self) -> &sluice_core::metrics::PoolStats {
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

//! Getting a backend connection in the client's state, forwarding a command and relaying the
//! reply, with the failure handling around it.

use super::Session;
use crate::error::{Error, LOST_BACKEND};
use sluice_core::admission::Permit;
use sluice_core::config::{Priority, is_native_hash};
use sluice_core::pool::PoolOptions;
use sluice_core::runtime::RuntimeConfig;
use sluice_mysql_backend::{BackendSecret, CheckoutRequest, PooledConn, RelayOutcome};
use sluice_mysql_proto::framing::Packet;
use sluice_mysql_proto::packets::err_payload;
use sluice_mysql_proto::reply::{ReplyKind, ReplyTracker};
use std::time::Duration;
use tracing::{info, warn};

/// Largest reply copied for the query cache; a bigger one is relayed and not cached.
const CAPTURE_LIMIT: usize = 4 << 20;

/// Replacements of a dead pooled connection per command, unless a rule's `retries` says.
pub(super) const DEFAULT_RETRIES: u32 = 1;

/// Why a command could not be forwarded.
pub(super) enum ForwardFailure {
    /// An error to report to the client (the session continues).
    Report(Error),
    /// The server answered a state-sync command with an ERR (e.g. the schema is gone); this
    /// payload goes to the client as the command's reply.
    ServerErr(Vec<u8>),
}

use std::borrow::Cow;

/// What a session can use without waiting for the pool or a server.
// Lives on the stack for a moment and is never part of a future, so its size costs nothing.
#[allow(clippy::large_enum_variant)]
enum AtHand {
    /// The connection it holds, or an idle pooled one already in its state (now held).
    Ready,
    /// An idle pooled connection whose session state differs from the client's.
    Unsynced(PooledConn),
    /// No idle connection: the pool's full checkout is needed.
    Nothing,
}

/// The part of getting a connection that waits (checkout or state sync), boxed.
type SlowPath<'a> =
    std::pin::Pin<Box<dyn std::future::Future<Output = Result<(), ForwardFailure>> + Send + 'a>>;

impl Session {
    /// What the session logs in to servers with: the client's own secret (borrowed: no copy
    /// per checkout) unless the backend password differs from the frontend one.
    pub(super) fn backend_secret(
        &self,
        rt: &RuntimeConfig,
    ) -> Result<Cow<'_, BackendSecret>, Error> {
        let name = &self.login.user.username;
        match rt.mysql.backend_users.get(name) {
            None => Err(Error::Backend(sluice_mysql_backend::Error::NoBackendUser(
                name.clone(),
            ))),
            Some(b) if b.password == self.login.user.password || is_native_hash(&b.password) => {
                Ok(Cow::Borrowed(&self.login.secret))
            }
            Some(b) => Ok(Cow::Owned(BackendSecret::Clear(b.password.clone()))),
        }
    }

    /// Makes sure the session has a backend connection in its session state.
    pub(super) async fn ensure_backend(&mut self) -> Result<(), ForwardFailure> {
        // Boxed, both: bringing a connection to the client's state sends statements to the
        // server, and opening one or queueing for one is rare next to reusing an idle one;
        // their state would otherwise be part of every command's future, which the session
        // moves into its reused block for every statement. (Built before it is awaited, so the
        // future keeps neither the idle connection nor the match.)
        let slow: SlowPath<'_> = match self.backend_at_hand()? {
            AtHand::Ready => return Ok(()),
            AtHand::Unsynced(pooled) => Box::pin(self.adopt(pooled)),
            AtHand::Nothing => Box::pin(self.checkout_backend()),
        };
        slow.await
    }

    /// What [`Self::ensure_backend`] can settle without waiting: the connection the session
    /// holds, or an idle pooled one.
    fn backend_at_hand(&mut self) -> Result<AtHand, ForwardFailure> {
        // A connection the session holds stays: it may carry a transaction or other pinned state,
        // so if the server closed it the client must see the failure rather than go on elsewhere.
        let rt = self.fe.config.load();
        if let Some(b) = self.backend.as_ref() {
            let k = b.key();
            if rt.mysql.server_in_service(k.hostgroup, &k.server) {
                return Ok(AtHand::Ready);
            }
            // OFFLINE_HARD or removed: its connections are dropped, as ProxySQL does.
            let server = k.server.to_string();
            let pinned = self.pins.reason();
            self.backend = None;
            if let Some(reason) = pinned {
                warn!(session = self.id, server = %server, reason,
                    "server went OFFLINE_HARD or was removed; dropping the session's backend connection");
                self.pins.clear();
                self.refresh_multiplexing_setting();
                let msg = format!(
                    "Server {server} was taken out of service (shunned, OFFLINE_HARD or removed); the connection and its {reason} are gone"
                );
                return Err(ForwardFailure::ServerErr(err_payload(
                    LOST_BACKEND.0,
                    LOST_BACKEND.1,
                    &msg,
                )));
            }
        }
        let secret = self.backend_secret(&rt).map_err(ForwardFailure::Report)?;
        let req = self.pool_request(&rt, &secret);
        let Some(mut pooled) = self.fe.pool.try_checkout_idle(&req) else {
            return Ok(AtHand::Nothing);
        };
        if pooled.conn().state != self.state {
            return Ok(AtHand::Unsynced(pooled));
        }
        self.backend = Some(pooled);
        self.backend_fresh = true;
        Ok(AtHand::Ready)
    }

    /// The pool request for the session's current hostgroup, user and charset.
    fn pool_request<'a>(
        &'a self,
        rt: &'a RuntimeConfig,
        secret: &'a BackendSecret,
    ) -> CheckoutRequest<'a> {
        let hostgroup = self.route_hostgroup;
        let servers = rt
            .mysql
            .hostgroups
            .get(&hostgroup)
            .map(Vec::as_slice)
            .unwrap_or(&[]);
        let mut req = checkout_request(
            &rt.mysql.variables,
            hostgroup,
            servers,
            (&self.login.user.username, secret),
            (self.login.charset, self.login.client_caps()),
        );
        req.options = PoolOptions {
            config: Some(&self.fe.config),
            worker: self.login.worker,
            priority: self
                .admission
                .as_ref()
                .map_or(Priority::Regular, Permit::priority),
            ..req.options
        };
        req
    }

    /// The pool's full checkout (open a connection, queue for one, retry other servers), then
    /// the connection brought to the client's state.
    async fn checkout_backend(&mut self) -> Result<(), ForwardFailure> {
        let rt = self.fe.config.load();
        let secret = self.backend_secret(&rt).map_err(ForwardFailure::Report)?;
        let req = self.pool_request(&rt, &secret);
        let pooled = match self.fe.pool.checkout(&req).await {
            Ok(p) => p,
            Err(e) => {
                if let sluice_mysql_backend::Error::ConnectTimeout {
                    hostgroup,
                    elapsed_ms,
                    last_error,
                } = &e
                {
                    warn!(session = self.id, user = %self.login.user.username, hostgroup, elapsed_ms,
                        last_error = last_error.as_deref().unwrap_or("no server available"),
                        "max connect timeout reached while reaching hostgroup");
                }
                return Err(ForwardFailure::Report(Error::Backend(e)));
            }
        };
        self.adopt(pooled).await
    }

    /// Brings a checked-out connection to the client's state (only the differences) and makes
    /// it the session's.
    async fn adopt(&mut self, mut pooled: PooledConn) -> Result<(), ForwardFailure> {
        match pooled.conn().sync_state(&self.state).await {
            Ok(Ok(())) => {}
            Ok(Err(err)) => {
                // The connection is fine; the client's state is not applicable (e.g. its schema
                // was dropped). Report the server's words; the connection goes back to the pool.
                pooled.release();
                return Err(ForwardFailure::ServerErr(err.to_vec()));
            }
            Err(e) => return Err(ForwardFailure::Report(Error::Backend(e))),
        }
        self.backend = Some(pooled);
        self.backend_fresh = true;
        Ok(())
    }

    /// Records that the state change a statement made on the held connection is its state now.
    pub(super) fn sync_conn_state(&mut self) {
        if let Some(b) = self.backend.as_mut() {
            b.conn().state = self.state.clone();
        }
    }

    /// Sends an error packet for a failed preparation step.
    pub(super) async fn report(&mut self, seq: u8, f: ForwardFailure) {
        let payload = match f {
            ForwardFailure::Report(e) => e.to_err_payload(),
            ForwardFailure::ServerErr(p) => p,
        };
        self.send_err(seq, &payload).await;
    }

    /// Forwards `pk` as is and relays the reply.
    pub(super) async fn forward(&mut self, pk: &Packet, kind: ReplyKind) -> Option<ReplyTracker> {
        self.forward_bytes(&pk.raw, pk.seq, kind).await
    }

    /// Forwards already framed command bytes and relays the reply. Returns the reply's tracker
    /// when it completed; on failure the client has been sent an error (or is gone).
    pub(super) async fn forward_bytes(
        &mut self,
        raw: &[u8],
        seq: u8,
        kind: ReplyKind,
    ) -> Option<ReplyTracker> {
        let reply_seq = seq.wrapping_add(1);
        // A pooled connection found dead before any reply byte is replaced, up to `retries`
        // times (1, ProxySQL's query_retries_on_failure default, unless a rule says otherwise).
        let retries = std::mem::replace(&mut self.query_retries, DEFAULT_RETRIES);
        for attempt in 0..=retries {
            if let Err(f) = self.ensure_backend().await {
                self.report(reply_seq, f).await;
                return None;
            }
            self.publish_running().await;
            let pooled = self.backend.as_mut()?;
            let reused_fresh = attempt < retries && self.backend_fresh && pooled.reused;
            let hostgroup = pooled.key().hostgroup;
            let conn = pooled.conn();
            // Only a command that never left Sluice is retried elsewhere: once it reached a
            // server it may have run, and running it twice is worse than an error.
            let (outcome, retryable) = {
                let mut commits = super::causal::commit_sink(
                    &self.fe.counters.stats.causal,
                    &self.login.user.username,
                    hostgroup,
                    &mut self.causal_token,
                );
                match conn.send_raw(raw).await {
                    Ok(()) if self.capture.is_some() => {
                        let mut tee = crate::capture::Capture::new(
                            &mut self.io.stream,
                            &mut self.capture,
                            CAPTURE_LIMIT,
                        );
                        (conn.relay_reply(kind, &mut tee, &mut commits).await, false)
                    }
                    Ok(()) => (
                        conn.relay_reply(kind, &mut self.io.stream, &mut commits)
                            .await,
                        false,
                    ),
                    Err(error) => (
                        RelayOutcome::BackendFailed {
                            error,
                            forwarded: 0,
                            next_seq: reply_seq,
                        },
                        reused_fresh,
                    ),
                }
            };
            let mut outcome = outcome;
            while let RelayOutcome::LocalInfile(t) = outcome {
                // Boxed: LOAD DATA LOCAL is rare, and its state would be in every command's future.
                outcome = Box::pin(self.relay_local_file(t)).await;
            }
            // Before the connection can go back to the pool, and after any KILL in flight.
            self.unpublish_running().await;
            // The common end, a whole reply, without building the failure paths' future.
            let handled = match outcome {
                RelayOutcome::Complete(t) => self.completed(t),
                other => self.handle_outcome(other, retryable).await,
            };
            match handled {
                Outcome::Done(t) => return t,
                Outcome::Retry => continue,
            }
        }
        None
    }

    async fn handle_outcome(&mut self, outcome: RelayOutcome, retryable: bool) -> Outcome {
        match outcome {
            RelayOutcome::Complete(t) => self.completed(t),
            RelayOutcome::LocalInfile(_) => {
                // `forward_bytes` relays the file before it gets here; a request left over means
                // the connection is mid-statement: it cannot be reused.
                warn!(
                    session = self.id,
                    "LOCAL INFILE request left unanswered; closing the backend connection"
                );
                self.backend = None;
                self.client_gone = true;
                Outcome::Done(None)
            }
            RelayOutcome::ClientGone(e) => {
                warn!(session = self.id, client = %self.io.peer, "client went away during a reply: {e}");
                self.backend = None;
                self.client_gone = true;
                Outcome::Done(None)
            }
            RelayOutcome::BackendFailed {
                error,
                forwarded,
                next_seq,
            } => {
                self.backend_failed(error, retryable && forwarded == 0, next_seq)
                    .await
            }
        }
    }

    /// A reply relayed whole: the server's error counted, the status flags followed.
    fn completed(&mut self, t: ReplyTracker) -> Outcome {
        self.backend_fresh = false;
        if let Some(t) = self.backend.as_ref().and_then(|b| b.traffic()) {
            t.queries.add(1);
        }
        if let (Some(code), Some(b)) = (t.error_code, self.backend.as_ref()) {
            let k = b.key();
            let key = (
                k.hostgroup,
                k.server.hostname.clone(),
                k.server.port,
                k.user.clone(),
                self.io.peer.ip().to_string(),
                self.state.schema.clone().unwrap_or_default(),
            );
            self.fe.counters.commands.record_error(
                key,
                &code.to_string(),
                t.error_message.as_deref().unwrap_or(""),
            );
        }
        if t.status_seen {
            self.pins.observe_status(t.status);
        }
        if t.error_code.is_some_and(connection_ending_error) {
            // The server closes the connection after these errors.
            self.backend = None;
        }
        Outcome::Done(Some(t))
    }

    /// The backend connection broke during a command: retried on a new one when nothing went
    /// to the client yet (`retry`), else the client gets error 1927 and — when the connection
    /// held a transaction or state Sluice cannot replay — the session ends.
    async fn backend_failed(
        &mut self,
        error: sluice_mysql_backend::Error,
        retry: bool,
        next_seq: u8,
    ) -> Outcome {
        let server = self
            .backend
            .as_ref()
            .map(|b| b.key().server.to_string())
            .unwrap_or_default();
        self.backend = None;
        if retry {
            warn!(session = self.id, server = %server,
                "pooled backend connection was dead ({error}); retrying on a new connection");
            return Outcome::Retry;
        }
        if self.slot.signal().is_raised(sluice_net::Signal::End) {
            // KILL CONNECTION of this session: its backend connection was killed with
            // it; the client sees its connection close, as a directly killed one does.
            info!(session = self.id, server = %server, "session killed during a statement; closing it");
            self.client_gone = true;
            return Outcome::Done(None);
        }
        // A transaction, or state Sluice cannot replay, went with the connection (the
        // server ended it: idle_transaction_timeout, a KILL, a crash). Going on elsewhere
        // would run the client's next statements outside the transaction it believes
        // open: the session ends after the error, as a direct connection would.
        let in_trans = self.pins.in_transaction();
        let lost_state = if in_trans {
            Some("transaction")
        } else if self.pins.dirty() {
            self.pins.reason()
        } else {
            None
        };
        let msg = match lost_state {
            Some(what) => {
                warn!(session = self.id, user = %self.login.user.username, server = %server,
                    "backend connection lost during a command: {error}; its {what} is gone with it: the client gets error 1927 and the session ends");
                self.client_gone = true;
                format!(
                    "Lost connection to backend server {server} during query: {error}; the {what} it held is gone, so this session ends"
                )
            }
            None => {
                warn!(session = self.id, user = %self.login.user.username, server = %server,
                    "backend connection lost during a command: {error}; the client gets error 1927 and the session continues on a new connection");
                format!("Lost connection to backend server {server} during query: {error}")
            }
        };
        // Whatever the lost connection held for this client is gone with it.
        self.pins.clear();
        self.refresh_multiplexing_setting();
        self.send_err(next_seq, &err_payload(LOST_BACKEND.0, LOST_BACKEND.1, &msg))
            .await;
        Outcome::Done(None)
    }

    pub(super) async fn send_err(&mut self, seq: u8, payload: &[u8]) {
        if self.io.write(seq, payload).await.is_err() {
            self.client_gone = true;
        }
    }
}

/// A checkout of `servers` in `hostgroup` for `user` with the session's reply-shaping
/// (charset, capabilities), under the configured connect timeouts.
pub(super) fn checkout_request<'a>(
    vars: &sluice_core::config::MysqlVariables,
    hostgroup: u32,
    servers: &'a [sluice_core::runtime::HostgroupServer],
    (user, secret): (&'a str, &'a BackendSecret),
    (charset, client_caps): (u8, u64),
) -> CheckoutRequest<'a> {
    CheckoutRequest {
        hostgroup,
        servers,
        user,
        secret,
        charset,
        client_caps,
        max_packet: (vars.max_allowed_packet as usize).max(64 << 20),
        options: PoolOptions::with_timeouts(
            Duration::from_millis(vars.connect_timeout_server),
            Duration::from_millis(vars.connect_timeout_server_max),
            Duration::from_millis(vars.connect_retries_delay),
        ),
    }
}

enum Outcome {
    Done(Option<ReplyTracker>),
    Retry,
}

/// Server errors after which the backend connection is gone (killed, server shutting down).
fn connection_ending_error(code: u16) -> bool {
    matches!(code, 1053 | 1077 | 1152 | 1156 | 1159 | 1161 | 1927 | 4031)
}

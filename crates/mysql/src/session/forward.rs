//! Forwarding a client command to the session's backend connection and relaying the reply.

use super::{Next, Session};
use crate::error::Error;
use sluice_core::config::is_native_hash;
use sluice_core::runtime::RuntimeConfig;
use sluice_mysql_backend::{BackendSecret, CheckoutRequest, RelayOutcome};
use sluice_mysql_proto::framing::Packet;
use sluice_mysql_proto::packets::err_payload;
use sluice_mysql_proto::reply::{ReplyKind, ReplyTracker};
use std::time::Duration;
use tracing::warn;

/// Why a command could not be forwarded.
enum ForwardFailure {
    /// An error to report to the client (the session continues).
    Report(Error),
    /// The backend replied with an ERR while preparing the connection (e.g. unknown schema);
    /// this payload goes to the client as the command's reply.
    BackendErr(Vec<u8>),
}

impl Session {
    /// `Close` when the client went away during the last command.
    pub(super) fn after_forward(&self) -> Next {
        if self.client_gone {
            Next::Close
        } else {
            Next::Continue
        }
    }

    pub(super) fn set_schema(&mut self, name: String) {
        if let Some(b) = self.backend.as_mut() {
            let c = b.conn();
            c.schema = Some(name.clone());
            c.schema_unknown = false;
        }
        self.schema = name;
    }

    /// Tracks `USE db` sent as a query so the schema survives a change of backend connection.
    pub(super) fn track_use(&mut self, sql: &[u8], _t: &ReplyTracker) {
        let text = String::from_utf8_lossy(sql);
        let trimmed = text.trim().trim_end_matches(';').trim();
        let lower = trimmed.to_ascii_lowercase();
        if let Some(rest) = lower.strip_prefix("use")
            && rest.starts_with(|c: char| c.is_whitespace() || c == '`')
            && !rest.contains(';')
        {
            let name = trimmed[3..].trim().trim_matches('`').to_string();
            if !name.is_empty() {
                self.set_schema(name);
                return;
            }
        }
        if lower.contains("use")
            && let Some(b) = self.backend.as_mut()
        {
            b.conn().schema_unknown = true;
        }
    }

    fn backend_secret(&self, rt: &RuntimeConfig) -> Result<BackendSecret, Error> {
        let name = &self.login.user.username;
        match rt.mysql.backend_users.get(name) {
            None => Err(Error::Backend(sluice_mysql_backend::Error::NoBackendUser(
                name.clone(),
            ))),
            Some(b) if b.password == self.login.user.password || is_native_hash(&b.password) => {
                Ok(self.login.secret.clone())
            }
            Some(b) => Ok(BackendSecret::Clear(b.password.clone())),
        }
    }

    /// Makes sure the session has a backend connection with its schema selected.
    async fn ensure_backend(&mut self) -> Result<(), ForwardFailure> {
        // A connection the session already holds is not swapped silently even if the server
        // closed it: it may carry a transaction or session state, so the client must see the
        // failure (2013, or the server's own error) rather than continue elsewhere.
        if self.backend.is_some() {
            return Ok(());
        }
        let rt = self.fe.config.load();
        let vars = &rt.mysql.variables;
        let hostgroup = self.login.user.default_hostgroup.0;
        let servers = rt
            .mysql
            .hostgroups
            .get(&hostgroup)
            .map(Vec::as_slice)
            .unwrap_or(&[]);
        let secret = self.backend_secret(&rt).map_err(ForwardFailure::Report)?;
        let req = CheckoutRequest {
            hostgroup,
            servers,
            user: &self.login.user.username,
            secret: &secret,
            charset: self.login.charset,
            client_caps: self.login.capabilities,
            connect_timeout: Duration::from_millis(vars.connect_timeout_server),
            connect_timeout_max: Duration::from_millis(vars.connect_timeout_server_max),
            retry_delay: Duration::from_millis(vars.connect_retries_delay),
            max_packet: (vars.max_allowed_packet as usize).max(64 << 20),
        };
        let mut pooled = match self.fe.pool.checkout(&req).await {
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
        let conn = pooled.conn();
        if conn.schema.as_deref() != Some(self.schema.as_str()) || conn.schema_unknown {
            match conn.init_db(&self.schema).await {
                Ok(Ok(())) => {}
                Ok(Err(err)) => {
                    self.backend = Some(pooled);
                    return Err(ForwardFailure::BackendErr(err.to_vec()));
                }
                Err(e) => return Err(ForwardFailure::Report(Error::Backend(e))),
            }
        }
        self.backend = Some(pooled);
        self.backend_fresh = true;
        Ok(())
    }

    /// Forwards `pk` and relays the reply. Returns the reply's tracker when it completed; on
    /// failure the client has been sent an error (or is gone: `client_gone`).
    pub(super) async fn forward(&mut self, pk: &Packet, kind: ReplyKind) -> Option<ReplyTracker> {
        let reply_seq = pk.seq.wrapping_add(1);
        for attempt in 0..2 {
            match self.ensure_backend().await {
                Ok(()) => {}
                Err(ForwardFailure::Report(e)) => {
                    self.send_err(reply_seq, &e.to_err_payload()).await;
                    return None;
                }
                Err(ForwardFailure::BackendErr(payload)) => {
                    self.send_err(reply_seq, &payload).await;
                    return None;
                }
            }
            let pooled = self.backend.as_mut()?;
            let retryable = attempt == 0 && self.backend_fresh && pooled.reused;
            let conn = pooled.conn();
            let outcome = match conn.send_raw(&pk.raw).await {
                Ok(()) => conn.relay_reply(kind, &mut self.io.stream).await,
                Err(error) => RelayOutcome::BackendFailed {
                    error,
                    forwarded: 0,
                    next_seq: reply_seq,
                },
            };
            match outcome {
                RelayOutcome::Complete(t) => {
                    self.backend_fresh = false;
                    if t.error_code.is_some_and(connection_ending_error) {
                        // The server closes the connection after these errors.
                        self.backend = None;
                    }
                    return Some(t);
                }
                RelayOutcome::ClientGone(e) => {
                    warn!(session = self.id, client = %self.io.peer, "client went away during a reply: {e}");
                    self.backend = None;
                    self.client_gone = true;
                    return None;
                }
                RelayOutcome::BackendFailed {
                    error,
                    forwarded,
                    next_seq,
                } => {
                    let server = self
                        .backend
                        .as_ref()
                        .map(|b| b.key().server.to_string())
                        .unwrap_or_default();
                    self.backend = None;
                    if retryable && forwarded == 0 {
                        warn!(session = self.id, server = %server,
                            "pooled backend connection was dead ({error}); retrying on a new connection");
                        continue;
                    }
                    warn!(session = self.id, user = %self.login.user.username, server = %server,
                        "backend connection lost during a command: {error}; the client gets error 2013 and the session continues on a new connection");
                    let msg =
                        format!("Lost connection to backend server {server} during query: {error}");
                    self.send_err(next_seq, &err_payload(2013, "HY000", &msg))
                        .await;
                    return None;
                }
            }
        }
        None
    }

    async fn send_err(&mut self, seq: u8, payload: &[u8]) {
        if self.io.write(seq, payload).await.is_err() {
            self.client_gone = true;
        }
    }
}

/// Server errors after which the backend connection is gone (killed, server shutting down).
fn connection_ending_error(code: u16) -> bool {
    matches!(code, 1053 | 1077 | 1152 | 1156 | 1159 | 1161 | 1927 | 4031)
}

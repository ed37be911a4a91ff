//! `KILL [QUERY|CONNECTION] id` and COM_PROCESS_KILL from clients, where `id` is the thread id
//! the client was given: a Sluice session id. `KILL QUERY` stops the statement that session is
//! running with a `KILL QUERY` on its backend server, sent through another connection; `KILL
//! CONNECTION` ends the session. Only sessions of the same user can be killed (MySQL's rule
//! without the PROCESS/CONNECTION_ADMIN privileges Sluice does not model).

use super::forward::checkout_request;
use super::{Next, Session};
use crate::registry::RunningOn;
use crate::sql::classify::KillRequest;
use sluice_mysql_backend::{BackendSecret, MysqlPool};
use sluice_mysql_proto::packets::err_payload;
use std::sync::Arc;
use tracing::{info, warn};

/// A `KILL QUERY` to send to a server, owned so that it can run in a task of its own.
pub(super) struct KillQuery {
    pool: Arc<MysqlPool>,
    vars: sluice_core::config::MysqlVariables,
    server: sluice_core::runtime::HostgroupServer,
    hostgroup: u32,
    user: String,
    secret: BackendSecret,
    shape: (u8, u64),
    /// The backend thread whose statement is stopped.
    pub(super) thread_id: u32,
    /// `KILL CONNECTION` rather than `KILL QUERY`: the target session ends, and its client sees
    /// its connection close mid-statement, as a directly killed connection does (not 1317).
    pub(super) connection: bool,
}

/// Why a `KILL` could not be carried out on the server.
#[derive(Debug, thiserror::Error)]
pub(super) enum KillFailed {
    /// No connection to the server (checkout or the connection failed).
    #[error(transparent)]
    Backend(#[from] sluice_mysql_backend::Error),
    /// The server answered the KILL with an error; its message.
    #[error("the server refused it: {0}")]
    Refused(String),
}

impl KillQuery {
    /// Sends `KILL QUERY thread_id` through a pooled connection to the same server.
    pub(super) async fn send(self) -> Result<(), KillFailed> {
        let req = checkout_request(
            &self.vars,
            self.hostgroup,
            std::slice::from_ref(&self.server),
            (&self.user, &self.secret),
            self.shape,
        );
        let mut c = self.pool.checkout(&req).await?;
        match c
            .conn()
            .run_sql(&format!(
                "KILL {} {}",
                if self.connection {
                    "CONNECTION"
                } else {
                    "QUERY"
                },
                self.thread_id
            ))
            .await
        {
            Ok(Ok(())) => {
                c.release();
                Ok(())
            }
            Ok(Err(e)) => {
                c.release();
                // ERR payload: 0xff, code, '#', SQLSTATE, then the message.
                Err(KillFailed::Refused(
                    String::from_utf8_lossy(e.get(9..).unwrap_or_default()).into_owned(),
                ))
            }
            Err(e) => Err(KillFailed::Backend(e)),
        }
    }
}

impl Session {
    /// The `KILL QUERY` that stops a statement running on `on`, with this session's backend
    /// credentials; `None` when the server is no longer in the runtime config.
    pub(super) fn kill_query_for(&self, on: &RunningOn) -> Option<KillQuery> {
        let rt = self.fe.config.load();
        let server = rt
            .mysql
            .hostgroups
            .get(&on.hostgroup)?
            .iter()
            .find(|s| s.key == on.server)?
            .clone();
        Some(KillQuery {
            pool: self.fe.pool.clone(),
            vars: rt.mysql.variables.clone(),
            server,
            hostgroup: on.hostgroup,
            user: self.login.user.username.clone(),
            secret: self.backend_secret(&rt).ok()?.into_owned(),
            shape: (self.login.charset, self.login.client_caps()),
            thread_id: on.thread_id,
            connection: false,
        })
    }

    /// Publishes the statement about to run on the held backend connection, for a `KILL QUERY`
    /// from another session.
    pub(super) async fn publish_running(&mut self) {
        let mut running = self.slot.running().lock().await;
        let Some(b) = self.backend.as_mut() else {
            *running = None;
            return;
        };
        let thread_id = b.conn().thread_id;
        let k = b.key();
        match running.as_mut() {
            Some(on) => {
                // Another connection than the last statement's (multiplexing hands out
                // whichever is idle): the place is rewritten in its own buffers, no allocation
                // once the host name fits.
                if on.server != k.server {
                    on.server.hostname.clone_from(&k.server.hostname);
                    on.server.port = k.server.port;
                }
                on.hostgroup = k.hostgroup;
                on.thread_id = thread_id;
                on.active = true;
            }
            None => {
                *running = Some(RunningOn {
                    hostgroup: k.hostgroup,
                    server: k.server.clone(),
                    thread_id,
                    active: true,
                });
            }
        }
    }

    /// The statement ended: waits for a kill being sent to it, so the backend connection goes
    /// back to the pool only after that.
    pub(super) async fn unpublish_running(&mut self) {
        if let Some(on) = self.slot.running().lock().await.as_mut() {
            on.active = false;
        }
    }

    /// COM_PROCESS_KILL: `KILL CONNECTION` of the id in its payload.
    pub(super) async fn process_kill(&mut self, seq: u8, payload: &[u8]) -> Next {
        match payload.get(1..5) {
            Some(b) => {
                let id = u32::from_le_bytes([b[0], b[1], b[2], b[3]]);
                self.kill(seq, &KillRequest::Session { id, query: false })
                    .await
            }
            None => {
                let p = err_payload(1047, "08S01", "malformed COM_PROCESS_KILL");
                self.send_err(seq, &p).await;
                Next::Continue
            }
        }
    }

    /// Carries out a client's `KILL` on a Sluice session. Boxed: KILL is rare and its state
    /// is large (it may open a connection to the target's server), and every command's future
    /// would otherwise carry it; the session moves that future into its reused block for every
    /// statement.
    pub(super) async fn kill(&mut self, seq: u8, req: &KillRequest) -> Next {
        Box::pin(self.kill_now(seq, req)).await
    }

    async fn kill_now(&mut self, seq: u8, req: &KillRequest) -> Next {
        let (id, query) = match req {
            KillRequest::Session { id, query } => (*id, *query),
            KillRequest::Unsupported(what) => {
                let msg = format!(
                    "{what} is not supported through Sluice: use KILL [QUERY|CONNECTION] with the \
                     thread id of CONNECTION_ID()"
                );
                self.send_err(seq, &err_payload(1235, "42000", &msg)).await;
                return Next::Continue;
            }
        };
        let Some((owner, target)) = self.fe.registry.target(id) else {
            let msg = format!("Unknown thread id: {id}");
            self.send_err(seq, &err_payload(1094, "HY000", &msg)).await;
            return Next::Continue;
        };
        if owner != self.login.user.username {
            let msg = format!("You are not owner of thread {id}");
            self.send_err(seq, &err_payload(1095, "HY000", &msg)).await;
            return Next::Continue;
        }
        if id == self.id && !query {
            info!(session = self.id, "session killed itself (KILL CONNECTION)");
            let p = err_payload(1927, "70100", "Connection was killed");
            self.send_err(seq, &p).await;
            return Next::Close;
        }
        {
            // Held while the KILL reaches the server: the target cannot hand its backend
            // connection to another client meanwhile.
            let running = target.running.lock().await;
            if !query {
                // Before the server drops its connection: the target then knows the loss is
                // its own kill (it closes quietly instead of reporting a lost backend).
                target.signal.raise(sluice_net::Signal::End);
            }
            if let Some(on) = running.as_ref().filter(|on| on.active)
                && let Some(mut k) = self.kill_query_for(on)
            {
                k.connection = !query;
                let thread_id = k.thread_id;
                match k.send().await {
                    Ok(()) => info!(session = self.id, target = id, server = %on.server, thread_id,
                        "KILL {0} from a client: sent KILL {0} to the server",
                        if query { "QUERY" } else { "CONNECTION" }),
                    Err(e) => warn!(session = self.id, target = id, server = %on.server, thread_id,
                        "KILL from a client: KILL QUERY could not be sent to the server: {e}"),
                }
            }
            if !query {
                info!(
                    session = self.id,
                    target = id,
                    "KILL CONNECTION from a client: session closed"
                );
            }
        }
        self.reply_ok(seq).await
    }
}

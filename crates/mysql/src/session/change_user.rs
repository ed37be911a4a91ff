//! COM_CHANGE_USER: re-authenticate the client as another user on the same connection.

use super::{Next, Session};
use crate::error::Error;
use crate::handshake::{AuthAttempt, exchange, fail};
use sluice_mysql_proto::framing::Packet;
use sluice_mysql_proto::handshake::ChangeUser;
use sluice_mysql_proto::scramble::NATIVE;
use tracing::{info, warn};

impl Session {
    /// A refused COM_CHANGE_USER: the client gets the error and the session goes on as the
    /// user it was, its session state reset as MariaDB resets it (user variables, temporary
    /// tables, prepared statements: as COM_RESET_CONNECTION).
    async fn refuse_change(&mut self, seq: u8, e: Error) -> Next {
        self.reset_session().await;
        // A client gone meanwhile is found at the next read.
        let _ = fail::<()>(&mut self.io, seq, e).await;
        Next::Continue
    }

    pub(super) async fn change_user(&mut self, pk: Packet) -> Next {
        let mut seq = pk.seq.wrapping_add(1);
        let cu = match ChangeUser::decode(&pk.payload, self.login.capabilities) {
            Ok(c) => c,
            Err(e) => {
                warn!(session = self.id, client = %self.io.peer, "closing client session: {e}");
                return Next::Close;
            }
        };
        let rt = self.fe.config.load();
        let user = rt.mysql.frontend_users.get(&cu.username).cloned();
        let plugin = cu.auth_plugin.clone().unwrap_or_else(|| NATIVE.to_string());
        let nonce = self.login.nonce.clone();
        let attempt = AuthAttempt {
            user: user.as_deref(),
            username: &cu.username,
            client_plugin: &plugin,
            nonce: &nonce,
            response: &cu.auth_response,
            default_plugin: &rt.mysql.variables.default_authentication_plugin,
        };
        let result = exchange(&mut self.io, attempt, &mut seq).await;
        let secret = match result {
            Ok(s) => s,
            Err(e) => {
                if matches!(e, Error::AccessDenied { .. }) {
                    // As MariaDB does: the session goes on as the user it was.
                    warn!(session = self.id, user = %cu.username, client = %self.io.peer, "COM_CHANGE_USER refused: {e}; the session stays {}", self.login.user.username);
                    return self.refuse_change(seq, e).await;
                }
                warn!(session = self.id, user = %cu.username, client = %self.io.peer, "COM_CHANGE_USER failed: {e}; closing the session");
                return Next::Close;
            }
        };
        // `exchange` denies unknown users, so `user` is set here.
        let Some(user) = user else { return Next::Close };
        if !user.active.0 {
            let e = Error::AccessDenied {
                user: cu.username.clone(),
                host: self.io.peer.ip().to_string(),
                using_password: "YES",
                extra: ". The user is not active".into(),
            };
            return self.refuse_change(seq, e).await;
        }
        if user.use_ssl.0 && !self.io.stream.get_ref().is_tls() {
            let e = Error::AccessDenied {
                user: cu.username.clone(),
                host: self.io.peer.ip().to_string(),
                using_password: "YES",
                extra: ". SSL is required".into(),
            };
            return self.refuse_change(seq, e).await;
        }
        if !self
            .slot
            .assign_user(&user.username, user.max_connections.0)
        {
            return self.refuse_change(seq, Error::TooManyConnections).await;
        }
        self.release_backend();
        info!(session = self.id, from = %self.login.user.username, to = %user.username, "COM_CHANGE_USER");
        let schema = cu
            .database
            .clone()
            .or_else(|| user.default_schema.clone().filter(|s| !s.is_empty()))
            .unwrap_or_else(|| rt.mysql.variables.default_schema.clone());
        if let Some(cs) = cu.charset {
            self.login.charset = cs as u8;
        }
        self.login.user = user;
        self.login.secret = secret;
        // A new login: the server side of the session starts over.
        for (_, s) in self.stmts.drain() {
            s.meta
                .client_refs
                .fetch_sub(1, std::sync::atomic::Ordering::Relaxed);
        }
        self.state = sluice_mysql_backend::SessionState {
            schema: Some(schema),
            ..Default::default()
        };
        self.pins.clear();
        self.last_insert_id = 0;
        self.last_insert_conn = None;
        self.client_wait_timeout = None;
        self.refresh_multiplexing_setting();
        self.publish();
        self.reply_ok(seq).await
    }
}

//! The command loop of one logged-in client: forward each command to the session's backend
//! connection and relay the raw reply; answer what needs no backend (COM_PING, COM_QUIT,
//! COM_RESET_CONNECTION, COM_CHANGE_USER) itself.

use crate::error::Error;
use crate::handshake::{ClientIo, LoggedIn, fail};
use crate::listener::MysqlFrontend;
use crate::registry::SessionSlot;
use sluice_mysql_backend::PooledConn;
use sluice_mysql_proto::consts::{com, status};
use sluice_mysql_proto::framing::Packet;
use sluice_mysql_proto::packets::{err_payload, ok_payload};
use sluice_mysql_proto::reply::ReplyKind;
use std::sync::Arc;
use tracing::{debug, warn};

/// One client session after login.
pub struct Session {
    id: u32,
    io: ClientIo,
    login: LoggedIn,
    schema: String,
    backend: Option<PooledConn>,
    /// True from checkout until the first command on that connection completes: a failure
    /// before any reply byte can then be retried on a new connection without the client noticing.
    backend_fresh: bool,
    /// Set when writing to the client failed: the session ends.
    client_gone: bool,
    /// The client changed a server option (COM_SET_OPTION) that COM_RESET_CONNECTION may not
    /// restore, so the backend connection is closed instead of pooled.
    backend_tainted: bool,
    fe: Arc<MysqlFrontend>,
    slot: SessionSlot,
}

mod change_user;
mod forward;

/// How a command ended for the session loop.
enum Next {
    Continue,
    Close,
}

impl Session {
    /// A session for a client that just logged in.
    pub fn new(
        id: u32,
        io: ClientIo,
        login: LoggedIn,
        fe: Arc<MysqlFrontend>,
        slot: SessionSlot,
    ) -> Self {
        let schema = login.schema.clone();
        Session {
            id,
            io,
            login,
            schema,
            backend: None,
            backend_fresh: false,
            client_gone: false,
            backend_tainted: false,
            fe,
            slot,
        }
    }

    /// Runs commands until the client quits, the connection breaks or Sluice shuts down.
    pub async fn run(mut self) {
        loop {
            let read = tokio::select! {
                biased;
                _ = self.fe.shutdown.cancelled() => {
                    debug!(session = self.id, "closing idle session: shutting down");
                    break;
                }
                r = self.io.read() => r,
            };
            let pk = match read {
                Ok(p) => p,
                Err(Error::Protocol(sluice_mysql_proto::Error::Closed)) => break,
                Err(e @ Error::Protocol(sluice_mysql_proto::Error::TooLarge { .. })) => {
                    warn!(session = self.id, user = %self.login.user.username, client = %self.io.peer,
                        "closing client session: {e} (mysql-max_allowed_packet)");
                    let _ = fail::<()>(&mut self.io, 1, e).await;
                    break;
                }
                Err(e) => {
                    warn!(session = self.id, user = %self.login.user.username, client = %self.io.peer,
                        "closing client session: {e}");
                    break;
                }
            };
            match self.dispatch(pk).await {
                Next::Continue => {}
                Next::Close => break,
            }
        }
        self.finish();
    }

    fn finish(mut self) {
        self.release_backend();
        drop(self.slot);
        debug!(session = self.id, "session ended");
    }

    /// Returns the backend connection to the pool (reset), or closes it when the session left
    /// state on it that a reset may not undo.
    pub(super) fn release_backend(&mut self) {
        if let Some(b) = self.backend.take() {
            if self.backend_tainted {
                drop(b);
            } else {
                b.release();
            }
        }
        self.backend_tainted = false;
    }

    async fn reply_ok(&mut self, seq: u8) -> Next {
        let st = status::AUTOCOMMIT;
        match self.io.write(seq, &ok_payload(0, 0, st, 0)).await {
            Ok(()) => Next::Continue,
            Err(_) => Next::Close,
        }
    }

    async fn reply_err(&mut self, seq: u8, e: &Error) -> Next {
        match self.io.write(seq, &e.to_err_payload()).await {
            Ok(()) => Next::Continue,
            Err(_) => Next::Close,
        }
    }

    async fn dispatch(&mut self, pk: Packet) -> Next {
        let Some(&cmd) = pk.payload.first() else {
            warn!(session = self.id, client = %self.io.peer, "closing client session: empty command packet");
            return Next::Close;
        };
        let reply_seq = pk.seq.wrapping_add(1);
        match cmd {
            com::QUIT => Next::Close,
            com::PING => self.reply_ok(reply_seq).await,
            com::QUERY => {
                let t = self.forward(&pk, ReplyKind::ResultSets).await;
                if let Some(t) = t.as_ref().filter(|t| !t.error) {
                    self.track_use(&pk.payload[1..], t);
                }
                self.after_forward()
            }
            com::INIT_DB => {
                let t = self.forward(&pk, ReplyKind::Single).await;
                if t.as_ref().is_some_and(|t| !t.error) {
                    let name = String::from_utf8_lossy(&pk.payload[1..]).into_owned();
                    self.set_schema(name);
                }
                self.after_forward()
            }
            com::STMT_PREPARE => {
                self.forward(&pk, ReplyKind::Prepare).await;
                self.after_forward()
            }
            com::STMT_EXECUTE => {
                self.forward(&pk, ReplyKind::ResultSets).await;
                self.after_forward()
            }
            com::STMT_FETCH => {
                self.forward(&pk, ReplyKind::Fetch).await;
                self.after_forward()
            }
            com::FIELD_LIST => {
                self.forward(&pk, ReplyKind::FieldList).await;
                self.after_forward()
            }
            com::STMT_RESET | com::STATISTICS => {
                self.forward(&pk, ReplyKind::Single).await;
                self.after_forward()
            }
            com::SET_OPTION => {
                self.backend_tainted = true;
                self.forward(&pk, ReplyKind::Single).await;
                self.after_forward()
            }
            com::STMT_CLOSE | com::STMT_SEND_LONG_DATA => {
                // No reply. Without a backend connection the statement cannot exist anyway.
                if let Some(b) = self.backend.as_mut()
                    && let Err(e) = b.conn().send_raw(&pk.raw).await
                {
                    warn!(session = self.id, "backend connection lost: {e}");
                    self.backend = None;
                }
                Next::Continue
            }
            com::RESET_CONNECTION => {
                // Reset the session's own backend connection in place (it keeps its schema).
                if let Some(b) = self.backend.as_mut()
                    && !matches!(b.conn().reset().await, Ok(true))
                {
                    self.backend = None;
                }
                self.reply_ok(reply_seq).await
            }
            com::CHANGE_USER => self.change_user(pk).await,
            com::PROCESS_KILL => {
                let e = Error::Unsupported(
                    "COM_PROCESS_KILL is not supported through Sluice; use KILL on the backend"
                        .into(),
                );
                self.reply_err(reply_seq, &e).await
            }
            other => {
                let msg = format!("Unknown command {other:#04x}");
                match self
                    .io
                    .write(reply_seq, &err_payload(1047, "08S01", &msg))
                    .await
                {
                    Ok(()) => Next::Continue,
                    Err(_) => Next::Close,
                }
            }
        }
    }
}

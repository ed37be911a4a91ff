//! A session's LISTEN and UNLISTEN under `pgsql-listen_mode=fanout` (or `reject`), and the
//! delivery of its notifications: written while the client is idle — between transactions, or
//! on a connection it keeps with nothing in flight — never inside a result.

use super::{PgSession, Step};
use crate::Error;
use crate::listen::{ListenRequest, Overflow, Subscriptions};
use sluice_core::config::ListenMode;
use sluice_pgsql_proto::frame::{error_response, message, ready};
use sluice_pgsql_proto::message::{Query, body};
use sluice_pgsql_proto::tag;
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt};
use tracing::{info, warn};

/// PostgreSQL's 25P02 message: a statement in a failed transaction.
const ABORTED: &str =
    "current transaction is aborted, commands ignored until end of transaction block";

/// Returns once the session has notifications waiting (never without subscriptions).
pub(super) async fn mail(l: &Option<Box<Subscriptions>>) {
    match l {
        Some(l) => l.mail().await,
        None => std::future::pending().await,
    }
}

/// Returns once the session's notification queue overflowed (never without subscriptions).
pub(super) async fn overflowed(l: &Option<Box<Subscriptions>>) -> Overflow {
    match l {
        Some(l) => l.overflowed().await,
        None => std::future::pending().await,
    }
}

/// Whether a Query message starts with `DISCARD ALL`, which also ends the session's LISTENs.
fn discards_all(m: &[u8]) -> bool {
    let q = body(m).trim_ascii_start();
    q.get(..11)
        .is_some_and(|h| h.eq_ignore_ascii_case(b"discard all"))
}

impl<S: AsyncRead + AsyncWrite + Unpin> PgSession<'_, S> {
    /// The LISTEN, UNLISTEN or `pg_listening_channels()` in Query `m` that Sluice answers itself
    /// (not in `pin` mode); a `DISCARD ALL` gives up the session's channels on its way to the
    /// server.
    pub(super) fn intercepted_listen(&mut self, m: &[u8]) -> Option<(ListenRequest, ListenMode)> {
        // Most statements are neither: decided from their first byte, before any parsing.
        let first = Query::read(m)?.sql.trim_ascii_start().first()?;
        let listening = self.listen.as_ref().is_some_and(|l| l.is_listening());
        match first {
            b'l' | b'L' | b'u' | b'U' | b'd' | b'D' | b'/' | b'-' => {}
            // `SELECT pg_listening_channels()` matters only to a session listening here.
            b's' | b'S' if listening => {}
            _ => return None,
        }
        let stmt = crate::listen::parse(m);
        let discard = discards_all(m);
        if stmt.is_none() && !discard {
            return None;
        }
        let mode = self.fe.config.load().pgsql.variables.listen.mode;
        if mode == ListenMode::Pin {
            return None;
        }
        // Only the channels Sluice listens to for the session are unknown to its server
        // connection; without any, the server's answer (e.g. a LISTEN that pinned) is right.
        if stmt == Some(ListenRequest::ListChannels) && (mode != ListenMode::Fanout || !listening) {
            return None;
        }
        if discard && let Some(l) = self.listen.as_mut() {
            l.unlisten_all();
            self.publish_listening();
        }
        stmt.map(|s| (s, mode))
    }

    /// Runs a LISTEN-family statement: at once outside a transaction, staged inside one,
    /// refused in a failed one (25P02, as PostgreSQL does) or in `reject` mode.
    pub(super) async fn listen_statement(
        &mut self,
        request: ListenRequest,
        mode: ListenMode,
    ) -> Result<Step, Error> {
        let status = self.backend.status();
        let mut out = Vec::new();
        let stmt = match request {
            ListenRequest::Change(stmt) => stmt,
            ListenRequest::ListChannels => return self.list_channels(status).await,
        };
        if mode == ListenMode::Reject {
            let msg = format!(
                "{} is not supported through this proxy (pgsql-listen_mode=reject)",
                stmt.tag()
            );
            out.extend(error_response("ERROR", "0A000", &msg));
        } else if status == tag::status::FAILED {
            out.extend(error_response("ERROR", "25P02", ABORTED));
        } else {
            let (fe, l) = (self.fe, self.l);
            let subs = self
                .listen
                .get_or_insert_with(|| Box::new(Subscriptions::new(fe, l)));
            let done = if status == tag::status::IN_TRANSACTION {
                subs.stage(fe, l, stmt.clone()).await
            } else {
                subs.run(fe, l, &stmt).await
            };
            match done {
                Ok(()) => out.extend(message(
                    tag::server::COMMAND_COMPLETE,
                    format!("{}\0", stmt.tag()).as_bytes(),
                )),
                Err(r) => {
                    warn!(user = %l.user.username, "pgsql: {} failed on the listener connection ({}): {}", stmt.tag(), r.code, r.message);
                    out.extend(error_response("ERROR", &r.code, &r.message));
                }
            }
            self.publish_listening();
        }
        // A LISTEN the listener connection could not carry out leaves the client's transaction
        // open on its server connection (not failed, as PostgreSQL would have it): the client
        // hears the error and decides (docs/listen-notify.md).
        out.extend(ready(status));
        self.tcp.write_all(&out).await?;
        Ok(Step::Continue)
    }

    /// `SELECT pg_listening_channels()` of a session listening through Sluice: as PostgreSQL,
    /// the committed channels (a LISTEN of the open transaction counts from its COMMIT), one
    /// text row each — in name order here, in LISTEN order there; 25P02 in a failed transaction.
    async fn list_channels(&mut self, status: u8) -> Result<Step, Error> {
        let mut out = if status == tag::status::FAILED {
            error_response("ERROR", "25P02", ABORTED)
        } else {
            let rows: Vec<Vec<Option<String>>> = self
                .listen
                .as_ref()
                .map(|l| l.channels())
                .unwrap_or_default()
                .into_iter()
                .map(|c| vec![Some(c)])
                .collect();
            crate::session::hook::rows_reply(&["pg_listening_channels".to_string()], &rows)
        };
        out.extend(ready(status));
        self.tcp.write_all(&out).await?;
        Ok(Step::Continue)
    }

    /// Notes that `m` may send notifications (`NOTIFY`, `pg_notify()`), when anybody listens
    /// through Sluice: the end of its transaction then waits for the listener (below).
    pub(super) fn note_notify(&mut self, m: &[u8]) {
        if self.notified
            || !matches!(m[0], tag::client::QUERY | tag::client::PARSE)
            || !self.fe.listen.active()
        {
            return;
        }
        self.notified =
            crate::session::processor::query_text(m).is_some_and(crate::listen::may_notify);
    }

    /// The end of a transaction that may have sent notifications (`kept`, ending with its
    /// ReadyForQuery): waits until the listener connection has fanned out every notification
    /// committed so far (bounded by `pgsql-listen_ack_timeout_ms`), so the NOTIFY is answered
    /// only once the listening sessions have it, and writes this session's own notifications
    /// before its ReadyForQuery, where PostgreSQL puts them.
    pub(super) async fn with_notifications_before_ready<'k>(
        &mut self,
        kept: std::borrow::Cow<'k, [u8]>,
    ) -> std::borrow::Cow<'k, [u8]> {
        let key = crate::listen::ListenerKey {
            hostgroup: u32::try_from(self.io.qp.hostgroup).unwrap_or(0),
            database: self.l.database.clone(),
        };
        let rt = self.fe.config.load();
        let wait = std::time::Duration::from_millis(rt.pgsql.variables.listen.ack_timeout_ms);
        if let Some(synced) = self.fe.listen.sync(&key) {
            let _ = tokio::time::timeout(wait, synced).await;
        }
        let Some(l) = self.listen.as_ref() else {
            return kept;
        };
        let at = kept.len().saturating_sub(6);
        if kept.get(at) != Some(&tag::server::READY_FOR_QUERY) {
            return kept;
        }
        let mail = l.take_mail();
        if mail.is_empty() {
            return kept;
        }
        let mut out =
            Vec::with_capacity(kept.len() + mail.iter().map(|m| m.frame.len()).sum::<usize>());
        out.extend_from_slice(&kept[..at]);
        for m in &mail {
            out.extend_from_slice(&m.frame);
        }
        out.extend_from_slice(&kept[at..]);
        std::borrow::Cow::Owned(out)
    }

    /// Shows the session's channels in the processlist.
    pub(super) fn publish_listening(&mut self) {
        let channels = self
            .listen
            .as_ref()
            .map(|l| l.channels())
            .unwrap_or_default();
        self.io.entry.set_listening(channels);
    }

    /// Writes the notifications waiting, if the client is idle; else they wait for the end of
    /// its transaction.
    pub(super) async fn deliver(&mut self) -> Result<Step, Error> {
        let idle = self.backend.quiet();
        let Some(l) = self.listen.as_ref() else {
            return Ok(Step::Continue);
        };
        if !idle {
            return Ok(Step::Continue);
        }
        let mail = l.take_mail();
        if mail.is_empty() {
            return Ok(Step::Continue);
        }
        let mut out = Vec::with_capacity(mail.iter().map(|m| m.frame.len()).sum());
        for m in &mail {
            out.extend_from_slice(&m.frame);
        }
        self.tcp.write_all(&out).await?;
        Ok(Step::Continue)
    }

    /// The session's notification queue overflowed: it is ended, with the reason.
    pub(super) async fn overflowed(&mut self, o: Overflow) -> Result<Step, Error> {
        let msg = format!(
            "terminating connection: {} notifications ({} bytes) were waiting for this session, the most pgsql-listen_queue_max / pgsql-listen_queue_max_bytes allow; the client does not read them fast enough",
            o.count, o.bytes
        );
        info!(user = %self.l.user.username, "pgsql: ended a listening session whose notification queue overflowed ({} notifications, {} bytes)", o.count, o.bytes);
        if let Some(held) = self.backend.take() {
            crate::pids::set_target(&self.handle.target, None);
            drop(held);
        }
        self.tcp
            .write_all(&error_response("FATAL", "53400", &msg))
            .await?;
        Ok(Step::End)
    }
}

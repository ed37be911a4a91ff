//! The held server connection's side of a session: its frames forwarded to the client with
//! what pooling needs noted on the way (prepared statements, SETs, causal tokens, the end of a
//! transaction's LISTENs), the connection given back once the transaction is over, and its loss.

use super::held::Backend;
use super::{PgSession, Step};
use crate::Error;
use crate::pids::set_target;
use crate::session::pins::PinSet;
use crate::session::sets::{Change, SessionVars, apply};
use crate::session::statements::Reply;
use sluice_pgsql_proto::frame::{error_response, parse_error};
use sluice_pgsql_proto::message;
use sluice_pgsql_proto::reply::SetsVerdict;
use sluice_pgsql_proto::tag::{server, status};
use std::ops::Range;
use std::time::Instant;
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt};
use tracing::info;

impl<S: AsyncRead + AsyncWrite + Unpin> PgSession<'_, S> {
    /// The server connection broke (terminated, crashed, cut): the client session ends as
    /// PostgreSQL ends it — the server's FATAL if it sent one, else Sluice's, then the close —
    /// as PgBouncer does too. Going on without the connection cannot be made right: the
    /// transaction or session state is gone, and any ReadyForQuery Sluice made up (for a batch
    /// whose Sync comes later, or with nothing asked) would be taken as the answer to a later
    /// command, putting every answer after it one off (the soak saw acknowledged commits that
    /// were not there). Sessions that hold no connection are not affected.
    pub(super) async fn server_lost(&mut self, e: Error) -> Result<Step, Error> {
        if let Some(mut held) = self.backend.take() {
            held.stop_timer();
        }
        set_target(&self.handle.target, None);
        if !std::mem::take(&mut self.error_forwarded) {
            let msg = format!("the server connection was lost: {e}");
            self.tcp
                .write_all(&error_response("FATAL", "08006", &msg))
                .await?;
        }
        info!(user = %self.l.user.username, "pgsql: the session's server connection was lost ({e}); ending the client session, as PostgreSQL would");
        Ok(Step::End)
    }

    /// Forwards every complete server frame, noting what pooling needs; gives the connection
    /// back when the transaction is over.
    pub(super) async fn server_frames(&mut self) -> Result<Step, Error> {
        let (fe, l) = (self.fe, self.l);
        let rt = fe.config.load();
        let now = Instant::now();
        let scan = match self.scan_frames(&rt, now)? {
            Scanned::Frames(scan) => scan,
            Scanned::HandoffFailed { code, message } => {
                // The session's statements may run without its settings: end it rather than
                // answer under the server's defaults. Every frame so far was the handoff's own.
                set_target(&self.handle.target, None);
                drop(self.backend.take());
                let msg = format!(
                    "Sluice could not apply this session's settings on a server connection: {message}"
                );
                self.tcp
                    .write_all(&error_response("FATAL", &code, &msg))
                    .await?;
                return Ok(Step::End);
            }
        };
        let Backend::Held(held) = &mut self.backend else {
            return Ok(Step::Continue);
        };
        // What the replies so far say; nothing below changes them.
        let quiet = held.quiet();
        let replied = scan.saw_ready && held.replies.outstanding() == 0;
        let conn = held.conn.conn();
        let mut lost = None;
        let drained = conn.reader.buf.len() == scan.pos;
        if scan.pos > 0 {
            let chunk = conn.reader.buf.split_to(scan.pos);
            let kept = without(&chunk, &scan.swallowed);
            if let Some(fill) = held.fill.as_mut() {
                fill.copy(&kept);
            }
            conn.traffic.received(chunk.len());
            // A transaction that wrote is over: its token is taken before the client hears
            // so, so no read it sends next (on any connection) can miss the write.
            if scan.saw_ready
                && quiet
                && conn.reader.buf.is_empty()
                && self.io.qp.take_written()
                && crate::session::causal::tokens_wanted(&rt)
            {
                let who = (l.user.username.as_str(), self.io.qp.hostgroup);
                let took =
                    crate::session::causal::take_token(fe, who, &mut self.causal_token, conn);
                lost = Box::pin(took).await.err();
            }
            let ended = scan.saw_ready && quiet;
            if ended && std::mem::take(&mut self.notified) {
                // Boxed: only transactions that sent notifications while someone listens.
                let kept = Box::pin(self.with_notifications_before_ready(kept)).await;
                self.tcp.write_all(&kept).await?;
            } else {
                self.tcp.write_all(&kept).await?;
            }
        }
        if let Some(e) = lost {
            return self.server_lost(Error::Server(e)).await;
        }
        if replied {
            self.transaction_replied(&rt);
        }
        if quiet
            && self.io.pinned.reason().is_none()
            && self.io.stmts.settled()
            && drained
            && let Some(held) = self.backend.take()
        {
            set_target(&self.handle.target, None);
            held.conn.release_clean_at(now);
        }
        if scan.listens_settled {
            self.publish_listening();
        }
        Ok(Step::Continue)
    }

    /// Reads the complete frames the held connection has buffered, noting what each means for
    /// the session (stats, errors, SETs kept, prepared statements, LISTENs settled) and which
    /// are Sluice's own replies to cut out; NotificationResponse pids become Sluice pids.
    fn scan_frames(
        &mut self,
        rt: &sluice_core::runtime::RuntimeConfig,
        now: Instant,
    ) -> Result<Scanned, Error> {
        let (fe, l) = (self.fe, self.l);
        let mut scan = Scan::default();
        let Backend::Held(held) = &mut self.backend else {
            return Ok(Scanned::Frames(scan));
        };
        let conn = held.conn.conn();
        // NotificationResponses, whose server pid becomes the notifier's Sluice pid.
        let mut notifications: Vec<usize> = Vec::new();
        held.replies.watch_sets(!self.io.pending.is_empty());
        while let Some(f) = held.replies.next(&conn.reader.buf[scan.pos..])? {
            let range = scan.pos..scan.pos + f.len;
            scan.pos += f.len;
            if let Some((code, message)) = f.handoff_failed {
                crate::session::handoff::log_failure(
                    &l.user.username,
                    &conn.server,
                    &code,
                    &message,
                );
                return Ok(Scanned::HandoffFailed { code, message });
            }
            if f.own {
                scan.swallowed.push(range);
                continue;
            }
            let body = message::body(&conn.reader.buf[range.clone()]);
            match f.kind {
                server::COMMAND_COMPLETE | server::READY_FOR_QUERY => {
                    if f.kind == server::COMMAND_COMPLETE && self.io.stmts.sql.waiting() {
                        let batch = self.io.stmts.batches_done() + 1;
                        self.io.stmts.sql.completed(body, batch);
                    }
                    if let Some(l) = self.listen.as_mut() {
                        if f.kind == server::COMMAND_COMPLETE {
                            l.saw_tag(body);
                        } else if body.first() == Some(&status::IDLE) {
                            scan.listens_settled |= l.transaction_ended();
                        }
                    }
                    let frame = (f.kind, body);
                    self.io
                        .qp
                        .received(rt, (&fe.query, &fe.commands, &fe.stats), frame, now);
                }
                server::ERROR_RESPONSE => {
                    if let Some(fill) = held.fill.as_mut() {
                        fill.failed();
                    }
                    let (code, message) = parse_error(body);
                    let hg = self.io.qp.hostgroup;
                    fe.server_stats.error(
                        (hg, &conn.server, &l.user.username, &l.database),
                        self.io.qp.client_ip(),
                        &code,
                        &message,
                    );
                }
                server::NOTIFICATION_RESPONSE => notifications.push(range.start),
                _ => {}
            }
            self.error_forwarded = match f.kind {
                server::ERROR_RESPONSE => true,
                server::READY_FOR_QUERY => false,
                _ => self.error_forwarded,
            };
            if f.kind == server::READY_FOR_QUERY {
                scan.saw_ready = true;
                conn.traffic.queries.add(1);
            }
            if let Some(verdict) = f.sets {
                let session = (&mut self.io.pending, &mut self.vars, &mut self.io.pinned);
                settle_sets(verdict, session, &mut conn.session_vars);
            }
            if matches!(
                f.kind,
                server::PARSE_COMPLETE | server::CLOSE_COMPLETE | server::READY_FOR_QUERY
            ) && self.io.stmts.incoming(f.kind, &mut conn.prepared) == Reply::Swallow
            {
                scan.swallowed.push(range);
            }
            if f.kind == server::READY_FOR_QUERY && self.io.stmts.sql.waiting() {
                let done = self.io.stmts.batches_done();
                self.io.stmts.sql.ready(done, &mut conn.sql_prepared);
            }
        }
        for at in notifications {
            let frame = &mut conn.reader.buf[at..];
            crate::pids::rewrite_notify_pid(&fe.cancels, &conn.server, frame);
        }
        Ok(Scanned::Frames(scan))
    }

    /// Everything the session sent was answered: the timer stops, the cache is filled or
    /// invalidated.
    pub(super) fn transaction_replied(&mut self, rt: &sluice_core::runtime::RuntimeConfig) {
        let Backend::Held(held) = &mut self.backend else {
            return;
        };
        held.stop_timer();
        if let Some((permit, since)) = self.admission.as_mut() {
            permit.observe_us(u64::try_from(since.elapsed().as_micros()).unwrap_or(u64::MAX));
            *since = Instant::now();
        }
        if held.replies.status() == status::IDLE && !held.batch_open {
            // The transaction is over: its class's slot goes back.
            self.admission = None;
        }
        let (fe, l) = (self.fe, self.l);
        if let Some(f) = held.fill.take() {
            let max = rt.pgsql.variables.query.query_cache_size_mb as usize * 1024 * 1024;
            f.store(&fe.cache, &l.user.username, &l.database, max);
        }
        if let Some((tables, complete)) = self.io.qp.take_writes() {
            fe.cache.invalidate(&tables, complete);
        }
    }
}

/// What [`PgSession::scan_frames`] found in the buffered server frames.
#[derive(Default)]
struct Scan {
    /// Bytes of complete frames.
    pos: usize,
    /// Replies to messages Sluice sent on its own (handoff, re-Parse, Close), cut out.
    swallowed: Vec<Range<usize>>,
    saw_ready: bool,
    /// A transaction with LISTENs or UNLISTENs ended (the processlist shows the channels).
    listens_settled: bool,
}

/// The frames to forward, or the handoff's failure (the session ends).
enum Scanned {
    Frames(Scan),
    HandoffFailed { code: String, message: String },
}

/// The transaction that carried a session's `pending` SETs ended: they are kept (in the
/// session's `vars` and in `conn_vars`, the connection's), undone, or — after an error inside a
/// committed transaction — unclear, which pins the connection.
fn settle_sets(
    verdict: SetsVerdict,
    (pending, vars, pinned): (&mut Vec<Change>, &mut SessionVars, &mut PinSet),
    conn_vars: &mut std::collections::BTreeMap<String, String>,
) {
    match verdict {
        SetsVerdict::Kept => {
            for c in pending.iter() {
                vars.apply(c);
                apply(conn_vars, c);
            }
        }
        // Committed after an error (savepoints): which SETs survived is unclear, so the
        // session keeps this connection.
        SetsVerdict::Unclear => pinned.sticky = Some("session state"),
        SetsVerdict::Undone => {}
    }
    pending.clear();
}

/// `chunk` without the byte ranges in `cut` (sorted, disjoint); borrowed when nothing is cut.
fn without<'c>(chunk: &'c [u8], cut: &[Range<usize>]) -> std::borrow::Cow<'c, [u8]> {
    if cut.is_empty() {
        return std::borrow::Cow::Borrowed(chunk);
    }
    let mut kept = Vec::with_capacity(chunk.len());
    let mut from = 0;
    for r in cut {
        kept.extend_from_slice(&chunk[from..r.start]);
        from = r.end;
    }
    kept.extend_from_slice(&chunk[from..]);
    std::borrow::Cow::Owned(kept)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cut_ranges_are_removed_in_order() {
        let chunk = b"aaBBccDDee";
        assert_eq!(&*without(chunk, &[]), chunk);
        assert_eq!(&*without(chunk, &[2..4, 6..8]), b"aaccee");
        assert_eq!(&*without(chunk, &[0..4, 4..10]), b"");
    }
}

//! Client messages while the session holds a server connection (what woke it, a Terminate, a
//! self-terminating Bind, LISTEN answered by Sluice) and their forwarding to that connection:
//! everything already buffered
//! goes in one write, prepared statement names are mapped, and each Query/Parse/Bind passes
//! through the query processor (rewrite, stats) on its way, with what it does to the session's
//! state noted (pins, `SET`s to confirm when its transaction ends).

use super::held::Backend;
use super::{Ended, Ev, PgSession, Step, terminate};
use crate::Error;
use crate::frontend::PgFrontend;
use crate::pids::set_target;
use crate::session::RULE_PIN;
use crate::session::held::Held;
use crate::session::pins::PinSet;
use crate::session::processor::{SessionProcessor, query_text, with_query};
use crate::session::sets::{Change, Effect, classify};
use crate::session::statements::SessionStatements;
use bytes::Bytes;
use sluice_core::util::EventClock;
use sluice_pgsql_backend::PgConn;
use sluice_pgsql_proto::frame::{Reader, complete_len};
use sluice_pgsql_proto::message::{self, Parse, Query};
use sluice_pgsql_proto::tag::{self, client};
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt};

/// The session's statement bookkeeping that forwarding updates.
pub(crate) struct SessionIo<'a> {
    pub stmts: &'a mut SessionStatements,
    pub qp: &'a mut SessionProcessor,
    /// The processlist entry (pin reason).
    pub entry: &'a crate::sessions::PgSessionEntry,
    /// Why the session keeps its server connection between transactions, if it does.
    pub pinned: PinSet,
    /// SET/RESET changes of the current transaction, kept when it commits.
    pub pending: Vec<Change>,
    /// The buffer client messages are staged in, kept between calls (no allocation per
    /// statement) unless a large batch grew it. Empty between writes, except for the handoff
    /// messages the pump stages just before forwarding a transaction's first message.
    pub out: Vec<u8>,
}

impl<S: AsyncRead + AsyncWrite + Unpin> PgSession<'_, S> {
    /// What woke the session while it holds a server connection.
    pub(super) async fn event(&mut self, ev: Ev) -> Result<Step, Error> {
        match ev {
            Ev::Terminated => {
                // The terminator cancelled the statement; the connection is closed.
                set_target(&self.handle.target, None);
                drop(self.backend.take());
                terminate(self.tcp, Ended::Terminated).await?;
                Ok(Step::End)
            }
            Ev::Client(Err(e)) => {
                // The client went away with the connection mid-use: it is closed (dropped).
                drop(self.backend.take());
                Err(e)
            }
            Ev::Client(Ok(m)) => self.client_message(m).await,
            Ev::Server(Err(e)) => self.server_lost(e).await,
            Ev::Server(Ok(())) => self.server_frames().await,
        }
    }

    /// The pid the session's client was given (BackendKeyData).
    pub(super) fn own_pid(&self) -> u32 {
        (self.owner >> 32) as u32
    }

    /// Whether `m` ends the session as PostgreSQL ends a backend that signals itself (FATAL
    /// 57P01): a Bind of `pg_terminate_backend($1)` with the session's own pid, or, with
    /// `query_too`, such a Query (on an idle session the Query is carried out with the other
    /// signals). Parses of such statements are noted here, so every Parse passes by.
    pub(super) fn terminates_itself(&mut self, m: &[u8], query_too: bool) -> bool {
        let own = self.own_pid();
        match m[0] {
            client::PARSE => {
                self.io.stmts.signals.parsed(m);
                false
            }
            client::BIND => self.io.stmts.signals.bound_pid(m) == Some(own),
            client::QUERY if query_too => matches!(
                Query::read(m).and_then(|q| crate::session::signals::parse(q.sql)),
                Some((crate::session::signals::Signal::Terminate, pid)) if pid == own
            ),
            _ => false,
        }
    }

    /// A client message while the session holds a server connection.
    pub(super) async fn client_message(&mut self, m: Bytes) -> Result<Step, Error> {
        if self.terminates_itself(&m, true) {
            // What was sent on the server connection is abandoned with it.
            set_target(&self.handle.target, None);
            drop(self.backend.take());
            return terminate(self.tcp, Ended::Terminated).await;
        }
        if m[0] == client::TERMINATE {
            if let Some(h) = self.backend.take() {
                let b = h.conn;
                if !h.replies.at_rest() {
                    // Replies still in flight or a transaction open: `DISCARD ALL` would fail
                    // or be read as the answer to what is in flight, leaving its own answer in
                    // the socket for the next session (the soak saw clients get "DISCARD ALL
                    // cannot run inside a transaction block"). The connection is closed.
                    drop(b);
                } else if self.io.pinned.reason().is_some() {
                    b.release_discard();
                } else {
                    b.release_clean();
                }
            }
            return Ok(Step::End);
        }
        // Nothing in flight: Sluice's answer cannot overtake the server's.
        if self
            .backend
            .held()
            .is_none_or(|h| h.replies.outstanding() == 0 && !h.batch_open)
            && let Some((stmt, mode)) = self.intercepted_listen(&m)
        {
            return self.listen_statement(stmt, mode).await;
        }
        if let Some(l) = self.listen.as_mut() {
            l.sent();
        }
        self.note_notify(&m);
        // Another session terminated from inside a transaction (psycopg's `test_identify_closure`).
        let own = self.own_pid();
        let rewritten = match (m[0], self.backend.held()) {
            (client::BIND, Some(h)) => match self.io.stmts.signals.bound_pid(&m) {
                Some(pid) if pid != own => {
                    let who = (self.l.user.username.as_str(), &h.conn.conn().server);
                    crate::session::signals::terminate_bound(&self.fe.cancels, who, &m, pid)
                }
                _ => None,
            },
            _ => None,
        };
        let m = rewritten.map_or(m, Bytes::from);
        if let Backend::Held(h) = &mut self.backend {
            let rt = self.fe.config.load();
            let first = (&m[..], None, EventClock::default());
            forward(self.fe, &rt, h, &mut self.io, self.reader, first).await?;
        }
        Ok(Step::Continue)
    }
}

/// Largest staging buffer kept for the next statement.
const KEEP_OUT: usize = 64 << 10;

/// Forwards `first` and every further complete client message already buffered (up to a
/// Terminate, which the pump handles) in one write: a pipelined Parse/Bind/Describe/Execute/Sync
/// costs one syscall, not five. `first` comes with its digest when the caller computed it, and
/// the clock of the event that sends it (statements are timed from it).
pub(crate) async fn forward(
    fe: &PgFrontend,
    rt: &sluice_core::runtime::RuntimeConfig,
    held: &mut Held,
    s: &mut SessionIo<'_>,
    reader: &mut Reader,
    (first, first_digest, mut clock): (&[u8], Option<(u64, String)>, EventClock),
) -> Result<(), Error> {
    let conn = held.conn.conn();
    let max = rt.pgsql.variables.max_prepared_statements as usize;
    let invalidate = rt.pgsql.variables.query.query_cache_invalidate_on_write;
    // May already hold the handoff's messages (see `handoff::stage`): they go first.
    let mut out = std::mem::take(&mut s.out);
    let mut add = |s: &mut SessionIo<'_>,
                   m: &[u8],
                   digest: Option<(u64, String)>,
                   out: &mut Vec<u8>,
                   clock: &mut EventClock| {
        // Rules run on every statement (rewrite, stats); routing only mattered at checkout.
        let mut rewritten = None;
        let digest = match digest {
            Some(d) => Some(d),
            None => {
                let sql = match m[0] {
                    client::BIND => s.stmts.bound_query(m),
                    _ => query_text(m),
                };
                sql.map(|q| {
                    // Borrowed when it is UTF-8, as statement texts are (the server checks).
                    let q = String::from_utf8_lossy(q);
                    let timed = rt.pgsql.variables.query.stats_time_query_processor;
                    let t0 = timed.then(std::time::Instant::now);
                    let d = s.qp.decide(rt, (&fe.query, &fe.shapes), &q);
                    if let Some(t0) = t0 {
                        fe.stats.processor_time(t0);
                    }
                    rewritten = d.action.rewritten.as_deref().and_then(|t| with_query(m, t));
                    match (d.action.multiplex, d.action.sticky_conn) {
                        (Some(0), _) | (_, Some(true)) => s.pinned.sticky = Some(RULE_PIN),
                        (Some(1), _) if s.pinned.sticky == Some(RULE_PIN) => s.pinned.sticky = None,
                        _ => {}
                    }
                    if d.digest.kind.writes() {
                        s.qp.note_written();
                        if invalidate {
                            s.qp.note_write(&d.digest.tables, d.digest.tables_complete);
                        }
                    }
                    (d.digest.hash, d.digest.text)
                })
            }
        };
        let m = rewritten.as_deref().unwrap_or(m);
        // A lone SQL-level PREPARE follows the session instead of pinning it.
        let sql_op = Query::read(m).and_then(|q| crate::session::sql_prepare::parse(q.sql));
        if !matches!(
            sql_op,
            Some(crate::session::sql_prepare::SqlOp::Prepare { .. })
        ) {
            note(m, &mut s.pinned, &mut s.pending);
        }
        if tag::ends_with_ready(m[0]) {
            held.replies.sent_sync();
        }
        s.qp.sent(m[0], digest, clock);
        stage(conn, s.stmts, m, max, &mut held.batch_open, out);
        if let Some(op) = sql_op {
            let batch = s.stmts.batches_sent();
            s.stmts.sql.sent(op, batch);
        }
    };
    add(s, first, first_digest, &mut out, &mut clock);
    while let Some(n) = complete_len(&reader.buf)? {
        match reader.buf[0] {
            client::TERMINATE => break,
            // A Bind of `pg_terminate_backend($1)` is the session's to look at (with its own
            // pid it ends the session): it stays in the buffer, read next as a message.
            client::BIND if s.stmts.signals.bound_pid(&reader.buf[..n]).is_some() => break,
            client::PARSE => s.stmts.signals.parsed(&reader.buf[..n]),
            _ => {}
        }
        let m = reader.buf.split_to(n);
        add(s, &m, None, &mut out, &mut clock);
    }
    conn.traffic.sent(out.len());
    conn.stream
        .write_all(&out)
        .await
        .map_err(Error::server_wire)?;
    out.clear();
    if out.capacity() <= KEEP_OUT {
        s.out = out;
    }
    Ok(())
}

/// Appends one client message for the server to `out`, mapping prepared statement names.
fn stage(
    conn: &mut PgConn,
    stmts: &mut SessionStatements,
    m: &[u8],
    max: usize,
    batch_open: &mut bool,
    out: &mut Vec<u8>,
) {
    match m[0] {
        client::PARSE | client::BIND | client::DESCRIBE | client::CLOSE => {
            *batch_open = true;
            return stmts.outgoing(m, &mut conn.prepared, max, out);
        }
        client::EXECUTE | client::FLUSH => *batch_open = true,
        client::SYNC => {
            *batch_open = false;
            stmts.batch_sent();
        }
        // FunctionCall is answered with its own ReadyForQuery, like a Query.
        client::FUNCTION_CALL => stmts.batch_sent(),
        client::QUERY => {
            stmts.batch_sent();
            // These drop every prepared statement on the connection, Sluice's included.
            let q = message::body(m).trim_ascii_start();
            let starts = |p: &[u8]| q.get(..p.len()).is_some_and(|h| h.eq_ignore_ascii_case(p));
            if starts(b"discard all") || starts(b"deallocate all") {
                conn.prepared.clear();
            }
        }
        _ => {}
    }
    out.extend_from_slice(m);
}

/// Notes what a client message does to session state: a pin (the reason kept for admins) or a
/// `SET`/`RESET` to confirm at the end of its transaction.
fn note(msg: &[u8], pins: &mut PinSet, pending: &mut Vec<Change>) {
    // A Query runs once; so does, in practice, an unnamed Parse (drivers such as pgjdbc send
    // `SET application_name` that way and execute it in the same batch). A named statement may
    // run any number of times later, so its SETs pin instead.
    let (sql, trackable) = match msg[0] {
        client::QUERY => match Query::read(msg) {
            Some(q) => (q.sql, true),
            None => return,
        },
        // The query ends at its NUL; parameter types follow.
        client::PARSE => match Parse::read(msg) {
            Some(p) => (p.query().unwrap_or(p.definition), p.name.is_empty()),
            None => return,
        },
        _ => return,
    };
    if PinSet::may_concern(sql) {
        pins.apply(&sluice_core::util::text(sql));
    }
    match classify(sql, trackable) {
        Effect::None => {}
        Effect::Pin(why) => pins.sticky = Some(why),
        Effect::Track(change) => pending.push(change),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sets_in_queries_and_unnamed_parses_are_tracked_named_parses_pin() {
        let mut pins = PinSet::default();
        let mut pending = Vec::new();
        note(
            b"Q\0\0\0\x19SET work_mem = '8MB'\0",
            &mut pins,
            &mut pending,
        );
        let mut unnamed = b"P\0\0\0\0\0SET application_name = 'x'\0\0\0".to_vec();
        let len = (unnamed.len() - 1) as u32;
        unnamed[1..5].copy_from_slice(&len.to_be_bytes());
        note(&unnamed, &mut pins, &mut pending);
        assert_eq!(pending.len(), 2);
        assert_eq!(pins.reason(), None);
        note(
            b"P\0\0\0\0s1\0SET work_mem = 1\0\0\0",
            &mut pins,
            &mut pending,
        );
        assert_eq!(pins.reason(), Some("session state"));
    }
}

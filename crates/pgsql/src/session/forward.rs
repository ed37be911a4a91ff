//! Forwarding client messages to the server connection in use: everything already buffered
//! goes in one write, prepared statement names are mapped, and each Query/Parse/Bind passes
//! through the query processor (rewrite, stats) on its way, with what it does to the session's
//! state noted (pins, `SET`s to confirm when its transaction ends).

use crate::Error;
use crate::frontend::PgFrontend;
use crate::session::RULE_PIN;
use crate::session::pins::PinSet;
use crate::session::processor::{SessionProcessor, query_text, with_query};
use crate::session::sets::{Change, Effect, classify};
use crate::session::statements::SessionStatements;
use sluice_pgsql_backend::PgConn;
use sluice_pgsql_proto::frame::{Reader, complete_len};
use tokio::io::AsyncWriteExt;

/// The session's statement bookkeeping the pump passes around.
pub(crate) struct SessionIo<'a> {
    pub stmts: &'a mut SessionStatements,
    pub qp: &'a mut SessionProcessor,
    /// The processlist entry (pin reason).
    pub entry: &'a crate::sessions::PgSessionEntry,
    /// The buffer client messages are staged in, kept between calls (no allocation per
    /// statement) unless a large batch grew it. Empty between writes, except for the handoff
    /// messages the pump stages just before forwarding a transaction's first message.
    pub out: Vec<u8>,
}

/// Largest staging buffer kept for the next statement.
const KEEP_OUT: usize = 64 << 10;

/// The session's bookkeeping that forwarding client messages updates.
pub(crate) struct Flow<'a> {
    pub batch_open: &'a mut bool,
    pub pinned: &'a mut crate::session::pins::PinSet,
    pub pending: &'a mut Vec<Change>,
    /// Counts the messages whose ReadyForQuery is awaited.
    pub replies: &'a mut sluice_pgsql_proto::reply::ReplyTracker,
}

/// Forwards `first` and every further complete client message already buffered (up to a
/// Terminate, which the pump handles) in one write: a pipelined Parse/Bind/Describe/Execute/Sync
/// costs one syscall, not five.
#[allow(clippy::too_many_arguments)]
pub(crate) async fn forward(
    fe: &PgFrontend,
    rt: &sluice_core::runtime::RuntimeConfig,
    conn: &mut PgConn,
    s: &mut SessionIo<'_>,
    reader: &mut Reader,
    first: &[u8],
    first_digest: Option<(u64, String)>,
    flow: Flow<'_>,
) -> Result<(), Error> {
    let max = rt.pgsql.variables.max_prepared_statements as usize;
    let invalidate = rt.pgsql.variables.query.query_cache_invalidate_on_write;
    // May already hold the handoff's messages (see `handoff::stage`): they go first.
    let mut out = std::mem::take(&mut s.out);
    let mut add =
        |s: &mut SessionIo<'_>, m: &[u8], digest: Option<(u64, String)>, out: &mut Vec<u8>| {
            // Rules run on every statement (rewrite, stats); routing only mattered at checkout.
            let mut rewritten = None;
            let digest = match digest {
                Some(d) => Some(d),
                None => {
                    let sql = match m[0] {
                        b'B' => s.stmts.bound_query(m),
                        _ => query_text(m),
                    };
                    sql.map(|q| {
                        // Borrowed when it is UTF-8, as statement texts are (the server checks).
                        let q = String::from_utf8_lossy(q);
                        let t0 = std::time::Instant::now();
                        let d = s.qp.decide(rt, &fe.query, &q);
                        fe.stats.processor_time(t0);
                        rewritten = d.action.rewritten.as_deref().and_then(|t| with_query(m, t));
                        match (d.action.multiplex, d.action.sticky_conn) {
                            (Some(0), _) | (_, Some(true)) => flow.pinned.sticky = Some(RULE_PIN),
                            (Some(1), _) if flow.pinned.sticky == Some(RULE_PIN) => {
                                flow.pinned.sticky = None
                            }
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
            let sql_op = match m[0] {
                b'Q' => crate::session::sql_prepare::parse(&m[5..]),
                _ => None,
            };
            if !matches!(
                sql_op,
                Some(crate::session::sql_prepare::SqlOp::Prepare { .. })
            ) {
                note(m, flow.pinned, flow.pending);
            }
            if matches!(m[0], b'Q' | b'S' | b'F') {
                flow.replies.sent_sync();
            }
            s.qp.sent(m[0], digest);
            stage(conn, s.stmts, m, max, flow.batch_open, out);
            if let Some(op) = sql_op {
                let batch = s.stmts.batches_sent();
                s.stmts.sql.sent(op, batch);
            }
        };
    add(s, first, first_digest, &mut out);
    while let Some(n) = complete_len(&reader.buf)? {
        match reader.buf[0] {
            b'X' => break,
            // A Bind of `pg_terminate_backend($1)` is the session's to look at (with its own
            // pid it ends the session): it stays in the buffer, read next as a message.
            b'B' if s.stmts.signals.bound_pid(&reader.buf[..n]).is_some() => break,
            b'P' => s.stmts.signals.parsed(&reader.buf[..n]),
            _ => {}
        }
        let m = reader.buf.split_to(n);
        add(s, &m, None, &mut out);
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
        b'P' | b'B' | b'D' | b'C' => {
            *batch_open = true;
            return stmts.outgoing(m, &mut conn.prepared, max, out);
        }
        b'E' | b'H' => *batch_open = true,
        b'S' => {
            *batch_open = false;
            stmts.batch_sent();
        }
        // FunctionCall is answered with its own ReadyForQuery, like a Query.
        b'F' => stmts.batch_sent(),
        b'Q' => {
            stmts.batch_sent();
            // These drop every prepared statement on the connection, Sluice's included.
            let q = m.get(5..).unwrap_or_default().trim_ascii_start();
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
        b'Q' => (&msg[5..], true),
        // Parse: the statement name, then the query.
        b'P' => match msg[5..].iter().position(|b| *b == 0) {
            Some(end) => {
                // The query ends at its NUL; parameter types follow.
                let rest = &msg[5 + end + 1..];
                let len = rest.iter().position(|b| *b == 0).unwrap_or(rest.len());
                (&rest[..len], end == 0)
            }
            None => return,
        },
        _ => return,
    };
    let sql_text = sql.strip_suffix(&[0]).unwrap_or(sql);
    if PinSet::may_concern(sql_text) {
        pins.apply(&sluice_core::util::text(sql_text));
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

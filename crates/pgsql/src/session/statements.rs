//! Prepared statements across pooled server connections. A client's named statement gets a
//! server-side name unique to the session and generation (`sl<session>_<n>`); when the session's
//! next transaction lands on a connection that lacks it, the Parse is replayed there first and its
//! ParseComplete swallowed. Each connection keeps at most `pgsql-max_prepared_statements`, closing
//! the least recently used (that CloseComplete is swallowed too). Only the statement name fields
//! of Parse/Bind/Describe/Close are rewritten; everything else goes through as raw bytes.

use bytes::Bytes;
use sluice_pgsql_backend::prepared::PreparedSet;
use sluice_pgsql_proto::message::{Bind, Close, Describe, Parse, Target, cstr};
use sluice_pgsql_proto::tag::{client, server};
use std::collections::VecDeque;

/// hashbrown's map with its randomly seeded foldhash: a statement name costs ~20 instructions to
/// hash where std's SipHash took ~190, and the PostgreSQL prepared path hashes four per statement.
type HashMap<K, V> = hashbrown::HashMap<K, V>;

/// A client statement as the server knows it.
#[derive(Debug, Clone)]
struct Statement {
    server_name: String,
    /// Parse body after the name: query text, NUL, parameter type count and OIDs.
    definition: Bytes,
}

/// One Parse or Close sent to the server whose reply has not arrived yet.
#[derive(Debug)]
struct Pending {
    server_name: Option<String>,
    /// The client's name when the client sent this Parse itself.
    client_name: Option<Bytes>,
    /// Sluice sent it on its own: the client must not see its reply.
    swallow: bool,
    /// Which Sync/Query batch it belongs to: only that batch's ReadyForQuery settles it.
    batch: u64,
}

/// A session's statements and the replies it owes the server connection in use.
#[derive(Debug)]
pub(crate) struct SessionStatements {
    session: u64,
    generation: u64,
    by_client_name: HashMap<Bytes, Statement>,
    parses: VecDeque<Pending>,
    closes: VecDeque<Pending>,
    /// Sync/Query messages sent, and ReadyForQuery messages received, on the connection in use.
    batches_sent: u64,
    batches_done: u64,
    /// The statements that call `pg_terminate_backend($1)`.
    pub(crate) signals: crate::session::signals::SignalStatements,
    /// SQL-level `PREPARE`d statements, followed per session.
    pub(crate) sql: crate::session::sql_prepare::SqlPrepared,
}

/// What to do with one server reply frame.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Reply {
    /// Send it to the client.
    Forward,
    /// Sluice caused it: drop it.
    Swallow,
}

/// Appends to `out` a `kind` message whose body is `prefix`, the statement `name` with its NUL,
/// then `rest`: the client's message with the statement renamed, written in place (a Bind of
/// `-M prepared` costs no allocation).
fn put_named(out: &mut Vec<u8>, kind: u8, prefix: &[&[u8]], name: &str, rest: &[u8]) {
    let body = prefix.iter().map(|p| p.len()).sum::<usize>() + name.len() + 1 + rest.len();
    out.reserve(body + 5);
    out.push(kind);
    out.extend_from_slice(&((body + 4) as u32).to_be_bytes());
    for p in prefix {
        out.extend_from_slice(p);
    }
    out.extend_from_slice(name.as_bytes());
    out.push(0);
    out.extend_from_slice(rest);
}

impl SessionStatements {
    /// Statements of the session identified by `session` (used in server-side names).
    pub(crate) fn new(session: u64) -> Self {
        SessionStatements {
            session,
            generation: 0,
            by_client_name: HashMap::new(),
            parses: VecDeque::new(),
            closes: VecDeque::new(),
            batches_sent: 0,
            batches_done: 0,
            signals: Default::default(),
            sql: Default::default(),
        }
    }

    /// The session these statements belong to (its cancel key).
    pub(crate) fn session_key(&self) -> u64 {
        self.session
    }

    /// A named Parse while the session holds no server connection: the statement is only
    /// recorded (the client gets its ParseComplete from Sluice) and parsed on the connection of
    /// its first Bind or Describe, so a bare Parse+Sync — libpq's `PQprepare` — never waits for a
    /// pooled connection. A broken query reports its error at that first use. False for other
    /// messages, which need a server.
    pub(crate) fn define_locally(&mut self, msg: &[u8]) -> bool {
        match Parse::read(msg) {
            Some(p) if !p.name.is_empty() => {
                self.define(p.name, p.definition);
                true
            }
            _ => false,
        }
    }

    fn define(&mut self, name: &[u8], definition: &[u8]) -> String {
        self.generation += 1;
        let server_name = format!("sl{:x}_{}", self.session, self.generation);
        self.by_client_name.insert(
            Bytes::copy_from_slice(name),
            Statement {
                server_name: server_name.clone(),
                definition: Bytes::copy_from_slice(definition),
            },
        );
        server_name
    }

    /// The query text of the named statement a Bind message refers to.
    pub(crate) fn bound_query(&self, bind: &[u8]) -> Option<&[u8]> {
        let st = self.by_client_name.get(Bind::read(bind)?.statement)?;
        let (query, _) = cstr(&st.definition)?;
        Some(query)
    }

    /// Batches (Sync, Query, FunctionCall) sent so far: the number of the last one sent.
    pub(crate) fn batches_sent(&self) -> u64 {
        self.batches_sent
    }

    /// Batches answered (ReadyForQuery) so far: the one in progress is the next.
    pub(crate) fn batches_done(&self) -> u64 {
        self.batches_done
    }

    /// A Sync or Query went to the server: later messages belong to the next batch.
    pub(crate) fn batch_sent(&mut self) {
        self.batches_sent += 1;
    }

    /// True when no Parse/Close reply is outstanding.
    pub(crate) fn settled(&self) -> bool {
        self.parses.is_empty() && self.closes.is_empty()
    }

    /// Rewrites one client message for the connection `conn`, appending what to send to `out`.
    /// Messages this does not concern are appended unchanged.
    pub(crate) fn outgoing(
        &mut self,
        msg: &[u8],
        conn: &mut PreparedSet,
        max: usize,
        out: &mut Vec<u8>,
    ) {
        match msg[0] {
            client::PARSE => {
                let Some(Parse { name, definition }) = Parse::read(msg) else {
                    return out.extend_from_slice(msg);
                };
                if name.is_empty() {
                    self.parses.push_back(Pending {
                        server_name: None,
                        client_name: None,
                        swallow: false,
                        batch: self.batches_sent,
                    });
                    return out.extend_from_slice(msg);
                }
                let server_name = self.define(name, definition);
                let client_name = Bytes::copy_from_slice(name);
                self.make_room(conn, max, out);
                put_named(out, client::PARSE, &[], &server_name, definition);
                conn.insert(server_name.clone());
                self.parses.push_back(Pending {
                    server_name: Some(server_name),
                    client_name: Some(client_name),
                    swallow: false,
                    batch: self.batches_sent,
                });
            }
            client::BIND => {
                let Some(b) = Bind::read(msg) else {
                    return out.extend_from_slice(msg);
                };
                let Some(server_name) = self.ensure(b.statement, conn, max, out) else {
                    return out.extend_from_slice(msg);
                };
                put_named(out, client::BIND, &[b.portal, b"\0"], server_name, b.params);
            }
            client::DESCRIBE => {
                let Some(Target::Statement(name)) = Describe::read(msg).map(|d| d.target) else {
                    return out.extend_from_slice(msg);
                };
                let Some(server_name) = self.ensure(name, conn, max, out) else {
                    return out.extend_from_slice(msg);
                };
                put_named(out, client::DESCRIBE, &[b"S"], server_name, b"");
            }
            client::CLOSE => {
                let named = match Close::read(msg).map(|c| c.target) {
                    Some(Target::Statement(name)) => {
                        self.by_client_name.remove(name).map(|st| st.server_name)
                    }
                    _ => None,
                };
                self.closes.push_back(Pending {
                    server_name: named.clone(),
                    client_name: None,
                    swallow: false,
                    batch: self.batches_sent,
                });
                match named {
                    // Closing a statement the connection lacks is not an error: the client still
                    // gets its CloseComplete.
                    Some(server_name) => {
                        conn.remove(&server_name);
                        put_named(out, client::CLOSE, &[b"S"], &server_name, b"");
                    }
                    None => out.extend_from_slice(msg),
                }
            }
            _ => out.extend_from_slice(msg),
        }
    }

    /// The server name of the client's statement `name`, parsed on `conn` first if it lacks it;
    /// None for the unnamed statement and names the session never prepared (the server reports
    /// those).
    fn ensure(
        &mut self,
        name: &[u8],
        conn: &mut PreparedSet,
        max: usize,
        out: &mut Vec<u8>,
    ) -> Option<&str> {
        if name.is_empty() {
            return None;
        }
        if !conn.touch(&self.by_client_name.get(name)?.server_name) {
            // Only here, where the connection lacks it, is the statement copied out.
            let st = self.by_client_name.get(name)?.clone();
            self.make_room(conn, max, out);
            put_named(out, client::PARSE, &[], &st.server_name, &st.definition);
            conn.insert(st.server_name.clone());
            self.parses.push_back(Pending {
                server_name: Some(st.server_name),
                client_name: None,
                swallow: true,
                batch: self.batches_sent,
            });
        }
        self.by_client_name
            .get(name)
            .map(|st| st.server_name.as_str())
    }

    /// Closes least recently used statements until one more fits under `max`.
    fn make_room(&mut self, conn: &mut PreparedSet, max: usize, out: &mut Vec<u8>) {
        while conn.len() >= max.max(1) {
            let Some(old) = conn.evict_oldest() else {
                break;
            };
            put_named(out, client::CLOSE, &[b"S"], &old, b"");
            self.closes.push_back(Pending {
                server_name: Some(old),
                client_name: None,
                swallow: true,
                batch: self.batches_sent,
            });
        }
    }

    /// Accounts for one server reply of type `kind` on `conn`.
    pub(crate) fn incoming(&mut self, kind: u8, conn: &mut PreparedSet) -> Reply {
        let popped = match kind {
            server::PARSE_COMPLETE => self.parses.pop_front(),
            server::CLOSE_COMPLETE => self.closes.pop_front(),
            server::READY_FOR_QUERY => {
                self.sync_done(conn);
                None
            }
            _ => None,
        };
        match popped {
            Some(p) if p.swallow => Reply::Swallow,
            _ => Reply::Forward,
        }
    }

    /// ReadyForQuery ends one batch: its Parses without a ParseComplete failed or were skipped
    /// after an error, so those statements do not exist on the connection (nor, for the client's
    /// own, anywhere). Entries of later batches, already sent, wait for their own.
    fn sync_done(&mut self, conn: &mut PreparedSet) {
        let done = self.batches_done;
        self.batches_done += 1;
        while self.parses.front().is_some_and(|p| p.batch <= done) {
            let Some(p) = self.parses.pop_front() else {
                break;
            };
            let Some(server_name) = p.server_name else {
                continue;
            };
            conn.remove(&server_name);
            if let Some(client) = p.client_name
                && self
                    .by_client_name
                    .get(&client)
                    .is_some_and(|st| st.server_name == server_name)
            {
                self.by_client_name.remove(&client);
            }
        }
        // A skipped Close leaves a statement no name will ever reach again; DISCARD ALL or the
        // connection's end frees it.
        while self.closes.front().is_some_and(|p| p.batch <= done) {
            self.closes.pop_front();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sluice_pgsql_proto::frame::message;

    fn with_name(kind: u8, prefix: &[u8], name: &str, rest: &[u8]) -> Vec<u8> {
        let mut out = Vec::new();
        put_named(&mut out, kind, &[prefix], name, rest);
        out
    }

    #[test]
    fn a_bind_is_renamed_byte_for_byte() {
        let mut s = SessionStatements::new(4);
        let mut c = PreparedSet::default();
        let mut out = Vec::new();
        s.outgoing(&parse("s4", "SELECT $1"), &mut c, 5, &mut out);
        out.clear();
        let params = [0u8, 1, 0, 1, 0, 0, 0, 1, b'7', 0, 0];
        let mut body = b"portal\0s4\0".to_vec();
        body.extend_from_slice(&params);
        s.outgoing(&message(b'B', &body), &mut c, 5, &mut out);
        let mut want = b"portal\0sl4_1\0".to_vec();
        want.extend_from_slice(&params);
        assert_eq!(out, message(b'B', &want));
    }

    fn parse(name: &str, sql: &str) -> Vec<u8> {
        let mut rest = sql.as_bytes().to_vec();
        rest.extend_from_slice(&[0, 0, 0]);
        with_name(b'P', b"", name, &rest)
    }

    fn bind(name: &str) -> Vec<u8> {
        with_name(b'B', b"\0", name, &[0, 0, 0, 0, 0, 0])
    }

    fn frames(mut b: &[u8]) -> Vec<(u8, String)> {
        let mut v = Vec::new();
        while b.len() >= 5 {
            let len = u32::from_be_bytes([b[1], b[2], b[3], b[4]]) as usize;
            let body = &b[5..len + 1];
            let text = match b[0] {
                b'B' => cstr(cstr(body).unwrap().1).unwrap().0,
                b'C' | b'D' => cstr(&body[1..]).unwrap().0,
                _ => cstr(body).unwrap().0,
            };
            v.push((b[0], String::from_utf8_lossy(text).into_owned()));
            b = &b[len + 1..];
        }
        v
    }

    #[test]
    fn replays_a_statement_on_a_connection_that_lacks_it() {
        let mut s = SessionStatements::new(0xab);
        let (mut c1, mut c2) = (PreparedSet::default(), PreparedSet::default());
        let mut out = Vec::new();
        s.outgoing(&parse("q", "SELECT 1"), &mut c1, 10, &mut out);
        s.outgoing(&bind("q"), &mut c1, 10, &mut out);
        assert_eq!(
            frames(&out),
            vec![(b'P', "slab_1".into()), (b'B', "slab_1".into())]
        );
        assert_eq!(s.incoming(b'1', &mut c1), Reply::Forward);
        assert_eq!(s.incoming(b'Z', &mut c1), Reply::Forward);
        // Next transaction on another connection: Parse injected, its reply swallowed.
        out.clear();
        s.outgoing(&bind("q"), &mut c2, 10, &mut out);
        assert_eq!(
            frames(&out),
            vec![(b'P', "slab_1".into()), (b'B', "slab_1".into())]
        );
        assert_eq!(s.incoming(b'1', &mut c2), Reply::Swallow);
        assert_eq!(s.incoming(b'2', &mut c2), Reply::Forward);
        // Already there: no Parse.
        out.clear();
        s.outgoing(&bind("q"), &mut c2, 10, &mut out);
        assert_eq!(frames(&out), vec![(b'B', "slab_1".into())]);
    }

    #[test]
    fn evicts_lru_with_a_swallowed_close_and_forgets_failed_parses() {
        let mut s = SessionStatements::new(1);
        let mut c = PreparedSet::default();
        let mut out = Vec::new();
        s.outgoing(&parse("a", "SELECT 1"), &mut c, 1, &mut out);
        s.incoming(b'1', &mut c);
        out.clear();
        s.outgoing(&parse("b", "SELECT 2"), &mut c, 1, &mut out);
        assert_eq!(
            frames(&out),
            vec![(b'C', "sl1_1".into()), (b'P', "sl1_2".into())]
        );
        assert_eq!(s.incoming(b'3', &mut c), Reply::Swallow);
        // The Parse of "b" fails: ReadyForQuery without ParseComplete.
        s.incoming(b'Z', &mut c);
        assert!(c.is_empty());
        out.clear();
        s.outgoing(&bind("b"), &mut c, 1, &mut out);
        assert_eq!(frames(&out), vec![(b'B', "b".into())], "unknown again");
        // "a" was evicted from the connection but the client still has it: replayed.
        out.clear();
        s.outgoing(&bind("a"), &mut c, 1, &mut out);
        assert_eq!(
            frames(&out),
            vec![(b'P', "sl1_1".into()), (b'B', "sl1_1".into())]
        );
    }

    #[test]
    fn a_parse_while_idle_is_defined_locally_and_parsed_at_first_use() {
        let mut s = SessionStatements::new(3);
        let mut c = PreparedSet::default();
        assert!(s.define_locally(&parse("p", "SELECT 1")));
        assert!(!s.define_locally(&parse("", "SELECT 1")));
        assert!(!s.define_locally(&bind("p")));
        let mut out = Vec::new();
        s.outgoing(&bind("p"), &mut c, 5, &mut out);
        assert_eq!(
            frames(&out),
            vec![(b'P', "sl3_1".into()), (b'B', "sl3_1".into())]
        );
        assert_eq!(s.incoming(b'1', &mut c), Reply::Swallow);
    }

    #[test]
    fn a_ready_for_query_settles_only_its_own_batch() {
        let mut s = SessionStatements::new(4);
        let mut c = PreparedSet::default();
        let mut out = Vec::new();
        // Close+Sync, then Parse+Sync pipelined before any reply.
        s.outgoing(&with_name(b'C', b"S", "old", b""), &mut c, 5, &mut out);
        s.batch_sent();
        s.outgoing(&parse("s4", "SELECT 4"), &mut c, 5, &mut out);
        s.batch_sent();
        assert_eq!(s.incoming(b'3', &mut c), Reply::Forward);
        assert_eq!(s.incoming(b'Z', &mut c), Reply::Forward);
        assert!(!s.settled(), "the Parse of the next batch is still due");
        assert_eq!(s.incoming(b'1', &mut c), Reply::Forward);
        assert_eq!(s.incoming(b'Z', &mut c), Reply::Forward);
        out.clear();
        s.outgoing(&bind("s4"), &mut c, 5, &mut out);
        assert_eq!(frames(&out), vec![(b'B', "sl4_1".into())]);
    }

    #[test]
    fn client_close_and_unnamed_statements_pass_through() {
        let mut s = SessionStatements::new(2);
        let mut c = PreparedSet::default();
        let mut out = Vec::new();
        s.outgoing(&parse("", "SELECT 1"), &mut c, 5, &mut out);
        s.outgoing(&bind(""), &mut c, 5, &mut out);
        s.outgoing(&parse("x", "SELECT 2"), &mut c, 5, &mut out);
        s.outgoing(&with_name(b'C', b"S", "x", b""), &mut c, 5, &mut out);
        s.outgoing(&with_name(b'C', b"P", "portal", b""), &mut c, 5, &mut out);
        assert_eq!(
            frames(&out),
            vec![
                (b'P', "".into()),
                (b'B', "".into()),
                (b'P', "sl2_1".into()),
                (b'C', "sl2_1".into()),
                (b'C', "portal".into()),
            ]
        );
        for kind in [b'1', b'2', b'1', b'3', b'3'] {
            assert_eq!(s.incoming(kind, &mut c), Reply::Forward);
        }
        assert!(s.settled());
        assert!(c.is_empty());
    }
}

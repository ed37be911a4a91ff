//! The query processor on the PostgreSQL side: rules and hints decide the hostgroup a
//! transaction starts on, block (`error_msg`), delay and rewrite queries; every Query and every
//! extended-protocol batch is timed from the message to its ReadyForQuery for the digest stats.

use sluice_core::metrics::FrontendStats;
use sluice_core::query::commands::{self, CommandCounters};
use sluice_core::query::{
    Decision, Dialect, Digest, DigestMemo, DigestSample, QueryContext, QueryProcessorStats,
    SharedShapes, process_digested,
};
use sluice_core::runtime::RuntimeConfig;
use sluice_core::util::unix_now;
use sluice_pgsql_proto::frame::message;
use sluice_pgsql_proto::message::{Parse, Query};
use sluice_pgsql_proto::tag::{client, server};
use std::collections::VecDeque;
use std::sync::atomic::Ordering;
use std::time::Instant;

/// One timed statement waiting for its ReadyForQuery.
#[derive(Debug)]
struct Timed {
    hash: u64,
    text: String,
    started: Instant,
    hostgroup: i64,
    /// Index in `stats_pgsql_commands_counters`.
    command: usize,
}

/// One execution of a statement, as the digest statistics record it.
#[derive(Clone, Copy)]
struct Execution<'a> {
    hash: u64,
    text: &'a str,
    /// The hostgroup it ran on (-1: answered by Sluice).
    hostgroup: i64,
    /// How long it took, and when it ended.
    took: std::time::Duration,
    ended: Instant,
    /// Rows affected and sent.
    rows: (u64, u64),
}

/// Who the session is, as rules see it.
#[derive(Debug, Clone)]
pub(crate) struct Identity {
    /// User.
    pub user: String,
    /// Database.
    pub database: String,
    /// Client IP.
    pub client_ip: String,
    /// Sluice IP the client connected to.
    pub local_ip: String,
    /// Sluice port the client connected to.
    pub local_port: u16,
}

/// Per-session query-processor state.
#[derive(Debug)]
pub(crate) struct SessionProcessor {
    id: Identity,
    next_flag_in: u32,
    /// The statement of the extended-protocol batch being built (from its Parse or Bind).
    batch: Option<(u64, String)>,
    inflight: VecDeque<Timed>,
    /// Rows of the statements answered since the last ReadyForQuery (affected, sent).
    rows: (u64, u64),
    /// Hostgroup of the connection in use (-1 = none).
    pub hostgroup: i64,
    /// Tables written since the last idle ReadyForQuery (cache invalidation), and whether the
    /// list is complete.
    writes: Option<(Vec<String>, bool)>,
    /// A statement of the current transaction writes (read-your-writes takes a token after it).
    wrote: bool,
    /// A clock reading and the Unix time then: digest rows get their `last_seen` from the
    /// statement's own timing instead of another clock read.
    epoch: (Instant, u64),
    /// The last statement digested: drivers send the same text again and again (every
    /// extended-protocol transaction re-parses it).
    memo: DigestMemo,
    /// Buffers of digests this session is done with (the text once its execution was
    /// recorded, the table names once the statement was routed): the next digest is written
    /// into them.
    spare: Digest,
}

/// The query text of a Query or Parse message.
pub(crate) fn query_text(m: &[u8]) -> Option<&[u8]> {
    match *m.first()? {
        client::QUERY => Query::read(m).map(|q| q.sql),
        client::PARSE => Parse::read(m)?.query(),
        _ => None,
    }
}

/// `m` (a Query or Parse) with its query text replaced by `sql`.
pub(crate) fn with_query(m: &[u8], sql: &str) -> Option<Vec<u8>> {
    match *m.first()? {
        client::QUERY => {
            let mut body = sql.as_bytes().to_vec();
            body.push(0);
            Some(message(client::QUERY, &body))
        }
        client::PARSE => {
            let p = Parse::read(m)?;
            // The query's NUL and the parameter types stay as they were.
            let types = &p.definition[p.query()?.len()..];
            let mut out = Vec::with_capacity(p.name.len() + 1 + sql.len() + types.len());
            out.extend_from_slice(p.name);
            out.push(0);
            out.extend_from_slice(sql.as_bytes());
            out.extend_from_slice(types);
            Some(message(client::PARSE, &out))
        }
        _ => None,
    }
}

/// Rows from a CommandComplete tag: (affected, sent). Read in place: every statement has one.
fn tag_rows(tag: &[u8]) -> (u64, u64) {
    let tag = tag.strip_suffix(&[0]).unwrap_or(tag);
    let verb = tag.split(|b| *b == b' ').next().unwrap_or_default();
    let last = tag.rsplit(|b| *b == b' ').next().unwrap_or_default();
    let n = if !last.is_empty() && last.iter().all(u8::is_ascii_digit) {
        last.iter().fold(0u64, |n, d| {
            n.saturating_mul(10).saturating_add(u64::from(d - b'0'))
        })
    } else {
        0
    };
    match verb {
        b"SELECT" | b"FETCH" | b"MOVE" => (0, n),
        b"INSERT" | b"UPDATE" | b"DELETE" | b"MERGE" | b"COPY" => (n, 0),
        _ => (0, 0),
    }
}

impl SessionProcessor {
    /// State for a new session.
    pub(crate) fn new(id: Identity) -> Self {
        SessionProcessor {
            id,
            next_flag_in: 0,
            batch: None,
            inflight: VecDeque::new(),
            rows: (0, 0),
            hostgroup: -1,
            writes: None,
            wrote: false,
            epoch: (Instant::now(), unix_now()),
            memo: DigestMemo::default(),
            spare: Digest::default(),
        }
    }

    /// Digest, rules and hints for one statement.
    pub(crate) fn decide(
        &mut self,
        rt: &RuntimeConfig,
        (stats, shapes): (&QueryProcessorStats, &SharedShapes),
        sql: &str,
    ) -> Decision {
        let vars = &rt.pgsql.variables.query;
        let ctx = QueryContext {
            user: &self.id.user,
            schema: &self.id.database,
            client_addr: &self.id.client_ip,
            proxy_addr: &self.id.local_ip,
            proxy_port: self.id.local_port,
            flag_in: std::mem::take(&mut self.next_flag_in),
        };
        let reuse = std::mem::take(&mut self.spare);
        let digest = self.memo.digest(
            sql,
            Dialect::Pgsql,
            vars.query_digests_max_digest_length,
            reuse,
            Some(shapes),
        );
        let d = process_digested(&rt.pgsql.rules, vars, &ctx, sql, digest);
        stats.hit(&d.action.matched);
        if let Some(f) = d.action.next_query_flag_in {
            self.next_flag_in = f;
        }
        if d.action.rewritten.is_some() {
            stats.rewritten.fetch_add(1, Ordering::Relaxed);
        }
        d
    }

    /// A statement of this session was answered by Sluice itself (blocked or OK'd).
    pub(crate) fn record_local(
        &self,
        rt: &RuntimeConfig,
        stats: &QueryProcessorStats,
        d: &Decision,
        started: Instant,
    ) {
        let ended = Instant::now();
        let run = Execution {
            hash: d.digest.hash,
            text: &d.digest.text,
            hostgroup: -1,
            took: ended.saturating_duration_since(started),
            ended,
            rows: (0, 0),
        };
        self.record(rt, stats, &run);
    }

    /// Adds one execution to `stats_pgsql_query_digest`.
    fn record(&self, rt: &RuntimeConfig, stats: &QueryProcessorStats, run: &Execution<'_>) {
        let Execution {
            hash,
            text,
            hostgroup,
            took,
            ended,
            rows,
        } = *run;
        let vars = &rt.pgsql.variables.query;
        if !vars.query_digests {
            return;
        }
        stats
            .digests
            .set_max_entries(vars.query_digests_max_entries as usize);
        stats.digests.record(&DigestSample {
            hostgroup,
            schema: &self.id.database,
            user: &self.id.user,
            client: if vars.query_digests_track_hostname {
                &self.id.client_ip
            } else {
                ""
            },
            digest: hash,
            text,
            duration_us: u64::try_from(took.as_micros()).unwrap_or(u64::MAX),
            rows_affected: rows.0,
            rows_sent: rows.1,
            now: self.epoch.1 + ended.saturating_duration_since(self.epoch.0).as_secs(),
        });
    }

    /// A client message went to the server: Query/Sync/FunctionCall start a timed entry, at the
    /// `clock`'s instant. `digest` is the statement's (hash, text) when the caller computed it.
    pub(crate) fn sent(
        &mut self,
        kind: u8,
        digest: Option<(u64, String)>,
        clock: &mut sluice_core::util::EventClock,
    ) {
        match kind {
            client::PARSE | client::BIND if digest.is_some() => self.batch = digest,
            client::QUERY | client::SYNC | client::FUNCTION_CALL => {
                let d = if kind == client::SYNC {
                    self.batch.take()
                } else {
                    digest
                };
                let (hash, text) = d.unwrap_or_default();
                self.inflight.push_back(Timed {
                    command: commands::query_command(text.as_bytes()),
                    hash,
                    text,
                    started: clock.now(),
                    hostgroup: self.hostgroup,
                });
            }
            _ => {}
        }
    }

    /// A server frame came back (read at `now`): CommandComplete counts rows; ReadyForQuery
    /// ends a timed entry.
    pub(crate) fn received(
        &mut self,
        rt: &RuntimeConfig,
        (stats, counters, frontend): (&QueryProcessorStats, &CommandCounters, &FrontendStats),
        (kind, body): (u8, &[u8]),
        now: Instant,
    ) {
        match kind {
            server::COMMAND_COMPLETE => {
                let (a, s) = tag_rows(body);
                self.rows.0 += a;
                self.rows.1 += s;
            }
            server::READY_FOR_QUERY => {
                let rows = std::mem::take(&mut self.rows);
                if let Some(t) = self.inflight.pop_front()
                    && !t.text.is_empty()
                {
                    let took = now.saturating_duration_since(t.started);
                    counters.record(t.command, took);
                    let us = u64::try_from(took.as_micros()).unwrap_or(u64::MAX);
                    let slow_us = rt.pgsql.variables.query.long_query_time * 1000;
                    frontend.statement(t.hostgroup, us, slow_us);
                    let run = Execution {
                        hash: t.hash,
                        text: &t.text,
                        hostgroup: t.hostgroup,
                        took,
                        ended: now,
                        rows,
                    };
                    self.record(rt, stats, &run);
                    self.spare.text = t.text;
                }
            }
            _ => {}
        }
    }

    /// Gives back the table-name buffers of a digest the session is done with.
    pub(crate) fn recycle_tables(&mut self, tables: Vec<String>) {
        self.spare.tables = tables;
    }

    /// A statement that writes `tables` went to the server.
    pub(crate) fn note_write(&mut self, tables: &[String], complete: bool) {
        let w = self.writes.get_or_insert_with(|| (Vec::new(), true));
        w.0.extend(tables.iter().cloned());
        w.1 &= complete;
    }

    /// A statement that writes went to the server (whatever the cache does with it).
    pub(crate) fn note_written(&mut self) {
        self.wrote = true;
    }

    /// Whether the transaction just over wrote; clears it.
    pub(crate) fn take_written(&mut self) -> bool {
        std::mem::take(&mut self.wrote)
    }

    /// The writes to invalidate cached results for, once the transaction is over.
    pub(crate) fn take_writes(&mut self) -> Option<(Vec<String>, bool)> {
        self.writes.take()
    }

    /// The client's IP address.
    pub(crate) fn client_ip(&self) -> &str {
        &self.id.client_ip
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn query_text_and_rewrite_of_query_and_parse() {
        let q = message(client::QUERY, b"SELECT 1\0");
        assert_eq!(query_text(&q), Some(&b"SELECT 1"[..]));
        let p = message(client::PARSE, b"s1\0SELECT $1\0\x00\x01\x00\x00\x00\x17");
        assert_eq!(query_text(&p), Some(&b"SELECT $1"[..]));
        let p2 = with_query(&p, "SELECT $1 + 1").expect("parse");
        assert_eq!(query_text(&p2), Some(&b"SELECT $1 + 1"[..]));
        assert!(p2.ends_with(b"\0\x00\x01\x00\x00\x00\x17"));
        assert_eq!(query_text(&message(client::PARSE, b"noterm")), None);
    }

    #[test]
    fn rows_from_tags() {
        assert_eq!(tag_rows(b"SELECT 5\0"), (0, 5));
        assert_eq!(tag_rows(b"INSERT 0 3\0"), (3, 0));
        assert_eq!(tag_rows(b"UPDATE 2\0"), (2, 0));
        assert_eq!(tag_rows(b"BEGIN\0"), (0, 0));
    }
}

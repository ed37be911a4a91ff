//! COM_QUERY: answered by Sluice when it can be, otherwise forwarded; what the statements did to
//! the session (SET, USE, temporary tables, locks, ...) is recorded afterwards.

use super::hook::Hooked;
use super::{Next, Session};
use crate::sql::classify::{Effects, ProxyAnswer, classify};
use crate::sql::compound::Compound;
use crate::sql::lexer::split_statements;
use crate::sql::set::{SetItem, SetParse, SetValue};
use sluice_core::query::WordSet;
use sluice_mysql_proto::framing::Packet;
use sluice_mysql_proto::packets::err_payload;
use sluice_mysql_proto::reply::ReplyKind;
use std::sync::atomic::Ordering;
use tracing::warn;

/// Words whose presence makes a query worth classifying; anything else (plain SELECT/INSERT/
/// UPDATE/DELETE without user variables) changes no session state and skips the tokenizer.
const INTERESTING: WordSet = WordSet::new(&[
    b"processlist",
    b"set",
    b"use",
    b"temporary",
    b"drop",
    b"lock",
    b"prepare",
    b"found_rows",
    b"@",
    b"xa",
    b"handler",
    b"version",
    b"last_insert_id",
    b"flush",
    b"kill",
    b"connection_id",
    b"local",
]);

/// A COM_QUERY packet carrying `sql`.
fn query_packet(seq: u8, sql: &str) -> Vec<u8> {
    let mut p = Vec::with_capacity(sql.len() + 1);
    p.push(sluice_mysql_proto::consts::com::QUERY);
    p.extend_from_slice(sql.as_bytes());
    sluice_mysql_proto::framing::packet(seq, &p)
}

/// What the statements of a query do to the session; none for a query with no word that could
/// change it (the common case, decided by one byte search).
fn statement_effects(sql: &[u8]) -> Vec<Effects> {
    if !INTERESTING.occurs_in(sql) {
        return Vec::new();
    }
    let text = sluice_core::util::text(sql);
    match crate::sql::compound::compound(&text) {
        // A stored body: its statements do not run now.
        Some(Compound::Definition) => Vec::new(),
        // A block runs now, and what it does to the session cannot be followed.
        Some(Compound::Block) => vec![Effects {
            untrackable: Some("compound statement"),
            ..Effects::default()
        }],
        None => split_statements(&text).into_iter().map(classify).collect(),
    }
}

fn quote_literal(v: &str) -> String {
    format!("'{}'", v.replace('\\', "\\\\").replace('\'', "''"))
}

impl Session {
    /// COM_QUERY, read at `started`.
    pub(super) async fn query(&mut self, pk: &Packet, started: std::time::Instant) -> Next {
        let reply_seq = pk.seq.wrapping_add(1);
        let original = sluice_core::util::text(&pk.payload[1..]);
        let routed = match self.consult_hook(&original, reply_seq).await {
            Hooked::Answered(next) => return next,
            Hooked::Route(hostgroup) => Some(hostgroup),
            Hooked::Continue => None,
        };
        // One snapshot for the statement, from planning to admission.
        let rt = self.fe.config.load();
        let mut plan = self.plan_query(&rt, &original);
        if let Some(hostgroup) = routed {
            match plan.as_mut() {
                Some(d) => d.action.destination_hostgroup = Some(hostgroup),
                None => self.route_hostgroup = hostgroup,
            }
        }
        if let Some(d) = &plan
            && let Some(next) = self.rule_answer(d, reply_seq, started).await
        {
            return next;
        }
        let rewritten: Option<Vec<u8>> = plan
            .as_ref()
            .and_then(|d| d.action.rewritten.as_deref())
            .map(|t| query_packet(pk.seq, t));
        let sql_bytes: &[u8] = match plan.as_ref().and_then(|d| d.action.rewritten.as_deref()) {
            Some(t) => t.as_bytes(),
            None => &pk.payload[1..],
        };
        let effects = statement_effects(sql_bytes);
        if let Some(next) = self.answer_locally(&effects, reply_seq).await {
            return next;
        }
        self.delay(&rt, plan.as_ref()).await;
        if let Some(hg) = plan.as_ref().and_then(|d| d.action.destination_hostgroup) {
            self.route_hostgroup = hg;
        }
        let cache_ttl = plan.as_ref().and_then(|d| self.cache_ttl(d));
        if let (Some(_), Some(d)) = (cache_ttl, plan.as_ref()) {
            if self.serve_cached(&original, d, started).await {
                return Next::Continue;
            }
            self.capture = Some(Vec::new());
        }
        // The text sent: the rewrite, else the client's (already checked as UTF-8 by the
        // lossy conversion; a query that is not UTF-8 is seen through its lossy form).
        let sql_text: &str = match plan.as_ref().and_then(|d| d.action.rewritten.as_deref()) {
            Some(t) => t,
            None => &original,
        };
        // After the cache (a hit needs no slot), before any backend connection is taken.
        if let Some(next) = self.admit(&rt, plan.as_ref(), sql_text, reply_seq).await {
            self.capture = None;
            return next;
        }
        let causal = self.causal_plan(&rt, plan.as_ref());
        let timeout = Session::query_timeout(&rt, plan.as_ref());
        drop(rt);
        if let Some(gate) = causal
            && let Some(next) = Box::pin(self.causal_gate(gate, reply_seq)).await
        {
            self.capture = None;
            return next;
        }
        if let Some(d) = plan.as_ref() {
            self.mirror(d, sql_text);
        }
        if let Some(r) = plan.as_ref().and_then(|d| d.action.retries) {
            self.query_retries = r;
        }
        let timeout = self.class_timeout(timeout);
        let t = self.forward_timed(pk, rewritten.as_deref(), timeout).await;
        self.statement_done(started);
        let captured = self.capture.take();
        if let Some(d) = &plan {
            self.after_forward(&original, d, t.as_ref(), started, captured, cache_ttl);
        }
        let Some(t) = t else {
            return Next::Continue;
        };
        let keep_multiplexing = plan.as_ref().and_then(|d| d.action.multiplex) == Some(2);
        self.record_effects(&effects, &t, keep_multiplexing, sql_bytes)
            .await;
        self.note_insert_id(&t);
        if let Some(d) = plan {
            self.spare_digest = d.digest;
        }
        Next::Continue
    }

    /// Statements Sluice answers without a backend: a refused LOAD DATA LOCAL INFILE, KILL,
    /// its own result sets and a lone `SET wait_timeout`. `None`: the query goes to a server.
    async fn answer_locally(&mut self, effects: &[Effects], reply_seq: u8) -> Option<Next> {
        if effects.iter().any(|e| e.load_local) && !self.local_infile_allowed() {
            let msg = if self
                .fe
                .config
                .load()
                .mysql
                .variables
                .enable_load_data_local_infile
            {
                "LOAD DATA LOCAL INFILE needs a client that allows it (e.g. mariadb --local-infile=1)"
            } else {
                "LOAD DATA LOCAL INFILE is disabled in Sluice (mysql-enable_load_data_local_infile=false)"
            };
            self.send_err(reply_seq, &err_payload(1148, "42000", msg))
                .await;
            return Some(Next::Continue);
        }
        if let [only] = effects {
            if let Some(kill) = &only.kill {
                return Some(self.kill(reply_seq, kill).await);
            }
            if let Some(answer) = &only.answer {
                let forward_version = self
                    .fe
                    .config
                    .load()
                    .mysql
                    .variables
                    .select_version_forwarding;
                let forward_insert_id =
                    matches!(answer, ProxyAnswer::LastInsertId(_)) && self.holds_insert_conn();
                if !(forward_insert_id
                    || forward_version
                        && matches!(
                            answer,
                            ProxyAnswer::Version(_) | ProxyAnswer::VersionComment(_)
                        ))
                {
                    return Some(self.answer(reply_seq, answer).await);
                }
            }
            if let Some(SetParse::Items(items)) = &only.set
                && let Some(ms) = only_wait_timeout(items)
            {
                let global = self.fe.config.load().mysql.variables.wait_timeout;
                self.client_wait_timeout = Some(ms.min(global));
                return Some(self.reply_ok(reply_seq).await);
            }
        }
        None
    }

    /// Records what the statements that ran did to the session (pins, schema, SETs), reading
    /// back values only the server knows.
    async fn record_effects(
        &mut self,
        effects: &[Effects],
        t: &sluice_mysql_proto::reply::ReplyTracker,
        keep_multiplexing: bool,
        sql_bytes: &[u8],
    ) {
        // With multi-statements, the statements before an error ran; the rest did not.
        let ran = if t.error {
            (t.results as usize).min(effects.len())
        } else {
            effects.len()
        };
        let mut read_back: Vec<String> = Vec::new();
        let mut state_changed = false;
        for e in &effects[..ran] {
            if !keep_multiplexing {
                self.pins.apply(e);
            }
            if let Some(db) = &e.use_schema {
                self.state.schema = Some(db.clone());
                state_changed = true;
            }
            if let Some(name) = &e.sql_prepare {
                // A new PREPARE of a name replaces the old statement, whatever it was.
                state_changed |= match &e.sql_prepare_text {
                    Some(text) => {
                        self.state
                            .prepared
                            .insert(name.clone(), text.clone())
                            .as_ref()
                            != Some(text)
                    }
                    None => self.state.prepared.remove(name).is_some(),
                };
            }
            if let Some(name) = &e.sql_deallocate {
                state_changed |= self.state.prepared.remove(name).is_some();
            }
            match &e.set {
                Some(SetParse::Items(items)) => {
                    for item in items {
                        state_changed |= self.apply_set_item(item, &mut read_back);
                    }
                }
                Some(SetParse::Unknown) => {
                    self.pins.unparsed_set = true;
                    self.fe
                        .counters
                        .unparsed_set
                        .fetch_add(1, Ordering::Relaxed);
                    warn!(session = self.id, user = %self.login.user.username,
                        "Unable to parse SET statement; the session stays on its backend connection: {}",
                        String::from_utf8_lossy(&sql_bytes[..sql_bytes.len().min(200)]));
                }
                _ => {}
            }
        }
        if !read_back.is_empty() {
            self.read_back(&read_back).await;
            state_changed = true;
        }
        if state_changed {
            self.sync_conn_state();
        }
    }

    /// Forwards a COM_QUERY (or its rewritten form) under an optional timeout: a timer sends
    /// `KILL QUERY` from another connection if the reply has not completed by then.
    async fn forward_timed(
        &mut self,
        pk: &Packet,
        rewritten: Option<&[u8]>,
        timeout: Option<std::time::Duration>,
    ) -> Option<sluice_mysql_proto::reply::ReplyTracker> {
        let killer = match timeout {
            Some(after) => {
                if let Err(f) = self.ensure_backend().await {
                    self.report(pk.seq.wrapping_add(1), f).await;
                    return None;
                }
                self.arm_killer(after)
            }
            None => None,
        };
        let t = match rewritten {
            Some(raw) => self.forward_bytes(raw, pk.seq, ReplyKind::ResultSets).await,
            None => self.forward(pk, ReplyKind::ResultSets).await,
        };
        if let Some(k) = killer {
            k.abort();
        }
        t
    }

    /// Whether the session holds the backend connection its last insert ran on.
    fn holds_insert_conn(&mut self) -> bool {
        let Some((server, thread)) = self.last_insert_conn.as_ref() else {
            return false;
        };
        self.backend.as_mut().is_some_and(|b| {
            let c = b.conn();
            c.thread_id == *thread && c.server == *server
        })
    }

    /// Remembers an auto-increment id a statement generated, and keeps the backend connection
    /// for the next few statements (`mysql-auto_increment_delay_multiplex`) so that
    /// `LAST_INSERT_ID()` inside other statements sees it too.
    pub(super) fn note_insert_id(&mut self, t: &sluice_mysql_proto::reply::ReplyTracker) {
        if t.last_insert_id == 0 {
            return;
        }
        self.last_insert_id = t.last_insert_id;
        self.last_insert_conn = self.backend.as_mut().map(|b| {
            let c = b.conn();
            (c.server.clone(), c.thread_id)
        });
        // Inside a transaction the connection is held anyway; holding on past its end would
        // chain transaction after transaction onto one connection.
        if t.status & sluice_mysql_proto::consts::status::IN_TRANS != 0 {
            return;
        }
        let rt = self.fe.config.load();
        let vars = &rt.mysql.variables;
        self.pins.auto_increment_left = vars.auto_increment_delay_multiplex + 1;
        self.pins.auto_increment_until = Some(
            std::time::Instant::now()
                + std::time::Duration::from_millis(vars.auto_increment_delay_multiplex_timeout_ms),
        );
    }

    /// Records one SET assignment that ran; returns true when the replayable state changed.
    fn apply_set_item(&mut self, item: &SetItem, read_back: &mut Vec<String>) -> bool {
        match item {
            SetItem::Session {
                name,
                value: SetValue::Literal(v),
            } => {
                if name == "wait_timeout" {
                    let global = self.fe.config.load().mysql.variables.wait_timeout;
                    if let Ok(secs) = v.trim_matches('\'').parse::<u64>() {
                        self.client_wait_timeout = Some(secs.saturating_mul(1000).min(global));
                    }
                }
                self.state.set_var(name, v);
                true
            }
            SetItem::Session {
                name,
                value: SetValue::Expression,
            } => {
                read_back.push(name.clone());
                false
            }
            SetItem::Names { charset, collation } => {
                let mut sql = match charset {
                    Some(cs) => format!("SET NAMES {}", quote_literal(cs)),
                    None => "SET NAMES DEFAULT".to_string(),
                };
                if let Some(c) = collation {
                    sql.push_str(&format!(" COLLATE {}", quote_literal(c)));
                }
                self.state.set_charset_cmd(sql);
                true
            }
            SetItem::CharacterSet(cs) => {
                let sql = match cs {
                    Some(cs) => format!("SET CHARACTER SET {}", quote_literal(cs)),
                    None => "SET CHARACTER SET DEFAULT".to_string(),
                };
                self.state.set_charset_cmd(sql);
                true
            }
            SetItem::SessionTransaction {
                isolation,
                read_only,
            } => {
                if isolation.is_some() {
                    self.state.isolation = isolation.clone();
                }
                if read_only.is_some() {
                    self.state.read_only = *read_only;
                }
                true
            }
            SetItem::NextTransaction => {
                self.pins.next_transaction = true;
                false
            }
            SetItem::Global => {
                // New sessions must see the new defaults (mariadb-test: 4 tests).
                if let Some(b) = self.backend.as_ref() {
                    self.fe.pool.globals_changed(&b.key().server);
                }
                false
            }
            SetItem::UserVar => false,
        }
    }

    /// Reads back variables set from expressions, so they can be replayed as literals.
    async fn read_back(&mut self, names: &[String]) {
        let sql = format!(
            "SELECT {}",
            names
                .iter()
                .map(|n| format!("@@session.{n}"))
                .collect::<Vec<_>>()
                .join(", ")
        );
        let Some(b) = self.backend.as_mut() else {
            return;
        };
        match b.conn().query_row(&sql).await {
            Ok(Ok(values)) => {
                for (name, v) in names.iter().zip(values) {
                    let lit = v.map_or_else(|| "NULL".to_string(), |v| quote_literal(&v));
                    self.state.set_var(name, &lit);
                }
            }
            _ => {
                // Could not learn the value: keep the session on this connection instead.
                self.pins.unparsed_set = true;
            }
        }
    }
}

/// `SET wait_timeout = N` alone: Sluice keeps it (in ms) instead of sending it to a server.
fn only_wait_timeout(items: &[SetItem]) -> Option<u64> {
    match items {
        [
            SetItem::Session {
                name,
                value: SetValue::Literal(v),
            },
        ] if name == "wait_timeout" => v
            .trim_matches('\'')
            .parse::<u64>()
            .ok()
            .map(|s| s.saturating_mul(1000)),
        _ => None,
    }
}

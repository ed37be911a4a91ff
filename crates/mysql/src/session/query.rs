//! COM_QUERY: answered by Sluice when it can be, otherwise forwarded; what the statements did to
//! the session (SET, USE, temporary tables, locks, ...) is recorded afterwards.

use super::{Next, Session};
use crate::sql::classify::{Effects, ProxyAnswer, classify};
use crate::sql::lexer::split_statements;
use crate::sql::set::{SetItem, SetParse, SetValue};
use sluice_mysql_proto::framing::Packet;
use sluice_mysql_proto::reply::ReplyKind;
use std::sync::atomic::Ordering;
use tracing::warn;

/// Words whose presence makes a query worth classifying; anything else (plain SELECT/INSERT/
/// UPDATE/DELETE without user variables) changes no session state and skips the tokenizer.
const INTERESTING: &[&[u8]] = &[
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
];

fn contains_ci(hay: &[u8], needle: &[u8]) -> bool {
    hay.windows(needle.len())
        .any(|w| w.eq_ignore_ascii_case(needle))
}

fn needs_classification(sql: &[u8]) -> bool {
    INTERESTING.iter().any(|n| contains_ci(sql, n))
}

fn quote_literal(v: &str) -> String {
    format!("'{}'", v.replace('\\', "\\\\").replace('\'', "''"))
}

impl Session {
    pub(super) async fn query(&mut self, pk: &Packet) -> Next {
        let sql_bytes = &pk.payload[1..];
        let effects: Vec<Effects> = if needs_classification(sql_bytes) {
            let text = String::from_utf8_lossy(sql_bytes);
            split_statements(&text).into_iter().map(classify).collect()
        } else {
            Vec::new()
        };
        let reply_seq = pk.seq.wrapping_add(1);
        if let [only] = effects.as_slice() {
            if let Some(answer) = &only.answer {
                let forward_version = self
                    .fe
                    .config
                    .load()
                    .mysql
                    .variables
                    .select_version_forwarding;
                if !(forward_version
                    && matches!(
                        answer,
                        ProxyAnswer::Version(_) | ProxyAnswer::VersionComment(_)
                    ))
                {
                    return self.answer(reply_seq, answer).await;
                }
            }
            if let Some(SetParse::Items(items)) = &only.set
                && let Some(ms) = only_wait_timeout(items)
            {
                let global = self.fe.config.load().mysql.variables.wait_timeout;
                self.client_wait_timeout = Some(ms.min(global));
                return self.reply_ok(reply_seq).await;
            }
        }
        let delay = self.fe.config.load().mysql.variables.default_query_delay;
        if delay > 0 {
            // mysql-default_query_delay: ProxySQL's global throttle, applied before the backend.
            tokio::time::sleep(std::time::Duration::from_millis(delay)).await;
        }
        let Some(t) = self.forward(pk, ReplyKind::ResultSets).await else {
            return Next::Continue;
        };
        // With multi-statements, the statements before an error ran; the rest did not.
        let ran = if t.error {
            (t.results as usize).min(effects.len())
        } else {
            effects.len()
        };
        let mut read_back: Vec<String> = Vec::new();
        let mut state_changed = false;
        for e in &effects[..ran] {
            self.pins.apply(e);
            if let Some(db) = &e.use_schema {
                self.state.schema = Some(db.clone());
                state_changed = true;
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
        self.note_insert_id(&t);
        Next::Continue
    }

    /// Remembers an auto-increment id a statement generated, and keeps the backend connection
    /// for the next few statements (`mysql-auto_increment_delay_multiplex`) so that
    /// `LAST_INSERT_ID()` inside other statements sees it too.
    pub(super) fn note_insert_id(&mut self, t: &sluice_mysql_proto::reply::ReplyTracker) {
        if t.last_insert_id == 0 {
            return;
        }
        self.last_insert_id = t.last_insert_id;
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
            SetItem::Global | SetItem::UserVar => false,
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

//! SQL-level `PREPARE name AS …` / `DEALLOCATE` followed per session instead of pinning it: a
//! session's statements are prepared again on whichever server connection it gets next, and a
//! connection's statements the session does not have are deallocated first, so no session ever
//! `EXECUTE`s another's. PostgreSQL's prepared statements are not transactional (a PREPARE
//! survives the ROLLBACK of its transaction), so each takes effect when the server completes it.
//! Only a Query holding exactly one such statement is followed; others (several statements, the
//! extended protocol) pin the session as before (`pins.rs`).

use sluice_core::query::lexer::{Syntax, split_statements};
use std::collections::{BTreeMap, VecDeque};

/// What one followed statement does.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum SqlOp {
    /// `PREPARE name … AS …`: the name as PostgreSQL folds it, and the statement's text.
    Prepare { name: String, text: String },
    /// `DEALLOCATE [PREPARE] name`.
    Deallocate(String),
    /// `DEALLOCATE [PREPARE] ALL` or `DISCARD ALL`.
    DeallocateAll,
}

impl SqlOp {
    /// Whether `tag` (a CommandComplete) is this statement's.
    fn completed_by(&self, tag: &[u8]) -> bool {
        let tag = tag.strip_suffix(&[0]).unwrap_or(tag);
        match self {
            SqlOp::Prepare { .. } => tag == b"PREPARE",
            SqlOp::Deallocate(_) => tag == b"DEALLOCATE",
            SqlOp::DeallocateAll => tag == b"DEALLOCATE ALL" || tag == b"DISCARD ALL",
        }
    }
}

/// The statement of a Query body (`sql`, NUL-terminated or not), when it is one of these.
pub(crate) fn parse(sql: &[u8]) -> Option<SqlOp> {
    let sql = sql.strip_suffix(&[0]).unwrap_or(sql);
    // Most statements are none of these: decided from the first letter, without UTF-8 checks.
    let first = sql.trim_ascii_start().first()?;
    if !matches!(first, b'p' | b'P' | b'd' | b'D') {
        return None;
    }
    let sql = std::str::from_utf8(sql).ok()?;
    let mut stmts = split_statements(sql, Syntax::Pgsql);
    if stmts.len() != 1 {
        return None;
    }
    let text = stmts.pop()?.trim();
    let (verb, rest) = word(text);
    if verb.eq_ignore_ascii_case("prepare") {
        let rest = rest.trim_start();
        let (name, after) = identifier(rest)?;
        if name == "transaction" && after.trim_start().starts_with('\'') {
            return None;
        }
        let after = after.trim_start();
        let after = match after.strip_prefix('(') {
            Some(types) => &types[types.find(')')? + 1..],
            None => after,
        };
        let (kw, _) = word(after.trim_start());
        kw.eq_ignore_ascii_case("as").then(|| SqlOp::Prepare {
            name,
            text: text.to_string(),
        })
    } else if verb.eq_ignore_ascii_case("deallocate") {
        let mut rest = rest.trim_start();
        let (w, after) = word(rest);
        if w.eq_ignore_ascii_case("prepare") && after.starts_with(char::is_whitespace) {
            rest = after.trim_start();
        }
        let (w, after) = word(rest);
        if w.eq_ignore_ascii_case("all") && after.trim().is_empty() {
            return Some(SqlOp::DeallocateAll);
        }
        let (name, after) = identifier(rest)?;
        after.trim().is_empty().then_some(SqlOp::Deallocate(name))
    } else if verb.eq_ignore_ascii_case("discard") {
        word(rest.trim_start())
            .0
            .eq_ignore_ascii_case("all")
            .then_some(SqlOp::DeallocateAll)
    } else {
        None
    }
}

/// The leading run of letters, and the rest.
fn word(s: &str) -> (&str, &str) {
    let end = s
        .find(|c: char| !c.is_ascii_alphabetic())
        .unwrap_or(s.len());
    s.split_at(end)
}

/// An identifier as PostgreSQL names it (unquoted: lower case; quoted: as written), and the rest.
fn identifier(s: &str) -> Option<(String, &str)> {
    if let Some(q) = s.strip_prefix('"') {
        let end = q.find('"')?;
        return (end > 0).then(|| (q[..end].to_string(), &q[end + 1..]));
    }
    let end = s
        .find(|c: char| !(c.is_alphanumeric() || c == '_' || c == '$'))
        .unwrap_or(s.len());
    (end > 0 && !s.starts_with(|c: char| c.is_ascii_digit()))
        .then(|| (s[..end].to_lowercase(), &s[end..]))
}

/// A session's SQL-level prepared statements, and its followed statements awaiting the server.
#[derive(Debug, Default)]
pub(crate) struct SqlPrepared {
    /// Name → the PREPARE statement that made it.
    statements: BTreeMap<String, String>,
    /// Sent and not yet answered: the statement, the batch (Query) it went in, and whether its
    /// CommandComplete came.
    pending: VecDeque<(SqlOp, u64, bool)>,
}

impl SqlPrepared {
    /// `op` went to the server as Query number `batch`.
    pub(crate) fn sent(&mut self, op: SqlOp, batch: u64) {
        self.pending.push_back((op, batch, false));
    }

    /// A CommandComplete of batch `batch` (the one in progress).
    pub(crate) fn completed(&mut self, tag: &[u8], batch: u64) {
        if let Some((op, b, ok)) = self.pending.front_mut()
            && *b == batch
            && op.completed_by(tag)
        {
            *ok = true;
        }
    }

    /// Batches up to `done` were answered: their completed statements take effect, for the
    /// session and for `conn`, the connection they ran on.
    pub(crate) fn ready(&mut self, done: u64, conn: &mut BTreeMap<String, String>) {
        while self.pending.front().is_some_and(|(_, b, _)| *b <= done) {
            let Some((op, _, ok)) = self.pending.pop_front() else {
                break;
            };
            if !ok {
                continue;
            }
            match op {
                SqlOp::Prepare { name, text } => {
                    conn.insert(name.clone(), text.clone());
                    self.statements.insert(name, text);
                }
                SqlOp::Deallocate(name) => {
                    conn.remove(&name);
                    self.statements.remove(&name);
                }
                SqlOp::DeallocateAll => {
                    conn.clear();
                    self.statements.clear();
                }
            }
        }
    }

    /// True while a followed statement awaits its reply.
    pub(crate) fn waiting(&self) -> bool {
        !self.pending.is_empty()
    }

    /// The SQL that makes a connection carrying `conn` carry exactly this session's statements
    /// (deallocating the others first), or `None` when it already does.
    pub(crate) fn replay(&self, conn: &BTreeMap<String, String>) -> Option<String> {
        if *conn == self.statements {
            return None;
        }
        let mut sql = String::new();
        for (name, text) in conn {
            if self.statements.get(name) != Some(text) {
                sql.push_str(&format!(
                    "DEALLOCATE {};",
                    crate::listen::quoted_identifier(name)
                ));
            }
        }
        for (name, text) in &self.statements {
            if conn.get(name) != Some(text) {
                sql.push_str(text);
                sql.push(';');
            }
        }
        Some(sql)
    }

    /// The session's statements (what a connection carries once [`Self::replay`] ran).
    pub(crate) fn statements(&self) -> &BTreeMap<String, String> {
        &self.statements
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_followed_statement_per_query() {
        let p = |s: &str| parse(s.as_bytes());
        assert_eq!(
            p("PREPARE q1 (int) AS SELECT $1;"),
            Some(SqlOp::Prepare {
                name: "q1".into(),
                text: "PREPARE q1 (int) AS SELECT $1".into()
            })
        );
        assert!(
            matches!(p("prepare \"Q\" as select 'a;b'"), Some(SqlOp::Prepare { name, .. }) if name == "Q")
        );
        assert_eq!(
            p("DEALLOCATE PREPARE q1"),
            Some(SqlOp::Deallocate("q1".into()))
        );
        assert_eq!(p("deallocate Q1;"), Some(SqlOp::Deallocate("q1".into())));
        assert_eq!(p("DEALLOCATE ALL"), Some(SqlOp::DeallocateAll));
        assert_eq!(p("DISCARD ALL"), Some(SqlOp::DeallocateAll));
        for other in [
            "PREPARE TRANSACTION 'x'",
            "PREPARE q1 AS SELECT 1; SELECT 2",
            "PREPARE q1",
            "DEALLOCATE",
            "DISCARD PLANS",
            "SELECT 1",
        ] {
            assert_eq!(p(other), None, "{other}");
        }
    }

    #[test]
    fn statements_take_effect_when_answered_and_replay_makes_a_connection_match() {
        let mut s = SqlPrepared::default();
        let mut conn = BTreeMap::new();
        let prep = |n: &str| SqlOp::Prepare {
            name: n.into(),
            text: format!("PREPARE {n} AS SELECT 1"),
        };
        s.sent(prep("a"), 1);
        s.sent(prep("b"), 2);
        s.completed(b"PREPARE\0", 1);
        // b's Query failed: an ErrorResponse, no CommandComplete.
        s.ready(2, &mut conn);
        assert_eq!(s.statements().keys().collect::<Vec<_>>(), ["a"]);
        assert!(!s.waiting());
        let mut other = BTreeMap::new();
        other.insert("z".to_string(), "PREPARE z AS SELECT 9".to_string());
        assert_eq!(
            s.replay(&other).as_deref(),
            Some("DEALLOCATE \"z\";PREPARE a AS SELECT 1;")
        );
        assert_eq!(s.replay(&conn), None);
        s.sent(SqlOp::Deallocate("a".into()), 3);
        s.completed(b"DEALLOCATE\0", 3);
        s.ready(3, &mut conn);
        assert!(s.statements().is_empty() && conn.is_empty());
    }
}

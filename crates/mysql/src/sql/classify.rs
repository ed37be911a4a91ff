//! What a statement does to session state, read from its tokens: the facts multiplexing needs
//! (temporary tables, locks, SQL-level PREPARE, user variables, FOUND_ROWS, schema changes) and
//! the queries Sluice answers itself.

use super::lexer::{Lexer, Tok};
use super::set::{SetParse, parse_set};
use sluice_core::advisory::{LockCall, call_args, first_arg, lock_key};
use sluice_core::query::lexer::Syntax;

/// A query Sluice answers without a backend.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum ProxyAnswer {
    /// `SELECT @@version` / `SELECT VERSION()`; the column name as the client wrote it.
    Version(String),
    /// `SELECT @@version_comment [LIMIT 1]`.
    VersionComment(String),
    /// `SELECT LAST_INSERT_ID()`.
    LastInsertId(String),
    /// `SELECT CONNECTION_ID()`: the Sluice session id, the thread id the client was given.
    ConnectionId(String),
    /// `SHOW [FULL] PROCESSLIST`: the user's own Sluice sessions, by the ids `KILL` takes.
    Processlist {
        /// `FULL`: the statement text is not cut at 100 characters.
        full: bool,
        /// The statement itself: its own row's `Info`.
        text: String,
    },
}

/// A `KILL` statement: it names a Sluice session, since that is the thread id clients know.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum KillRequest {
    /// `KILL [HARD|SOFT] [CONNECTION|QUERY] id`.
    Session {
        /// The Sluice session id (the client's thread id).
        id: u32,
        /// True for `KILL QUERY` (stop the statement), false for `KILL [CONNECTION]`.
        query: bool,
    },
    /// A form Sluice cannot map onto its sessions (`KILL QUERY ID`, `KILL USER`): the text says
    /// which.
    Unsupported(&'static str),
}

/// The effects of one statement on session state.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Effects {
    /// The statement is a SET.
    pub set: Option<SetParse>,
    /// `USE db`.
    pub use_schema: Option<String>,
    /// `CREATE TEMPORARY TABLE` names (lower case, unqualified).
    pub temp_created: Vec<String>,
    /// `DROP [TEMPORARY] TABLE` names (lower case, unqualified).
    pub dropped: Vec<String>,
    /// `GET_LOCK()`, `RELEASE_LOCK()` and `RELEASE_ALL_LOCKS()` calls, in the order written.
    pub user_locks: Vec<LockCall>,
    /// LOCK TABLES / FLUSH TABLES WITH READ LOCK.
    pub lock_tables: bool,
    /// UNLOCK TABLES.
    pub unlock_tables: bool,
    /// `PREPARE name FROM ...`.
    pub sql_prepare: Option<String>,
    /// The string literal of `PREPARE name FROM '...'`, as written: the statement can be
    /// prepared again on another connection (`FROM @var` cannot, and pins).
    pub sql_prepare_text: Option<String>,
    /// `DEALLOCATE|DROP PREPARE name`.
    pub sql_deallocate: Option<String>,
    /// SELECT SQL_CALC_FOUND_ROWS.
    pub calc_found_rows: bool,
    /// Calls FOUND_ROWS().
    pub found_rows: bool,
    /// Assigns a user variable (`@x := ...`, `INTO @x`, `SET @x`).
    pub assigns_user_var: bool,
    /// Something whose effect on the session cannot be tracked (XA, HANDLER, LOCK INSTANCE, ...).
    pub untrackable: Option<&'static str>,
    /// A query Sluice answers itself.
    pub answer: Option<ProxyAnswer>,
    /// A `KILL` Sluice carries out on its own sessions.
    pub kill: Option<KillRequest>,
    /// `LOAD DATA|XML [LOW_PRIORITY|CONCURRENT] LOCAL INFILE`: the server will ask the client
    /// for a file.
    pub load_local: bool,
}

/// Reads `KILL [HARD|SOFT] [CONNECTION|QUERY] id` (MySQL and MariaDB forms).
fn parse_kill(t: &[Tok<'_>]) -> KillRequest {
    let mut i = 1;
    if t.get(i)
        .is_some_and(|x| x.is_keyword("HARD") || x.is_keyword("SOFT"))
    {
        i += 1;
    }
    let mut query = false;
    if t.get(i).is_some_and(|x| x.is_keyword("QUERY")) {
        query = true;
        i += 1;
        if t.get(i).is_some_and(|x| x.is_keyword("ID")) {
            return KillRequest::Unsupported("KILL QUERY ID (by query id)");
        }
    } else if t.get(i).is_some_and(|x| x.is_keyword("CONNECTION")) {
        i += 1;
    }
    if t.get(i).is_some_and(|x| x.is_keyword("USER")) {
        return KillRequest::Unsupported("KILL USER");
    }
    let rest = match &t[i.min(t.len())..] {
        [id, semi] if semi.is_punct(";") => std::slice::from_ref(id),
        r => r,
    };
    match rest {
        [Tok::Num(n)] => match n.parse::<u32>() {
            Ok(id) => KillRequest::Session { id, query },
            Err(_) => KillRequest::Unsupported("KILL with a thread id out of range"),
        },
        _ => KillRequest::Unsupported("KILL without a literal thread id"),
    }
}

fn last_name(toks: &[Tok<'_>], mut i: usize) -> (Option<String>, usize) {
    let mut name = None;
    while let Some(n) = toks.get(i).and_then(Tok::name) {
        name = Some(n.to_ascii_lowercase());
        i += 1;
        if toks.get(i).is_some_and(|t| t.is_punct(".")) {
            i += 1;
        } else {
            break;
        }
    }
    (name, i)
}

fn column_text(sql: &str, toks: &[Tok<'_>]) -> String {
    // The column name MySQL reports is the expression as written; rebuild it from tokens.
    let _ = sql;
    toks.iter()
        .map(|t| match t {
            Tok::SysVar(v) => format!("@@{v}"),
            Tok::UserVar(v) => format!("@{v}"),
            Tok::Quoted(_) => t.name().unwrap_or_default().to_string(),
            _ => t.text().to_string(),
        })
        .collect()
}

fn proxy_answer(sql: &str, t: &[Tok<'_>]) -> Option<ProxyAnswer> {
    if !t.first()?.is_keyword("SELECT") {
        return None;
    }
    let mut body = &t[1..];
    if body.last().is_some_and(|x| x.is_punct(";")) {
        body = &body[..body.len() - 1];
    }
    // Optional LIMIT n at the end (the mysql CLI sends `select @@version_comment limit 1`).
    if body.len() >= 2
        && body[body.len() - 2].is_keyword("LIMIT")
        && matches!(body[body.len() - 1], Tok::Num(_))
    {
        body = &body[..body.len() - 2];
    }
    // Optional [AS] alias.
    let (expr, alias) = match body {
        [e @ .., a, Tok::Word(n)] if a.is_keyword("AS") => (e, Some(n.to_string())),
        [e @ .., a, q @ Tok::Quoted(_)] if a.is_keyword("AS") => (e, q.name().map(str::to_string)),
        _ => (body, None),
    };
    let name = || alias.clone().unwrap_or_else(|| column_text(sql, expr));
    match expr {
        [Tok::SysVar(v)]
            if v.eq_ignore_ascii_case("version") || v.eq_ignore_ascii_case("session.version") =>
        {
            Some(ProxyAnswer::Version(name()))
        }
        [Tok::SysVar(v)] if v.eq_ignore_ascii_case("version_comment") => {
            Some(ProxyAnswer::VersionComment(name()))
        }
        [f, o, c] if f.is_keyword("VERSION") && o.is_punct("(") && c.is_punct(")") => {
            Some(ProxyAnswer::Version(name()))
        }
        [f, o, c] if f.is_keyword("LAST_INSERT_ID") && o.is_punct("(") && c.is_punct(")") => {
            Some(ProxyAnswer::LastInsertId(name()))
        }
        [f, o, c] if f.is_keyword("CONNECTION_ID") && o.is_punct("(") && c.is_punct(")") => {
            Some(ProxyAnswer::ConnectionId(name()))
        }
        _ => None,
    }
}

/// The user-level lock calls of a statement in the order written, keyed by the name argument
/// (`?`: unknown). A `GET_LOCK` counts as taken whatever it returned (the safe side).
fn user_lock_calls(sql: &str) -> Vec<LockCall> {
    let mut out: Vec<(usize, LockCall)> = Vec::new();
    for (at, args) in call_args(sql, "GET_LOCK", Syntax::Mysql) {
        out.push((
            at,
            LockCall::Lock(lock_key(first_arg(args, Syntax::Mysql), Syntax::Mysql)),
        ));
    }
    for (at, args) in call_args(sql, "RELEASE_LOCK", Syntax::Mysql) {
        out.push((
            at,
            LockCall::Unlock(lock_key(first_arg(args, Syntax::Mysql), Syntax::Mysql)),
        ));
    }
    for (at, _) in call_args(sql, "RELEASE_ALL_LOCKS", Syntax::Mysql) {
        out.push((at, LockCall::UnlockAll));
    }
    out.sort_by_key(|(at, _)| *at);
    out.into_iter().map(|(_, call)| call).collect()
}

/// `SHOW [FULL] PROCESSLIST [;]`.
fn show_processlist(sql: &str, t: &[Tok<'_>]) -> Option<ProxyAnswer> {
    let body = match t {
        [rest @ .., last] if last.is_punct(";") => rest,
        _ => t,
    };
    match body {
        [_, p] if p.is_keyword("PROCESSLIST") => Some(ProxyAnswer::Processlist {
            full: false,
            text: sql.trim().to_string(),
        }),
        [_, f, p] if f.is_keyword("FULL") && p.is_keyword("PROCESSLIST") => {
            Some(ProxyAnswer::Processlist {
                full: true,
                text: sql.trim().to_string(),
            })
        }
        _ => None,
    }
}

/// The tables of `DROP [TEMPORARY] TABLE [IF EXISTS] a, b …`, the first name at `i`.
fn dropped_tables(toks: &[Tok<'_>], mut i: usize) -> Vec<String> {
    let kw = |i: usize, k: &str| toks.get(i).is_some_and(|t| t.is_keyword(k));
    if kw(i, "IF") && kw(i + 1, "EXISTS") {
        i += 2;
    }
    let mut dropped = Vec::new();
    loop {
        let (n, next) = last_name(toks, i);
        match n {
            Some(n) => dropped.push(n),
            None => break,
        }
        if toks.get(next).is_some_and(|t| t.is_punct(",")) {
            i = next + 1;
        } else {
            break;
        }
    }
    dropped
}

/// What a statement's function calls and user variables do, wherever they stand: user locks,
/// `FOUND_ROWS()`, `SQL_CALC_FOUND_ROWS`, an assignment to a `@variable`.
fn calls_and_variables(sql: &str, toks: &[Tok<'_>], e: &mut Effects) {
    let Some(first) = toks.first() else { return };
    for (i, t) in toks.iter().enumerate() {
        let call = toks.get(i + 1).is_some_and(|n| n.is_punct("("));
        match t {
            Tok::Word(w)
                if call
                    && e.user_locks.is_empty()
                    && (w.eq_ignore_ascii_case("GET_LOCK")
                        || w.eq_ignore_ascii_case("RELEASE_LOCK")
                        || w.eq_ignore_ascii_case("RELEASE_ALL_LOCKS")) =>
            {
                e.user_locks = user_lock_calls(sql);
            }
            Tok::Word(w) if call && w.eq_ignore_ascii_case("FOUND_ROWS") => e.found_rows = true,
            Tok::Word(w) if w.eq_ignore_ascii_case("SQL_CALC_FOUND_ROWS") => {
                e.calc_found_rows = true
            }
            Tok::UserVar(_) => {
                let assigned = toks.get(i + 1).is_some_and(|n| n.is_punct(":="))
                    || (i > 0
                        && (toks[i - 1].is_keyword("INTO")
                            || toks[i - 1].is_punct(",") && e.assigns_user_var))
                    || (first.is_keyword("SET")
                        && toks.get(i + 1).is_some_and(|n| n.is_punct("=")));
                if assigned {
                    e.assigns_user_var = true;
                }
            }
            _ => {}
        }
    }
}

/// Classifies one statement (no `;`-separated lists: see [`super::lexer::split_statements`]).
pub(crate) fn classify(sql: &str) -> Effects {
    let toks: Vec<Tok<'_>> = Lexer::new(sql).collect();
    let mut e = Effects::default();
    let Some(first) = toks.first() else { return e };
    let kw = |i: usize, k: &str| toks.get(i).is_some_and(|t| t.is_keyword(k));
    if first.is_keyword("SET") {
        e.set = Some(parse_set(sql));
    } else if first.is_keyword("USE") {
        e.use_schema = toks.get(1).and_then(Tok::name).map(str::to_string);
    } else if first.is_keyword("CREATE") && kw(1, "TEMPORARY") && kw(2, "TABLE") {
        let mut i = 3;
        if kw(i, "IF") && kw(i + 1, "NOT") && kw(i + 2, "EXISTS") {
            i += 3;
        }
        if let (Some(n), _) = last_name(&toks, i) {
            e.temp_created.push(n);
        }
    } else if first.is_keyword("DROP") && (kw(1, "TABLE") || (kw(1, "TEMPORARY") && kw(2, "TABLE")))
    {
        e.dropped = dropped_tables(&toks, if kw(1, "TABLE") { 2 } else { 3 });
    } else if first.is_keyword("LOCK") && (kw(1, "TABLES") || kw(1, "TABLE")) {
        e.lock_tables = true;
    } else if first.is_keyword("LOCK") {
        e.untrackable = Some("LOCK INSTANCE");
    } else if first.is_keyword("FLUSH") && toks.iter().any(|t| t.is_keyword("LOCK")) {
        e.lock_tables = true;
    } else if first.is_keyword("UNLOCK") && (kw(1, "TABLES") || kw(1, "TABLE")) {
        e.unlock_tables = true;
    } else if first.is_keyword("PREPARE") {
        e.sql_prepare = toks.get(1).and_then(Tok::name).map(str::to_ascii_lowercase);
        e.sql_prepare_text = match toks.get(2..) {
            Some([from, Tok::Str(text)]) if from.is_keyword("FROM") && text.starts_with('\'') => {
                Some((*text).to_string())
            }
            _ => None,
        };
    } else if (first.is_keyword("DEALLOCATE") || first.is_keyword("DROP")) && kw(1, "PREPARE") {
        e.sql_deallocate = toks.get(2).and_then(Tok::name).map(str::to_ascii_lowercase);
    } else if first.is_keyword("XA") {
        e.untrackable = Some("XA transaction");
    } else if first.is_keyword("HANDLER") {
        e.untrackable = Some("HANDLER");
    } else if first.is_keyword("SELECT") {
        e.answer = proxy_answer(sql, &toks);
    } else if first.is_keyword("SHOW") {
        e.answer = show_processlist(sql, &toks);
    } else if first.is_keyword("KILL") {
        e.kill = Some(parse_kill(&toks));
    } else if first.is_keyword("LOAD") && (kw(1, "DATA") || kw(1, "XML")) {
        let at = if kw(2, "LOW_PRIORITY") || kw(2, "CONCURRENT") {
            3
        } else {
            2
        };
        e.load_local = kw(at, "LOCAL");
    }
    calls_and_variables(sql, &toks, &mut e);
    e
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pins_and_releases() {
        assert_eq!(
            classify("CREATE TEMPORARY TABLE IF NOT EXISTS db.Tmp1 (a int)").temp_created,
            vec!["tmp1"]
        );
        assert_eq!(
            classify("DROP TEMPORARY TABLE IF EXISTS tmp1, `x`.`T2`").dropped,
            vec!["tmp1", "t2"]
        );
        assert_eq!(
            classify("SELECT GET_LOCK('a', 1), RELEASE_LOCK( 'a' ), get_lock(?, 0)").user_locks,
            vec![
                LockCall::Lock(Some("'a'".into())),
                LockCall::Unlock(Some("'a'".into())),
                LockCall::Lock(None)
            ]
        );
        assert_eq!(
            classify("select release_all_locks()").user_locks,
            vec![LockCall::UnlockAll]
        );
        assert!(classify("LOCK TABLES t READ").lock_tables);
        assert!(classify("FLUSH TABLES WITH READ LOCK").lock_tables);
        assert!(classify("UNLOCK TABLES").unlock_tables);
        assert_eq!(
            classify("PREPARE s1 FROM 'SELECT 1'")
                .sql_prepare
                .as_deref(),
            Some("s1")
        );
        assert_eq!(
            classify("DEALLOCATE PREPARE S1").sql_deallocate.as_deref(),
            Some("s1")
        );
        assert_eq!(
            classify("PREPARE s1 FROM 'SELECT ''a'', ?'")
                .sql_prepare_text
                .as_deref(),
            Some("'SELECT ''a'', ?'")
        );
        assert_eq!(classify("PREPARE s1 FROM @q").sql_prepare_text, None);
        assert_eq!(classify("PREPARE s1 FROM 'a' 'b'").sql_prepare_text, None);
        assert!(classify("SELECT SQL_CALC_FOUND_ROWS * FROM t LIMIT 1").calc_found_rows);
        assert!(classify("SELECT FOUND_ROWS()").found_rows);
        assert!(classify("SELECT @x := 1").assigns_user_var);
        assert!(classify("SELECT 1 INTO @x").assigns_user_var);
        assert!(classify("SET @x = 1").assigns_user_var);
        assert!(!classify("SELECT @x").assigns_user_var);
        assert!(!classify("SELECT * FROM t WHERE a = @x").assigns_user_var);
        assert_eq!(classify("XA START 'x'").untrackable, Some("XA transaction"));
        assert_eq!(classify("USE `shop`").use_schema.as_deref(), Some("shop"));
        assert!(
            classify("SELECT 'GET_LOCK(' FROM t").user_locks.is_empty(),
            "strings are not calls"
        );
    }

    #[test]
    fn show_processlist_is_answered_with_its_own_text() {
        assert_eq!(
            classify("show processlist").answer,
            Some(ProxyAnswer::Processlist {
                full: false,
                text: "show processlist".into()
            })
        );
        assert_eq!(
            classify("SHOW FULL PROCESSLIST;").answer,
            Some(ProxyAnswer::Processlist {
                full: true,
                text: "SHOW FULL PROCESSLIST;".into()
            })
        );
        for other in [
            "SHOW PROCESSLIST LIKE 'x'",
            "SHOW TABLES",
            "SHOW FULL TABLES",
            "SELECT 'show processlist'",
        ] {
            assert_eq!(classify(other).answer, None, "{other}");
        }
    }

    #[test]
    fn proxy_answers() {
        assert_eq!(
            classify("SELECT @@version").answer,
            Some(ProxyAnswer::Version("@@version".into()))
        );
        assert_eq!(
            classify("select version()").answer,
            Some(ProxyAnswer::Version("version()".into()))
        );
        assert_eq!(
            classify("SELECT VERSION() AS v").answer,
            Some(ProxyAnswer::Version("v".into()))
        );
        assert_eq!(
            classify("select @@version_comment limit 1").answer,
            Some(ProxyAnswer::VersionComment("@@version_comment".into()))
        );
        assert_eq!(
            classify("SELECT LAST_INSERT_ID()").answer,
            Some(ProxyAnswer::LastInsertId("LAST_INSERT_ID()".into()))
        );
        assert_eq!(
            classify("select connection_id() as id").answer,
            Some(ProxyAnswer::ConnectionId("id".into()))
        );
        assert_eq!(classify("SELECT @@version, 1").answer, None);
        assert_eq!(classify("SELECT LAST_INSERT_ID() + 1").answer, None);
    }

    #[test]
    fn load_data_local_is_recognised() {
        for sql in [
            "LOAD DATA LOCAL INFILE '/tmp/x' INTO TABLE t",
            "load data concurrent local infile 'x' into table t",
            "LOAD XML LOCAL INFILE 'x' INTO TABLE t",
            "/* batch */ LOAD DATA LOW_PRIORITY LOCAL INFILE 'x' INTO TABLE t",
        ] {
            assert!(classify(sql).load_local, "{sql}");
        }
        assert!(!classify("LOAD DATA INFILE '/tmp/x' INTO TABLE t").load_local);
        assert!(!classify("SELECT 'LOAD DATA LOCAL'").load_local);
    }

    #[test]
    fn kill_statements_name_sessions() {
        let k = |sql: &str| classify(sql).kill;
        let session = |id, query| Some(KillRequest::Session { id, query });
        assert_eq!(k("KILL 12"), session(12, false));
        assert_eq!(k("kill connection 7;"), session(7, false));
        assert_eq!(k("KILL QUERY 7"), session(7, true));
        assert_eq!(k("KILL HARD QUERY 9"), session(9, true));
        assert_eq!(k("KILL SOFT CONNECTION 9"), session(9, false));
        for sql in [
            "KILL QUERY ID 5",
            "KILL USER app",
            "KILL @x",
            "KILL 99999999999",
            "KILL",
        ] {
            assert!(
                matches!(k(sql), Some(KillRequest::Unsupported(_))),
                "{sql}: {:?}",
                k(sql)
            );
        }
        assert_eq!(k("SELECT 1"), None);
    }
}

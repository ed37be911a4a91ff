//! What keeps a PostgreSQL session on its server connection, cause by cause, so the pin ends
//! when its last cause does: `UNLISTEN`, dropping the temporary table (view, sequence),
//! releasing the advisory lock, closing the `WITH HOLD` cursor, `DEALLOCATE`, or `DISCARD ALL`. Causes Sluice cannot
//! follow (an unparsable `SET`, a rule's `multiplex=0`) or cannot undo (`LOAD` of a library into
//! the server process) stay for the session.

use sluice_core::advisory::{AdvisoryLocks, LockCall, call_args, lock_key};
use sluice_core::query::WordSet;
use sluice_core::query::lexer::{Syntax, split_statements, words};
use std::collections::BTreeSet;

/// The session-scoped things a server connection holds for one client.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct PinSet {
    listens: BTreeSet<String>,
    temp_tables: BTreeSet<String>,
    /// Temporary views and sequences, as `view name` / `sequence name`.
    temp_objects: BTreeSet<String>,
    advisory_locks: AdvisoryLocks,
    hold_cursors: BTreeSet<String>,
    prepared: BTreeSet<String>,
    /// A `set_config(…, false)` ran: a session setting Sluice cannot read from the text.
    session_config: bool,
    /// A cause that lasts the session.
    pub sticky: Option<&'static str>,
}

/// The words of a statement, lower-cased (`sluice-query`'s [`words`]): tokens written together
/// make one word (`pg_temp.t`, `*`), `,` `;` `(` `)` and spaces separate them, a quoted name
/// loses its outer quotes, comments are skipped (`LISTEN /* x */ jobs` listens to `jobs`).
fn statement_words(stmt: &str) -> Vec<String> {
    words(stmt, Syntax::Pgsql, &[",", ";", "(", ")"])
        .into_iter()
        .map(|w| w.trim_matches('"').to_ascii_lowercase())
        .collect()
}

/// First words of the statements that can start or end a pin.
const PIN_VERBS: [&str; 10] = [
    "listen",
    "unlisten",
    "create",
    "drop",
    "declare",
    "close",
    "prepare",
    "deallocate",
    "discard",
    "load",
];

/// ASCII case-insensitive substring test.
/// Functions whose call anywhere in a statement may take a session-level lock or setting.
const PIN_FUNCTIONS: WordSet = WordSet::new(&[b"advisory_", b"set_config"]);

/// The last part of a possibly schema-qualified name.
fn unqualified(name: &str) -> String {
    name.rsplit('.').next().unwrap_or(name).to_string()
}

impl PinSet {
    /// No pins, or only a cause that lasts the session.
    pub(crate) fn with_sticky(sticky: Option<&'static str>) -> Self {
        PinSet {
            sticky,
            ..PinSet::default()
        }
    }

    /// Why the session is pinned, or `None`.
    pub(crate) fn reason(&self) -> Option<&'static str> {
        if let Some(s) = self.sticky {
            Some(s)
        } else if !self.listens.is_empty() {
            Some("LISTEN")
        } else if !self.temp_tables.is_empty() {
            Some("temporary table")
        } else if !self.temp_objects.is_empty() {
            Some("temporary view or sequence")
        } else if self.advisory_locks.held() {
            Some("advisory lock")
        } else if !self.hold_cursors.is_empty() {
            Some("WITH HOLD cursor")
        } else if !self.prepared.is_empty() {
            Some("SQL PREPARE")
        } else if self.session_config {
            Some("set_config")
        } else {
            None
        }
    }

    /// Whether SQL text `sql` could start or end a pin, decided on its bytes: most statements
    /// cannot, and the caller then needs no text made of them for [`PinSet::apply`] (UTF-8
    /// checked once more). A list of statements always could. PostgreSQL's whitespace is
    /// ASCII (space, `\t`, `\n`, `\r`, `\f`, and `\v` since 16), so a statement this passes
    /// over is one the server refuses anyway.
    pub(crate) fn may_concern(sql: &[u8]) -> bool {
        let space = |b: &u8| b.is_ascii_whitespace() || *b == b'\x0b';
        let end = sql.iter().rposition(|b| !space(b)).map_or(0, |i| i + 1);
        let mut one = &sql[..end];
        while let Some(rest) = one.strip_suffix(b";") {
            one = rest;
        }
        if memchr::memchr(b';', one).is_some() {
            return true;
        }
        let start = one.iter().position(|b| !space(b)).unwrap_or(one.len());
        let one = &one[start..];
        let head_len = one
            .iter()
            .position(|b| space(b) || matches!(b, b'(' | b';'))
            .unwrap_or(one.len());
        let head = &one[..head_len];
        PIN_VERBS
            .iter()
            .any(|v| head.eq_ignore_ascii_case(v.as_bytes()))
            || PIN_FUNCTIONS.occurs_in(one)
    }

    /// Notes what one SQL text (possibly several statements) does to the pins.
    pub(crate) fn apply(&mut self, sql: &str) {
        let one = sql.trim_end().trim_end_matches(';');
        if !one.contains(';') {
            // One statement (the common case): no list to build.
            return self.statement(one.trim());
        }
        for stmt in split_statements(sql, Syntax::Pgsql) {
            self.statement(stmt);
        }
    }

    /// `CREATE [OR REPLACE] {TEMP|TEMPORARY} [RECURSIVE] {TABLE|VIEW|SEQUENCE} [IF NOT EXISTS]
    /// name`, or such an object created in `pg_temp`: it lives as long as the server session.
    /// A table `ON COMMIT DROP` ends with its transaction.
    fn created(&mut self, w: &[String], lower: &str) {
        let Some(i) =
            (w.iter().take(6)).position(|x| matches!(x.as_str(), "table" | "view" | "sequence"))
        else {
            return;
        };
        let kind = w[i].as_str();
        let mut name = w.get(i + 1).cloned().unwrap_or_default();
        if name == "if" {
            name = w.get(i + 4).cloned().unwrap_or_default();
        }
        let temp =
            w[..i].iter().any(|x| x == "temp" || x == "temporary") || name.starts_with("pg_temp.");
        if !temp || name.is_empty() || (kind == "table" && lower.contains("on commit drop")) {
            return;
        }
        if kind == "table" {
            self.temp_tables.insert(unqualified(&name));
        } else {
            self.temp_objects
                .insert(format!("{kind} {}", unqualified(&name)));
        }
    }

    /// `DROP TABLE|VIEW|SEQUENCE [IF EXISTS] a, b … [CASCADE|RESTRICT]`: temporary ones forgotten.
    fn dropped(&mut self, w: &[String]) {
        let kind = w.get(1).map(String::as_str);
        for name in w.iter().skip(2) {
            if matches!(name.as_str(), "if" | "exists" | "cascade" | "restrict") {
                continue;
            }
            match kind {
                Some("table") => {
                    self.temp_tables.remove(&unqualified(name));
                }
                Some(k @ ("view" | "sequence")) => {
                    self.temp_objects
                        .remove(&format!("{k} {}", unqualified(name)));
                }
                _ => {}
            }
        }
    }

    /// `DEALLOCATE [PREPARE] name|ALL`.
    fn deallocated(&mut self, w: &[String]) {
        let name = match w.get(1).map(String::as_str) {
            Some("prepare") => w.get(2),
            _ => w.get(1),
        };
        match name.map(String::as_str) {
            Some("all") => self.prepared.clear(),
            Some(n) => {
                self.prepared.remove(n);
            }
            None => {}
        }
    }

    /// `DISCARD ALL` (everything but what never leaves, `LOAD`) or `DISCARD TEMP`.
    fn discarded(&mut self, w: &[String]) {
        match w.get(1).map(String::as_str) {
            Some("all") => {
                let sticky = self.sticky;
                *self = PinSet {
                    sticky,
                    ..PinSet::default()
                };
            }
            Some("temp" | "temporary") => {
                self.temp_tables.clear();
                self.temp_objects.clear();
            }
            _ => {}
        }
    }

    fn statement(&mut self, stmt: &str) {
        // Most statements touch nothing here: decide that without allocating (this runs for
        // every statement on the hot path).
        let head = stmt
            .trim_start()
            .split(|c: char| c.is_whitespace() || c == '(' || c == ';')
            .next()
            .unwrap_or("");
        let relevant = PIN_VERBS.iter().any(|v| head.eq_ignore_ascii_case(v))
            || PIN_FUNCTIONS.occurs_in(stmt.as_bytes());
        if !relevant {
            return;
        }
        let lower = stmt.to_ascii_lowercase();
        let w = statement_words(stmt);
        let first = w.first().map(String::as_str).unwrap_or("");
        match first {
            "listen" => {
                if let Some(ch) = w.get(1) {
                    self.listens.insert(ch.clone());
                }
            }
            "unlisten" => match w.get(1).map(String::as_str) {
                Some("*") | None => self.listens.clear(),
                Some(ch) => {
                    self.listens.remove(ch);
                }
            },
            "create" => self.created(&w, &lower),
            "drop" => self.dropped(&w),
            "declare" if lower.contains("with hold") => {
                if let Some(c) = w.get(1) {
                    self.hold_cursors.insert(c.clone());
                }
            }
            "close" => match w.get(1).map(String::as_str) {
                Some("all") => self.hold_cursors.clear(),
                Some(c) => {
                    self.hold_cursors.remove(c);
                }
                None => {}
            },
            "prepare" => {
                if let Some(n) = w.get(1) {
                    self.prepared.insert(n.clone());
                }
            }
            "deallocate" => self.deallocated(&w),
            // A shared library loaded into the server process stays there: the session keeps
            // the connection to its end.
            "load" => {
                self.sticky.get_or_insert("LOAD");
            }
            "discard" => self.discarded(&w),
            _ => {}
        }
        if lower.contains("advisory_") {
            for call in advisory_calls(stmt) {
                self.advisory_locks.apply(&call);
            }
        }
        if session_set_config(&lower) {
            self.session_config = true;
        }
    }
}

/// The session-level advisory-lock calls of a statement in the order they are written (not the
/// `_xact_` ones, which end with the transaction). A shared and an exclusive lock of one key
/// are two locks.
fn advisory_calls(stmt: &str) -> Vec<LockCall> {
    const CALLS: [(&str, bool, bool); 6] = [
        // (function, shared, takes)
        ("pg_advisory_unlock", false, false),
        ("pg_advisory_unlock_shared", true, false),
        ("pg_advisory_lock", false, true),
        ("pg_try_advisory_lock", false, true),
        ("pg_advisory_lock_shared", true, true),
        ("pg_try_advisory_lock_shared", true, true),
    ];
    let mut out: Vec<(usize, LockCall)> = call_args(stmt, "pg_advisory_unlock_all", Syntax::Pgsql)
        .into_iter()
        .map(|(at, _)| (at, LockCall::UnlockAll))
        .collect();
    for (function, shared, takes) in CALLS {
        for (at, args) in call_args(stmt, function, Syntax::Pgsql) {
            let key = lock_key(args, Syntax::Pgsql)
                .map(|k| if shared { format!("shared {k}") } else { k });
            out.push((
                at,
                if takes {
                    LockCall::Lock(key)
                } else {
                    LockCall::Unlock(key)
                },
            ));
        }
    }
    out.sort_by_key(|(at, _)| *at);
    out.into_iter().map(|(_, call)| call).collect()
}

/// True when a lower-cased statement calls `set_config` with an `is_local` that is not the
/// literal `true` (a session-level setting, kept past the transaction). An argument Sluice cannot
/// read plainly counts as session-level.
fn session_set_config(lower: &str) -> bool {
    lower.match_indices("set_config").any(|(i, _)| {
        let rest = lower[i + "set_config".len()..].trim_start();
        let Some(args) = rest.strip_prefix('(') else {
            return false;
        };
        let args = args.split(')').next().unwrap_or("");
        let is_local = args.split(',').nth(2).map(str::trim);
        !matches!(is_local, Some("true" | "'true'" | "'t'" | "'on'"))
    })
}

#[cfg(test)]
#[path = "pins_tests.rs"]
mod tests;

//! Session-level advisory locks a client holds on its server connection (PostgreSQL's
//! `pg_advisory_lock` family, MySQL's `GET_LOCK`), counted per key, so the connection stays
//! with the client exactly until the last lock is released — not until a release of a lock it
//! never held, which the server answers with false and Sluice used to count.
//!
//! ```
//! use sluice_core::advisory::{AdvisoryLocks, LockCall};
//!
//! let mut held = AdvisoryLocks::default();
//! held.apply(&LockCall::Lock(Some("42".into())));
//! held.apply(&LockCall::Unlock(Some("7".into()))); // never taken: the server says false
//! assert!(held.held());
//! held.apply(&LockCall::Unlock(Some("42".into())));
//! assert!(!held.held());
//! ```

use crate::query::lexer::{Lexer, Syntax, Token};
use std::collections::BTreeMap;

/// One call that takes or gives back an advisory lock, with its key as written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LockCall {
    /// Takes the lock (the `try_` forms count as taking it: whether they got it is in a result
    /// Sluice does not read, and keeping the connection is the safe side). `None`: the key is
    /// not in the text (a bound parameter).
    Lock(Option<String>),
    /// Gives one lock of the key back.
    Unlock(Option<String>),
    /// Gives every lock back (`pg_advisory_unlock_all()`, `RELEASE_ALL_LOCKS()`).
    UnlockAll,
}

/// The advisory locks one session holds, per key.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AdvisoryLocks {
    by_key: BTreeMap<String, u32>,
    /// Locks taken with a key Sluice cannot read; only releases with unreadable keys or a
    /// release of everything count them down (a release of a known key might not be theirs).
    unknown: u32,
}

impl AdvisoryLocks {
    /// Applies one call that ran.
    pub fn apply(&mut self, call: &LockCall) {
        match call {
            LockCall::Lock(Some(k)) => *self.by_key.entry(k.clone()).or_default() += 1,
            LockCall::Lock(None) => self.unknown += 1,
            LockCall::Unlock(Some(k)) => {
                if let Some(n) = self.by_key.get_mut(k) {
                    *n -= 1;
                    if *n == 0 {
                        self.by_key.remove(k);
                    }
                }
            }
            LockCall::Unlock(None) => self.unknown = self.unknown.saturating_sub(1),
            LockCall::UnlockAll => *self = AdvisoryLocks::default(),
        }
    }

    /// Whether any lock is held.
    pub fn held(&self) -> bool {
        self.unknown > 0 || !self.by_key.is_empty()
    }
}

/// The tokens of `sql` with where each begins and ends, up to where it stops lexing.
fn spanned<'a>(sql: &'a str, syntax: Syntax) -> Vec<(usize, usize, Token<'a>)> {
    let mut lexer = Lexer::new(sql, syntax);
    let mut out = Vec::new();
    while let Some(Ok(t)) = lexer.next() {
        out.push((lexer.token_start(), lexer.offset(), t));
    }
    out
}

/// Every call of function `name` in `sql` (case-insensitive name, not qualified, not part of a
/// longer identifier): where it starts and its argument text, nested parentheses kept (`1, 2`
/// for `f(1, 2)`). Read with `syntax`'s lexer, so strings, quoted names and comments hide
/// nothing and fake nothing (a backslash-escaped quote in a MySQL string does not end it).
pub fn call_args<'a>(sql: &'a str, name: &str, syntax: Syntax) -> Vec<(usize, &'a str)> {
    let tokens = spanned(sql, syntax);
    let mut out = Vec::new();
    let mut i = 0;
    while i < tokens.len() {
        let (at, _, t) = tokens[i];
        let called = matches!(t, Token::Word(w) if w.eq_ignore_ascii_case(name))
            && !(i > 0 && tokens[i - 1].2.is_punct("."))
            && tokens.get(i + 1).is_some_and(|(_, _, n)| n.is_punct("("));
        if called && let Some(close) = closing_paren(&tokens, i + 1) {
            let (open_end, close_start) = (tokens[i + 1].1, tokens[close].0);
            out.push((at, sql[open_end..close_start].trim()));
            i = close + 1;
            continue;
        }
        i += 1;
    }
    out
}

/// The key an argument text names: its tokens as written, without the whitespace and comments
/// between them, or `None` for a bound parameter (`$1`, `?`), whose value differs from call to
/// call.
pub fn lock_key(arg: &str, syntax: Syntax) -> Option<String> {
    let mut key = String::with_capacity(arg.len());
    for (start, end, t) in spanned(arg, syntax) {
        if matches!(t, Token::Placeholder(_)) {
            return None;
        }
        key.push_str(&arg[start..end]);
    }
    Some(key)
}

/// The first argument of an argument list (up to a comma outside parentheses, strings and
/// comments).
pub fn first_arg(args: &str, syntax: Syntax) -> &str {
    let mut depth = 0u32;
    for (start, _, t) in spanned(args, syntax) {
        match t.text() {
            "(" if matches!(t, Token::Punct(_)) => depth += 1,
            ")" if matches!(t, Token::Punct(_)) => depth = depth.saturating_sub(1),
            "," if depth == 0 && matches!(t, Token::Punct(_)) => return args[..start].trim(),
            _ => {}
        }
    }
    args.trim()
}

/// The index of the `)` token closing the `(` at `open`; `None` when unclosed.
fn closing_paren(tokens: &[(usize, usize, Token<'_>)], open: usize) -> Option<usize> {
    let mut depth = 0u32;
    for (i, (_, _, t)) in tokens.iter().enumerate().skip(open) {
        if t.is_punct("(") {
            depth += 1;
        } else if t.is_punct(")") {
            depth = depth.saturating_sub(1);
            if depth == 0 {
                return Some(i);
            }
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn calls_are_found_with_their_arguments() {
        let sql = "SELECT pg_advisory_lock(1), PG_ADVISORY_LOCK ( hashtext('a)b') ), \
                   pg_advisory_lock_shared(2, 3), 'pg_advisory_lock(9)', x.pg_advisory_lock(4)";
        let args = |name| -> Vec<&str> {
            call_args(sql, name, Syntax::Pgsql)
                .into_iter()
                .map(|c| c.1)
                .collect()
        };
        assert_eq!(args("pg_advisory_lock"), vec!["1", "hashtext('a)b')"]);
        assert_eq!(args("pg_advisory_lock_shared"), vec!["2, 3"]);
        assert_eq!(
            call_args(sql, "pg_advisory_lock", Syntax::Pgsql)[0].0,
            7,
            "where the call starts"
        );
        assert!(
            call_args("select f(1", "f", Syntax::Pgsql).is_empty(),
            "unclosed"
        );
        assert_eq!(first_arg("'a,b', 10", Syntax::Mysql), "'a,b'");
        assert_eq!(
            first_arg("concat('x', y), 5", Syntax::Mysql),
            "concat('x', y)"
        );
    }

    #[test]
    fn quotes_are_read_as_the_server_reads_them() {
        // A backslash-escaped quote does not end a MySQL string: the call after it is a call.
        let mysql = r"SELECT 'it\'s', GET_LOCK('job', 10)";
        assert_eq!(
            call_args(mysql, "GET_LOCK", Syntax::Mysql),
            [(16, "'job', 10")]
        );
        // Nor an E'' string's in PostgreSQL; and a dollar-quoted string or a comment hides one.
        let pg =
            r"SELECT E'\'', pg_advisory_lock(1), $$pg_advisory_lock(2)$$ -- pg_advisory_lock(3)";
        let args: Vec<_> = call_args(pg, "pg_advisory_lock", Syntax::Pgsql)
            .into_iter()
            .map(|c| c.1)
            .collect();
        assert_eq!(args, ["1"]);
        assert_eq!(first_arg("'a\\',b', 2", Syntax::Mysql), "'a\\',b'");
    }

    #[test]
    fn keys_are_the_text_without_spaces_and_parameters_are_unknown() {
        let key = |arg| lock_key(arg, Syntax::Pgsql);
        assert_eq!(key("1 ,  2").as_deref(), Some("1,2"));
        assert_eq!(key("'my lock'").as_deref(), Some("'my lock'"));
        assert_eq!(
            key("hashtext( 'a b' ) /* why */").as_deref(),
            Some("hashtext('a b')")
        );
        assert_eq!(key("$1"), None);
        assert_eq!(lock_key("?", Syntax::Mysql), None);
        assert_eq!(lock_key("CONCAT('job', ?)", Syntax::Mysql), None);
    }

    #[test]
    fn each_key_is_counted_and_a_release_of_another_changes_nothing() {
        let mut l = AdvisoryLocks::default();
        let key = |k: &str| Some(k.to_string());
        l.apply(&LockCall::Lock(key("1")));
        l.apply(&LockCall::Lock(key("1")));
        l.apply(&LockCall::Unlock(key("2")));
        l.apply(&LockCall::Unlock(key("1")));
        assert!(l.held(), "taken twice, released once");
        l.apply(&LockCall::Unlock(key("1")));
        assert!(!l.held());
        // A lock with an unreadable key is not released by a known key's release.
        l.apply(&LockCall::Lock(None));
        l.apply(&LockCall::Unlock(key("1")));
        assert!(l.held());
        l.apply(&LockCall::Unlock(None));
        assert!(!l.held());
        l.apply(&LockCall::Lock(key("a")));
        l.apply(&LockCall::Lock(None));
        l.apply(&LockCall::UnlockAll);
        assert!(!l.held());
    }
}

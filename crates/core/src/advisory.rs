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

/// Every call of function `name` in `sql` (case-insensitive name, not part of a longer
/// identifier): where it starts and its argument text, nested parentheses kept (`1, 2` for
/// `f(1, 2)`). Text inside quotes is not looked into for calls. Bounded by the statement's
/// length.
pub fn call_args<'a>(sql: &'a str, name: &str) -> Vec<(usize, &'a str)> {
    let bytes = sql.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    let mut quote: Option<u8> = None;
    while i < bytes.len() {
        let c = bytes[i];
        if let Some(q) = quote {
            if c == q {
                quote = None;
            }
            i += 1;
            continue;
        }
        if matches!(c, b'\'' | b'"' | b'`') {
            quote = Some(c);
            i += 1;
            continue;
        }
        let starts_word = i == 0 || !is_ident(bytes[i - 1]);
        let named = bytes
            .get(i..i + name.len())
            .is_some_and(|w| w.eq_ignore_ascii_case(name.as_bytes()));
        if starts_word && named {
            let mut j = i + name.len();
            while bytes.get(j).is_some_and(u8::is_ascii_whitespace) {
                j += 1;
            }
            if bytes.get(j) == Some(&b'(')
                && let Some(end) = closing_paren(bytes, j)
            {
                out.push((i, sql[j + 1..end].trim()));
                i = end + 1;
                continue;
            }
        }
        i += 1;
    }
    out
}

/// The key an argument text names: its text with whitespace outside quotes removed, or `None`
/// for a bound parameter (`$1`, `?`), whose value differs from call to call.
pub fn lock_key(arg: &str) -> Option<String> {
    let mut key = String::with_capacity(arg.len());
    let mut quote: Option<char> = None;
    for c in arg.chars() {
        match quote {
            Some(q) => {
                key.push(c);
                if c == q {
                    quote = None;
                }
            }
            None if c == '$' || c == '?' => return None,
            None if c.is_whitespace() => {}
            None => {
                if matches!(c, '\'' | '"' | '`') {
                    quote = Some(c);
                }
                key.push(c);
            }
        }
    }
    Some(key)
}

/// The first argument of an argument list (up to a comma outside parentheses and quotes).
pub fn first_arg(args: &str) -> &str {
    let mut depth = 0u32;
    let mut quote: Option<char> = None;
    for (i, c) in args.char_indices() {
        match (quote, c) {
            (Some(q), c) if c == q => quote = None,
            (Some(_), _) => {}
            (None, '\'' | '"' | '`') => quote = Some(c),
            (None, '(') => depth += 1,
            (None, ')') => depth = depth.saturating_sub(1),
            (None, ',') if depth == 0 => return args[..i].trim(),
            _ => {}
        }
    }
    args.trim()
}

fn is_ident(c: u8) -> bool {
    c.is_ascii_alphanumeric() || c == b'_' || c == b'$' || c == b'.'
}

/// The index of the `)` closing the `(` at `open`, quotes respected; `None` when unclosed.
fn closing_paren(b: &[u8], open: usize) -> Option<usize> {
    let mut depth = 0u32;
    let mut quote: Option<u8> = None;
    for (i, &c) in b.iter().enumerate().skip(open) {
        match quote {
            Some(q) if c == q => quote = None,
            Some(_) => {}
            None => match c {
                b'\'' | b'"' | b'`' => quote = Some(c),
                b'(' => depth += 1,
                b')' => {
                    depth -= 1;
                    if depth == 0 {
                        return Some(i);
                    }
                }
                _ => {}
            },
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
        let args = |name| -> Vec<&str> { call_args(sql, name).into_iter().map(|c| c.1).collect() };
        assert_eq!(args("pg_advisory_lock"), vec!["1", "hashtext('a)b')"]);
        assert_eq!(args("pg_advisory_lock_shared"), vec!["2, 3"]);
        assert_eq!(
            call_args(sql, "pg_advisory_lock")[0].0,
            7,
            "where the call starts"
        );
        assert!(call_args("select f(1", "f").is_empty(), "unclosed");
        assert_eq!(first_arg("'a,b', 10"), "'a,b'");
        assert_eq!(first_arg("concat('x', y), 5"), "concat('x', y)");
    }

    #[test]
    fn keys_are_the_text_without_spaces_and_parameters_are_unknown() {
        assert_eq!(lock_key("1 ,  2").as_deref(), Some("1,2"));
        assert_eq!(lock_key("'my lock'").as_deref(), Some("'my lock'"));
        assert_eq!(lock_key("$1"), None);
        assert_eq!(lock_key("?"), None);
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

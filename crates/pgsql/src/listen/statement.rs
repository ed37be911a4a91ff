//! Recognising the LISTEN and UNLISTEN statements Sluice answers itself, and the query of the
//! session's channels (`SELECT pg_listening_channels()`): a simple Query holding exactly one of
//! them (an optional `;`, leading comments allowed). Anything else — several statements in one
//! Query, the extended protocol — goes to the server as before, where a LISTEN pins the session
//! (see `pins.rs`).

use sluice_core::query::lexer::{Lexer, Syntax, Token};

/// A LISTEN-family statement, its channel as PostgreSQL names it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum ListenStatement {
    /// `LISTEN channel`.
    Listen(String),
    /// `UNLISTEN channel`.
    Unlisten(String),
    /// `UNLISTEN *`.
    UnlistenAll,
}

/// A statement of the LISTEN family Sluice may answer itself.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum ListenRequest {
    /// LISTEN or UNLISTEN.
    Change(ListenStatement),
    /// `SELECT [* FROM] [pg_catalog.]pg_listening_channels()`: which channels the session
    /// listens to, which under fan-out only Sluice knows.
    ListChannels,
}

impl ListenStatement {
    /// The CommandComplete tag PostgreSQL answers it with.
    pub(crate) fn tag(&self) -> &'static str {
        match self {
            ListenStatement::Listen(_) => "LISTEN",
            _ => "UNLISTEN",
        }
    }
}

/// PostgreSQL's identifier length limit (NAMEDATALEN - 1): longer names are truncated.
const MAX_IDENTIFIER: usize = 63;

/// The statement of a Query message (`msg` starts with `Q`), when it is one LISTEN, UNLISTEN or
/// query of the session's channels, read with `sluice-query`'s lexer (PostgreSQL syntax).
pub(crate) fn parse(msg: &[u8]) -> Option<ListenRequest> {
    let sql = std::str::from_utf8(sluice_pgsql_proto::message::Query::read(msg)?.sql).ok()?;
    let mut tokens = Lexer::new(sql, Syntax::Pgsql);
    let mut next = move || tokens.next()?.ok();
    let verb = next()?;
    if verb.is_keyword("select") {
        return lists_channels(&mut next).then_some(ListenRequest::ListChannels);
    }
    let listen = if verb.is_keyword("listen") {
        true
    } else if verb.is_keyword("unlisten") {
        false
    } else {
        return None;
    };
    let target = next()?;
    if !at_end(&mut next) {
        return None;
    }
    Some(ListenRequest::Change(match target {
        t if !listen && t.is_punct("*") => ListenStatement::UnlistenAll,
        t if listen => ListenStatement::Listen(identifier(&t)?),
        t => ListenStatement::Unlisten(identifier(&t)?),
    }))
}

/// Whether what follows `SELECT` is `[* FROM] [pg_catalog.]pg_listening_channels()` and the end.
fn lists_channels<'a>(next: &mut impl FnMut() -> Option<Token<'a>>) -> bool {
    let mut t = next();
    if t.is_some_and(|t| t.is_punct("*")) {
        if !next().is_some_and(|t| t.is_keyword("from")) {
            return false;
        }
        t = next();
    }
    if t.is_some_and(|t| t.is_keyword("pg_catalog")) {
        if !next().is_some_and(|t| t.is_punct(".")) {
            return false;
        }
        t = next();
    }
    t.is_some_and(|t| t.is_keyword("pg_listening_channels"))
        && next().is_some_and(|t| t.is_punct("("))
        && next().is_some_and(|t| t.is_punct(")"))
        && at_end(next)
}

/// Whether only one optional `;` remains.
fn at_end<'a>(next: &mut impl FnMut() -> Option<Token<'a>>) -> bool {
    match next() {
        None => true,
        Some(t) => t.is_punct(";") && next().is_none(),
    }
}

/// The identifier a token names, as PostgreSQL names it: an unquoted one folded to lower case,
/// a quoted one as written (`""` is a quote); truncated to 63 bytes.
fn identifier(t: &Token<'_>) -> Option<String> {
    let mut name = match t {
        Token::Word(w) => w.to_lowercase(),
        _ => t.identifier()?.into_owned(),
    };
    if name.is_empty() {
        return None;
    }
    if name.len() > MAX_IDENTIFIER {
        let mut cut = MAX_IDENTIFIER;
        while !name.is_char_boundary(cut) {
            cut -= 1;
        }
        name.truncate(cut);
    }
    Some(name)
}

/// Whether `sql` calls `pg_notify(`, in any case.
pub(crate) fn sends_notification(sql: &str) -> bool {
    let b = sql.as_bytes();
    // One memchr pass for `_` (no substring searcher to build: this runs on every Query), then
    // the words around it compared in any case.
    memchr::memchr_iter(b'_', b).any(|i| {
        i >= 2
            && b.get(i - 2..i + 7)
                .is_some_and(|w| w.eq_ignore_ascii_case(b"pg_notify"))
            && b[i + 7..].trim_ascii_start().starts_with(b"(")
    })
}

/// Whether `sql` may send a notification: it says `notify` anywhere, in any case (a false
/// positive costs one round trip on the listener connection).
pub(crate) fn may_notify(sql: &[u8]) -> bool {
    sql.windows(6).any(|w| w.eq_ignore_ascii_case(b"notify"))
}

/// An identifier (a channel, a statement name) quoted so any name is safe in SQL.
pub(crate) fn quoted(channel: &str) -> String {
    format!("\"{}\"", channel.replace('"', "\"\""))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parsed(sql: &str) -> Option<ListenRequest> {
        let mut m = vec![b'Q', 0, 0, 0, 0];
        m.extend_from_slice(sql.as_bytes());
        m.push(0);
        parse(&m)
    }

    fn q(sql: &str) -> Option<ListenStatement> {
        match parsed(sql)? {
            ListenRequest::Change(s) => Some(s),
            ListenRequest::ListChannels => None,
        }
    }

    #[test]
    fn one_statement_is_recognised_as_postgresql_names_it() {
        use ListenStatement::*;
        assert_eq!(q("LISTEN Jobs"), Some(Listen("jobs".into())));
        assert_eq!(q("  listen \"Jobs\" ; "), Some(Listen("Jobs".into())));
        assert_eq!(q("LISTEN \"a\"\"b\""), Some(Listen("a\"b".into())));
        assert_eq!(
            q("/* app */ -- x\nUNLISTEN jobs;"),
            Some(Unlisten("jobs".into()))
        );
        assert_eq!(q("UNLISTEN *"), Some(UnlistenAll));
        assert_eq!(q("unlisten * ;"), Some(UnlistenAll));
        let long = "c".repeat(70);
        assert_eq!(q(&format!("LISTEN {long}")), Some(Listen("c".repeat(63))));
        for sql in [
            "SELECT pg_listening_channels()",
            "select PG_LISTENING_CHANNELS ( ) ;",
            "SELECT * FROM pg_listening_channels()",
            "/* c */ SELECT pg_catalog.pg_listening_channels();",
        ] {
            assert_eq!(parsed(sql), Some(ListenRequest::ListChannels), "{sql}");
        }
    }

    #[test]
    fn anything_else_goes_to_the_server() {
        for sql in [
            "LISTEN a; LISTEN b",
            "LISTEN",
            "LISTEN a b",
            "LISTEN \"unterminated",
            "LISTEN \"\"",
            "LISTEN 1abc",
            "NOTIFY a",
            "SELECT 1",
            "LISTENING a",
            "/* open",
            "SELECT pg_listening_channels() AS c",
            "SELECT pg_listening_channels(), 1",
            "SELECT count(*) FROM pg_listening_channels()",
            "SELECT pg_listening_channelsx()",
            "SELECT pg_catalog.é",
            "SELECT * FROM pg_listening_channels() c",
        ] {
            assert_eq!(parsed(sql), None, "{sql}");
        }
    }

    #[test]
    fn pg_notify_calls_are_found() {
        assert!(sends_notification("SELECT pg_notify('a', 'b')"));
        assert!(sends_notification("select PG_NOTIFY ('a', 'b')"));
        assert!(sends_notification("SELECT Pg_Notify('a', 'b')"));
        assert!(sends_notification("SELECT pg_catalog.pg_notify('a','b')"));
        assert!(!sends_notification("SELECT 'pg_notify' AS x"));
        assert!(!sends_notification("SELECT my_notify(1)"));
    }

    #[test]
    fn quoting_doubles_quotes() {
        assert_eq!(quoted("a\"b"), "\"a\"\"b\"");
    }
}

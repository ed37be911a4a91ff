//! The first read-only layer: Sluice's own lexer decides whether an agent's SQL is exactly one
//! read. It holds on its own — the READ ONLY transaction, the single-statement wire, the reader
//! hostgroup and the login's grants are the other layers, and each stops what the others let
//! through (see docs/mcp.md, "Security model").
//!
//! A statement is a read when it is one statement (a trailing `;` aside) that starts with
//! `SELECT`, `WITH`, `SHOW`, `DESCRIBE`/`DESC`, `EXPLAIN` (never with `ANALYZE`), `VALUES`,
//! `TABLE` or `(`, and nowhere holds a data-modifying word (`INSERT`, `UPDATE`, `DELETE`,
//! `MERGE`, `REPLACE` … outside their pure string functions `INSERT(` / `REPLACE(`), an `INTO`,
//! a locking clause, a variable assignment, or a call of a function with side effects (the
//! lists [`MYSQL_SIDE_EFFECTS`] and [`PGSQL_SIDE_EFFECTS`]). Identifiers are whole tokens, so `created_at` or `updated_at` never
//! match anything.

pub mod corpus;
mod functions;
pub(crate) mod lexer;

use lexer::{LexError, Token, tokenize};
use sluice_core::query::Dialect;

pub use functions::{MYSQL_SIDE_EFFECTS, PGSQL_SIDE_EFFECTS};

/// Why a statement is not a read (the message an agent sees).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct Refusal(pub String);

fn refuse(why: impl Into<String>) -> Result<(), Refusal> {
    Err(Refusal(why.into()))
}

/// What the statement starts with, when it is a read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReadKind {
    /// `SELECT`, `WITH`, `VALUES`, `TABLE`, `(`.
    Query,
    /// `SHOW`, `DESCRIBE`, `DESC`.
    Show,
    /// `EXPLAIN` without `ANALYZE`.
    Explain,
}

/// Checks that `sql` is exactly one read in `dialect`; `max_sleep_ms` is the call's timeout
/// (a literal `SLEEP`/`pg_sleep` beyond it is refused up front).
pub fn check_read(sql: &str, dialect: Dialect, max_sleep_ms: u64) -> Result<ReadKind, Refusal> {
    let mut tokens = tokenize(sql, dialect).map_err(|e| {
        Refusal(match e {
            LexError::ExecutableComment => {
                "executable comments (/*! … */) are refused: MySQL runs their text".into()
            }
            LexError::Unterminated(what) => format!("the statement has an unterminated {what}"),
            LexError::Unexpected(c) => format!("unexpected character {c:?} in the statement"),
        })
    })?;
    while tokens.last() == Some(&Token::Semicolon) {
        tokens.pop();
    }
    if tokens.contains(&Token::Semicolon) {
        return Err(Refusal(
            "exactly one statement per call: the text holds more than one".into(),
        ));
    }
    let kind = match tokens.first() {
        None => return Err(Refusal("the statement is empty".into())),
        Some(Token::Punct("(")) => ReadKind::Query,
        Some(Token::Word(w)) => match w.as_str() {
            "SELECT" | "WITH" | "VALUES" | "TABLE" => ReadKind::Query,
            "SHOW" | "DESCRIBE" | "DESC" => ReadKind::Show,
            "EXPLAIN" => ReadKind::Explain,
            other => {
                return Err(Refusal(format!(
                    "{other} is not a read: only SELECT, WITH, SHOW, DESCRIBE, EXPLAIN, VALUES and TABLE run here"
                )));
            }
        },
        Some(_) => {
            return Err(Refusal(
                "the statement does not start with a keyword".into(),
            ));
        }
    };
    check_body(&tokens, dialect, max_sleep_ms)?;
    Ok(kind)
}

/// Every identifier of `sql` (bare words and quoted names), lower-cased; empty when it does
/// not lex.
pub(crate) fn identifiers(sql: &str, dialect: Dialect) -> Vec<String> {
    tokenize(sql, dialect)
        .unwrap_or_default()
        .into_iter()
        .filter_map(|t| match t {
            Token::Word(w) => Some(w.to_ascii_lowercase()),
            Token::Quoted(q) => Some(q.to_ascii_lowercase()),
            _ => None,
        })
        .collect()
}

/// Words that start a nested write inside one read statement (PostgreSQL's data-modifying
/// CTEs, `WITH … UPDATE` in MySQL 8). Every other statement keyword (`CALL`, `DO`, `COPY`,
/// `SET`, `LOCK`, `PREPARE` …) can only start a statement, and the first-keyword check and the
/// single-statement check already refuse any second statement: listing them here would refuse
/// columns named `start` or `load` and stop nothing more.
const NESTED_WRITE_WORDS: &[&str] = &["UPDATE", "DELETE", "MERGE"];

fn check_body(tokens: &[Token], dialect: Dialect, max_sleep_ms: u64) -> Result<(), Refusal> {
    let side_effects = match dialect {
        Dialect::Mysql => MYSQL_SIDE_EFFECTS,
        Dialect::Pgsql => PGSQL_SIDE_EFFECTS,
    };
    for (i, t) in tokens.iter().enumerate() {
        let next = tokens.get(i + 1);
        let prev = i.checked_sub(1).and_then(|p| tokens.get(p));
        match t {
            Token::Punct(":=") => {
                return refuse("assignments (:=) change session state and are refused");
            }
            Token::Variable if matches!(next, Some(Token::Punct("=" | ":="))) => {
                if matches!(prev, Some(Token::Word(w)) if w == "SET") {
                    return refuse("SET changes session state and is refused");
                }
            }
            // A quoted name can be called too: `"pg_advisory_lock"(1)`.
            Token::Quoted(name) if next == Some(&Token::Punct("(")) => {
                check_call(name, side_effects, tokens.get(i + 2..), max_sleep_ms)?;
            }
            Token::Word(w) => {
                let call = next == Some(&Token::Punct("("));
                let qualified = prev == Some(&Token::Punct("."));
                check_word(w, call, qualified, next, prev)?;
                if call {
                    check_call(w, side_effects, tokens.get(i + 2..), max_sleep_ms)?;
                }
            }
            _ => {}
        }
    }
    Ok(())
}

fn check_word(
    w: &str,
    call: bool,
    qualified: bool,
    next: Option<&Token>,
    prev: Option<&Token>,
) -> Result<(), Refusal> {
    // `t.update` is a column, not a keyword.
    if qualified {
        return Ok(());
    }
    match w {
        // MySQL's INSERT(str, pos, len, new) and REPLACE(str, from, to) are pure functions.
        "INSERT" | "REPLACE" if call => Ok(()),
        "INSERT" | "REPLACE" => refuse(format!("{w} is a write and is refused")),
        "SET" => match prev {
            // CHARACTER SET / CHARSET in casts and conversions.
            Some(Token::Word(p)) if p == "CHARACTER" => Ok(()),
            _ => refuse("SET changes state and is refused"),
        },
        "FOR" => match next {
            Some(Token::Word(n)) if matches!(n.as_str(), "UPDATE" | "SHARE" | "NO" | "KEY") => {
                refuse("locking reads (FOR UPDATE / FOR SHARE) are refused: they take row locks")
            }
            _ => Ok(()),
        },
        "SHARE" if matches!(next, Some(Token::Word(n)) if n == "MODE") => {
            refuse("locking reads (LOCK IN SHARE MODE) are refused: they take row locks")
        }
        "INTO" => refuse("SELECT … INTO (a file, a variable or a new table) is refused"),
        "ANALYZE" | "ANALYSE" => {
            refuse("ANALYZE runs the statement: only plain EXPLAIN is allowed")
        }
        // MERGE is not reserved (a column may be called that): only MERGE INTO is a write.
        "MERGE" if !matches!(next, Some(Token::Word(n)) if n == "INTO") => Ok(()),
        _ if NESTED_WRITE_WORDS.contains(&w) && !call => {
            refuse(format!("{w} is not allowed in a read-only statement"))
        }
        _ => Ok(()),
    }
}

fn check_call(
    name: &str,
    side_effects: &[&str],
    args: Option<&[Token]>,
    max_sleep_ms: u64,
) -> Result<(), Refusal> {
    let lower = name.to_ascii_lowercase();
    if side_effects.iter().any(|f| {
        f.strip_suffix('*')
            .map_or(*f == lower, |prefix| lower.starts_with(prefix))
    }) {
        return refuse(format!(
            "{lower}() has side effects (locks, files, sessions, sequences or other servers) and is refused"
        ));
    }
    if lower == "sleep" || lower == "pg_sleep" {
        // A literal duration beyond the call's timeout cannot finish: say so at once.
        if let Some([Token::Literal(n), Token::Punct(")"), ..]) = args
            && let Ok(secs) = n.parse::<f64>()
            && secs * 1000.0 > max_sleep_ms as f64
        {
            return refuse(format!(
                "{lower}({n}) would outlast this call's {max_sleep_ms} ms timeout"
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests;

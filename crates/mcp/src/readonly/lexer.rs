//! A tokenizer for both dialects that knows what a server would treat as code: strings (with
//! MySQL's backslash escapes, PostgreSQL's `E''` and dollar quoting), quoted identifiers,
//! comments (PostgreSQL's nest) and MySQL's executable comments (`/*! … */`, `/*M! … */`),
//! which it reports rather than skips.

use sluice_core::query::Dialect;

/// One token of a statement.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Token {
    /// A bare word (keyword or identifier), upper-cased.
    Word(String),
    /// A quoted identifier (never a keyword), unquoted.
    Quoted(String),
    /// A string or number literal.
    Literal(String),
    /// A `?`, `$1` or `:name` placeholder.
    Placeholder,
    /// One punctuation character (or `:=`, `::` as one).
    Punct(&'static str),
    /// `;`.
    Semicolon,
    /// `@name` / `@@name` (MySQL variables).
    Variable,
}

/// Why the text could not be tokenized safely.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum LexError {
    /// A string, identifier or comment is not closed.
    Unterminated(&'static str),
    /// MySQL runs the text of `/*! … */` comments.
    ExecutableComment,
    /// A byte the lexer does not know (NUL, control characters).
    Unexpected(char),
}

/// Tokenizes `sql`; comments are dropped (but never executable ones).
pub(crate) fn tokenize(sql: &str, dialect: Dialect) -> Result<Vec<Token>, LexError> {
    let b = sql.as_bytes();
    let mysql = dialect == Dialect::Mysql;
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        let c = b[i];
        match c {
            b' ' | b'\t' | b'\n' | b'\r' | 0x0b | 0x0c => i += 1,
            b'-' if b.get(i + 1) == Some(&b'-')
                && (!mysql || b.get(i + 2).is_none_or(|n| n.is_ascii_whitespace())) =>
            {
                i = line_end(b, i);
            }
            b'#' if mysql => i = line_end(b, i),
            b'/' if b.get(i + 1) == Some(&b'*') => {
                let body = &b[i + 2..];
                if mysql && (body.first() == Some(&b'!') || body.starts_with(b"M!")) {
                    return Err(LexError::ExecutableComment);
                }
                i = block_comment_end(b, i, !mysql)?;
            }
            b'\'' => {
                let (end, text) = quoted(b, i, b'\'', mysql)?;
                out.push(Token::Literal(text));
                i = end;
            }
            b'"' if mysql => {
                // MySQL without ANSI_QUOTES: a string. Treated as a literal either way.
                let (end, text) = quoted(b, i, b'"', true)?;
                out.push(Token::Literal(text));
                i = end;
            }
            b'"' => {
                let (end, name) = quoted(b, i, b'"', false)?;
                out.push(Token::Quoted(name));
                i = end;
            }
            b'`' if mysql => {
                let (end, name) = quoted(b, i, b'`', false)?;
                out.push(Token::Quoted(name));
                i = end;
            }
            b'$' if !mysql => {
                if let Some(end) = dollar_quote_end(b, i)? {
                    out.push(Token::Literal(String::new()));
                    i = end;
                } else {
                    i = digits_end(b, i + 1);
                    out.push(Token::Placeholder);
                }
            }
            b'E' | b'e' if !mysql && b.get(i + 1) == Some(&b'\'') => {
                let (end, text) = quoted(b, i + 1, b'\'', true)?;
                out.push(Token::Literal(text));
                i = end;
            }
            b'@' if mysql => {
                i = variable_end(b, i)?;
                out.push(Token::Variable);
            }
            b'0'..=b'9' => {
                let start = i;
                i = scan_while(b, i, |c| c.is_ascii_alphanumeric() || c == b'.');
                out.push(Token::Literal(sql[start..i].to_string()));
            }
            b'?' => {
                i += 1;
                out.push(Token::Placeholder);
            }
            b';' => {
                i += 1;
                out.push(Token::Semicolon);
            }
            b':' if b.get(i + 1) == Some(&b'=') => {
                i += 2;
                out.push(Token::Punct(":="));
            }
            b':' if b.get(i + 1) == Some(&b':') => {
                i += 2;
                out.push(Token::Punct("::"));
            }
            _ if is_word_byte(c) => {
                let start = i;
                i = scan_while(b, i, |c| is_word_byte(c) || c == b'$');
                out.push(Token::Word(sql[start..i].to_ascii_uppercase()));
            }
            _ => {
                let Some(p) = PUNCT.iter().find(|p| p.as_bytes()[0] == c) else {
                    let ch = sql[i..].chars().next().unwrap_or('?');
                    return Err(LexError::Unexpected(ch));
                };
                out.push(Token::Punct(p));
                i += 1;
            }
        }
    }
    Ok(out)
}

/// The end of the run of bytes from `i` that `keep` accepts.
fn scan_while(b: &[u8], mut i: usize, keep: impl Fn(u8) -> bool) -> usize {
    while i < b.len() && keep(b[i]) {
        i += 1;
    }
    i
}

/// The end of a MySQL variable at `i` (`@name`, `@@global.name`, `@'quoted'`, `` @`quoted` ``).
fn variable_end(b: &[u8], i: usize) -> Result<usize, LexError> {
    let i = scan_while(b, i + 1, |c| c == b'@' || is_word_byte(c));
    match b.get(i) {
        Some(&q) if matches!(q, b'`' | b'\'' | b'"') => Ok(quoted(b, i, q, q != b'`')?.0),
        _ => Ok(i),
    }
}

const PUNCT: &[&str] = &[
    "(", ")", ",", ".", "*", "+", "-", "/", "%", "=", "<", ">", "!", "|", "&", "^", "~", "[", "]",
    ":", "{", "}",
];

/// Letters, digits, `_` and every non-ASCII byte (identifiers may hold them).
fn is_word_byte(c: u8) -> bool {
    c.is_ascii_alphanumeric() || c == b'_' || c >= 0x80
}

fn line_end(b: &[u8], i: usize) -> usize {
    b[i..]
        .iter()
        .position(|&c| c == b'\n')
        .map_or(b.len(), |p| i + p + 1)
}

fn digits_end(b: &[u8], mut i: usize) -> usize {
    while i < b.len() && b[i].is_ascii_digit() {
        i += 1;
    }
    i
}

/// The end of a `/* … */` comment starting at `i` (nested ones too when `nests`).
fn block_comment_end(b: &[u8], i: usize, nests: bool) -> Result<usize, LexError> {
    let mut depth = 0usize;
    let mut j = i;
    while j + 1 < b.len() {
        if b[j] == b'/' && b[j + 1] == b'*' && (nests || depth == 0) {
            depth += 1;
            j += 2;
        } else if b[j] == b'*' && b[j + 1] == b'/' {
            depth -= 1;
            j += 2;
            if depth == 0 {
                return Ok(j);
            }
        } else {
            j += 1;
        }
    }
    Err(LexError::Unterminated("comment"))
}

/// A quoted run starting at `i` with quote `q`; doubled quotes escape, and so does a backslash
/// when `backslash`. Returns the end and the unescaped text.
fn quoted(b: &[u8], i: usize, q: u8, backslash: bool) -> Result<(usize, String), LexError> {
    let mut j = i + 1;
    let mut text = Vec::new();
    while j < b.len() {
        let c = b[j];
        if backslash && c == b'\\' {
            if let Some(&n) = b.get(j + 1) {
                text.push(n);
            }
            j += 2;
            continue;
        }
        if c == q {
            if b.get(j + 1) == Some(&q) {
                text.push(q);
                j += 2;
                continue;
            }
            return Ok((j + 1, String::from_utf8_lossy(&text).into_owned()));
        }
        text.push(c);
        j += 1;
    }
    Err(LexError::Unterminated(match q {
        b'\'' => "string",
        b'"' => "quoted identifier",
        _ => "backquoted identifier",
    }))
}

/// The end of a `$tag$ … $tag$` string starting at `i`, or `None` when `$` starts a
/// placeholder (`$1`).
fn dollar_quote_end(b: &[u8], i: usize) -> Result<Option<usize>, LexError> {
    let mut j = i + 1;
    while j < b.len() && (b[j].is_ascii_alphanumeric() || b[j] == b'_') {
        j += 1;
    }
    if b.get(j) != Some(&b'$') || b.get(i + 1).is_some_and(u8::is_ascii_digit) {
        return Ok(None);
    }
    let tag = &b[i..=j];
    let body = j + 1;
    match b[body..].windows(tag.len()).position(|w| w == tag) {
        Some(p) => Ok(Some(body + p + tag.len())),
        None => Err(LexError::Unterminated("dollar-quoted string")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(sql: &str, d: Dialect) -> Vec<String> {
        tokenize(sql, d)
            .expect("lexes")
            .into_iter()
            .filter_map(|t| match t {
                Token::Word(w) => Some(w),
                _ => None,
            })
            .collect()
    }

    #[test]
    fn strings_comments_and_identifiers_hide_their_words() {
        let sql = "SELECT 'DROP '' x', `delete`, /* UPDATE */ a -- INSERT\n FROM t # DROP";
        assert_eq!(words(sql, Dialect::Mysql), ["SELECT", "A", "FROM", "T"]);
        let pg = "SELECT $$ DROP $$, $x$ a $y$ b $x$, E'\\' DELETE', \"update\" /* a /* b */ c */";
        assert_eq!(words(pg, Dialect::Pgsql), ["SELECT"]);
    }

    #[test]
    fn executable_comments_and_open_strings_are_errors() {
        assert_eq!(
            tokenize("SELECT 1 /*!50000 INTO OUTFILE '/tmp/x' */", Dialect::Mysql),
            Err(LexError::ExecutableComment)
        );
        assert!(tokenize("SELECT /*M!100000 1 */", Dialect::Mysql).is_err());
        assert!(tokenize("SELECT 'abc", Dialect::Mysql).is_err());
        assert!(tokenize("SELECT $a$ abc", Dialect::Pgsql).is_err());
        // In MySQL a backslash escapes the quote: this string never ends.
        assert!(tokenize(r"SELECT 'a\'; DROP TABLE t", Dialect::Mysql).is_err());
        // In PostgreSQL it does not: the string ends and a second statement follows.
        let t = tokenize(r"SELECT 'a\'; DROP TABLE t", Dialect::Pgsql).expect("lexes");
        assert!(t.contains(&Token::Semicolon));
    }

    #[test]
    fn mysql_double_dash_needs_a_space() {
        // `1--1` is 1 minus minus 1 in MySQL, not a comment.
        assert_eq!(
            words("SELECT 1--1 FROM t", Dialect::Mysql),
            ["SELECT", "FROM", "T"]
        );
        assert_eq!(words("SELECT 1 --x\n", Dialect::Pgsql), ["SELECT"]);
    }
}

//! One SQL tokenizer for every text Sluice reads a statement from: the MySQL session's
//! classifier and `SET` tracker, the statement splitters of both frontends and their admin
//! ports, the admin store's guard (SQLite) and the MCP read-only check. It knows what the
//! server would treat as code and what as data — strings (MySQL's backslash escapes,
//! PostgreSQL's `E'…'` and `$tag$…$tag$`), quoted names, comments (PostgreSQL's nest), MySQL's
//! executable comments (`/*! … */`, `/*M! … */`), whose body it tokenizes because the server
//! runs it — per [`Syntax`]. Tokens borrow from the text; nothing is allocated. What a caller
//! refuses (an executable comment, a character it does not expect) is the caller's policy.
//!
//! ```
//! use sluice_query::lexer::{Lexer, Syntax, Token, split_statements, words};
//!
//! let tokens: Vec<Token<'_>> = Lexer::new("SELECT 'a;b' /* ; */, `c` FROM t", Syntax::Mysql)
//!     .map_while(Result::ok)
//!     .collect();
//! assert!(tokens[0].is_keyword("select"));
//! assert_eq!(tokens[1].string_value(Syntax::Mysql).as_deref(), Some("a;b"));
//! assert_eq!(tokens[3].name(), Some("c"));
//!
//! let pg = "DO $$ BEGIN PERFORM 1; END $$; SELECT 2";
//! assert_eq!(split_statements(pg, Syntax::Pgsql), ["DO $$ BEGIN PERFORM 1; END $$", "SELECT 2"]);
//! assert_eq!(
//!     words("SELECT /* c */ @@version, pg_temp.t", Syntax::Mysql, &[","]),
//!     ["SELECT", "@@version", "pg_temp.t"]
//! );
//! ```

mod scan;
#[cfg(test)]
mod tests;

use crate::Dialect;
use scan::{
    block_comment_end, dollar_quote_end, is_space, is_word_byte, line_end, quoted_end, scan_while,
};
use std::borrow::Cow;

/// The grammar a text is tokenized by.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Syntax {
    /// MySQL and MariaDB: `'…'` and `"…"` strings with backslash escapes (and a charset
    /// introducer, `_utf8mb4'…'`), `` `…` `` names, `#` and `-- ` comments (the dash pair
    /// needs a space after it: `1--1` is arithmetic), executable comments, `@user` and
    /// `@@system` variables, `$` in names.
    Mysql,
    /// PostgreSQL: `'…'` strings (backslash escapes only in `E'…'`), `$tag$…$tag$` strings,
    /// `"…"` names, `--` comments, nested `/* */`, `$1` placeholders.
    Pgsql,
    /// SQLite, the admin store: `'…'` strings, `"…"`, `` `…` `` and `[…]` names, `--` and
    /// `/* */` comments, `?`, `?NNN`, `:name`, `@name` and `$name` parameters.
    Sqlite,
}

impl From<Dialect> for Syntax {
    fn from(d: Dialect) -> Self {
        match d {
            Dialect::Mysql => Syntax::Mysql,
            Dialect::Pgsql => Syntax::Pgsql,
        }
    }
}

/// One token, borrowing its text from the statement as written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Token<'a> {
    /// An unquoted word: a keyword or an identifier.
    Word(&'a str),
    /// A quoted identifier with its quotes (backticks, double quotes, or SQLite's brackets);
    /// see [`Token::name`].
    Quoted(&'a str),
    /// A string literal as written: quotes, a prefix (`E`, `_utf8mb4`) and escapes included;
    /// see [`Token::string_value`].
    Str(&'a str),
    /// A number.
    Num(&'a str),
    /// A parameter placeholder: `?`, `$1`, SQLite's `?3`, `:name`, `@name`, `$name`.
    Placeholder(&'a str),
    /// A MySQL user variable, without its `@` (and its quotes, when quoted).
    UserVar(&'a str),
    /// A MySQL system variable, without its `@@` (`session.sql_mode`).
    SysVar(&'a str),
    /// Punctuation or an operator: one character, or one of `:=`, `::`, `<=`, `>=`, `<>`,
    /// `!=`, `<<`, `>>`, `||`, `&&`, `=>`. `;` too.
    Punct(&'a str),
}

impl<'a> Token<'a> {
    /// Whether this is the unquoted word `keyword`, in any case.
    pub fn is_keyword(&self, keyword: &str) -> bool {
        matches!(self, Token::Word(w) if w.eq_ignore_ascii_case(keyword))
    }

    /// Whether this is the punctuation `p`.
    pub fn is_punct(&self, p: &str) -> bool {
        matches!(self, Token::Punct(x) if *x == p)
    }

    /// The text as written.
    pub fn text(&self) -> &'a str {
        match *self {
            Token::Word(t)
            | Token::Quoted(t)
            | Token::Str(t)
            | Token::Num(t)
            | Token::Placeholder(t)
            | Token::UserVar(t)
            | Token::SysVar(t)
            | Token::Punct(t) => t,
        }
    }

    /// The name a word or quoted identifier gives: the word, or what is between the quotes as
    /// written (a doubled quote stays doubled; [`Token::identifier`] undoubles it).
    pub fn name(&self) -> Option<&'a str> {
        match *self {
            Token::Word(w) => Some(w),
            Token::Quoted(q) => Some(q.get(1..q.len().saturating_sub(1)).unwrap_or("")),
            _ => None,
        }
    }

    /// The identifier a word or quoted identifier names, a doubled quote inside undoubled
    /// (case as written).
    pub fn identifier(&self) -> Option<Cow<'a, str>> {
        let body = self.name()?;
        let Token::Quoted(q) = self else {
            return Some(Cow::Borrowed(body));
        };
        let close = match q.as_bytes().first() {
            Some(b'[') => return Some(Cow::Borrowed(body)),
            Some(&c) => c as char,
            None => return Some(Cow::Borrowed(body)),
        };
        let doubled: String = [close, close].iter().collect();
        Some(if body.contains(&doubled) {
            Cow::Owned(body.replace(&doubled, &close.to_string()))
        } else {
            Cow::Borrowed(body)
        })
    }

    /// The value of a string literal as `syntax` reads it: prefix and quotes removed, doubled
    /// quotes undoubled, backslash escapes (MySQL, PostgreSQL's `E'…'`) taken as the character
    /// they escape (`\n` reads as `n`: enough for matching names and keywords).
    pub fn string_value(&self, syntax: Syntax) -> Option<Cow<'a, str>> {
        let Token::Str(s) = *self else {
            return None;
        };
        if s.starts_with('$') {
            let tag_end = s.get(1..).and_then(|r| r.find('$'))? + 2;
            return s
                .get(tag_end..s.len().saturating_sub(tag_end))
                .map(Cow::Borrowed);
        }
        let open = s.find(['\'', '"'])?;
        let q = s.as_bytes()[open];
        let backslash = match syntax {
            Syntax::Mysql => true,
            Syntax::Pgsql => open == 1 && s.as_bytes()[0].eq_ignore_ascii_case(&b'e'),
            Syntax::Sqlite => false,
        };
        let closed = s.len() > open + 1 && s.as_bytes()[s.len() - 1] == q;
        let body = s.get(open + 1..s.len() - usize::from(closed))?;
        if !(body.contains(q as char) || backslash && body.contains('\\')) {
            return Some(Cow::Borrowed(body));
        }
        Some(Cow::Owned(scan::unescape(body, q, backslash)))
    }
}

/// Why a text stopped tokenizing.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum LexError {
    /// A string, quoted identifier or comment is not closed; names which.
    #[error("the statement has an unterminated {0}")]
    Unterminated(&'static str),
}

/// The tokens of a text, in order; comments and whitespace are skipped. After an error it
/// yields nothing more.
#[derive(Debug, Clone)]
pub struct Lexer<'a> {
    sql: &'a str,
    i: usize,
    /// Where the token last returned began.
    start: usize,
    syntax: Syntax,
    /// Inside `/*! … */`: the next `*/` ends that comment.
    in_executable_comment: bool,
    saw_executable_comment: bool,
}

impl<'a> Lexer<'a> {
    /// Starts at the beginning of `sql`.
    pub fn new(sql: &'a str, syntax: Syntax) -> Self {
        Lexer {
            sql,
            i: 0,
            start: 0,
            syntax,
            in_executable_comment: false,
            saw_executable_comment: false,
        }
    }

    /// The byte offset where the next token (or comment) starts.
    pub fn offset(&self) -> usize {
        self.i
    }

    /// The byte offset where the token last returned began (its end is [`Lexer::offset`]):
    /// `sql[token_start()..offset()]` is the token as written, quotes and sigils included.
    pub fn token_start(&self) -> usize {
        self.start
    }

    /// Whether an executable comment (`/*! … */`, `/*M! … */`) has begun so far: MySQL runs
    /// its body, which this lexer tokenizes as code.
    pub fn saw_executable_comment(&self) -> bool {
        self.saw_executable_comment
    }

    /// Skips whitespace and comments; an unterminated comment is an error.
    fn skip_space_and_comments(&mut self) -> Result<(), LexError> {
        let b = self.sql.as_bytes();
        let mysql = self.syntax == Syntax::Mysql;
        loop {
            self.i = scan_while(b, self.i, is_space);
            let rest = &b[self.i..];
            let dash_comment =
                rest.starts_with(b"--") && (!mysql || rest.get(2).is_none_or(|&c| is_space(c)));
            if dash_comment || (mysql && rest.first() == Some(&b'#')) {
                self.i = line_end(b, self.i);
            } else if mysql && (rest.starts_with(b"/*!") || rest.starts_with(b"/*M!")) {
                let marker = if rest[2] == b'!' { 3 } else { 4 };
                self.i = scan_while(b, self.i + marker, |c| c.is_ascii_digit());
                self.in_executable_comment = true;
                self.saw_executable_comment = true;
            } else if self.in_executable_comment && rest.starts_with(b"*/") {
                self.i += 2;
                self.in_executable_comment = false;
            } else if rest.starts_with(b"/*") {
                self.i = block_comment_end(b, self.i, self.syntax == Syntax::Pgsql)?;
            } else {
                return Ok(());
            }
        }
    }

    /// The token starting at `self.i` (not whitespace, not a comment), and moves past it.
    fn token(&mut self) -> Result<Token<'a>, LexError> {
        let (sql, b, start) = (self.sql, self.sql.as_bytes(), self.i);
        let at = |j: usize| b.get(j).copied();
        let syntax = self.syntax;
        let (end, make): (usize, fn(&'a str) -> Token<'a>) = match b[start] {
            b'\'' => (quoted_end(b, start, syntax == Syntax::Mysql)?, Token::Str),
            b'"' if syntax == Syntax::Mysql => (quoted_end(b, start, true)?, Token::Str),
            b'"' => (quoted_end(b, start, false)?, Token::Quoted),
            b'`' if syntax != Syntax::Pgsql => (quoted_end(b, start, false)?, Token::Quoted),
            b'[' if syntax == Syntax::Sqlite => match b[start..].iter().position(|&c| c == b']') {
                Some(p) => (start + p + 1, Token::Quoted),
                None => return Err(LexError::Unterminated("quoted identifier")),
            },
            b'E' | b'e' if syntax == Syntax::Pgsql && at(start + 1) == Some(b'\'') => {
                (quoted_end(b, start + 1, true)?, Token::Str)
            }
            b'$' if syntax == Syntax::Pgsql => match dollar_quote_end(b, start)? {
                Some(end) => (end, Token::Str),
                None if at(start + 1).is_some_and(|c| c.is_ascii_digit()) => (
                    scan_while(b, start + 1, |c| c.is_ascii_digit()),
                    Token::Placeholder,
                ),
                None => (start + 1, Token::Punct),
            },
            b'@' if syntax == Syntax::Mysql => return self.variable(start),
            b'?' => (
                scan_while(b, start + 1, |c| c.is_ascii_digit()),
                Token::Placeholder,
            ),
            b':' | b'@' | b'$'
                if syntax == Syntax::Sqlite && at(start + 1).is_some_and(is_word_byte) =>
            {
                (scan_while(b, start + 1, is_word_byte), Token::Placeholder)
            }
            b'0'..=b'9' => (
                scan_while(b, start, |c| c.is_ascii_alphanumeric() || c == b'.'),
                Token::Num,
            ),
            b'.' if at(start + 1).is_some_and(|c| c.is_ascii_digit()) => {
                (scan_while(b, start + 1, |c| c.is_ascii_digit()), Token::Num)
            }
            b':' if matches!(at(start + 1), Some(b'=' | b':')) => (start + 2, Token::Punct),
            b'<' | b'>' | b'!' | b'|' | b'&' | b'='
                if matches!(
                    (b[start], at(start + 1)),
                    (b'<' | b'>' | b'!', Some(b'='))
                        | (b'<', Some(b'>' | b'<'))
                        | (b'>', Some(b'>'))
                        | (b'|', Some(b'|'))
                        | (b'&', Some(b'&'))
                        | (b'=', Some(b'>'))
                ) =>
            {
                (start + 2, Token::Punct)
            }
            c if is_word_byte(c) || (c == b'$' && syntax == Syntax::Mysql) => {
                let end = scan_while(b, start, |c| is_word_byte(c) || c == b'$');
                let introducer =
                    syntax == Syntax::Mysql && c == b'_' && matches!(at(end), Some(b'\'' | b'"'));
                if introducer {
                    (quoted_end(b, end, true)?, Token::Str)
                } else {
                    (end, Token::Word)
                }
            }
            _ => {
                // One character, UTF-8 aware so that slicing stays on a boundary.
                let len = sql[start..].chars().next().map_or(1, char::len_utf8);
                (start + len, Token::Punct)
            }
        };
        self.i = end;
        Ok(make(&sql[start..end]))
    }

    /// A MySQL variable at `start` (`@name`, `@'quoted'`, `@@session.name`).
    fn variable(&mut self, start: usize) -> Result<Token<'a>, LexError> {
        let b = self.sql.as_bytes();
        let name_byte = |c: u8| is_word_byte(c) || c == b'.' || c == b'$';
        if b.get(start + 1) == Some(&b'@') {
            self.i = scan_while(b, start + 2, name_byte);
            return Ok(Token::SysVar(&self.sql[start + 2..self.i]));
        }
        match b.get(start + 1) {
            Some(&(b'\'' | b'"' | b'`')) => {
                let end = quoted_end(b, start + 1, b[start + 1] != b'`')?;
                self.i = end;
                Ok(Token::UserVar(&self.sql[start + 2..end - 1]))
            }
            _ => {
                self.i = scan_while(b, start + 1, name_byte);
                Ok(Token::UserVar(&self.sql[start + 1..self.i]))
            }
        }
    }
}

impl<'a> Iterator for Lexer<'a> {
    type Item = Result<Token<'a>, LexError>;

    fn next(&mut self) -> Option<Self::Item> {
        let step = self.skip_space_and_comments().and_then(|()| {
            if self.i >= self.sql.len() {
                return Ok(None);
            }
            self.start = self.i;
            self.token().map(Some)
        });
        match step {
            Ok(t) => t.map(Ok),
            Err(e) => {
                self.i = self.sql.len();
                Some(Err(e))
            }
        }
    }
}

/// The statements of a multi-statement text: split on `;` outside strings, names and comments,
/// each trimmed, empty ones dropped. An unterminated string or comment runs to the end, as it
/// would on the server.
pub fn split_statements(sql: &str, syntax: Syntax) -> Vec<&str> {
    let mut parts = Vec::new();
    let mut lexer = Lexer::new(sql, syntax);
    let mut start = 0;
    while let Some(Ok(t)) = lexer.next() {
        if t.is_punct(";") {
            parts.push(&sql[start..lexer.offset() - 1]);
            start = lexer.offset();
        }
    }
    parts.push(&sql[start..]);
    parts
        .into_iter()
        .map(str::trim)
        .filter(|p| !p.is_empty())
        .collect()
}

/// The words of `sql` as written: runs of tokens with nothing between them (no space, no
/// comment) — `pg_temp.t`, `@@version`, `version()`, `'a b'` — as slices of the text. A token
/// in `separators` (punctuation) ends a run and is left out. Up to where the text stops lexing.
pub fn words<'a>(sql: &'a str, syntax: Syntax, separators: &[&str]) -> Vec<&'a str> {
    let mut out: Vec<&'a str> = Vec::new();
    let mut lexer = Lexer::new(sql, syntax);
    let mut run: Option<(usize, usize)> = None;
    while let Some(Ok(t)) = lexer.next() {
        let (start, end) = (lexer.token_start(), lexer.offset());
        if matches!(t, Token::Punct(p) if separators.contains(&p)) {
            out.extend(run.take().map(|(s, e)| &sql[s..e]));
            continue;
        }
        run = match run {
            Some((s, e)) if e == start => Some((s, end)),
            other => {
                out.extend(other.map(|(s, e)| &sql[s..e]));
                Some((start, end))
            }
        };
    }
    out.extend(run.map(|(s, e)| &sql[s..e]));
    out
}

//! A MySQL tokenizer: words, quoted strings, backtick identifiers, numbers, user and system
//! variables, punctuation. Comments are skipped, except that the body of an executable comment
//! (`/*! ... */`, `/*!40101 ... */`) is tokenized, because MySQL runs it.

/// One token, borrowing from the statement text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Tok<'a> {
    /// An unquoted word (keyword or identifier).
    Word(&'a str),
    /// A quoted string, with its quotes (`'x'` or `"x"`), possibly with a charset introducer before.
    Str(&'a str),
    /// A backtick-quoted identifier, without the backticks.
    Quoted(&'a str),
    /// A number.
    Num(&'a str),
    /// A user variable `@name` (without `@`).
    UserVar(&'a str),
    /// A system variable `@@name` / `@@session.name` (without `@@`).
    SysVar(&'a str),
    /// Punctuation or an operator (`=`, `:=`, `,`, `(`, `)`, `;`, `.`, ...).
    Punct(&'a str),
}

impl<'a> Tok<'a> {
    /// True when this is the word `kw` (case-insensitive).
    pub(crate) fn is_kw(&self, kw: &str) -> bool {
        matches!(self, Tok::Word(w) if w.eq_ignore_ascii_case(kw))
    }

    /// True when this is the punctuation `p`.
    pub(crate) fn is_punct(&self, p: &str) -> bool {
        matches!(self, Tok::Punct(x) if *x == p)
    }

    /// The text of a name-like token (word or backtick identifier).
    pub(crate) fn name(&self) -> Option<&'a str> {
        match self {
            Tok::Word(w) | Tok::Quoted(w) => Some(w),
            _ => None,
        }
    }
}

/// Tokenizer over a statement; yields tokens until the end of the text.
#[derive(Debug, Clone)]
pub(crate) struct Lexer<'a> {
    s: &'a str,
    b: &'a [u8],
    i: usize,
    /// Inside `/*! ... */`: the next `*/` just ends that comment.
    in_exec_comment: bool,
}

impl<'a> Lexer<'a> {
    /// Starts at the beginning of `s`.
    pub(crate) fn new(s: &'a str) -> Self {
        Lexer {
            s,
            b: s.as_bytes(),
            i: 0,
            in_exec_comment: false,
        }
    }

    /// Byte offset of the next token.
    pub(crate) fn offset(&self) -> usize {
        self.i
    }

    fn skip_space_and_comments(&mut self) {
        loop {
            while self.i < self.b.len() && self.b[self.i].is_ascii_whitespace() {
                self.i += 1;
            }
            let rest = &self.b[self.i..];
            if rest.starts_with(b"#")
                || (rest.starts_with(b"--") && rest.get(2).is_none_or(|c| c.is_ascii_whitespace()))
            {
                while self.i < self.b.len() && self.b[self.i] != b'\n' {
                    self.i += 1;
                }
            } else if rest.starts_with(b"/*!") {
                self.i += 3;
                while self.i < self.b.len() && self.b[self.i].is_ascii_digit() {
                    self.i += 1;
                }
                self.in_exec_comment = true;
            } else if rest.starts_with(b"*/") && self.in_exec_comment {
                self.i += 2;
                self.in_exec_comment = false;
            } else if rest.starts_with(b"/*") {
                match find(&self.b[self.i + 2..], b"*/") {
                    Some(end) => self.i += 2 + end + 2,
                    None => self.i = self.b.len(),
                }
            } else {
                return;
            }
        }
    }

    fn take_while(&mut self, start: usize, f: impl Fn(u8) -> bool) -> &'a str {
        let mut j = start;
        while j < self.b.len() && f(self.b[j]) {
            j += 1;
        }
        self.i = j;
        self.slice(start, j)
    }

    fn slice(&self, from: usize, to: usize) -> &'a str {
        self.s.get(from..to).unwrap_or("")
    }

    /// Ends a quoted run starting at `start` (the quote); handles doubled quotes and `\` escapes.
    fn quoted_end(&self, start: usize, q: u8) -> usize {
        let mut j = start + 1;
        while j < self.b.len() {
            let c = self.b[j];
            if c == b'\\' && q != b'`' {
                j += 2;
                continue;
            }
            if c == q {
                if self.b.get(j + 1) == Some(&q) {
                    j += 2;
                    continue;
                }
                return j + 1;
            }
            j += 1;
        }
        self.b.len()
    }
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

fn is_word_byte(c: u8) -> bool {
    c.is_ascii_alphanumeric() || c == b'_' || c == b'$' || c >= 0x80
}

impl<'a> Iterator for Lexer<'a> {
    type Item = Tok<'a>;

    fn next(&mut self) -> Option<Tok<'a>> {
        self.skip_space_and_comments();
        let start = self.i;
        let c = *self.b.get(start)?;
        let tok = match c {
            b'\'' | b'"' => {
                let end = self.quoted_end(start, c).min(self.b.len());
                self.i = end;
                Tok::Str(self.slice(start, end))
            }
            b'`' => {
                let end = self.quoted_end(start, b'`').min(self.b.len());
                self.i = end;
                Tok::Quoted(self.slice(start + 1, end.saturating_sub(1).max(start + 1)))
            }
            b'@' if self.b.get(start + 1) == Some(&b'@') => {
                Tok::SysVar(self.take_while(start + 2, |c| is_word_byte(c) || c == b'.'))
            }
            b'@' => match self.b.get(start + 1) {
                Some(&q @ (b'\'' | b'"' | b'`')) => {
                    let end = self.quoted_end(start + 1, q).min(self.b.len());
                    self.i = end;
                    Tok::UserVar(self.slice(start + 2, end.saturating_sub(1).max(start + 2)))
                }
                _ => Tok::UserVar(self.take_while(start + 1, |c| is_word_byte(c) || c == b'.')),
            },
            b'0'..=b'9' => {
                Tok::Num(self.take_while(start, |c| c.is_ascii_alphanumeric() || c == b'.'))
            }
            b'.' if self.b.get(start + 1).is_some_and(u8::is_ascii_digit) => {
                Tok::Num(self.take_while(start + 1, |c| c.is_ascii_digit()))
            }
            b':' if self.b.get(start + 1) == Some(&b'=') => {
                self.i = start + 2;
                Tok::Punct(self.slice(start, start + 2))
            }
            b'<' | b'>' | b'!' | b'|' | b'&' => {
                let two = matches!(
                    self.b.get(start + 1),
                    Some(b'=' | b'>' | b'<' | b'|' | b'&')
                );
                self.i = start + if two { 2 } else { 1 };
                Tok::Punct(self.slice(start, self.i))
            }
            c if is_word_byte(c) => {
                let w = self.take_while(start, is_word_byte);
                // A charset introducer: _utf8mb4'text'
                if w.starts_with('_') && matches!(self.b.get(self.i), Some(b'\'' | b'"')) {
                    let q = self.b[self.i];
                    let end = self.quoted_end(self.i, q).min(self.b.len());
                    self.i = end;
                    Tok::Str(self.slice(start, end))
                } else {
                    Tok::Word(w)
                }
            }
            _ => {
                // One character (UTF-8 aware so slicing stays on a boundary).
                let len = self
                    .s
                    .get(start..)
                    .and_then(|r| r.chars().next())
                    .map_or(1, char::len_utf8);
                self.i = start + len;
                Tok::Punct(self.slice(start, start + len))
            }
        };
        Some(tok)
    }
}

/// Splits a multi-statement query on `;` outside strings and comments.
pub(crate) fn split_statements(sql: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut lx = Lexer::new(sql);
    let mut start = 0;
    while let Some(t) = lx.next() {
        if t.is_punct(";") {
            let part = sql.get(start..lx.offset().saturating_sub(1)).unwrap_or("");
            if !part.trim().is_empty() {
                out.push(part);
            }
            start = lx.offset();
        }
    }
    let tail = sql.get(start..).unwrap_or("");
    if !tail.trim().is_empty() {
        out.push(tail);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn toks(s: &str) -> Vec<Tok<'_>> {
        Lexer::new(s).collect()
    }

    #[test]
    fn basic_tokens() {
        let t = toks(
            "SET @@session.sql_mode = 'A,B', @x := 5, time_zone=\"America/Port-au-Prince\" -- c\n",
        );
        assert_eq!(
            t,
            vec![
                Tok::Word("SET"),
                Tok::SysVar("session.sql_mode"),
                Tok::Punct("="),
                Tok::Str("'A,B'"),
                Tok::Punct(","),
                Tok::UserVar("x"),
                Tok::Punct(":="),
                Tok::Num("5"),
                Tok::Punct(","),
                Tok::Word("time_zone"),
                Tok::Punct("="),
                Tok::Str("\"America/Port-au-Prince\""),
            ]
        );
    }

    #[test]
    fn comments_and_executable_comments() {
        assert_eq!(
            toks("/* hi */ SELECT # x\n 1"),
            vec![Tok::Word("SELECT"), Tok::Num("1")]
        );
        assert_eq!(
            toks("/*!40101 SET NAMES utf8 */;"),
            vec![
                Tok::Word("SET"),
                Tok::Word("NAMES"),
                Tok::Word("utf8"),
                Tok::Punct(";")
            ]
        );
        assert_eq!(
            toks("SELECT `a``b`, 'it''s', _utf8mb4'x'")[1],
            Tok::Quoted("a``b")
        );
    }

    #[test]
    fn splits_statements() {
        assert_eq!(
            split_statements("SELECT ';'; SET a=1 ;  "),
            vec!["SELECT ';'", " SET a=1 "]
        );
        assert_eq!(split_statements("SELECT 1"), vec!["SELECT 1"]);
    }

    proptest! {
        #[test]
        fn never_panics(s in ".{0,80}") {
            let _ = toks(&s);
            let _ = split_statements(&s);
        }
    }
}

//! The read-only check's tokens: `sluice-query`'s one lexer, which knows what a server would
//! treat as code — strings (MySQL's backslash escapes, PostgreSQL's `E''` and dollar quoting),
//! quoted identifiers, comments (PostgreSQL's nest) — with this layer's policy on top: MySQL's
//! executable comments (`/*! … */`, `/*M! … */`), open strings and comments and characters
//! outside SQL's punctuation are errors, words are upper-cased and literals read.

use sluice_core::query::Dialect;
use sluice_core::query::lexer::{self, Lexer, Syntax};

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

/// Tokenizes `sql` with `sluice-query`'s lexer; comments are dropped, but an executable
/// comment, an open string or comment, or a character outside SQL's punctuation is an error.
pub(crate) fn tokenize(sql: &str, dialect: Dialect) -> Result<Vec<Token>, LexError> {
    let syntax = Syntax::from(dialect);
    let mut lexer = Lexer::new(sql, syntax);
    let mut out = Vec::new();
    while let Some(step) = lexer.next() {
        // MySQL runs an executable comment's body: whatever it holds, refuse it.
        if lexer.saw_executable_comment() {
            return Err(LexError::ExecutableComment);
        }
        let token = step.map_err(|e| match e {
            lexer::LexError::Unterminated(what) => LexError::Unterminated(what),
            _ => LexError::Unterminated("statement"),
        })?;
        match token {
            lexer::Token::Word(w) => out.push(Token::Word(w.to_ascii_uppercase())),
            lexer::Token::Quoted(_) => {
                let name = token.identifier().unwrap_or_default();
                out.push(Token::Quoted(name.into_owned()));
            }
            lexer::Token::Str(_) => {
                let text = token.string_value(syntax).unwrap_or_default();
                out.push(Token::Literal(text.into_owned()));
            }
            lexer::Token::Num(n) => out.push(Token::Literal(n.to_string())),
            lexer::Token::Placeholder(_) => out.push(Token::Placeholder),
            lexer::Token::UserVar(_) | lexer::Token::SysVar(_) => out.push(Token::Variable),
            lexer::Token::Punct(";") => out.push(Token::Semicolon),
            lexer::Token::Punct(p @ (":=" | "::")) => {
                out.push(Token::Punct(if p == ":=" { ":=" } else { "::" }));
            }
            _ => {
                // Operators of two characters are read as their characters, one by one.
                for c in token.text().chars() {
                    let known = PUNCT.iter().find(|p| p.chars().eq([c]));
                    out.push(Token::Punct(known.ok_or(LexError::Unexpected(c))?));
                }
            }
        }
    }
    if lexer.saw_executable_comment() {
        return Err(LexError::ExecutableComment);
    }
    Ok(out)
}

const PUNCT: &[&str] = &[
    "(", ")", ",", ".", "*", "+", "-", "/", "%", "=", "<", ">", "!", "|", "&", "^", "~", "[", "]",
    ":", "{", "}",
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_are_upper_cased_and_literals_read() {
        let t = tokenize(
            "select `Order`, 'it''s', 42 FROM t WHERE a := ?",
            Dialect::Mysql,
        )
        .expect("lexes");
        assert_eq!(
            t,
            [
                Token::Word("SELECT".into()),
                Token::Quoted("Order".into()),
                Token::Punct(","),
                Token::Literal("it's".into()),
                Token::Punct(","),
                Token::Literal("42".into()),
                Token::Word("FROM".into()),
                Token::Word("T".into()),
                Token::Word("WHERE".into()),
                Token::Word("A".into()),
                Token::Punct(":="),
                Token::Placeholder,
            ]
        );
        // A two-character operator is its characters, one by one, as the checks expect.
        let t = tokenize("SELECT a <= b", Dialect::Pgsql).expect("lexes");
        assert_eq!(t[2..4], [Token::Punct("<"), Token::Punct("=")]);
    }

    #[test]
    fn executable_comments_open_strings_and_strange_bytes_are_errors() {
        assert_eq!(
            tokenize("SELECT 1 /*!50000 INTO OUTFILE '/tmp/x' */", Dialect::Mysql),
            Err(LexError::ExecutableComment)
        );
        assert_eq!(
            tokenize("SELECT /*M!100000 1 */", Dialect::Mysql),
            Err(LexError::ExecutableComment)
        );
        assert_eq!(
            tokenize("SELECT 1 /*!", Dialect::Mysql),
            Err(LexError::ExecutableComment)
        );
        assert_eq!(
            tokenize("SELECT 'abc", Dialect::Mysql),
            Err(LexError::Unterminated("string"))
        );
        // In MySQL a backslash escapes the quote: this string never ends.
        assert!(tokenize(r"SELECT 'a\'; DROP TABLE t", Dialect::Mysql).is_err());
        assert_eq!(
            tokenize("SELECT 1\0", Dialect::Pgsql),
            Err(LexError::Unexpected('\0'))
        );
        assert_eq!(
            tokenize("SELECT @x", Dialect::Pgsql),
            Err(LexError::Unexpected('@'))
        );
    }
}

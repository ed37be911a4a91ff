//! The MySQL session's tokens: `sluice-query`'s one lexer ([`sluice_core::query::lexer`]) in
//! its MySQL syntax — words, quoted strings, backtick names, numbers, user and system variables,
//! punctuation; comments skipped, the body of an executable comment (`/*! … */`,
//! `/*M! … */`) tokenized because the server runs it. A text that does not lex to its end (an
//! open string or comment) yields its tokens up to there: the server refuses such a statement.

use sluice_core::query::lexer::{self, Syntax};

pub(crate) use sluice_core::query::lexer::Token as Tok;

/// The tokens of one MySQL statement, up to the end or to where it stops lexing.
#[derive(Debug, Clone)]
pub(crate) struct Lexer<'a>(lexer::Lexer<'a>);

impl<'a> Lexer<'a> {
    /// Starts at the beginning of `sql`.
    pub(crate) fn new(sql: &'a str) -> Self {
        Lexer(lexer::Lexer::new(sql, Syntax::Mysql))
    }
}

impl<'a> Iterator for Lexer<'a> {
    type Item = Tok<'a>;

    fn next(&mut self) -> Option<Tok<'a>> {
        self.0.next()?.ok()
    }
}

/// Splits a multi-statement query on `;` outside strings and comments (each part trimmed).
pub(crate) fn split_statements(sql: &str) -> Vec<&str> {
    lexer::split_statements(sql, Syntax::Mysql)
}

//! Borrowed views of the client messages Sluice looks into: a [`Query`]'s text, a [`Parse`]'s
//! name and query, a [`Bind`]'s portal and statement, the target of a [`Describe`] or
//! [`Close`]. Each reads a whole message (type byte, length, body) as the framing returns it,
//! without copying; `None` for another type or a body that does not hold what the type says.
//! Messages are still forwarded as the raw bytes they came in.
//!
//! ```
//! use sluice_pgsql_proto::frame::message;
//! use sluice_pgsql_proto::message::{Bind, Parse, Query};
//! use sluice_pgsql_proto::tag::client;
//!
//! let q = message(client::QUERY, b"SELECT 1\0");
//! assert_eq!(Query::read(&q).map(|q| q.sql), Some(&b"SELECT 1"[..]));
//!
//! let p = message(client::PARSE, b"s1\0SELECT $1\0\0\0");
//! let parse = Parse::read(&p).expect("a Parse");
//! assert_eq!((parse.name, parse.query()), (&b"s1"[..], Some(&b"SELECT $1"[..])));
//!
//! let b = message(client::BIND, b"\0s1\0\0\0\0\0\0\0");
//! assert_eq!(Bind::read(&b).map(|b| b.statement), Some(&b"s1"[..]));
//! assert!(Bind::read(&q).is_none());
//! ```

use crate::tag::client;

/// The body of a whole message (after its type byte and length); empty when there is none.
#[inline]
pub fn body(msg: &[u8]) -> &[u8] {
    msg.get(5..).unwrap_or_default()
}

/// `b` split at its first NUL: the string before it and what follows it. A plain scan: the
/// strings it splits off (statement and portal names) are short, where a SIMD search costs more
/// to set up than it saves.
#[inline]
pub fn cstr(b: &[u8]) -> Option<(&[u8], &[u8])> {
    let end = b.iter().position(|c| *c == 0)?;
    Some((&b[..end], &b[end + 1..]))
}

/// The body of `msg` if its type is `kind`.
#[inline]
fn body_of(msg: &[u8], kind: u8) -> Option<&[u8]> {
    match msg.first() {
        Some(k) if *k == kind => msg.get(5..),
        _ => None,
    }
}

/// A Query message: statements in the simple protocol.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Query<'a> {
    /// The statement text, without its terminating NUL.
    pub sql: &'a [u8],
}

impl<'a> Query<'a> {
    /// `msg` as a Query.
    #[inline]
    pub fn read(msg: &'a [u8]) -> Option<Query<'a>> {
        let b = body_of(msg, client::QUERY)?;
        Some(Query {
            sql: b.strip_suffix(&[0]).unwrap_or(b),
        })
    }
}

/// A Parse message: a statement prepared under a name (empty: the unnamed statement).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Parse<'a> {
    /// The statement's name.
    pub name: &'a [u8],
    /// Everything after the name: the query, its NUL and the parameter types — what parsing
    /// the statement again under another name needs.
    pub definition: &'a [u8],
}

impl<'a> Parse<'a> {
    /// `msg` as a Parse (its name read; the query only when asked for).
    #[inline]
    pub fn read(msg: &'a [u8]) -> Option<Parse<'a>> {
        let (name, definition) = cstr(body_of(msg, client::PARSE)?)?;
        Some(Parse { name, definition })
    }

    /// The query text; `None` when it lacks its NUL.
    #[inline]
    pub fn query(&self) -> Option<&'a [u8]> {
        // Queries run long: a SIMD search.
        memchr::memchr(0, self.definition).map(|end| &self.definition[..end])
    }
}

/// A Bind message: a portal made from a prepared statement.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Bind<'a> {
    /// The portal's name (empty: the unnamed portal).
    pub portal: &'a [u8],
    /// The statement's name (empty: the unnamed statement).
    pub statement: &'a [u8],
    /// Everything after the statement name: formats, parameters, result formats.
    pub params: &'a [u8],
}

impl<'a> Bind<'a> {
    /// `msg` as a Bind.
    #[inline]
    pub fn read(msg: &'a [u8]) -> Option<Bind<'a>> {
        let (portal, rest) = cstr(body_of(msg, client::BIND)?)?;
        let (statement, params) = cstr(rest)?;
        Some(Bind {
            portal,
            statement,
            params,
        })
    }
}

/// What a Describe or Close names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Target<'a> {
    /// A prepared statement (`S`).
    Statement(&'a [u8]),
    /// A portal (`P`).
    Portal(&'a [u8]),
}

#[inline]
fn target(body: &[u8]) -> Option<Target<'_>> {
    let (&kind, rest) = body.split_first()?;
    let (name, _) = cstr(rest)?;
    match kind {
        b'S' => Some(Target::Statement(name)),
        b'P' => Some(Target::Portal(name)),
        _ => None,
    }
}

/// A Describe message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Describe<'a> {
    /// What it describes.
    pub target: Target<'a>,
}

impl<'a> Describe<'a> {
    /// `msg` as a Describe.
    #[inline]
    pub fn read(msg: &'a [u8]) -> Option<Describe<'a>> {
        let target = target(body_of(msg, client::DESCRIBE)?)?;
        Some(Describe { target })
    }
}

/// A Close message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Close<'a> {
    /// What it closes.
    pub target: Target<'a>,
}

impl<'a> Close<'a> {
    /// `msg` as a Close.
    #[inline]
    pub fn read(msg: &'a [u8]) -> Option<Close<'a>> {
        let target = target(body_of(msg, client::CLOSE)?)?;
        Some(Close { target })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::frame::message;

    #[test]
    fn views_read_their_own_type_and_refuse_short_bodies() {
        let d = message(client::DESCRIBE, b"Sname\0");
        assert_eq!(
            Describe::read(&d).map(|d| d.target),
            Some(Target::Statement(b"name"))
        );
        let c = message(client::CLOSE, b"Pp1\0");
        assert_eq!(
            Close::read(&c).map(|c| c.target),
            Some(Target::Portal(b"p1"))
        );
        // The wrong type, a missing NUL, an unknown target kind, a message cut short.
        assert!(Close::read(&d).is_none());
        let unterminated = message(client::PARSE, b"s1\0SELECT 1");
        assert_eq!(Parse::read(&unterminated).and_then(|p| p.query()), None);
        assert!(Parse::read(&message(client::PARSE, b"s1")).is_none());
        assert!(Describe::read(&message(client::DESCRIBE, b"Xname\0")).is_none());
        assert!(Query::read(b"Q\0\0").is_none());
        assert_eq!(body(b"Q"), b"");
        let q = message(client::QUERY, b"SELECT 1");
        assert_eq!(Query::read(&q).map(|q| q.sql), Some(&b"SELECT 1"[..]));
    }
}

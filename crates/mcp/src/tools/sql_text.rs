//! Quoting for the SQL the discovery and sampling tools write: identifiers and string
//! literals per dialect. Names with a NUL byte are refused (no server accepts one).

use crate::error::Error;
use sluice_core::query::Dialect;

fn no_nul(s: &str) -> Result<&str, Error> {
    if s.contains('\0') {
        return Err(Error::Arguments("a name holds a NUL byte".into()));
    }
    Ok(s)
}

/// `name` as a quoted identifier.
pub(crate) fn ident(d: Dialect, name: &str) -> Result<String, Error> {
    let name = no_nul(name)?;
    Ok(match d {
        Dialect::Mysql => format!("`{}`", name.replace('`', "``")),
        Dialect::Pgsql => format!("\"{}\"", name.replace('"', "\"\"")),
    })
}

/// `s` as a string literal (PostgreSQL's `E''` form, so it reads the same whatever
/// `standard_conforming_strings` says).
pub(crate) fn literal(d: Dialect, s: &str) -> Result<String, Error> {
    let s = no_nul(s)?.replace('\\', "\\\\").replace('\'', "''");
    Ok(match d {
        Dialect::Mysql => format!("'{s}'"),
        Dialect::Pgsql => format!("E'{s}'"),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quotes_cannot_be_escaped() {
        assert_eq!(ident(Dialect::Mysql, "a`b").expect("ok"), "`a``b`");
        assert_eq!(ident(Dialect::Pgsql, "a\"b").expect("ok"), "\"a\"\"b\"");
        assert_eq!(
            literal(Dialect::Mysql, "x\\'; DROP").expect("ok"),
            "'x\\\\''; DROP'"
        );
        assert_eq!(literal(Dialect::Pgsql, "it's").expect("ok"), "E'it''s'");
        assert!(ident(Dialect::Mysql, "a\0").is_err());
        // What they produce lexes as one literal / one identifier.
        for d in [Dialect::Mysql, Dialect::Pgsql] {
            let sql = format!(
                "SELECT {} FROM t WHERE a = {}",
                ident(d, "x`\"y").expect("ok"),
                literal(d, "'; DROP TABLE t; --\\").expect("ok")
            );
            crate::readonly::check_read(&sql, d, 1000).expect("one read");
        }
    }
}

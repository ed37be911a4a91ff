//! A session's memory of its last statement's digest: drivers send the same text again and
//! again (a connection pool's health check, every extended-protocol transaction re-parsing its
//! statements, an ORM's repeated lookups), and a digest is the processor's largest cost.

use super::digest::{self, Dialect, Digest};

/// Texts longer than this are not remembered: copying them would cost more than it saves, and
/// the memo should not hold a large buffer for the whole of an idle session.
pub const MEMO_MAX_SQL: usize = 4096;

/// The last statement's text and, once the same text came twice in a row, its digest. A
/// statement seen once is not worth a copy of its digest: texts that carry their values inline
/// rarely repeat. One per session; it never crosses sessions, so no lock.
#[derive(Debug, Default)]
pub struct DigestMemo {
    sql: String,
    digest: Option<Digest>,
    /// `query_digests_max_digest_length` the digest was made with.
    limit: u32,
}

impl DigestMemo {
    /// The digest of `sql` in `dialect` cut at `limit` bytes, written into `reuse`'s buffers
    /// (no allocation once they are large enough): copied from the memo when `sql` is the text
    /// of the last statement, computed otherwise. A session speaks one dialect, so the dialect
    /// is not part of the key.
    pub fn digest(&mut self, sql: &str, dialect: Dialect, limit: u32, mut reuse: Digest) -> Digest {
        let repeated = self.limit == limit && self.sql == sql;
        if repeated && let Some(d) = &self.digest {
            reuse.assign_from(d);
            return reuse;
        }
        let d = digest::digest_reusing(sql, dialect, limit as usize, reuse);
        if repeated {
            self.digest = Some(d.clone());
        } else if sql.len() <= MEMO_MAX_SQL {
            // The text buffer is reused: no allocation once it is large enough.
            self.sql.clear();
            self.sql.push_str(sql);
            self.digest = None;
            self.limit = limit;
        }
        d
    }

    /// Whether a digest is remembered (the text came at least twice in a row).
    pub fn holds_digest(&self) -> bool {
        self.digest.is_some()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check_dialect(dialect: Dialect, q1: &str, q2: &str) {
        let mut m = DigestMemo::default();
        let fresh = |sql: &str| digest::digest(sql, dialect, 2048);
        // The buffers handed in hold another statement's digest: none of it may show through.
        let dirty = || fresh("SELECT * FROM a JOIN b ON a.x = b.y JOIN c ON c.z = a.x /* hint */");
        assert_eq!(m.digest(q1, dialect, 2048, dirty()), fresh(q1));
        assert!(!m.holds_digest(), "seen once: no copy kept");
        assert_eq!(m.digest(q1, dialect, 2048, dirty()), fresh(q1));
        assert!(m.holds_digest(), "seen twice: kept");
        assert_eq!(m.digest(q1, dialect, 2048, dirty()), fresh(q1));
        assert_eq!(
            m.digest(q2, dialect, 2048, dirty()),
            fresh(q2),
            "another text is digested afresh"
        );
        assert!(!m.holds_digest());
        // A new length limit is a new digest.
        m.digest(q2, dialect, 2048, dirty());
        let short = m.digest(q2, dialect, 10, dirty());
        assert_eq!(short, digest::digest(q2, dialect, 10));
        assert!(short.text.len() <= 10);
    }

    #[test]
    fn a_repeated_statement_reuses_its_digest() {
        check_dialect(
            Dialect::Pgsql,
            "SELECT abalance FROM pgbench_accounts WHERE aid = $1",
            "UPDATE pgbench_accounts SET abalance = 0 WHERE aid = $1",
        );
        check_dialect(
            Dialect::Mysql,
            "SELECT c FROM sbtest1 WHERE id=42",
            "UPDATE sbtest1 SET k=k+1 WHERE id=42",
        );
    }

    #[test]
    fn a_long_text_is_not_remembered() {
        let mut m = DigestMemo::default();
        let long = format!("SELECT '{}'", "x".repeat(MEMO_MAX_SQL));
        m.digest(&long, Dialect::Mysql, 2048, Digest::default());
        m.digest(&long, Dialect::Mysql, 2048, Digest::default());
        assert!(!m.holds_digest());
        assert!(m.sql.is_empty());
    }
}

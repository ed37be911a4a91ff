//! A session's memory of its last statement's digest: drivers send the same text again and
//! again (a connection pool's health check, every extended-protocol transaction re-parsing its
//! statements, an ORM's repeated lookups), applications the same statement with other values
//! inline (`WHERE id = 42`, then `WHERE id = 7`), and a digest is the processor's largest cost.

use super::digest::{self, Dialect, Digest, NumberSpans};
use crate::shapes::{SHAPE_MAX_SQL, SharedShapes};

/// Texts longer than this are not remembered: copying them would cost more than it saves, and
/// the memo should not hold a large buffer for the whole of an idle session.
pub const MEMO_MAX_SQL: usize = 4096;

/// The last statement's text and, once a text of the same shape came twice in a row, its
/// digest. Texts have the same shape when they differ only in the digits of plain numeric
/// literals (see `digest/numbers.rs`: their digest is the same, so it is not computed again).
/// A statement seen once is not worth a copy of its digest. One per session; it never crosses
/// sessions, so no lock.
#[derive(Debug, Default)]
pub struct DigestMemo {
    sql: String,
    /// Where `sql`'s plain numeric literals lie.
    numbers: NumberSpans,
    digest: Option<Digest>,
    /// `query_digests_max_digest_length` the digest was made with.
    limit: u32,
}

impl DigestMemo {
    /// The digest of `sql` in `dialect` cut at `limit` bytes, written into `reuse`'s buffers
    /// (no allocation once they are large enough): copied from the memo when `sql` has the
    /// shape of the last statement, else from `shared` (the shapes the sessions of this thread
    /// digested lately) when it holds `sql`'s shape, computed otherwise (and kept in `shared`).
    /// A session speaks one dialect, so the dialect is not part of the memo's key.
    pub fn digest(
        &mut self,
        sql: &str,
        dialect: Dialect,
        limit: u32,
        mut reuse: Digest,
        shared: Option<&SharedShapes>,
    ) -> Digest {
        let repeated =
            self.limit == limit && self.numbers.same_shape(self.sql.as_bytes(), sql.as_bytes());
        if repeated && let Some(d) = &self.digest {
            reuse.assign_from(d);
            return reuse;
        }
        // A text too long to be kept is not looked for (no hash of it, no lock). A poisoned
        // lock is a panic elsewhere on this thread: the cache is only skipped.
        let mut shapes = shared
            .filter(|_| sql.len() <= SHAPE_MAX_SQL)
            .and_then(|per_thread| per_thread.local().lock().ok());
        let key = shapes.as_ref().map(|_| digest::shape_key(sql.as_bytes()));
        if let (Some(cache), Some(key)) = (&shapes, key)
            && let Some((numbers, d)) = cache.find(key, sql, dialect, limit)
        {
            reuse.assign_from(d);
            drop(shapes);
            if repeated {
                // The same shape twice in a row: kept by the session (one copy per change of
                // shape), so its next statements take no lock.
                self.digest = Some(reuse.clone());
            } else {
                self.remember(sql, numbers, limit);
            }
            return reuse;
        }
        let (d, numbers) = if repeated {
            let d = digest::digest_reusing(sql, dialect, limit as usize, reuse);
            self.digest = Some(d.clone());
            let numbers = self
                .numbers
                .match_shape(self.sql.as_bytes(), sql.as_bytes());
            (d, numbers.unwrap_or_else(NumberSpans::exact))
        } else {
            let (d, numbers) = digest::digest_noting_numbers(sql, dialect, limit as usize, reuse);
            self.remember(sql, numbers, limit);
            (d, numbers)
        };
        if let (Some(cache), Some(key)) = (&mut shapes, key) {
            cache.keep(key, (sql, numbers), (dialect, limit), &d);
        }
        d
    }

    /// `sql` becomes the memo's last statement (seen once: no digest kept), unless it is too
    /// long to copy.
    fn remember(&mut self, sql: &str, numbers: NumberSpans, limit: u32) {
        if sql.len() <= MEMO_MAX_SQL {
            // The text buffer is reused: no allocation once it is large enough.
            self.sql.clear();
            self.sql.push_str(sql);
            self.numbers = numbers;
            self.digest = None;
            self.limit = limit;
        }
    }

    /// Whether a digest is remembered (the text came at least twice in a row).
    pub fn holds_digest(&self) -> bool {
        self.digest.is_some()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn check_dialect(dialect: Dialect, q1: &str, q2: &str) {
        let mut m = DigestMemo::default();
        let fresh = |sql: &str| digest::digest(sql, dialect, 2048);
        // The buffers handed in hold another statement's digest: none of it may show through.
        let dirty = || fresh("SELECT * FROM a JOIN b ON a.x = b.y JOIN c ON c.z = a.x /* hint */");
        assert_eq!(m.digest(q1, dialect, 2048, dirty(), None), fresh(q1));
        assert!(!m.holds_digest(), "seen once: no copy kept");
        assert_eq!(m.digest(q1, dialect, 2048, dirty(), None), fresh(q1));
        assert!(m.holds_digest(), "seen twice: kept");
        assert_eq!(m.digest(q1, dialect, 2048, dirty(), None), fresh(q1));
        assert_eq!(
            m.digest(q2, dialect, 2048, dirty(), None),
            fresh(q2),
            "another text is digested afresh"
        );
        assert!(!m.holds_digest());
        // A new length limit is a new digest.
        m.digest(q2, dialect, 2048, dirty(), None);
        let short = m.digest(q2, dialect, 10, dirty(), None);
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
    fn texts_that_differ_only_in_plain_numbers_share_a_digest() {
        let mut m = DigestMemo::default();
        let fresh = |sql: &str| digest::digest(sql, Dialect::Pgsql, 2048);
        let texts = [
            "SELECT abalance FROM pgbench_accounts WHERE aid = 12345;",
            "SELECT abalance FROM pgbench_accounts WHERE aid = 7;",
            "SELECT abalance FROM pgbench_accounts WHERE aid = 99999999;",
        ];
        assert_eq!(
            m.digest(texts[0], Dialect::Pgsql, 2048, Digest::default(), None),
            fresh(texts[0])
        );
        assert!(!m.holds_digest(), "seen once: no copy kept");
        assert_eq!(
            m.digest(texts[1], Dialect::Pgsql, 2048, Digest::default(), None),
            fresh(texts[1])
        );
        assert!(m.holds_digest(), "the same shape twice: kept");
        assert_eq!(
            m.digest(texts[2], Dialect::Pgsql, 2048, Digest::default(), None),
            fresh(texts[2])
        );
        // Not a plain number: digested afresh, and it becomes the memo's text.
        let other = "SELECT abalance FROM pgbench_accounts WHERE aid = 1e5;";
        assert_eq!(
            m.digest(other, Dialect::Pgsql, 2048, Digest::default(), None),
            fresh(other)
        );
        assert!(!m.holds_digest());
    }

    /// Statements made of SQL pieces, then the same with each run of digits replaced by
    /// another piece (digits, or something that is not a plain number): whatever the memo
    /// reuses, every digest equals a fresh one.
    fn statement_and_variants() -> impl Strategy<Value = (String, Vec<Vec<&'static str>>)> {
        let atoms = prop::sample::select(vec![
            "SELECT", " ", "'", "\"", "$", "$1", "--", "/*", "*/", "(", ")", ",", "1", "42", "0x",
            "-", "+", ".", "e", "E", ";", "FROM", "t", "t1", "IN", "=", "\n", "é", "#",
        ]);
        let text = prop::collection::vec(atoms, 0..30).prop_map(|v| v.concat());
        let piece = prop::sample::select(vec![
            "7",
            "0",
            "123456789",
            "00",
            "",
            "1e5",
            "1.5",
            "x",
            "0x1",
            "-2",
            ".5",
            "e",
            "1_",
            "'1'",
            " 3",
            "9 ",
        ]);
        let variants = prop::collection::vec(prop::collection::vec(piece, 8), 1..6);
        (text, variants)
    }

    fn with_numbers_replaced(sql: &str, pieces: &[&str]) -> String {
        let mut out = String::new();
        let mut runs = 0;
        let mut chars = sql.chars().peekable();
        while let Some(c) = chars.next() {
            if c.is_ascii_digit() {
                while chars.peek().is_some_and(char::is_ascii_digit) {
                    chars.next();
                }
                out.push_str(pieces[runs % pieces.len()]);
                runs += 1;
            } else {
                out.push(c);
            }
        }
        out
    }

    proptest! {
        #[test]
        fn a_reused_digest_is_always_the_fresh_one((sql, variants) in statement_and_variants()) {
            for dialect in [Dialect::Mysql, Dialect::Pgsql] {
                let mut m = DigestMemo::default();
                let mut texts = vec![sql.clone(), sql.clone()];
                texts.extend(variants.iter().map(|p| with_numbers_replaced(&sql, p)));
                for t in &texts {
                    let got = m.digest(t, dialect, 2048, Digest::default(), None);
                    prop_assert_eq!(got, digest::digest(t, dialect, 2048), "{:?} after {:?}", t, sql);
                }
            }
        }
    }

    proptest! {
        /// Two sessions of one thread share a cache and alternate two statements' variants
        /// (a shape each session misses in its own memo every time): whatever either reuses,
        /// from its memo or the shared cache, every digest is the fresh one.
        #[test]
        fn a_shared_shape_is_always_the_fresh_digest(
            (a, a_variants) in statement_and_variants(),
            (b, b_variants) in statement_and_variants(),
        ) {
            for dialect in [Dialect::Mysql, Dialect::Pgsql] {
                let shared = SharedShapes::default();
                let (mut one, mut two) = (DigestMemo::default(), DigestMemo::default());
                let mut texts = vec![a.clone(), b.clone(), a.clone(), a.clone()];
                for (pa, pb) in a_variants.iter().zip(b_variants.iter().cycle()) {
                    texts.push(with_numbers_replaced(&a, pa));
                    texts.push(with_numbers_replaced(&b, pb));
                }
                for (i, t) in texts.iter().enumerate() {
                    let m = if i % 3 == 0 { &mut one } else { &mut two };
                    let got = m.digest(t, dialect, 2048, Digest::default(), Some(&shared));
                    prop_assert_eq!(got, digest::digest(t, dialect, 2048), "{:?} among {:?}", t, texts);
                }
            }
        }
    }

    #[test]
    fn sessions_share_the_shapes_they_alternate() {
        let shared = SharedShapes::default();
        let (mut one, mut two) = (DigestMemo::default(), DigestMemo::default());
        let texts = |id: u32| {
            (1..=4).map(move |t| format!("SELECT c FROM sbtest{t} WHERE id={}", id * 7 + t))
        };
        for t in texts(1) {
            one.digest(&t, Dialect::Mysql, 2048, Digest::default(), Some(&shared));
        }
        // The other session's first statements of each shape are found, not tokenized: its
        // memo is given their spans, so the same text again matches its memo.
        let cache = shared.local().lock().expect("not poisoned");
        for t in texts(2) {
            let key = digest::shape_key(t.as_bytes());
            let (_, d) = cache.find(key, &t, Dialect::Mysql, 2048).expect("kept");
            assert_eq!(*d, digest::digest(&t, Dialect::Mysql, 2048));
            assert!(
                cache.find(key, &t, Dialect::Pgsql, 2048).is_none(),
                "another dialect"
            );
            assert!(
                cache.find(key, &t, Dialect::Mysql, 100).is_none(),
                "another length"
            );
        }
        drop(cache);
        for t in texts(3) {
            let got = two.digest(&t, Dialect::Mysql, 2048, Digest::default(), Some(&shared));
            assert_eq!(got, digest::digest(&t, Dialect::Mysql, 2048));
        }
    }

    #[test]
    fn a_long_text_is_not_remembered() {
        let mut m = DigestMemo::default();
        let shared = SharedShapes::default();
        let long = format!("SELECT '{}'", "x".repeat(MEMO_MAX_SQL));
        m.digest(
            &long,
            Dialect::Mysql,
            2048,
            Digest::default(),
            Some(&shared),
        );
        m.digest(
            &long,
            Dialect::Mysql,
            2048,
            Digest::default(),
            Some(&shared),
        );
        assert!(!m.holds_digest());
        assert!(m.sql.is_empty());
        let key = digest::shape_key(long.as_bytes());
        let cache = shared.local().lock().expect("not poisoned");
        assert!(
            cache.find(key, &long, Dialect::Mysql, 2048).is_none(),
            "nor shared"
        );
    }
}

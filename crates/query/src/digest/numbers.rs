//! Where a statement's plain numeric literals lie, so that a session's memo can tell that the
//! next statement differs from the last one only in their values (`WHERE aid = 12345` then
//! `WHERE aid = 867`) and reuse its digest instead of tokenizing again.
//!
//! A span is noted only for a literal the digest turned into `?` from a run of ASCII digits
//! alone (no sign, point, exponent or hex prefix), after a byte that is not `-`, `+` or `.` and
//! before one that cannot continue a number or a word. Another text that is byte for byte the
//! same outside the noted spans, with a non-empty run of digits in each, reads the same to the
//! tokenizer: every byte before a span is the same (so is its state there), the run is a
//! number to it again (the byte after it is the same and ends it), and the tokenizer looks no
//! further ahead than the byte after a token. Its digest text, hash, tables and kind are the
//! same; only a first comment's offsets could move, so a text with a comment notes no spans.

use super::{Tokenizer, is_ident_byte};

/// Spans noted per text; a text with more is matched exactly.
const MAX_SPANS: usize = 8;

/// The plain numeric literals of one text (see the module doc).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct NumberSpans {
    spans: [(u16, u16); MAX_SPANS],
    /// Spans noted; `None` once the text cannot be matched by shape (too many spans, a
    /// position past `u16`, a first comment).
    len: Option<usize>,
}

impl Default for NumberSpans {
    fn default() -> Self {
        NumberSpans {
            spans: [(0, 0); MAX_SPANS],
            len: Some(0),
        }
    }
}

impl NumberSpans {
    /// Spans that match nothing but the very same text.
    pub(crate) fn exact() -> Self {
        NumberSpans {
            len: None,
            ..NumberSpans::default()
        }
    }

    fn note(&mut self, start: usize, end: usize) {
        let Some(n) = self.len else { return };
        match (u16::try_from(start), u16::try_from(end)) {
            (Ok(s), Ok(e)) if n < MAX_SPANS => {
                self.spans[n] = (s, e);
                self.len = Some(n + 1);
            }
            _ => self.len = None,
        }
    }

    /// Whether `other` differs from `noted` (the text these spans were noted in) only by
    /// the digits in the noted spans: then both have the same digest.
    pub(crate) fn same_shape(&self, noted: &[u8], other: &[u8]) -> bool {
        self.walk::<false>(noted, other).is_some()
    }

    /// [`Self::same_shape`], with the spans of `other` when it matches: the same literals, at
    /// their places in `other` (the bytes around each are the same as in `noted`, so they are
    /// the spans a digest of `other` would note).
    pub(crate) fn match_shape(&self, noted: &[u8], other: &[u8]) -> Option<NumberSpans> {
        self.walk::<true>(noted, other)
    }

    /// Compares `other` with `noted` span by span; notes `other`'s spans when `NOTE` (the
    /// plain comparison, once per statement, does not pay for them).
    #[inline(always)]
    fn walk<const NOTE: bool>(&self, noted: &[u8], other: &[u8]) -> Option<NumberSpans> {
        let Some(n) = self.len else {
            return (noted == other).then_some(*self);
        };
        let mut found = NumberSpans::default();
        let (mut i, mut j) = (0usize, 0usize);
        for &(s, e) in &self.spans[..n] {
            let (s, e) = (usize::from(s), usize::from(e));
            let before = noted.get(i..s)?;
            if other.get(j..j + before.len()) != Some(before) {
                return None;
            }
            j += before.len();
            let digits = other
                .get(j..)
                .unwrap_or_default()
                .iter()
                .take_while(|b| b.is_ascii_digit())
                .count();
            if digits == 0 {
                return None;
            }
            if NOTE {
                found.note(j, j + digits);
            }
            j += digits;
            i = e;
        }
        (noted.get(i..) == other.get(j..)).then_some(found)
    }
}

/// A hash of `sql` that texts of one shape share: every byte but the digits of a run that
/// could be a noted span (one not after a byte of a word, `-`, `+` or `.`), and the run's
/// place. Two texts with the same shape have the same key; texts with one key may still differ
/// in shape ([`NumberSpans::match_shape`] decides).
pub(crate) fn shape_key(sql: &[u8]) -> u64 {
    const PRIME: u64 = 0x0000_0100_0000_01b3;
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    let mut prev = 0u8;
    let mut in_run = false;
    for &b in sql {
        let skip = b.is_ascii_digit()
            && (in_run || !(is_ident_byte(prev) || matches!(prev, b'-' | b'+' | b'.')));
        if skip {
            if !in_run {
                h = (h ^ u64::from(b'?')).wrapping_mul(PRIME);
            }
        } else {
            h = (h ^ u64::from(b)).wrapping_mul(PRIME);
        }
        in_run = skip;
        prev = b;
    }
    h
}

impl Tokenizer<'_> {
    /// The literal `start..end` was a run of digits alone: noted when the bytes around it
    /// make it a span (see the module doc).
    pub(super) fn note_number(&mut self, start: usize, end: usize) {
        let Some(numbers) = self.numbers.as_mut() else {
            return;
        };
        let before = start.checked_sub(1).and_then(|p| self.src.get(p));
        let after = self.src.get(end);
        let clear_before = !matches!(before, Some(b'-' | b'+' | b'.'));
        let clear_after = after.is_none_or(|&b| !is_ident_byte(b) && b != b'.');
        if clear_before && clear_after {
            numbers.note(start, end);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spans(sql: &str) -> NumberSpans {
        super::super::digest_noting_numbers(
            sql,
            super::super::Dialect::Pgsql,
            1024,
            Default::default(),
        )
        .1
    }

    #[test]
    fn plain_digit_literals_are_noted_and_others_are_not() {
        let s = spans("SELECT a FROM t WHERE id = 12345 AND b IN (7, 8)");
        assert_eq!(s.len, Some(3));
        for sql in [
            "SELECT -5",
            "SELECT 1.5",
            "SELECT 1e5",
            "SELECT 0x1F",
            "SELECT .5",
            "SELECT t1",
        ] {
            assert_eq!(spans(sql).len, Some(0), "{sql}");
        }
        assert_eq!(
            spans("SELECT 1 /* c */").len,
            None,
            "a first comment: exact only"
        );
        let many = format!("SELECT {}", ["1"; MAX_SPANS + 1].join(","));
        assert_eq!(spans(&many).len, None, "too many: exact only");
    }

    #[test]
    fn only_digit_runs_in_the_spans_may_differ() {
        let noted = "SELECT a FROM t WHERE id = 12345;";
        let s = spans(noted);
        let same = |other: &str| s.same_shape(noted.as_bytes(), other.as_bytes());
        assert!(same("SELECT a FROM t WHERE id = 7;"));
        assert!(same("SELECT a FROM t WHERE id = 000123456789;"));
        assert!(same(noted));
        for other in [
            "SELECT a FROM t WHERE id = ;",
            "SELECT a FROM t WHERE id = 7e;",
            "SELECT a FROM t WHERE id = 7.5;",
            "SELECT a FROM t WHERE id = 7a;",
            "SELECT a FROM t WHERE id = 0x7;",
            "SELECT a FROM t WHERE id = 7",
            "SELECT a FROM t WHERE id = 7; ",
            "SELECT b FROM t WHERE id = 7;",
        ] {
            assert!(!same(other), "{other}");
        }
    }
}

//! Finding any of a few words in a statement's text, in any case, without tokenizing it: the
//! sessions use it on every statement to skip their state trackers when nothing in the text
//! could concern them.

/// A fixed set of ASCII words to look for anywhere in a text (inside other words too: the
/// callers treat a hit as "look closer", so a false positive costs only that).
#[derive(Debug)]
pub struct WordSet {
    words: &'static [&'static [u8]],
    /// Per byte, the words that start with it in either case (bit `i` for `words[i]`): only
    /// at offsets holding such a byte are those words compared.
    first: [u32; 256],
    /// Per pair of bytes (65,536 bits), whether a word may start with that pair in any case (a
    /// one-byte word with any byte after it): most offsets of a statement are passed over on
    /// one table lookup, where the first byte alone (`first`) matched many (`s`, `l`, `c`, `t`
    /// start words).
    pairs: [u64; 1024],
    /// When every word holds a byte that is not a letter (`_`, `@`, a digit…), at most three
    /// distinct ones: those bytes, and each word's first such byte's offset. The text is then
    /// searched for them with `memchr` (many bytes per instruction) instead of byte by byte,
    /// and a word is compared only around such a byte, which statements hold few of.
    anchors: Option<Anchors>,
}

/// The non-letter bytes a [`WordSet`] is searched by (see [`WordSet::anchors`]).
#[derive(Debug, Clone, Copy)]
struct Anchors {
    /// The distinct anchor bytes; unused places repeat the first.
    bytes: [u8; 3],
    /// Per word, the offset of its anchor byte.
    offsets: [usize; 32],
}

/// The bit of a pair of bytes in [`WordSet::pairs`].
const fn pair_index(a: u8, b: u8) -> usize {
    (a as usize) << 8 | b as usize
}

const fn set_bit(bits: &mut [u64], i: usize) {
    bits[i / 64] |= 1 << (i % 64);
}

/// The offset of the first byte of `w` that is not an ASCII letter.
const fn anchor_of(w: &[u8]) -> Option<usize> {
    let mut i = 0;
    while i < w.len() {
        if !w[i].is_ascii_alphabetic() {
            return Some(i);
        }
        i += 1;
    }
    None
}

/// The [`Anchors`] of `words`, when every word has one and there are at most three distinct.
const fn anchors(words: &[&[u8]]) -> Option<Anchors> {
    let mut bytes = [0u8; 3];
    let mut distinct = 0;
    let mut offsets = [0usize; 32];
    let mut i = 0;
    while i < words.len() {
        let Some(off) = anchor_of(words[i]) else {
            return None;
        };
        offsets[i] = off;
        let b = words[i][off];
        let mut j = 0;
        while j < distinct && bytes[j] != b {
            j += 1;
        }
        if j == distinct {
            if distinct == 3 {
                return None;
            }
            bytes[distinct] = b;
            distinct += 1;
        }
        i += 1;
    }
    if distinct == 0 {
        return None;
    }
    let mut k = distinct;
    while k < 3 {
        bytes[k] = bytes[0];
        k += 1;
    }
    Some(Anchors { bytes, offsets })
}

impl WordSet {
    /// The set of `words` (an empty word is ignored).
    ///
    /// # Panics
    /// With more than 32 words; a `const` set fails to compile instead.
    pub const fn new(words: &'static [&'static [u8]]) -> WordSet {
        assert!(words.len() <= 32, "a WordSet holds at most 32 words");
        let mut first = [0u32; 256];
        let mut pairs = [0u64; 1024];
        let mut i = 0;
        while i < words.len() {
            let w = words[i];
            if let Some(&b) = w.first() {
                first[b.to_ascii_lowercase() as usize] |= 1 << i;
                first[b.to_ascii_uppercase() as usize] |= 1 << i;
                if w.len() == 1 {
                    let mut next = 0;
                    while next < 256 {
                        set_bit(&mut pairs, pair_index(b.to_ascii_lowercase(), next as u8));
                        set_bit(&mut pairs, pair_index(b.to_ascii_uppercase(), next as u8));
                        next += 1;
                    }
                } else {
                    let cases = [
                        (w[0].to_ascii_lowercase(), w[1].to_ascii_lowercase()),
                        (w[0].to_ascii_lowercase(), w[1].to_ascii_uppercase()),
                        (w[0].to_ascii_uppercase(), w[1].to_ascii_lowercase()),
                        (w[0].to_ascii_uppercase(), w[1].to_ascii_uppercase()),
                    ];
                    let mut c = 0;
                    while c < cases.len() {
                        set_bit(&mut pairs, pair_index(cases[c].0, cases[c].1));
                        c += 1;
                    }
                }
            }
            i += 1;
        }
        WordSet {
            words,
            first,
            pairs,
            anchors: anchors(words),
        }
    }

    /// Whether any of the words occurs in `text`, ignoring ASCII case. One pass over the text,
    /// one table lookup per pair of bytes, that compares words only where a pair starts one:
    /// comparing every word at every offset cost ~12,000 instructions for a MySQL point select,
    /// and where the first byte alone matched ~1,200 (callgrind, docs/benchmarks.md).
    pub fn occurs_in(&self, text: &[u8]) -> bool {
        if let Some(a) = &self.anchors {
            return self.occurs_around_anchors(a, text);
        }
        let after = text.get(1..).unwrap_or_default();
        for (i, (&b, &next)) in text.iter().zip(after).enumerate() {
            let pair = pair_index(b, next);
            if self.pairs[pair / 64] >> (pair % 64) & 1 == 1 && self.word_at(text, i) {
                return true;
            }
        }
        // The last byte: only a one-byte word fits there.
        text.len()
            .checked_sub(1)
            .is_some_and(|last| self.word_at(text, last))
    }

    /// Whether one of the words starts at `text[i]`.
    fn word_at(&self, text: &[u8], i: usize) -> bool {
        let Some(&b) = text.get(i) else {
            return false;
        };
        let mut candidates = self.first[b as usize];
        while candidates != 0 {
            let w = self.words[candidates.trailing_zeros() as usize];
            candidates &= candidates - 1;
            if text
                .get(i..i + w.len())
                .is_some_and(|t| t.eq_ignore_ascii_case(w))
            {
                return true;
            }
        }
        false
    }

    /// [`WordSet::occurs_in`] for a set with anchors: each word is compared where its anchor
    /// byte could sit.
    fn occurs_around_anchors(&self, a: &Anchors, text: &[u8]) -> bool {
        let [b0, b1, b2] = a.bytes;
        memchr::memchr3_iter(b0, b1, b2, text).any(|at| {
            self.words.iter().zip(a.offsets).any(|(w, off)| {
                w[off] == text[at]
                    && at
                        .checked_sub(off)
                        .and_then(|start| text.get(start..start + w.len()))
                        .is_some_and(|t| t.eq_ignore_ascii_case(w))
            })
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const SET: WordSet = WordSet::new(&[b"set", b"found_rows", b"@", b"x"]);
    /// Every word has a non-letter: searched by `_`, `@` and `2`.
    const ANCHORED: WordSet = WordSet::new(&[b"advisory_", b"set_config", b"@x", b"utf2"]);

    /// The definition: any word at any offset, in any case.
    fn by_definition(words: &[&[u8]], text: &[u8]) -> bool {
        words
            .iter()
            .any(|w| !w.is_empty() && text.windows(w.len()).any(|t| t.eq_ignore_ascii_case(w)))
    }

    #[test]
    fn words_are_found_in_any_case_anywhere() {
        for hit in [
            "SET a=1",
            "select SQL_CALC_FOUND_ROWS 1",
            "@v",
            "reset",
            "offSet",
        ] {
            assert!(SET.occurs_in(hit.as_bytes()), "{hit}");
        }
        for miss in ["SELECT c FROM sbtest1 WHERE id=5000", "", "se", "found_row"] {
            assert!(!SET.occurs_in(miss.as_bytes()), "{miss}");
        }
    }

    #[test]
    fn sets_whose_words_all_hold_a_non_letter_are_searched_by_those_bytes() {
        assert!(SET.anchors.is_none(), "\"set\" is all letters");
        let a = ANCHORED.anchors.expect("anchored");
        assert_eq!(a.bytes, [b'_', b'@', b'2']);
        assert_eq!(a.offsets[..4], [8, 3, 0, 3]);
        assert!(
            WordSet::new(&[b"a_", b"b@", b"c1", b"d("])
                .anchors
                .is_none(),
            "four bytes"
        );
        for hit in [
            "SELECT pg_advisory_lock(1)",
            "select SET_CONFIG('a', 'b', false)",
            "@x",
            "UTF2",
            "x advisory_",
        ] {
            assert!(ANCHORED.occurs_in(hit.as_bytes()), "{hit}");
        }
        for miss in [
            "SELECT abalance FROM pgbench_accounts WHERE aid = 5",
            "",
            "_",
            "dvisory_",
            "set config",
            "@",
            "tf2",
        ] {
            assert!(!ANCHORED.occurs_in(miss.as_bytes()), "{miss}");
        }
    }

    proptest! {
        #[test]
        fn the_scan_agrees_with_its_definition(
            parts in proptest::collection::vec(
                prop_oneof![
                    Just("SeT".to_string()),
                    Just("found_ROWS".to_string()),
                    Just("@".to_string()),
                    Just("X".to_string()),
                    "[a-zA-Z_@ =0-9]{0,12}",
                ],
                0..8,
            )
        ) {
            let text = parts.concat();
            prop_assert_eq!(
                SET.occurs_in(text.as_bytes()),
                by_definition(&[b"set", b"found_rows", b"@", b"x"], text.as_bytes())
            );
        }

        #[test]
        fn the_anchored_search_agrees_with_its_definition(
            parts in proptest::collection::vec(
                prop_oneof![
                    Just("AdVisory_".to_string()),
                    Just("set_CONFIG".to_string()),
                    Just("@X".to_string()),
                    Just("utf2".to_string()),
                    "[a-zA-Z_@ =0-9(]{0,12}",
                ],
                0..8,
            )
        ) {
            let text = parts.concat();
            prop_assert_eq!(
                ANCHORED.occurs_in(text.as_bytes()),
                by_definition(&[b"advisory_", b"set_config", b"@x", b"utf2"], text.as_bytes())
            );
        }
    }
}

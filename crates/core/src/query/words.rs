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
}

impl WordSet {
    /// The set of `words` (an empty word is ignored).
    ///
    /// # Panics
    /// With more than 32 words; a `const` set fails to compile instead.
    pub const fn new(words: &'static [&'static [u8]]) -> WordSet {
        assert!(words.len() <= 32, "a WordSet holds at most 32 words");
        let mut first = [0u32; 256];
        let mut i = 0;
        while i < words.len() {
            if let Some(&b) = words[i].first() {
                first[b.to_ascii_lowercase() as usize] |= 1 << i;
                first[b.to_ascii_uppercase() as usize] |= 1 << i;
            }
            i += 1;
        }
        WordSet { words, first }
    }

    /// Whether any of the words occurs in `text`, ignoring ASCII case. One pass over the text
    /// that compares a word only where its first byte is: comparing every word at every
    /// offset cost ~12,000 instructions for a MySQL point select (callgrind,
    /// docs/benchmarks.md).
    pub fn occurs_in(&self, text: &[u8]) -> bool {
        for (i, &b) in text.iter().enumerate() {
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
        }
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const SET: WordSet = WordSet::new(&[b"set", b"found_rows", b"@", b"x"]);

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
    }
}

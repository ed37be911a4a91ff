//! Finding any of a few words in a statement's text, in any case, without tokenizing it: the
//! sessions use it on every statement to skip their state trackers when nothing in the text
//! could concern them.

/// A fixed set of ASCII words to look for anywhere in a text (inside other words too: the
/// callers treat a hit as "look closer", so a false positive costs only that).
#[derive(Debug)]
pub struct WordSet {
    words: &'static [&'static [u8]],
    /// Bytes a word starts with, either case: only at those offsets are words compared.
    starts: [bool; 256],
}

impl WordSet {
    /// The set of `words` (each non-empty; an empty word is ignored).
    pub const fn new(words: &'static [&'static [u8]]) -> WordSet {
        let mut starts = [false; 256];
        let mut i = 0;
        while i < words.len() {
            if let Some(&b) = words[i].first() {
                starts[b.to_ascii_lowercase() as usize] = true;
                starts[b.to_ascii_uppercase() as usize] = true;
            }
            i += 1;
        }
        WordSet { words, starts }
    }

    /// Whether any of the words occurs in `text`, ignoring ASCII case. One pass over the text
    /// that compares words only where one could start: comparing every word at every offset
    /// cost ~12,000 instructions for a MySQL point select (callgrind, docs/benchmarks.md).
    pub fn occurs_in(&self, text: &[u8]) -> bool {
        text.iter().enumerate().any(|(i, &b)| {
            self.starts[b as usize]
                && self.words.iter().any(|w| {
                    !w.is_empty()
                        && text
                            .get(i..i + w.len())
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

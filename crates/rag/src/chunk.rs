//! Splitting a document's text into chunks: sizes in characters (never bytes, so no UTF-8
//! sequence is cut), an overlap between neighbours, and a tail shorter than the minimum merged
//! into the chunk before it. Cuts prefer a paragraph, then a line, then a sentence, then a word
//! boundary in the last fifth of the window.

/// How a source's text is cut.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Chunking {
    /// Characters per chunk at most (before a merged tail).
    pub size: usize,
    /// Characters each chunk repeats from the end of the one before.
    pub overlap: usize,
    /// A last chunk shorter than this is merged into the one before.
    pub min: usize,
}

impl Default for Chunking {
    fn default() -> Self {
        Chunking {
            size: 1000,
            overlap: 150,
            min: 200,
        }
    }
}

/// The chunks of `text` (none for blank text).
pub fn chunks(text: &str, c: Chunking) -> Vec<String> {
    let chars: Vec<(usize, char)> = text.char_indices().collect();
    let n = chars.len();
    if text.trim().is_empty() {
        return Vec::new();
    }
    let size = c.size.max(1);
    let overlap = c.overlap.min(size / 2);
    let at = |i: usize| if i >= n { text.len() } else { chars[i].0 };
    let mut out: Vec<(usize, usize)> = Vec::new();
    let mut start = 0;
    while start < n {
        let mut end = (start + size).min(n);
        if end < n {
            end = boundary(&chars, start, end);
        }
        out.push((start, end));
        if end >= n {
            break;
        }
        start = end.saturating_sub(overlap).max(start + 1);
    }
    if out.len() > 1
        && let Some(&(s, e)) = out.last()
        && e - s < c.min
    {
        out.pop();
        if let Some(prev) = out.last_mut() {
            prev.1 = e;
        }
    }
    out.into_iter()
        .map(|(s, e)| text[at(s)..at(e)].trim().to_string())
        .filter(|s| !s.is_empty())
        .collect()
}

/// Where to cut a window `[start, end)`: after the last paragraph break, line break, sentence
/// end or space in its last fifth, else at `end`.
fn boundary(chars: &[(usize, char)], start: usize, end: usize) -> usize {
    let floor = end - (end - start) / 5;
    let window = &chars[floor..end];
    let last = |pred: &dyn Fn(usize) -> bool| {
        (0..window.len())
            .rev()
            .find(|&i| pred(i))
            .map(|i| floor + i + 1)
    };
    let ch = |i: usize| window[i].1;
    last(&|i| ch(i) == '\n' && i > 0 && ch(i - 1) == '\n')
        .or_else(|| last(&|i| ch(i) == '\n'))
        .or_else(|| {
            last(&|i| {
                matches!(ch(i), '.' | '!' | '?')
                    && window.get(i + 1).is_some_and(|c| c.1.is_whitespace())
            })
        })
        .or_else(|| last(&|i| ch(i).is_whitespace()))
        .unwrap_or(end)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn short_text_is_one_chunk_and_blank_text_none() {
        assert_eq!(chunks("hello", Chunking::default()), vec!["hello"]);
        assert!(chunks("  \n ", Chunking::default()).is_empty());
    }

    #[test]
    fn cuts_prefer_sentences_and_overlap() {
        let text = "One sentence here. Another one follows. And a third one ends it.";
        let c = Chunking {
            size: 40,
            overlap: 10,
            min: 5,
        };
        let got = chunks(text, c);
        assert_eq!(got[0], "One sentence here. Another one follows.");
        assert!(got.len() >= 2);
        assert!(got[1].ends_with("ends it."));
    }

    #[test]
    fn a_short_tail_is_merged() {
        let text = format!("{} tail", "a".repeat(100));
        let c = Chunking {
            size: 100,
            overlap: 0,
            min: 20,
        };
        assert_eq!(chunks(&text, c), vec![text.clone()]);
    }

    #[test]
    fn multibyte_text_is_cut_on_characters() {
        let text = "ü".repeat(250);
        let c = Chunking {
            size: 100,
            overlap: 10,
            min: 10,
        };
        let got = chunks(&text, c);
        assert!(got.iter().all(|s| s.chars().count() <= 100));
        assert_eq!(got[0].chars().count(), 100);
    }

    proptest! {
        #[test]
        fn every_character_is_in_some_chunk(text in "\\PC{0,600}", size in 1usize..80, overlap in 0usize..40, min in 0usize..40) {
            let c = Chunking { size, overlap, min };
            let got = chunks(&text, c);
            // Each chunk is a piece of the text, within size (plus a merged tail).
            for s in &got {
                prop_assert!(text.contains(s.as_str()));
                prop_assert!(s.chars().count() <= size + min);
            }
            // Nothing but whitespace is lost: every non-space character's count is covered.
            let kept: usize = got.iter().map(|s| s.chars().filter(|c| !c.is_whitespace()).count()).sum();
            let total = text.chars().filter(|c| !c.is_whitespace()).count();
            prop_assert!(kept >= total);
        }
    }
}

//! Combining the text and vector legs of a hybrid search: reciprocal rank fusion
//! (`weight / (k0 + rank)` summed over the legs a chunk appears in), and the reranking of text
//! candidates by their vectors' similarity to the query.

use crate::embed::cosine;
use crate::index::Hit;
use std::collections::HashMap;

/// One leg of a fusion: its hits in rank order and its weight.
#[derive(Debug, Clone, Copy)]
pub struct Leg<'a> {
    /// Hits, best first.
    pub hits: &'a [Hit],
    /// The leg's weight.
    pub weight: f64,
}

/// Reciprocal rank fusion of `legs` with constant `k0`; the `k` best, scores the fused ones.
pub fn rrf(legs: &[Leg<'_>], k0: f64, k: usize) -> Vec<Hit> {
    let mut fused: HashMap<&str, (f64, &Hit)> = HashMap::new();
    for leg in legs {
        for (rank, h) in leg.hits.iter().enumerate() {
            let s = leg.weight / (k0 + (rank + 1) as f64);
            fused
                .entry(h.chunk_id.as_str())
                .and_modify(|e| e.0 += s)
                .or_insert((s, h));
        }
    }
    let mut out: Vec<Hit> = fused
        .into_values()
        .map(|(s, h)| Hit {
            score: s,
            ..h.clone()
        })
        .collect();
    out.sort_by(|a, b| {
        b.score
            .total_cmp(&a.score)
            .then_with(|| a.chunk_id.cmp(&b.chunk_id))
    });
    out.truncate(k);
    out
}

/// `candidates` ordered by the cosine similarity of their vectors (by index row) to `query`;
/// the `k` best. Candidates without a vector are left out.
pub fn rerank(
    candidates: Vec<Hit>,
    vectors: &HashMap<i64, Vec<f32>>,
    query: &[f32],
    k: usize,
) -> Vec<Hit> {
    let mut out: Vec<Hit> = candidates
        .into_iter()
        .filter_map(|h| {
            let v = vectors.get(&h.rowid)?;
            Some(Hit {
                score: f64::from(cosine(v, query)),
                ..h
            })
        })
        .collect();
    out.sort_by(|a, b| b.score.total_cmp(&a.score));
    out.truncate(k);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hit(id: &str) -> Hit {
        Hit {
            chunk_id: id.into(),
            doc_id: id.into(),
            source_id: 1,
            title: String::new(),
            body: String::new(),
            metadata: serde_json::Value::Null,
            score: 0.0,
            rowid: 0,
        }
    }

    #[test]
    fn a_chunk_in_both_legs_wins() {
        let fts = [hit("a"), hit("b"), hit("c")];
        let vec = [hit("c"), hit("d")];
        let got = rrf(
            &[
                Leg {
                    hits: &fts,
                    weight: 1.0,
                },
                Leg {
                    hits: &vec,
                    weight: 1.0,
                },
            ],
            60.0,
            3,
        );
        assert_eq!(got[0].chunk_id, "c");
        assert!((got[0].score - (1.0 / 63.0 + 1.0 / 61.0)).abs() < 1e-12);
        assert_eq!(got.len(), 3);
        assert_eq!(got[1].chunk_id, "a");
    }

    #[test]
    fn weights_move_a_leg_up() {
        let fts = [hit("a")];
        let vec = [hit("b")];
        let got = rrf(
            &[
                Leg {
                    hits: &fts,
                    weight: 1.0,
                },
                Leg {
                    hits: &vec,
                    weight: 2.0,
                },
            ],
            60.0,
            2,
        );
        assert_eq!(got[0].chunk_id, "b");
    }
}

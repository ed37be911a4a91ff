//! `catalog.search` by meaning: each catalog object's text — its name, comment and columns, what
//! the text search indexes — embedded with the model of the `rag_sources` row that
//! `mcp-catalog_embedding_source` names, kept in the catalog store by content hash (an object
//! is embedded again only when a harvest changed its text, or the model changed), and ranked by
//! cosine similarity to the query. `hybrid` fuses that ranking with the text search's by
//! reciprocal rank fusion.

use super::store::{Hit, Store, err};
use crate::Error;
use sluice_rag::embed::{Embedder, Role, cosine};
use sqlx::Row;
use std::collections::HashMap;

/// Objects embedded per model call.
const EMBED_BATCH: usize = 32;
/// The snippet of a semantic hit: the start of the object's text.
const SNIPPET_CHARS: usize = 160;
/// RRF's constant for `hybrid` (as `rag.search_hybrid`'s default).
const RRF_K0: f64 = 60.0;

/// How `catalog.search` ranks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub(crate) enum SearchMode {
    /// Full-text search (FTS5, BM25), the default.
    #[default]
    Fts,
    /// By meaning: the objects' embeddings nearest the query's.
    Semantic,
    /// Both, fused by reciprocal rank.
    Hybrid,
}

/// An object's text as the search sees it.
struct ObjectText {
    target_id: String,
    object_key: String,
    text: String,
    hash: String,
}

fn text_hash(model: &str, text: &str) -> String {
    sluice_rag::content_hash(&[model, text])
}

fn to_blob(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

fn from_blob(b: &[u8]) -> Vec<f32> {
    b.chunks_exact(4)
        .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect()
}

impl Store {
    /// Every object of `target` (all targets when `None`) with its indexed text.
    async fn object_texts(
        &self,
        target: Option<&str>,
        model: &str,
    ) -> Result<Vec<ObjectText>, Error> {
        let mut c = self.conn.lock().await;
        let rows = sqlx::query(
            "SELECT target_id, object_key, name, comment, columns FROM fts_objects \
             WHERE ?1 IS NULL OR target_id = ?1",
        )
        .bind(target)
        .fetch_all(&mut *c)
        .await
        .map_err(err)?;
        Ok(rows
            .iter()
            .map(|r| {
                let parts: [String; 3] = [r.get(2), r.get(3), r.get(4)];
                let text = parts
                    .iter()
                    .filter(|p| !p.is_empty())
                    .cloned()
                    .collect::<Vec<_>>()
                    .join(". ");
                ObjectText {
                    target_id: r.get(0),
                    object_key: r.get(1),
                    hash: text_hash(model, &text),
                    text,
                }
            })
            .collect())
    }

    /// The stored vectors: (target, key) → (hash, vector).
    async fn object_vectors(&self) -> Result<HashMap<(String, String), (String, Vec<f32>)>, Error> {
        let mut c = self.conn.lock().await;
        let rows =
            sqlx::query("SELECT target_id, object_key, text_hash, vector FROM object_vectors")
                .fetch_all(&mut *c)
                .await
                .map_err(err)?;
        Ok(rows
            .iter()
            .map(|r| {
                let blob: Vec<u8> = r.get(3);
                ((r.get(0), r.get(1)), (r.get(2), from_blob(&blob)))
            })
            .collect())
    }

    /// Stores the vectors of `objects` (replacing older ones).
    async fn put_object_vectors(&self, objects: &[(&ObjectText, Vec<f32>)]) -> Result<(), Error> {
        let mut c = self.conn.lock().await;
        for (o, v) in objects {
            sqlx::query(
                "INSERT OR REPLACE INTO object_vectors (target_id, object_key, text_hash, vector) \
                 VALUES (?1, ?2, ?3, ?4)",
            )
            .bind(&o.target_id)
            .bind(&o.object_key)
            .bind(&o.hash)
            .bind(to_blob(v))
            .execute(&mut *c)
            .await
            .map_err(err)?;
        }
        Ok(())
    }

    /// The `limit` objects (of `target`, or all) nearest `query` in meaning, embedding first
    /// those whose text or model changed since they were last embedded.
    pub(crate) async fn search_semantic(
        &self,
        embedder: &Embedder,
        target: Option<&str>,
        query: &str,
        limit: u32,
    ) -> Result<Vec<Hit>, Error> {
        let model = embedder.describe();
        let objects = self.object_texts(target, &model).await?;
        let mut vectors = self.object_vectors().await?;
        let stale: Vec<&ObjectText> = objects
            .iter()
            .filter(|o| {
                vectors
                    .get(&(o.target_id.clone(), o.object_key.clone()))
                    .is_none_or(|(hash, _)| *hash != o.hash)
            })
            .collect();
        for batch in stale.chunks(EMBED_BATCH) {
            let texts: Vec<String> = batch.iter().map(|o| o.text.clone()).collect();
            let embedded = embedder.embed(&texts, Role::Passage).await?;
            let pairs: Vec<(&ObjectText, Vec<f32>)> = batch.iter().copied().zip(embedded).collect();
            self.put_object_vectors(&pairs).await?;
            for (o, v) in pairs {
                vectors.insert(
                    (o.target_id.clone(), o.object_key.clone()),
                    (o.hash.clone(), v),
                );
            }
        }
        if !stale.is_empty() {
            tracing::info!(objects = stale.len(), model = %model,
                "MCP catalog: embedded the catalog objects new or changed since the last semantic search");
        }
        let q = embedder
            .embed(&[query.to_string()], Role::Query)
            .await?
            .pop()
            .unwrap_or_default();
        let mut scored: Vec<(f32, &ObjectText)> = objects
            .iter()
            .filter_map(|o| {
                let (_, v) = vectors.get(&(o.target_id.clone(), o.object_key.clone()))?;
                Some((cosine(v, &q), o))
            })
            .collect();
        scored.sort_by(|a, b| {
            b.0.total_cmp(&a.0)
                .then_with(|| a.1.object_key.cmp(&b.1.object_key))
        });
        Ok(scored
            .into_iter()
            .take(limit as usize)
            .map(|(_, o)| Hit {
                target_id: o.target_id.clone(),
                object_key: o.object_key.clone(),
                snippet: o.text.chars().take(SNIPPET_CHARS).collect(),
            })
            .collect())
    }
}

/// Reciprocal rank fusion of the text and semantic rankings (equal weights), the `limit` best;
/// a hit found by both keeps the text search's snippet (its terms marked).
pub(crate) fn fuse(text: Vec<Hit>, semantic: Vec<Hit>, limit: u32) -> Vec<Hit> {
    let mut fused: Vec<(f64, Hit)> = Vec::new();
    for leg in [text, semantic] {
        for (rank, h) in leg.into_iter().enumerate() {
            let s = 1.0 / (RRF_K0 + (rank + 1) as f64);
            match fused
                .iter_mut()
                .find(|(_, f)| f.target_id == h.target_id && f.object_key == h.object_key)
            {
                Some(f) => f.0 += s,
                None => fused.push((s, h)),
            }
        }
    }
    fused.sort_by(|a, b| {
        b.0.total_cmp(&a.0)
            .then_with(|| a.1.object_key.cmp(&b.1.object_key))
    });
    fused
        .into_iter()
        .take(limit as usize)
        .map(|(_, h)| h)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hit(key: &str) -> Hit {
        Hit {
            target_id: "t".into(),
            object_key: key.into(),
            snippet: key.into(),
        }
    }

    #[test]
    fn fusion_ranks_what_both_legs_found_first() {
        let text = vec![hit("a.orders"), hit("a.customers")];
        let semantic = vec![hit("a.invoices"), hit("a.customers"), hit("a.orders")];
        let keys: Vec<String> = fuse(text, semantic, 10)
            .into_iter()
            .map(|h| h.object_key)
            .collect();
        assert_eq!(keys, ["a.orders", "a.customers", "a.invoices"]);
        assert_eq!(fuse(vec![hit("x")], vec![hit("y")], 1).len(), 1);
    }

    #[test]
    fn vectors_round_trip_through_their_blob() {
        let v = vec![0.25f32, -1.5, 3.0];
        assert_eq!(from_blob(&to_blob(&v)), v);
        assert_ne!(text_hash("m1", "x"), text_hash("m2", "x"));
    }
}

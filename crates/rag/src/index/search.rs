//! Reading the index: full-text search (FTS5, BM25), vector search (sqlite-vec KNN), the
//! chunks' stored vectors for reranking, chunks and documents by id. Filters on sources and
//! metadata are bound parameters.

use super::{Index, vec_table};
use crate::Error;
use serde::Serialize;
use serde_json::Value;
use sqlx::AssertSqlSafe;
use sqlx::sqlite::{SqliteArguments, SqliteRow};
use sqlx::{Arguments, Row};
use std::collections::HashMap;

/// What a search may return.
#[derive(Debug, Clone, Default)]
pub struct SearchFilter {
    /// Only these sources (empty: all).
    pub source_ids: Vec<u32>,
    /// Only chunks whose metadata has these values (`key` = value).
    pub metadata: Vec<(String, Value)>,
}

/// A chunk found.
#[derive(Debug, Clone, Serialize)]
pub struct Hit {
    /// `<doc_id>#<index>`.
    pub chunk_id: String,
    /// `<source_id>:<primary key>`.
    pub doc_id: String,
    /// The source.
    pub source_id: u32,
    /// The document's title.
    pub title: String,
    /// The chunk's text.
    pub body: String,
    /// The document's metadata.
    pub metadata: Value,
    /// Higher is better: -BM25 for text, cosine similarity for vectors, the fused score for
    /// hybrid.
    pub score: f64,
    /// The chunk's row in the index (for reranking).
    #[serde(skip)]
    pub rowid: i64,
}

/// A document by id.
#[derive(Debug, Clone, Serialize)]
pub struct Doc {
    /// Its id.
    pub doc_id: String,
    /// The source.
    pub source_id: u32,
    /// The source row's primary key.
    pub pk: Value,
    /// Title.
    pub title: String,
    /// The whole text.
    pub body: String,
    /// Metadata.
    pub metadata: Value,
}

const HIT_COLUMNS: &str =
    "c.chunk_id, c.doc_id, c.source_id, c.title, c.body, c.metadata_json, c.chunk_rowid";

fn hit(r: &SqliteRow, score: f64) -> Hit {
    Hit {
        chunk_id: r.get(0),
        doc_id: r.get(1),
        source_id: r.get::<i64, _>(2) as u32,
        title: r.get(3),
        body: r.get(4),
        metadata: serde_json::from_str(&r.get::<String, _>(5)).unwrap_or(Value::Null),
        score,
        rowid: r.get(6),
    }
}

/// The filter's SQL (` AND …`) with its values bound into `args`.
fn filter_sql(f: &SearchFilter, args: &mut SqliteArguments) -> Result<String, Error> {
    let bad = |e: sqlx::error::BoxDynError| Error::Arguments(e.to_string());
    let mut sql = String::new();
    if !f.source_ids.is_empty() {
        sql.push_str(" AND c.source_id IN (");
        for (i, id) in f.source_ids.iter().enumerate() {
            sql.push_str(if i == 0 { "?" } else { ", ?" });
            args.add(*id).map_err(bad)?;
        }
        sql.push(')');
    }
    for (key, value) in &f.metadata {
        sql.push_str(" AND json_extract(c.metadata_json, ?) = ?");
        args.add(format!("$.\"{}\"", key.replace('"', "")))
            .map_err(bad)?;
        match value {
            Value::Bool(b) => args.add(i64::from(*b)),
            Value::Number(n) if n.is_i64() => args.add(n.as_i64().unwrap_or(0)),
            Value::Number(n) => args.add(n.as_f64().unwrap_or(0.0)),
            Value::String(s) => args.add(s.clone()),
            other => {
                return Err(Error::Arguments(format!(
                    "metadata filter {key:?}: {other} is not a string, number or boolean"
                )));
            }
        }
        .map_err(bad)?;
    }
    Ok(sql)
}

/// Every term of `q` quoted, so FTS5 operators in an agent's text cannot change the query.
pub fn fts_query(q: &str) -> String {
    q.split(|c: char| !c.is_alphanumeric() && c != '_')
        .filter(|t| !t.is_empty())
        .map(|t| format!("\"{t}\""))
        .collect::<Vec<_>>()
        .join(" OR ")
}

fn blob_to_vec(b: &[u8]) -> Vec<f32> {
    b.chunks_exact(4)
        .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect()
}

impl Index {
    /// The `k` chunks best matching `query`'s words (BM25), filtered.
    pub async fn search_fts(
        &self,
        query: &str,
        filter: &SearchFilter,
        k: usize,
    ) -> Result<Vec<Hit>, Error> {
        let q = fts_query(query);
        if q.is_empty() {
            return Ok(Vec::new());
        }
        let mut args = SqliteArguments::default();
        args.add(q).map_err(|e| Error::Arguments(e.to_string()))?;
        let filters = filter_sql(filter, &mut args)?;
        args.add(k as i64)
            .map_err(|e| Error::Arguments(e.to_string()))?;
        let sql = format!(
            "SELECT {HIT_COLUMNS}, bm25(rag_fts_chunks) AS rank FROM rag_fts_chunks \
             JOIN rag_chunks c ON c.chunk_rowid = rag_fts_chunks.rowid \
             WHERE rag_fts_chunks MATCH ?{filters} ORDER BY rank LIMIT ?"
        );
        let mut c = self.conn.lock().await;
        let rows = sqlx::query_with(AssertSqlSafe(sql), args)
            .fetch_all(&mut *c)
            .await?;
        Ok(rows.iter().map(|r| hit(r, -r.get::<f64, _>(7))).collect())
    }

    /// The `k` chunks of `source_id` nearest `vector` (normalised), among its `candidates`
    /// nearest when a filter applies; scores are cosine similarities.
    pub async fn search_vector(
        &self,
        source_id: u32,
        vector: &[f32],
        filter: &SearchFilter,
        k: usize,
        candidates: usize,
    ) -> Result<Vec<Hit>, Error> {
        let bad = |e: sqlx::error::BoxDynError| Error::Arguments(e.to_string());
        let mut args = SqliteArguments::default();
        let blob: Vec<u8> = vector.iter().flat_map(|x| x.to_le_bytes()).collect();
        args.add(blob).map_err(bad)?;
        let filtered = !filter.metadata.is_empty();
        args.add(if filtered { candidates.max(k) } else { k } as i64)
            .map_err(bad)?;
        let filters = filter_sql(filter, &mut args)?;
        args.add(k as i64).map_err(bad)?;
        let sql = format!(
            "WITH knn AS (SELECT rowid, distance FROM {} WHERE embedding MATCH ? AND k = ?) \
             SELECT {HIT_COLUMNS}, knn.distance FROM knn JOIN rag_chunks c ON c.chunk_rowid = knn.rowid \
             WHERE 1{filters} ORDER BY knn.distance LIMIT ?",
            vec_table(source_id)
        );
        let mut c = self.conn.lock().await;
        let rows = sqlx::query_with(AssertSqlSafe(sql), args)
            .fetch_all(&mut *c)
            .await?;
        Ok(rows
            .iter()
            .map(|r| {
                let d = r.get::<f64, _>(7);
                hit(r, 1.0 - d * d / 2.0)
            })
            .collect())
    }

    /// The stored vectors of chunks (by index row) of `source_id`.
    pub async fn vectors(
        &self,
        source_id: u32,
        rowids: &[i64],
    ) -> Result<HashMap<i64, Vec<f32>>, Error> {
        let mut c = self.conn.lock().await;
        let sql = format!(
            "SELECT embedding FROM {} WHERE rowid = ?1",
            vec_table(source_id)
        );
        let mut out = HashMap::new();
        for &r in rowids {
            let b: Option<Vec<u8>> = sqlx::query_scalar(AssertSqlSafe(sql.as_str()))
                .bind(r)
                .fetch_optional(&mut *c)
                .await?;
            if let Some(b) = b {
                out.insert(r, blob_to_vec(&b));
            }
        }
        Ok(out)
    }

    /// Chunks by id, in the order asked (missing ones left out).
    pub async fn chunks_by_id(&self, ids: &[String]) -> Result<Vec<Hit>, Error> {
        let mut c = self.conn.lock().await;
        let mut out = Vec::new();
        for id in ids {
            let row = sqlx::query(AssertSqlSafe(format!(
                "SELECT {HIT_COLUMNS} FROM rag_chunks c WHERE c.chunk_id = ?1"
            )))
            .bind(id)
            .fetch_optional(&mut *c)
            .await?;
            if let Some(r) = row {
                out.push(hit(&r, 0.0));
            }
        }
        Ok(out)
    }

    /// Documents by id, in the order asked (missing ones left out).
    pub async fn docs_by_id(&self, ids: &[String]) -> Result<Vec<Doc>, Error> {
        let mut c = self.conn.lock().await;
        let mut out = Vec::new();
        for id in ids {
            let row = sqlx::query(
                "SELECT doc_id, source_id, pk_json, title, body, metadata_json FROM rag_documents WHERE doc_id = ?1",
            )
            .bind(id)
            .fetch_optional(&mut *c)
            .await?;
            if let Some(r) = row {
                out.push(Doc {
                    doc_id: r.get(0),
                    source_id: r.get::<i64, _>(1) as u32,
                    pk: serde_json::from_str(&r.get::<String, _>(2)).unwrap_or(Value::Null),
                    title: r.get(3),
                    body: r.get(4),
                    metadata: serde_json::from_str(&r.get::<String, _>(5)).unwrap_or(Value::Null),
                });
            }
        }
        Ok(out)
    }

    /// The sources with a vector table: (source id, dimension, model).
    pub async fn vector_spaces(&self) -> Result<Vec<(u32, usize, String)>, Error> {
        let mut c = self.conn.lock().await;
        let rows = sqlx::query(
            "SELECT source_id, dimension, model FROM rag_vector_spaces ORDER BY source_id",
        )
        .fetch_all(&mut *c)
        .await?;
        Ok(rows
            .iter()
            .map(|r| {
                (
                    r.get::<i64, _>(0) as u32,
                    r.get::<i64, _>(1) as usize,
                    r.get(2),
                )
            })
            .collect())
    }
}

//! Writing the index: a batch of documents with their chunks, vectors and the sync cursor in
//! one transaction; the sweep that removes documents gone from the source.

use super::{Index, now, vec_table};
use crate::Error;
use sqlx::AssertSqlSafe;
use sqlx::{Row, SqliteConnection};
use std::collections::HashMap;

/// A document as the sync built it.
#[derive(Debug, Clone)]
pub struct DocRow {
    /// `<source_id>:<primary key>`.
    pub doc_id: String,
    /// The primary key as JSON.
    pub pk_json: String,
    /// Its title (may be empty).
    pub title: String,
    /// Its text.
    pub body: String,
    /// Its metadata columns as a JSON object.
    pub metadata_json: String,
    /// SHA-256 of title, body and metadata.
    pub content_hash: String,
    /// The change column's value.
    pub change_value: Option<String>,
    /// Its chunks, in order.
    pub chunks: Vec<ChunkRow>,
}

/// A chunk as the sync built it.
#[derive(Debug, Clone)]
pub struct ChunkRow {
    /// `<doc_id>#<index>`.
    pub chunk_id: String,
    /// Its place in the document.
    pub index: u32,
    /// SHA-256 of what was embedded.
    pub content_hash: String,
    /// Its text.
    pub body: String,
    /// Its vector; `None` when the index already holds this chunk with the same hash.
    pub vector: Option<Vec<f32>>,
}

/// Where a source's sync stands.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SyncState {
    /// The last (change value, primary key) read, as JSON texts.
    pub cursor: Option<(String, String)>,
    /// Runs finished.
    pub runs: u64,
    /// When the last run finished without error (epoch seconds).
    pub last_ok_at: Option<i64>,
    /// The last run's error ('' after a good run).
    pub last_error: String,
    /// When the last complete delete sweep finished (epoch seconds).
    pub last_sweep_at: Option<i64>,
}

fn blob(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

impl Index {
    /// The content hashes the index holds for `doc_ids`.
    pub async fn doc_hashes(&self, doc_ids: &[String]) -> Result<HashMap<String, String>, Error> {
        let mut c = self.conn.lock().await;
        let mut out = HashMap::new();
        for id in doc_ids {
            let h: Option<String> =
                sqlx::query_scalar("SELECT content_hash FROM rag_documents WHERE doc_id = ?1")
                    .bind(id)
                    .fetch_optional(&mut *c)
                    .await?;
            if let Some(h) = h {
                out.insert(id.clone(), h);
            }
        }
        Ok(out)
    }

    /// The content hashes the index holds for the chunks of `doc_id`, by chunk id.
    pub async fn chunk_hashes(&self, doc_id: &str) -> Result<HashMap<String, String>, Error> {
        let mut c = self.conn.lock().await;
        let rows = sqlx::query("SELECT chunk_id, content_hash FROM rag_chunks WHERE doc_id = ?1")
            .bind(doc_id)
            .fetch_all(&mut *c)
            .await?;
        Ok(rows
            .iter()
            .map(|r| (r.get::<String, _>(0), r.get::<String, _>(1)))
            .collect())
    }

    /// Writes `docs` of `source_id` and moves its cursor to `cursor`, all or nothing.
    pub async fn apply_batch(
        &self,
        source_id: u32,
        docs: &[DocRow],
        cursor: Option<&(String, String)>,
    ) -> Result<(), Error> {
        let mut c = self.conn.lock().await;
        let mut tx = sqlx::Connection::begin(&mut *c).await?;
        for d in docs {
            write_doc(&mut tx, source_id, d).await?;
        }
        if let Some((change, pk)) = cursor {
            sqlx::query(
                "INSERT INTO rag_sync_state (source_id, cursor_change, cursor_pk) VALUES (?1, ?2, ?3) \
                 ON CONFLICT (source_id) DO UPDATE SET cursor_change = excluded.cursor_change, cursor_pk = excluded.cursor_pk",
            )
            .bind(source_id)
            .bind(change)
            .bind(pk)
            .execute(&mut *tx)
            .await?;
        }
        tx.commit().await?;
        Ok(())
    }

    /// Where `source_id`'s sync stands.
    pub async fn sync_state(&self, source_id: u32) -> Result<SyncState, Error> {
        let mut c = self.conn.lock().await;
        let row = sqlx::query(
            "SELECT cursor_change, cursor_pk, runs, last_ok_at, last_error, last_sweep_at \
             FROM rag_sync_state WHERE source_id = ?1",
        )
        .bind(source_id)
        .fetch_optional(&mut *c)
        .await?;
        Ok(row
            .map(|r| SyncState {
                cursor: match (r.get::<Option<String>, _>(0), r.get::<Option<String>, _>(1)) {
                    (Some(a), Some(b)) => Some((a, b)),
                    _ => None,
                },
                runs: r.get::<i64, _>(2) as u64,
                last_ok_at: r.get(3),
                last_error: r.get(4),
                last_sweep_at: r.get(5),
            })
            .unwrap_or_default())
    }

    /// Records the end of a run: `error` is `None` for a good one.
    pub async fn finish_run(&self, source_id: u32, error: Option<&str>) -> Result<(), Error> {
        let mut c = self.conn.lock().await;
        sqlx::query(
            "INSERT INTO rag_sync_state (source_id, runs, last_ok_at, last_error) VALUES (?1, 1, ?2, ?3) \
             ON CONFLICT (source_id) DO UPDATE SET runs = runs + 1, \
             last_ok_at = COALESCE(excluded.last_ok_at, last_ok_at), last_error = excluded.last_error",
        )
        .bind(source_id)
        .bind(error.is_none().then(now))
        .bind(error.unwrap_or(""))
        .execute(&mut *c)
        .await?;
        Ok(())
    }

    /// Starts a delete sweep of `source_id`: its generation.
    pub async fn sweep_begin(&self, source_id: u32) -> Result<i64, Error> {
        let mut c = self.conn.lock().await;
        let g: i64 = sqlx::query_scalar(
            "INSERT INTO rag_sync_state (source_id, sweep_generation) VALUES (?1, 1) \
             ON CONFLICT (source_id) DO UPDATE SET sweep_generation = sweep_generation + 1 \
             RETURNING sweep_generation",
        )
        .bind(source_id)
        .fetch_one(&mut *c)
        .await?;
        Ok(g)
    }

    /// Marks the documents of `doc_ids` as still in the source in sweep `generation`.
    pub async fn sweep_mark(&self, generation: i64, doc_ids: &[String]) -> Result<(), Error> {
        let mut c = self.conn.lock().await;
        let mut tx = sqlx::Connection::begin(&mut *c).await?;
        for id in doc_ids {
            sqlx::query("UPDATE rag_documents SET sweep_mark = ?1 WHERE doc_id = ?2")
                .bind(generation)
                .bind(id)
                .execute(&mut *tx)
                .await?;
        }
        tx.commit().await?;
        Ok(())
    }

    /// Ends a complete sweep: deletes the documents of `source_id` not marked in `generation`
    /// (and their chunks and vectors); how many.
    pub async fn sweep_finish(&self, source_id: u32, generation: i64) -> Result<u64, Error> {
        let mut c = self.conn.lock().await;
        let mut tx = sqlx::Connection::begin(&mut *c).await?;
        let gone: Vec<String> = sqlx::query_scalar(
            "SELECT doc_id FROM rag_documents WHERE source_id = ?1 AND sweep_mark < ?2",
        )
        .bind(source_id)
        .bind(generation)
        .fetch_all(&mut *tx)
        .await?;
        for id in &gone {
            delete_doc(&mut tx, source_id, id).await?;
        }
        sqlx::query("UPDATE rag_sync_state SET last_sweep_at = ?2 WHERE source_id = ?1")
            .bind(source_id)
            .bind(now())
            .execute(&mut *tx)
            .await?;
        tx.commit().await?;
        Ok(gone.len() as u64)
    }
}

async fn write_doc(tx: &mut SqliteConnection, source_id: u32, d: &DocRow) -> Result<(), Error> {
    sqlx::query(
        "INSERT INTO rag_documents (doc_id, source_id, pk_json, title, body, metadata_json, content_hash, change_value, synced_at) \
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9) ON CONFLICT (doc_id) DO UPDATE SET pk_json = excluded.pk_json, \
         title = excluded.title, body = excluded.body, metadata_json = excluded.metadata_json, \
         content_hash = excluded.content_hash, change_value = excluded.change_value, synced_at = excluded.synced_at",
    )
    .bind(&d.doc_id)
    .bind(source_id)
    .bind(&d.pk_json)
    .bind(&d.title)
    .bind(&d.body)
    .bind(&d.metadata_json)
    .bind(&d.content_hash)
    .bind(&d.change_value)
    .bind(now())
    .execute(&mut *tx)
    .await?;
    let existing: HashMap<String, i64> =
        sqlx::query("SELECT chunk_id, chunk_rowid FROM rag_chunks WHERE doc_id = ?1")
            .bind(&d.doc_id)
            .fetch_all(&mut *tx)
            .await?
            .iter()
            .map(|r| (r.get::<String, _>(0), r.get::<i64, _>(1)))
            .collect();
    let vecs = vec_table(source_id);
    for ch in &d.chunks {
        let rowid = match existing.get(&ch.chunk_id) {
            Some(&rowid) => {
                sqlx::query(
                    "UPDATE rag_chunks SET chunk_index = ?2, title = ?3, body = ?4, metadata_json = ?5, content_hash = ?6 \
                     WHERE chunk_rowid = ?1",
                )
                .bind(rowid)
                .bind(ch.index)
                .bind(&d.title)
                .bind(&ch.body)
                .bind(&d.metadata_json)
                .bind(&ch.content_hash)
                .execute(&mut *tx)
                .await?;
                rowid
            }
            None => sqlx::query(
                "INSERT INTO rag_chunks (chunk_id, doc_id, source_id, chunk_index, title, body, metadata_json, content_hash) \
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
            )
            .bind(&ch.chunk_id)
            .bind(&d.doc_id)
            .bind(source_id)
            .bind(ch.index)
            .bind(&d.title)
            .bind(&ch.body)
            .bind(&d.metadata_json)
            .bind(&ch.content_hash)
            .execute(&mut *tx)
            .await?
            .last_insert_rowid(),
        };
        sqlx::query("DELETE FROM rag_fts_chunks WHERE rowid = ?1")
            .bind(rowid)
            .execute(&mut *tx)
            .await?;
        sqlx::query("INSERT INTO rag_fts_chunks (rowid, title, body) VALUES (?1, ?2, ?3)")
            .bind(rowid)
            .bind(&d.title)
            .bind(&ch.body)
            .execute(&mut *tx)
            .await?;
        if let Some(v) = &ch.vector {
            sqlx::query(AssertSqlSafe(format!(
                "DELETE FROM {vecs} WHERE rowid = ?1"
            )))
            .bind(rowid)
            .execute(&mut *tx)
            .await?;
            sqlx::query(AssertSqlSafe(format!(
                "INSERT INTO {vecs} (rowid, embedding) VALUES (?1, ?2)"
            )))
            .bind(rowid)
            .bind(blob(v))
            .execute(&mut *tx)
            .await?;
        }
    }
    let keep: std::collections::HashSet<&str> =
        d.chunks.iter().map(|c| c.chunk_id.as_str()).collect();
    for (id, rowid) in &existing {
        if !keep.contains(id.as_str()) {
            delete_chunk(tx, &vecs, *rowid).await?;
        }
    }
    Ok(())
}

async fn delete_chunk(tx: &mut SqliteConnection, vecs: &str, rowid: i64) -> Result<(), Error> {
    for sql in [
        "DELETE FROM rag_chunks WHERE chunk_rowid = ?1".to_string(),
        "DELETE FROM rag_fts_chunks WHERE rowid = ?1".to_string(),
        format!("DELETE FROM {vecs} WHERE rowid = ?1"),
    ] {
        sqlx::query(AssertSqlSafe(sql.as_str()))
            .bind(rowid)
            .execute(&mut *tx)
            .await?;
    }
    Ok(())
}

async fn delete_doc(tx: &mut SqliteConnection, source_id: u32, doc_id: &str) -> Result<(), Error> {
    let rowids: Vec<i64> =
        sqlx::query_scalar("SELECT chunk_rowid FROM rag_chunks WHERE doc_id = ?1")
            .bind(doc_id)
            .fetch_all(&mut *tx)
            .await?;
    let vecs = vec_table(source_id);
    for r in rowids {
        delete_chunk(tx, &vecs, r).await?;
    }
    sqlx::query("DELETE FROM rag_documents WHERE doc_id = ?1")
        .bind(doc_id)
        .execute(&mut *tx)
        .await?;
    Ok(())
}

/// Removes everything of `source_id` (its model changed): documents, chunks, FTS rows, state.
pub(super) async fn forget_source(tx: &mut SqliteConnection, source_id: u32) -> Result<(), Error> {
    sqlx::query(
        "DELETE FROM rag_fts_chunks WHERE rowid IN (SELECT chunk_rowid FROM rag_chunks WHERE source_id = ?1)",
    )
    .bind(source_id)
    .execute(&mut *tx)
    .await?;
    for sql in [
        "DELETE FROM rag_chunks WHERE source_id = ?1",
        "DELETE FROM rag_documents WHERE source_id = ?1",
        "DELETE FROM rag_sync_state WHERE source_id = ?1",
    ] {
        sqlx::query(sql).bind(source_id).execute(&mut *tx).await?;
    }
    Ok(())
}

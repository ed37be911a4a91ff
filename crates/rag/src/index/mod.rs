//! The embedded index: one SQLite database (`rag_index.db` in the datadir) holding documents,
//! their chunks, an FTS5 table over the chunks and one sqlite-vec `vec0` table of vectors per
//! source, plus each source's sync state. One connection; statements with bound parameters
//! only (table names are built from source ids, which are integers).

mod search;
mod vec_ext;
mod write;

pub use search::{Doc, Hit, SearchFilter};
pub use write::{ChunkRow, DocRow, SyncState};

use crate::Error;
use sqlx::AssertSqlSafe;
use sqlx::sqlite::{SqliteConnectOptions, SqliteConnection, SqliteJournalMode};
use sqlx::{ConnectOptions, Row};
use std::path::Path;
use tokio::sync::Mutex;

/// The index's schema version (in `rag_meta`).
pub const SCHEMA_VERSION: i64 = 1;

const SCHEMA: &[&str] = &[
    "CREATE TABLE IF NOT EXISTS rag_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)",
    "CREATE TABLE IF NOT EXISTS rag_documents (doc_id TEXT PRIMARY KEY, source_id INTEGER NOT NULL, \
     pk_json TEXT NOT NULL, title TEXT NOT NULL, body TEXT NOT NULL, metadata_json TEXT NOT NULL, \
     content_hash TEXT NOT NULL, change_value TEXT, synced_at INTEGER NOT NULL, sweep_mark INTEGER NOT NULL DEFAULT 0)",
    "CREATE INDEX IF NOT EXISTS rag_documents_of ON rag_documents (source_id)",
    "CREATE TABLE IF NOT EXISTS rag_chunks (chunk_rowid INTEGER PRIMARY KEY, chunk_id TEXT NOT NULL UNIQUE, \
     doc_id TEXT NOT NULL, source_id INTEGER NOT NULL, chunk_index INTEGER NOT NULL, title TEXT NOT NULL, \
     body TEXT NOT NULL, metadata_json TEXT NOT NULL, content_hash TEXT NOT NULL)",
    "CREATE INDEX IF NOT EXISTS rag_chunks_of ON rag_chunks (doc_id)",
    "CREATE VIRTUAL TABLE IF NOT EXISTS rag_fts_chunks USING fts5(title, body, tokenize='porter unicode61')",
    "CREATE TABLE IF NOT EXISTS rag_vector_spaces (source_id INTEGER PRIMARY KEY, dimension INTEGER NOT NULL, \
     model TEXT NOT NULL)",
    "CREATE TABLE IF NOT EXISTS rag_sync_state (source_id INTEGER PRIMARY KEY, cursor_change TEXT, \
     cursor_pk TEXT, runs INTEGER NOT NULL DEFAULT 0, last_ok_at INTEGER, last_error TEXT NOT NULL DEFAULT '', \
     last_sweep_at INTEGER, sweep_generation INTEGER NOT NULL DEFAULT 0)",
];

/// The vector table of a source.
fn vec_table(source_id: u32) -> String {
    format!("rag_vec_{source_id}")
}

/// The index database.
pub struct Index {
    pub(crate) conn: Mutex<SqliteConnection>,
}

impl std::fmt::Debug for Index {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Index")
    }
}

/// Seconds since the epoch.
pub(crate) fn now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0)
}

impl Index {
    /// Opens (creating) the index at `path`, or in memory; `Err` if it was written by a newer
    /// Sluice (its schema version is above [`SCHEMA_VERSION`]).
    pub async fn open(path: Option<&Path>) -> Result<Index, Error> {
        let opts = match path {
            Some(p) => SqliteConnectOptions::new()
                .filename(p)
                .create_if_missing(true)
                .journal_mode(SqliteJournalMode::Wal),
            None => SqliteConnectOptions::new().in_memory(true),
        };
        let mut conn = opts.connect().await?;
        vec_ext::register(&mut conn).await?;
        for sql in SCHEMA {
            sqlx::query(*sql).execute(&mut conn).await?;
        }
        let version: Option<String> =
            sqlx::query_scalar("SELECT value FROM rag_meta WHERE key = 'schema_version'")
                .fetch_optional(&mut conn)
                .await?;
        match version.and_then(|v| v.parse::<i64>().ok()) {
            Some(v) if v > SCHEMA_VERSION => {
                return Err(Error::Arguments(format!(
                    "the index has schema version {v}; this Sluice reads up to {SCHEMA_VERSION}"
                )));
            }
            Some(_) => {}
            None => {
                sqlx::query("INSERT INTO rag_meta (key, value) VALUES ('schema_version', ?1)")
                    .bind(SCHEMA_VERSION.to_string())
                    .execute(&mut conn)
                    .await?;
            }
        }
        Ok(Index {
            conn: Mutex::new(conn),
        })
    }

    /// The sqlite-vec version compiled in.
    pub async fn vec_version(&self) -> Result<String, Error> {
        let mut c = self.conn.lock().await;
        Ok(sqlx::query_scalar("SELECT vec_version()")
            .fetch_one(&mut *c)
            .await?)
    }

    /// Makes sure source `source_id` has a vector table of `dimension` for `model`. A source
    /// whose model or dimension changed loses its documents (they are all embedded again) and
    /// its cursor; returns true then.
    pub async fn prepare_source(
        &self,
        source_id: u32,
        dimension: usize,
        model: &str,
    ) -> Result<bool, Error> {
        let mut c = self.conn.lock().await;
        let row =
            sqlx::query("SELECT dimension, model FROM rag_vector_spaces WHERE source_id = ?1")
                .bind(source_id)
                .fetch_optional(&mut *c)
                .await?;
        let same = row.as_ref().is_some_and(|r| {
            r.get::<i64, _>(0) == dimension as i64 && r.get::<String, _>(1) == model
        });
        if same {
            return Ok(false);
        }
        let rebuilt = row.is_some();
        let mut tx = sqlx::Connection::begin(&mut *c).await?;
        if rebuilt {
            write::forget_source(&mut tx, source_id).await?;
        }
        sqlx::query(AssertSqlSafe(format!(
            "DROP TABLE IF EXISTS {}",
            vec_table(source_id)
        )))
        .execute(&mut *tx)
        .await?;
        sqlx::query(AssertSqlSafe(format!(
            "CREATE VIRTUAL TABLE {} USING vec0(embedding float[{dimension}])",
            vec_table(source_id)
        )))
        .execute(&mut *tx)
        .await?;
        sqlx::query(
            "INSERT INTO rag_vector_spaces (source_id, dimension, model) VALUES (?1, ?2, ?3) \
             ON CONFLICT (source_id) DO UPDATE SET dimension = excluded.dimension, model = excluded.model",
        )
        .bind(source_id)
        .bind(dimension as i64)
        .bind(model)
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        Ok(rebuilt)
    }

    /// Counts of one source: (documents, chunks).
    pub async fn counts(&self, source_id: u32) -> Result<(u64, u64), Error> {
        let mut c = self.conn.lock().await;
        let docs: i64 =
            sqlx::query_scalar("SELECT COUNT(*) FROM rag_documents WHERE source_id = ?1")
                .bind(source_id)
                .fetch_one(&mut *c)
                .await?;
        let chunks: i64 =
            sqlx::query_scalar("SELECT COUNT(*) FROM rag_chunks WHERE source_id = ?1")
                .bind(source_id)
                .fetch_one(&mut *c)
                .await?;
        Ok((docs as u64, chunks as u64))
    }

    /// The index file's size in bytes (pages × page size).
    pub async fn size_bytes(&self) -> Result<u64, Error> {
        let mut c = self.conn.lock().await;
        let pages: i64 = sqlx::query_scalar("PRAGMA page_count")
            .fetch_one(&mut *c)
            .await?;
        let size: i64 = sqlx::query_scalar("PRAGMA page_size")
            .fetch_one(&mut *c)
            .await?;
        Ok((pages * size) as u64)
    }
}

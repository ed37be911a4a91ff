//! The RAG side of the HTTP endpoint: the index (`rag_index.db` in the datadir), one embedder
//! per source (built again when its row changes), the syncs (on `RAG SYNC SOURCE n` and on
//! each source's `sync_interval_ms`), which read the source through the read-only path, and
//! their stats.

mod reader;
mod stats;

pub(crate) use reader::ProxyReader;
pub(crate) use stats::RagStats;

use crate::error::Error;
use crate::service::McpService;
use sluice_core::config::RagSource;
use sluice_rag::Index;
use sluice_rag::embed::{Embedder, OpenAiConfig, OpenAiEmbedder};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio_util::sync::CancellationToken;

/// Why `RAG SYNC SOURCE n` does not start a sync.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SyncRefused {
    /// No enabled source `n` in the runtime config.
    #[error("no enabled rag source {0} at runtime (LOAD RAG SOURCES TO RUNTIME)")]
    NoSource(u32),
    /// Source `n` is syncing already.
    #[error("rag source {0} is syncing already")]
    Running(u32),
}

/// What the RAG side keeps between calls.
#[derive(Default)]
pub(crate) struct RagState {
    index: tokio::sync::OnceCell<Index>,
    embedders: Mutex<HashMap<u32, (RagSource, Arc<Embedder>)>>,
}

/// Retries of an embedding request after the first attempt.
const EMBEDDING_RETRIES: u32 = 3;

/// Why a source's embedding API key cannot be read.
#[derive(Debug, thiserror::Error)]
enum ApiKeyError {
    #[error("embedding_api_key_env: the environment variable {0} is not set")]
    EnvUnset(String),
    #[error("embedding_api_key_file: cannot read {path}: {source}")]
    File {
        path: String,
        source: std::io::Error,
    },
}

fn api_key(s: &RagSource) -> Result<Option<String>, ApiKeyError> {
    if !s.embedding_api_key_env.is_empty() {
        return std::env::var(&s.embedding_api_key_env)
            .map(Some)
            .map_err(|_| ApiKeyError::EnvUnset(s.embedding_api_key_env.clone()));
    }
    if !s.embedding_api_key_file.is_empty() {
        return std::fs::read_to_string(&s.embedding_api_key_file)
            .map(|k| Some(k.trim().to_string()))
            .map_err(|source| ApiKeyError::File {
                path: s.embedding_api_key_file.clone(),
                source,
            });
    }
    Ok(None)
}

fn embedder(s: &RagSource) -> Result<Embedder, sluice_rag::Error> {
    let source = |why: String| sluice_rag::Error::Source {
        source_id: s.source_id,
        why,
    };
    if s.embedding_provider == "builtin" {
        #[cfg(feature = "builtin-embedder")]
        return Ok(Embedder::Builtin(sluice_rag::embed::BuiltinEmbedder::load(
            std::path::Path::new(&s.embedding_model),
            s.embedding_batch_size as usize,
        )?));
        #[cfg(not(feature = "builtin-embedder"))]
        return Err(source(
            "embedding_provider builtin: this Sluice was built without the builtin-embedder feature".into(),
        ));
    }
    Ok(Embedder::OpenAi(OpenAiEmbedder::new(OpenAiConfig {
        base_url: s.embedding_base_url.clone(),
        model: s.embedding_model.clone(),
        dimension: s.embedding_dimension as usize,
        api_key: api_key(s).map_err(|e| source(e.to_string()))?,
        batch_size: s.embedding_batch_size as usize,
        timeout: Duration::from_millis(s.embedding_timeout_ms.max(100)),
        retries: EMBEDDING_RETRIES,
        max_rps: s.embedding_max_rps,
        passage_prefix: s.embedding_passage_prefix.clone(),
        query_prefix: s.embedding_query_prefix.clone(),
        tls: None,
    })?))
}

fn now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

impl McpService {
    /// The index, opened at first use (in memory without a datadir).
    pub(crate) async fn rag_index(&self) -> Result<&Index, Error> {
        self.rag
            .index
            .get_or_try_init(|| async {
                let path = self.datadir.as_ref().map(|d| d.join("rag_index.db"));
                Index::open(path.as_deref()).await
            })
            .await
            .map_err(Error::Rag)
    }

    /// The source's embedder (the same one while its row is unchanged).
    pub(crate) fn rag_embedder(&self, s: &RagSource) -> Result<Arc<Embedder>, Error> {
        let mut m = self.rag.embedders.lock().unwrap_or_else(|p| p.into_inner());
        if let Some((row, e)) = m.get(&s.source_id)
            && row == s
        {
            return Ok(e.clone());
        }
        let e = Arc::new(embedder(s)?);
        m.insert(s.source_id, (s.clone(), e.clone()));
        Ok(e)
    }

    /// The enabled source `id` of the running configuration.
    pub(crate) fn rag_source(&self, id: u32) -> Option<RagSource> {
        let rt = self.config.load();
        rt.mcp
            .rag_sources
            .iter()
            .find(|s| s.source_id == id && s.enabled.0)
            .cloned()
    }

    /// `RAG SYNC SOURCE n`: starts a sync of source `id` in the background; the message says
    /// it started, `Err` why it cannot.
    pub fn rag_sync(self: &Arc<Self>, id: u32) -> Result<String, SyncRefused> {
        let source = self.rag_source(id).ok_or(SyncRefused::NoSource(id))?;
        if !self.stats.rag.start(id, &source.name) {
            return Err(SyncRefused::Running(id));
        }
        let svc = self.clone();
        tokio::spawn(async move { svc.rag_run(source).await });
        Ok(format!(
            "sync of rag source {id} started; stats_rag_sources shows its progress"
        ))
    }

    /// One run of `source` (its start already recorded), with stats and a log line.
    async fn rag_run(&self, source: RagSource) {
        let id = source.source_id;
        let started = Instant::now();
        let sweep = source.sweep_interval_ms == 0
            || now().saturating_sub(self.stats.rag.last_sweep(id)) * 1000
                >= source.sweep_interval_ms;
        let (report, outcome) = async {
            let index = match self.rag_index().await {
                Ok(i) => i,
                Err(e) => return (Default::default(), Err(e)),
            };
            let embedder = match self.rag_embedder(&source) {
                Ok(e) => e,
                Err(e) => return (Default::default(), Err(e)),
            };
            let reader = reader::ProxyReader { svc: self };
            let (report, r) =
                sluice_rag::sync::run(&source, &reader, &embedder, index, sweep, &|so_far| {
                    self.stats.rag.progress(id, so_far)
                })
                .await;
            (report, r.map_err(Error::Rag))
        }
        .await;
        let outcome = outcome.map_err(|e| e.to_string());
        let counts = match self.rag_index().await {
            Ok(index) => index.counts(id).await.ok(),
            Err(_) => None,
        };
        if let Ok(index) = self.rag_index().await {
            let _ = index
                .finish_run(id, outcome.as_ref().err().map(String::as_str))
                .await;
        }
        let ms = started.elapsed().as_millis() as u64;
        let r = &report;
        match &outcome {
            Ok(()) => tracing::info!(
                source_id = id,
                name = %source.name,
                rows_read = r.rows_read,
                docs_changed = r.docs_changed,
                docs_unchanged = r.docs_unchanged,
                chunks_embedded = r.chunks_embedded,
                chunks_unchanged = r.chunks_unchanged,
                docs_deleted = r.docs_deleted,
                swept = r.swept,
                rebuilt = r.rebuilt,
                ms,
                "RAG: synced the source into the index"
            ),
            Err(e) => tracing::warn!(
                source_id = id,
                name = %source.name,
                rows_read = r.rows_read,
                chunks_embedded = r.chunks_embedded,
                ms,
                "RAG: sync failed; the index keeps every page committed before it, and the next run resumes from there: {e}"
            ),
        }
        self.stats
            .rag
            .finish(id, &report, outcome.as_ref().err(), ms, counts);
    }

    /// Runs each enabled source with a `sync_interval_ms` when it is due, until `shutdown`.
    pub async fn rag_schedule(self: Arc<Self>, shutdown: CancellationToken) {
        loop {
            tokio::select! {
                _ = shutdown.cancelled() => return,
                _ = tokio::time::sleep(Duration::from_secs(1)) => {}
            }
            let rt = self.config.load();
            for s in rt
                .mcp
                .rag_sources
                .iter()
                .filter(|s| s.enabled.0 && s.sync_interval_ms > 0)
            {
                let due = now().saturating_sub(self.stats.rag.last_start(s.source_id)) * 1000
                    >= s.sync_interval_ms;
                if due && self.stats.rag.start(s.source_id, &s.name) {
                    let svc = self.clone();
                    let s = s.clone();
                    tokio::spawn(async move { svc.rag_run(s).await });
                }
            }
        }
    }
}

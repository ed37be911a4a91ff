//! The RAG tools' arguments and results (their JSON Schemas are generated from these).

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::BTreeMap;

/// Which chunks a search may return.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Scope<'a> {
    /// Only these source ids.
    pub source_ids: &'a [u32],
    /// Only these source names.
    pub source_names: &'a [String],
    /// Only chunks whose metadata has these values.
    pub filters: &'a BTreeMap<String, Value>,
}

macro_rules! scoped {
    ($($t:ty),*) => {$(
        impl $t {
            /// The search's scope.
            pub(crate) fn scope(&self) -> Scope<'_> {
                Scope {
                    source_ids: &self.source_ids,
                    source_names: &self.source_names,
                    filters: &self.filters,
                }
            }
        }
    )*};
}

scoped!(FtsArgs, VectorArgs, HybridArgs);

/// `rag.search_fts`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct FtsArgs {
    /// Words to look for (BM25 ranking; operators are taken as words).
    pub query: String,
    /// How many chunks (at most `mcp-rag_k_max`; default 10).
    #[serde(default)]
    pub k: Option<u64>,
    /// Only these source ids.
    #[serde(default)]
    pub source_ids: Vec<u32>,
    /// Only these source names.
    #[serde(default)]
    pub source_names: Vec<String>,
    /// Only chunks whose metadata has these values (`{"lang": "en"}`).
    #[serde(default)]
    pub filters: BTreeMap<String, Value>,
}

/// `rag.search_vector`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct VectorArgs {
    /// Text to embed with each source's model and search by meaning.
    #[serde(default)]
    pub query_text: Option<String>,
    /// Or a vector to search with (searches the sources of that dimension).
    #[serde(default)]
    pub query_vector: Option<Vec<f32>>,
    /// How many chunks (at most `mcp-rag_k_max`; default 10).
    #[serde(default)]
    pub k: Option<u64>,
    /// Only these source ids.
    #[serde(default)]
    pub source_ids: Vec<u32>,
    /// Only these source names.
    #[serde(default)]
    pub source_names: Vec<String>,
    /// Only chunks whose metadata has these values (`{"lang": "en"}`).
    #[serde(default)]
    pub filters: BTreeMap<String, Value>,
}

/// `rag.search_hybrid`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct HybridArgs {
    /// The question or words.
    pub query: String,
    /// How many chunks (at most `mcp-rag_k_max`; default 10).
    #[serde(default)]
    pub k: Option<u64>,
    /// `fuse` (reciprocal rank fusion of both searches, the default) or `fts_then_vec`
    /// (text candidates reranked by meaning).
    #[serde(default)]
    pub mode: Option<String>,
    /// Text-search depth for `fuse` (default 50).
    #[serde(default)]
    pub fts_k: Option<u64>,
    /// Vector-search depth for `fuse` (default 50).
    #[serde(default)]
    pub vec_k: Option<u64>,
    /// RRF constant (default 60).
    #[serde(default)]
    pub rrf_k0: Option<f64>,
    /// Weight of the text leg (default 1).
    #[serde(default)]
    pub fts_weight: Option<f64>,
    /// Weight of the vector leg (default 1).
    #[serde(default)]
    pub vec_weight: Option<f64>,
    /// Text candidates for `fts_then_vec` (default 200, at most `mcp-rag_candidates_max`).
    #[serde(default)]
    pub candidates: Option<u64>,
    /// Only these source ids.
    #[serde(default)]
    pub source_ids: Vec<u32>,
    /// Only these source names.
    #[serde(default)]
    pub source_names: Vec<String>,
    /// Only chunks whose metadata has these values (`{"lang": "en"}`).
    #[serde(default)]
    pub filters: BTreeMap<String, Value>,
}

/// `rag.get_chunks`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct ChunkIds {
    /// Chunk ids (`<source>:<key>#<n>`).
    pub chunk_ids: Vec<String>,
}

/// `rag.get_docs`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct DocIds {
    /// Document ids (`<source>:<key>`).
    pub doc_ids: Vec<String>,
}

/// `rag.fetch_from_source`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct FetchArgs {
    /// The document whose source row to read as it is now.
    pub doc_id: String,
}

/// No arguments.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct NoRagArgs {}

/// A found chunk.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct RagHit {
    /// `<source>:<key>#<n>`.
    pub chunk_id: String,
    /// `<source>:<key>`.
    pub doc_id: String,
    /// The source id.
    pub source_id: u32,
    /// The source's name.
    pub source_name: String,
    /// The document's title.
    pub title: String,
    /// The chunk's text.
    pub body: String,
    /// The document's metadata.
    pub metadata: Value,
    /// Higher is better (see the tool).
    pub score: f64,
}

/// Search results.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct RagHits {
    /// The chunks, best first.
    pub results: Vec<RagHit>,
    /// Cut at `mcp-rag_response_max_bytes`.
    pub truncated: bool,
}

/// Documents.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct RagDocs {
    /// The documents found, in the order asked.
    pub docs: Vec<RagDoc>,
    /// Cut at `mcp-rag_response_max_bytes`.
    pub truncated: bool,
}

/// A document.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct RagDoc {
    /// Its id.
    pub doc_id: String,
    /// The source id.
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

/// A source row as it is now.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct SourceRow {
    /// The document.
    pub doc_id: String,
    /// Column name to value; null when the row is gone.
    pub row: Option<BTreeMap<String, Value>>,
}

/// The sources and the index.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct RagStatsAnswer {
    /// `stats_rag_sources` rows as objects.
    pub sources: Vec<BTreeMap<String, Value>>,
    /// The index file's size in bytes.
    pub index_bytes: u64,
    /// The sqlite-vec version.
    pub sqlite_vec: String,
}

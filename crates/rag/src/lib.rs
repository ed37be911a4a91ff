//! Sluice's retrieval index for agents (RAG): rows of MySQL or PostgreSQL tables, read through
//! the proxy, become documents cut into chunks ([`chunk`]); chunks get vectors from an
//! embedding model ([`embed`]); an embedded SQLite index holds text (FTS5) and vectors
//! (sqlite-vec) side by side ([`Index`]); [`sync`] keeps it in step with the tables, and
//! [`fuse`] combines the text and vector searches.
//!
//! ```no_run
//! # async fn demo() -> Result<(), sluice_rag::Error> {
//! use sluice_rag::embed::{Embedder, OpenAiConfig, OpenAiEmbedder, Role};
//! use sluice_rag::{Index, SearchFilter};
//! use std::time::Duration;
//! let index = Index::open(Some(std::path::Path::new("/var/lib/sluice/rag_index.db"))).await?;
//! let embedder = Embedder::OpenAi(OpenAiEmbedder::new(OpenAiConfig {
//!     base_url: "http://127.0.0.1:8000/v1".into(),
//!     model: "multilingual-e5-small".into(),
//!     dimension: 384,
//!     api_key: None,
//!     batch_size: 32,
//!     timeout: Duration::from_secs(20),
//!     retries: 3,
//!     max_rps: 0,
//!     passage_prefix: "passage: ".into(),
//!     query_prefix: "query: ".into(),
//!     tls: None,
//! })?);
//! let q = embedder.embed(&["how do I vacuum a table".into()], Role::Query).await?;
//! for hit in index.search_vector(1, &q[0], &SearchFilter::default(), 10, 100).await? {
//!     println!("{:.3} {} {}", hit.score, hit.chunk_id, hit.title);
//! }
//! # Ok(()) }
//! ```

pub mod chunk;
pub mod embed;
mod error;
pub mod fuse;
mod index;
pub mod source_sql;
pub mod sync;

pub use error::Error;
pub use index::Doc;
pub use index::{ChunkRow, DocRow, Hit, Index, SCHEMA_VERSION, SearchFilter, SyncState};
pub use sync::content_hash;

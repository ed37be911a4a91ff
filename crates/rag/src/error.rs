//! What can go wrong in the index, the embedders and a sync, each with the source or server
//! it concerns.

/// The retrieval layer's failure.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The index database failed.
    #[error("index: {0}")]
    Index(#[from] sqlx::Error),
    /// The embedding server could not be reached, timed out or answered badly.
    #[error("embeddings from {url}: {why}")]
    Embedding {
        /// The endpoint.
        url: String,
        /// What happened.
        why: String,
    },
    /// Vectors of the wrong size: the model is not the one the index was built with.
    #[error("embeddings of {got} dimensions where the source's index has {expected}")]
    Dimension {
        /// The index's dimension.
        expected: usize,
        /// What the model returned.
        got: usize,
    },
    /// A source's configuration cannot be used (checked at sync start).
    #[error("rag source {source_id}: {why}")]
    Source {
        /// The source.
        source_id: u32,
        /// Why.
        why: String,
    },
    /// Reading the source's rows failed.
    #[error("reading rag source {source_id}: {why}")]
    Read {
        /// The source.
        source_id: u32,
        /// The reader's error.
        why: String,
    },
    /// The source's reader failed (its own error).
    #[error("reading rag source {source_id}: {source}")]
    Reader {
        /// The source.
        source_id: u32,
        /// The reader's error.
        source: crate::sync::ReadError,
    },
    /// sqlite-vec could not be registered on the index.
    #[error("sqlite-vec: {0}")]
    VectorExtension(String),
    /// Bad search arguments.
    #[error("invalid arguments: {0}")]
    Arguments(String),
}

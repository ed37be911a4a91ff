//! Turning text into vectors. Every vector the index keeps or searches with is normalised to
//! length 1, so the index's L2 distance orders like cosine distance.

#[cfg(feature = "builtin-embedder")]
mod builtin;
mod openai;

#[cfg(feature = "builtin-embedder")]
pub use builtin::BuiltinEmbedder;
pub use openai::{OpenAiConfig, OpenAiEmbedder};

use crate::Error;

/// What a text is embedded as: some models (E5) want documents and queries marked apart.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// A chunk being indexed.
    Passage,
    /// A search query.
    Query,
}

/// An embedding model a source uses.
// One per source, kept behind an `Arc`: the variants' sizes do not matter.
#[allow(clippy::large_enum_variant)]
#[derive(Debug)]
pub enum Embedder {
    /// A server speaking OpenAI's `POST /embeddings`.
    OpenAi(OpenAiEmbedder),
    /// A model run in this process (feature `builtin-embedder`).
    #[cfg(feature = "builtin-embedder")]
    Builtin(BuiltinEmbedder),
}

impl Embedder {
    /// The vectors of `texts`, in order, normalised; `Err` names the server and what it did.
    pub async fn embed(&self, texts: &[String], role: Role) -> Result<Vec<Vec<f32>>, Error> {
        let mut out = match self {
            Embedder::OpenAi(e) => e.embed(texts, role).await?,
            #[cfg(feature = "builtin-embedder")]
            Embedder::Builtin(e) => {
                let _ = role;
                e.embed(texts).await?
            }
        };
        let expected = self.dimension();
        for v in &mut out {
            if v.len() != expected {
                return Err(Error::Dimension {
                    expected,
                    got: v.len(),
                });
            }
            normalise(v);
        }
        Ok(out)
    }

    /// The vectors' size.
    pub fn dimension(&self) -> usize {
        match self {
            Embedder::OpenAi(e) => e.config().dimension,
            #[cfg(feature = "builtin-embedder")]
            Embedder::Builtin(e) => e.dimension(),
        }
    }

    /// A name for logs and stats: the model and where it runs.
    pub fn describe(&self) -> String {
        match self {
            Embedder::OpenAi(e) => format!("{} at {}", e.config().model, e.config().base_url),
            #[cfg(feature = "builtin-embedder")]
            Embedder::Builtin(e) => format!("builtin:{}", e.dir().display()),
        }
    }
}

/// Scales `v` to length 1 (a zero vector stays zero).
pub fn normalise(v: &mut [f32]) {
    let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt();
    if norm > 0.0 && norm.is_finite() {
        for x in v {
            *x /= norm;
        }
    }
}

/// Cosine similarity of two normalised vectors.
pub fn cosine(a: &[f32], b: &[f32]) -> f32 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}

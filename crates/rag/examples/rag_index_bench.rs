//! The index alone at scale (`cargo xtask bench rag` runs it): `N` chunks (default 100,000)
//! of corpus words with random unit vectors of 384 dimensions written in pages of 1,000, then
//! 200 searches of each kind: FTS (two words), vector (k = 10, exact KNN), and the hybrid
//! fusion of both legs at depth 50. Prints the write rate, p50/p99 per kind and the file size.
//!
//! ```text
//! cargo run --release -p sluice-rag --example rag_index_bench -- /tmp/bench.db 100000 words.txt
//! ```

use sluice_rag::fuse::{Leg, rrf};
use sluice_rag::{ChunkRow, DocRow, Index, SearchFilter};
use std::time::{Duration, Instant};

const DIM: usize = 384;
const PAGE: usize = 1000;
const QUERIES: usize = 200;

/// xorshift64*: deterministic, so two runs search the same index.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    fn unit(&mut self) -> Vec<f32> {
        let mut v: Vec<f32> = (0..DIM)
            .map(|_| (self.next() >> 40) as f32 / (1u64 << 24) as f32 - 0.5)
            .collect();
        sluice_rag::embed::normalise(&mut v);
        v
    }
}

fn percentile(samples: &mut [Duration], p: f64) -> f64 {
    samples.sort();
    let i = ((samples.len() as f64 - 1.0) * p).round() as usize;
    samples[i].as_secs_f64() * 1000.0
}

/// Document `i`: 60 words drawn from `words`, one chunk with a random unit vector.
fn random_doc(i: usize, words: &[String], rng: &mut Rng) -> DocRow {
    let body: Vec<&str> = (0..60)
        .map(|_| words[rng.next() as usize % words.len()].as_str())
        .collect();
    let body = body.join(" ");
    DocRow {
        doc_id: format!("1:{i}"),
        pk_json: i.to_string(),
        title: String::new(),
        body: body.clone(),
        metadata_json: "{}".into(),
        content_hash: i.to_string(),
        change_value: None,
        chunks: vec![ChunkRow {
            chunk_id: format!("1:{i}#0"),
            index: 0,
            content_hash: i.to_string(),
            body,
            vector: Some(rng.unit()),
        }],
    }
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let path = args.next().unwrap_or_else(|| "rag_index_bench.db".into());
    let n: usize = args.next().and_then(|s| s.parse().ok()).unwrap_or(100_000);
    let words: Vec<String> = match args.next() {
        Some(f) => std::fs::read_to_string(f)?
            .split_whitespace()
            .filter(|w| w.len() > 3 && w.chars().all(char::is_alphabetic))
            .map(str::to_lowercase)
            .collect(),
        None => "table index vacuum query transaction lock replica server column row"
            .split(' ')
            .map(String::from)
            .collect(),
    };
    let _ = std::fs::remove_file(&path);
    let index = Index::open(Some(std::path::Path::new(&path))).await?;
    index.prepare_source(1, DIM, "random").await?;
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    let started = Instant::now();
    for page in 0..n.div_ceil(PAGE) {
        let docs: Vec<DocRow> = (page * PAGE..((page + 1) * PAGE).min(n))
            .map(|i| random_doc(i, &words, &mut rng))
            .collect();
        index.apply_batch(1, &docs, None).await?;
    }
    let write = started.elapsed();
    let all = SearchFilter::default();
    let (mut fts, mut vec, mut hybrid) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..QUERIES {
        let q = format!(
            "{} {}",
            words[rng.next() as usize % words.len()],
            words[rng.next() as usize % words.len()]
        );
        let v = rng.unit();
        let t = Instant::now();
        let a = index.search_fts(&q, &all, 10).await?;
        fts.push(t.elapsed());
        let t = Instant::now();
        let b = index.search_vector(1, &v, &all, 10, 100).await?;
        vec.push(t.elapsed());
        let t = Instant::now();
        let a50 = index.search_fts(&q, &all, 50).await?;
        let b50 = index.search_vector(1, &v, &all, 50, 100).await?;
        let fused = rrf(
            &[
                Leg {
                    hits: &a50,
                    weight: 1.0,
                },
                Leg {
                    hits: &b50,
                    weight: 1.0,
                },
            ],
            60.0,
            10,
        );
        hybrid.push(t.elapsed());
        assert!(b.len() == 10 && fused.len() >= a.len().min(10));
    }
    let size = index.size_bytes().await?;
    println!("| chunks | {n} |");
    println!(
        "| write | {:.0} chunks/s ({:.1} s) |",
        n as f64 / write.as_secs_f64(),
        write.as_secs_f64()
    );
    for (name, s) in [
        ("fts, k=10", &mut fts),
        ("vector, k=10", &mut vec),
        ("hybrid fuse, depth 50", &mut hybrid),
    ] {
        println!(
            "| search {name} | p50 {:.2} ms, p99 {:.2} ms |",
            percentile(s, 0.5),
            percentile(s, 0.99)
        );
    }
    println!(
        "| index size | {:.1} MiB ({:.0} bytes per chunk) |",
        size as f64 / 1048576.0,
        size as f64 / n as f64
    );
    Ok(())
}

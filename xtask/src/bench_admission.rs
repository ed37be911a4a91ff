//! `cargo xtask bench admission`: what workload classes and a p99 guard do for OLTP under a
//! burst of CPU-heavy statements, and what admission costs on the plain path.
//!
//! Part 1, one Sluice (release), six configurations run in [`ROUNDS`] interleaved rounds of
//! [`RUN_SECONDS`] each (the p99 of a few thousand point selects on two shared cores moves by
//! up to 2x between identical runs; interleaving spreads that noise over every configuration
//! and the medians are reported): OLTP point selects at a fixed rate alone (the reference),
//! then beside a burst of `BENCHMARK()` statements with no class, with the burst in class
//! `vector` capped at 4 slots and at 1 (the floor of what a `reduce` guard can do), and with
//! the class at 12 slots (as many as the burst has threads: no cap until a guard shrinks it)
//! under a guard that watches OLTP's p99 or one that watches MariaDB's `Threads_running`; both
//! ramp the class down to 1 slot and delay it, and release it over 3 s. The OLTP p50/p99 of each run are the client's, and the p99 of the
//! statements sent after the first [`SETTLE_SECONDS`] (a guard acts on what it has seen).
//! Goal: with the guard, OLTP p99 under the burst <= 1.5 x the reference.
//!
//! Part 2, callgrind: Sluice's user-space instructions per statement for the `bench
//! instructions` statements with no class configured and with one class (`oltp`, unlimited: every statement
//! goes through a gate), and a baseline binary when `BENCH_BASELINE_BIN` names one.

use crate::bench::{build_release, env_num, median, spawn_sluice, spread};
use crate::bench_alloc::{config, prepare_workloads};
use crate::bench_instructions::{Runs, STATEMENTS};
use std::path::PathBuf;
use std::process::Command;
use xtask::proc::{self, run_capture, step};

const PORT: u16 = 16734;
const ADMIN_PORT: u16 = 16732;
/// Seconds of load per run.
const RUN_SECONDS: u32 = 12;
/// Interleaved rounds of every configuration.
const ROUNDS: usize = 3;
const OLTP_THREADS: u32 = 4;
/// Statements per second per OLTP thread.
const OLTP_RATE: u32 = 50;
const BURST_THREADS: u32 = 12;
/// Seconds from the start of a run after which OLTP statements count as "settled".
const SETTLE_SECONDS: u32 = 3;

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
    p50: f64,
    p99: f64,
    p99_settled: f64,
    n: u64,
    errors: u64,
    burst_done: u64,
    burst_refused: u64,
}

fn load(script: &std::path::Path, name: &str, burst: u32) -> xtask::Result<Run> {
    step(&format!("{name}: {RUN_SECONDS} s"));
    let out = run_capture(Command::new("python3").arg(script).args([
        PORT.to_string(),
        RUN_SECONDS.to_string(),
        OLTP_THREADS.to_string(),
        OLTP_RATE.to_string(),
        burst.to_string(),
        SETTLE_SECONDS.to_string(),
    ]))?;
    let v: serde_json::Value =
        serde_json::from_str(out.trim()).map_err(|e| format!("{name}: {e}: {out}"))?;
    let b = &v["burst"];
    Ok(Run {
        p50: v["p50"].as_f64().unwrap_or(f64::NAN),
        p99: v["p99"].as_f64().unwrap_or(f64::NAN),
        p99_settled: v["p99_settled"].as_f64().unwrap_or(f64::NAN),
        n: v["n"].as_u64().unwrap_or(0),
        errors: v["errors"].as_u64().unwrap_or(0),
        burst_done: b["done"].as_u64().unwrap_or(0),
        burst_refused: b["refused"].as_u64().unwrap_or(0),
    })
}

fn admin(sql: &str) -> xtask::Result<()> {
    crate::soak_faults::admin_sql(ADMIN_PORT, sql).map(drop)
}

/// One configuration: its name, the burst's threads, and the admin statements that set it up
/// (every one sets the whole of it, so the order of runs does not matter).
struct Setup {
    name: &'static str,
    burst: u32,
    sql: String,
}

/// The configurations; the p99 guard's thresholds come from the reference p99 (`reference`).
fn setups(reference: f64) -> Vec<Setup> {
    let reset = "DELETE FROM workload_guards; DELETE FROM workload_classes WHERE name = 'oltp';";
    let class = |slots: u32| {
        format!(
            "UPDATE workload_classes SET active = 1, max_concurrency = {slots}, max_queue = 64, queue_timeout_ms = 60000 WHERE name = 'vector';"
        )
    };
    let load = "LOAD WORKLOAD CLASSES TO RUNTIME";
    let no_class =
        format!("{reset} UPDATE workload_classes SET active = 0 WHERE name = 'vector'; {load}");
    vec![
        Setup {
            name: "OLTP alone",
            burst: 0,
            sql: no_class.clone(),
        },
        Setup {
            name: "burst, no class",
            burst: BURST_THREADS,
            sql: no_class,
        },
        Setup {
            name: "burst in class vector (4 slots)",
            burst: BURST_THREADS,
            sql: format!("{reset} {} {load}", class(4)),
        },
        // The floor of what a `reduce` guard can do: the class held at one slot throughout.
        Setup {
            name: "burst in class vector (1 slot)",
            burst: BURST_THREADS,
            sql: format!("{reset} {} {load}", class(1)),
        },
        // The p99 guard watches OLTP's own p99: `oltp` gets a row (unlimited) to be measured.
        Setup {
            name: "burst in class vector (12 slots) + p99 guard on oltp",
            burst: BURST_THREADS,
            sql: format!(
                "{reset} {} INSERT INTO workload_classes (name) VALUES ('oltp'); \
                 INSERT INTO workload_guards (guard_id, classes, signal, watch_class, window_s, low, high, max_delay_ms, mode, release_ms) \
                 VALUES (1, 'vector', 'class_p99', 'oltp', 1, {low:.3}, {high:.3}, 500, 'reduce', 3000); {load}",
                class(BURST_THREADS),
                low = reference,
                high = reference * 1.5,
            ),
        },
        // The server's own load: the primary's Threads_running (the probe counts itself).
        Setup {
            name: "burst in class vector (12 slots) + Threads_running guard",
            burst: BURST_THREADS,
            sql: format!(
                "{reset} {} INSERT INTO workload_guards (guard_id, classes, signal, hostgroup, low, high, max_delay_ms, mode, release_ms) \
                 VALUES (2, 'vector', 'threads_running', 0, 2, 4, 500, 'reduce', 3000); {load}",
                class(BURST_THREADS),
            ),
        },
    ]
}

/// Part 1: every configuration, [`ROUNDS`] times, interleaved; runs grouped by configuration.
fn under_burst(state: &std::path::Path) -> xtask::Result<Vec<(&'static str, Vec<Run>)>> {
    let dir = state.join("bench-admission");
    let mut child = spawn_sluice(&dir, "admission", &sluice_config(), PORT)?;
    let script = dir.join("bench_admission.py");
    std::fs::write(&script, include_str!("bench_admission.py")).map_err(|e| e.to_string())?;
    let result = (|| {
        // A first run alone gives the p99 guard its reference; it is not reported.
        let first = setups(0.0).swap_remove(0);
        admin(&first.sql)?;
        let reference = load(&script, "reference for the p99 guard", 0)?.p99;
        let setups = setups(reference);
        let mut runs: Vec<(&'static str, Vec<Run>)> =
            setups.iter().map(|s| (s.name, Vec::new())).collect();
        for round in 1..=ROUNDS {
            for (i, s) in setups.iter().enumerate() {
                admin(&s.sql)?;
                let name = format!("round {round}/{ROUNDS}: {}", s.name);
                runs[i].1.push(load(&script, &name, s.burst)?);
            }
        }
        Ok(runs)
    })();
    proc::signal(child.id(), "TERM");
    let _ = child.wait();
    result
}

/// Part 2: instructions per statement, no class vs one class (vs a baseline binary).
fn plain_path(state: &std::path::Path) -> xtask::Result<Vec<(String, Vec<Runs>)>> {
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
pub(crate) fn admission() -> xtask::Result<()> {
    let state = prepare_workloads()?;
    build_release()?;
    let runs = under_burst(&state)?;
    let mut t = format!(
        "OLTP: {OLTP_THREADS} threads x {OLTP_RATE} point selects/s for {RUN_SECONDS} s; burst: {BURST_THREADS} threads of \
         SELECT BENCHMARK(500000, MD5(..)) back to back; {ROUNDS} interleaved rounds, medians (the range in brackets)\n\n\
         | run | OLTP p50 ms | OLTP p99 ms | p99 / alone | p99 after {SETTLE_SECONDS} s / alone | OLTP statements, errors | burst done, refused |\n|---|---|---|---|---|---|---|\n"
    );
    let of = |runs: &[Run], f: fn(&Run) -> f64| median(runs.iter().map(f).collect());
    let alone = &runs[0].1;
    let (reference, settled_reference) = (of(alone, |r| r.p99), of(alone, |r| r.p99_settled));
    for (name, rs) in &runs {
        let range = |f: fn(&Run) -> f64| spread(&rs.iter().map(f).collect::<Vec<_>>());
        t.push_str(&format!(
            "| {name} | {:.2} | {:.2} {} | {:.2} | {:.2} | {}, {} | {}, {} |\n",
            of(rs, |r| r.p50),
            of(rs, |r| r.p99),
            range(|r| r.p99),
            of(rs, |r| r.p99) / reference,
            of(rs, |r| r.p99_settled) / settled_reference,
            rs.iter().map(|r| r.n).sum::<u64>(),
            rs.iter().map(|r| r.errors).sum::<u64>(),
            rs.iter().map(|r| r.burst_done).sum::<u64>(),
            rs.iter().map(|r| r.burst_refused).sum::<u64>(),
        ));
    }
    let columns = plain_path(&state)?;
    let names: Vec<&str> = columns.iter().map(|(n, _)| n.as_str()).collect();
    t.push_str(&format!(
        "\nSluice's user-space instructions per statement (callgrind, the bench instructions statements)\n\n| workload | {} |\n|---|{}\n",
        names.join(" | "),
        "---|".repeat(names.len())
    ));
    for (i, w) in STATEMENTS.iter().enumerate() {
        let cells: Vec<String> = columns
            .iter()
            .map(|(_, c)| format!("{:.0}", c[i].per_statement()))
            .collect();
        t.push_str(&format!("| {} | {} |\n", w.name, cells.join(" | ")));
    }
    println!("\n{t}");
    let out = xtask::workspace_root().join("target/bench-admission.md");
    std::fs::write(&out, &t).map_err(|e| e.to_string())?;
    step(&format!("table written to {}", out.display()));
    Ok(())
}

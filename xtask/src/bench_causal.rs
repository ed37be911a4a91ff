//! `cargo xtask bench causal`: what read-your-writes costs and buys. Closed loops through one
//! release Sluice: increment a row (writer), read it back (a point select the rule sends to the
//! replica), with `mysql-causal_reads` = `none`, `local` and `user`, in [`ROUNDS`] interleaved
//! rounds of [`RUN_SECONDS`] (medians, the range in brackets). The replica follows the primary
//! with its natural lag (no `MASTER_DELAY`): the table shows how many reads were stale without
//! the gate, that none are with it, and what the gate costs in throughput and read latency.
//! A last row runs reads alone (no writes, so no token) with `local`: the gate's cost when there
//! is nothing to wait for.

use crate::bench::{build_release, median, spawn_sluice, spread};
use std::process::Command;
use xtask::proc::{self, run_capture, step};

const PORT: u16 = 16744;
const ADMIN_PORT: u16 = 16742;
const RUN_SECONDS: u32 = 10;
const ROUNDS: usize = 3;
const THREADS: u32 = 8;

fn sluice_config() -> String {
    let (p, r) = (xtask::ports::MY_PRIMARY, xtask::ports::MY_REPLICA);
    format!(
        "[admin_variables]\nmysql_ifaces = \"127.0.0.1:{ADMIN_PORT}\"\npgsql_ifaces = \"127.0.0.1:0\"\n\
         [pgsql_variables]\ninterfaces = \"127.0.0.1:0\"\n\
         [mysql_variables]\ninterfaces = \"127.0.0.1:{PORT}\"\nthreads = 2\nmonitor_enabled = false\n\
         [[mysql_servers]]\nhostgroup_id = 0\nhostname = \"127.0.0.1\"\nport = {p}\n\
         [[mysql_servers]]\nhostgroup_id = 1\nhostname = \"127.0.0.1\"\nport = {r}\n\
         [[mysql_users]]\nusername = \"app\"\npassword = \"app\"\n\
         [[mysql_query_rules]]\nrule_id = 1\nactive = 1\nmatch_digest = \"^SELECT\"\ndestination_hostgroup = 1\napply = 1\n"
    )
}

struct Run {
    per_s: f64,
    p50: f64,
    p99: f64,
    stale: u64,
    errors: u64,
}

fn load(script: &std::path::Path, name: &str, writes: bool) -> xtask::Result<Run> {
    step(&format!("{name}: {RUN_SECONDS} s"));
    let mut cmd = Command::new("python3");
    cmd.arg(script).args([
        PORT.to_string(),
        RUN_SECONDS.to_string(),
        THREADS.to_string(),
    ]);
    if !writes {
        cmd.env("BENCH_CAUSAL_READS_ONLY", "1");
    }
    let out = run_capture(&mut cmd)?;
    let v: serde_json::Value =
        serde_json::from_str(out.trim()).map_err(|e| format!("{name}: {e}: {out}"))?;
    if v["errors"].as_u64().unwrap_or(0) > 0 {
        return Err(format!("{name}: {}", v["first_error"]));
    }
    Ok(Run {
        per_s: v["iterations"].as_f64().unwrap_or(0.0) / f64::from(RUN_SECONDS),
        p50: v["p50"].as_f64().unwrap_or(f64::NAN),
        p99: v["p99"].as_f64().unwrap_or(f64::NAN),
        stale: v["stale"].as_u64().unwrap_or(0),
        errors: v["errors"].as_u64().unwrap_or(0),
    })
}

fn admin(sql: &str) -> xtask::Result<()> {
    crate::soak_faults::admin_sql(ADMIN_PORT, sql).map(drop)
}

/// Runs the rounds and prints the table (also written to target/bench-causal.md).
pub(crate) fn causal() -> xtask::Result<()> {
    xtask::packages::ensure_test_tools()?;
    xtask::backends_up()?;
    build_release()?;
    let rows: Vec<String> = (1..=THREADS).map(|i| format!("({i}, 0)")).collect();
    xtask::mariadb::primary(&xtask::state_dir()).sql(&format!(
        "CREATE DATABASE IF NOT EXISTS causal_bench; DROP TABLE IF EXISTS causal_bench.t; \
             CREATE TABLE causal_bench.t (id INT PRIMARY KEY, v BIGINT NOT NULL); \
             INSERT INTO causal_bench.t VALUES {};",
        rows.join(",")
    ))?;
    let dir = xtask::state_dir().join("bench-causal");
    let mut child = spawn_sluice(&dir, "causal", &sluice_config(), PORT)?;
    let script = dir.join("bench_causal.py");
    std::fs::write(&script, include_str!("bench_causal.py")).map_err(|e| e.to_string())?;
    let setups: [(&str, &str, bool); 4] = [
        ("none (the classic split)", "none", true),
        ("local", "local", true),
        ("user", "user", true),
        ("local, reads only (no token)", "local", false),
    ];
    let result = (|| {
        let mut runs: Vec<Vec<Run>> = setups.iter().map(|_| Vec::new()).collect();
        for round in 1..=ROUNDS {
            for (i, (name, mode, writes)) in setups.iter().enumerate() {
                admin(&format!(
                    "SET mysql-causal_reads = '{mode}'; SET mysql-causal_reads_timeout_ms = 2000; LOAD MYSQL VARIABLES TO RUNTIME"
                ))?;
                runs[i].push(load(
                    &script,
                    &format!("round {round}/{ROUNDS}: {name}"),
                    *writes,
                )?);
            }
        }
        Ok::<_, String>(runs)
    })();
    proc::signal(child.id(), "TERM");
    let _ = child.wait();
    let runs = result?;
    let mut t = format!(
        "{THREADS} threads, closed loops of UPDATE (writer) then a point select of the same row (replica, \
         natural lag), {RUN_SECONDS} s per run, {ROUNDS} interleaved rounds, medians (range)\n\n\
         | causal_reads | loops/s | read p50 ms | read p99 ms | stale reads (all rounds) | errors |\n|---|---|---|---|---|---|\n"
    );
    for ((name, _, _), rs) in setups.iter().zip(&runs) {
        let of = |f: fn(&Run) -> f64| median(rs.iter().map(f).collect());
        let range = |f: fn(&Run) -> f64| spread(&rs.iter().map(f).collect::<Vec<_>>());
        t.push_str(&format!(
            "| {name} | {:.0} {} | {:.2} | {:.2} {} | {} | {} |\n",
            of(|r| r.per_s),
            range(|r| r.per_s),
            of(|r| r.p50),
            of(|r| r.p99),
            range(|r| r.p99),
            rs.iter().map(|r| r.stale).sum::<u64>(),
            rs.iter().map(|r| r.errors).sum::<u64>(),
        ));
    }
    println!("\n{t}");
    let out = xtask::workspace_root().join("target/bench-causal.md");
    std::fs::write(&out, &t).map_err(|e| e.to_string())?;
    step(&format!("table written to {}", out.display()));
    Ok(())
}

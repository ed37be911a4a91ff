//! `cargo xtask bench notify`: LISTEN/NOTIFY through Sluice's fan-out against PostgreSQL itself.
//! One sender sends [`NOTIFICATIONS`] notifications 20 ms apart to every listener (psycopg,
//! asyncio, one Python process for both paths, so its own overhead is in both); each run reports
//! the delivery latency p50/p99 (send to receipt) and the server connections the listeners cost.
//! Side by side at 200 listeners (PostgreSQL directly: one backend per listener; through Sluice),
//! then Sluice alone at 1,000 (more than the test server's `max_connections`). [`ROUNDS`]
//! interleaved rounds, medians with the range in brackets.

use crate::bench::{build_release, median, spawn_sluice, spread};
use std::process::Command;
use xtask::proc::{self, run_capture, step};

const PORT: u16 = 16754;
const ADMIN_PORT: u16 = 16752;
const NOTIFICATIONS: u32 = 100;
const ROUNDS: usize = 3;

fn sluice_config() -> String {
    let p = xtask::ports::PG_PRIMARY;
    format!(
        "[admin_variables]\nmysql_ifaces = \"127.0.0.1:{ADMIN_PORT}\"\npgsql_ifaces = \"127.0.0.1:0\"\n\
         [pgsql_variables]\ninterfaces = \"127.0.0.1:{PORT}\"\nthreads = 2\nmonitor_enabled = false\n\
         [mysql_variables]\ninterfaces = \"127.0.0.1:0\"\n\
         [[pgsql_servers]]\nhostgroup_id = 0\nhostname = \"127.0.0.1\"\nport = {p}\nmax_connections = 8\n\
         [[pgsql_users]]\nusername = \"app\"\npassword = \"app\"\n"
    )
}

struct Run {
    p50: f64,
    p99: f64,
    servers: u64,
    delivered: u64,
    expected: u64,
}

fn load(script: &std::path::Path, name: &str, port: u16, listeners: u32) -> xtask::Result<Run> {
    step(&format!(
        "{name}: {listeners} listeners, {NOTIFICATIONS} notifications"
    ));
    let out = run_capture(Command::new("python3").arg(script).args([
        port.to_string(),
        "postgres".to_string(),
        listeners.to_string(),
        NOTIFICATIONS.to_string(),
    ]))?;
    let v: serde_json::Value =
        serde_json::from_str(out.trim()).map_err(|e| format!("{name}: {e}: {out}"))?;
    Ok(Run {
        p50: v["p50"].as_f64().unwrap_or(f64::NAN),
        p99: v["p99"].as_f64().unwrap_or(f64::NAN),
        servers: v["servers"].as_u64().unwrap_or(0),
        delivered: v["delivered"].as_u64().unwrap_or(0),
        expected: v["expected"].as_u64().unwrap_or(0),
    })
}

/// Runs the rounds and prints the table (also written to target/bench-notify.md).
pub(crate) fn notify() -> xtask::Result<()> {
    xtask::packages::ensure_test_tools()?;
    xtask::backends_up()?;
    build_release()?;
    let dir = xtask::state_dir().join("bench-notify");
    let mut child = spawn_sluice(&dir, "notify", &sluice_config(), PORT)?;
    let script = dir.join("bench_notify.py");
    std::fs::write(&script, include_str!("bench_notify.py")).map_err(|e| e.to_string())?;
    let direct = xtask::ports::PG_PRIMARY;
    let setups: [(&str, u16, u32); 3] = [
        ("PostgreSQL directly", direct, 200),
        ("through Sluice (fanout)", PORT, 200),
        ("through Sluice (fanout)", PORT, 1_000),
    ];
    let result = (|| {
        let mut runs: Vec<Vec<Run>> = setups.iter().map(|_| Vec::new()).collect();
        for round in 1..=ROUNDS {
            for (i, (name, port, listeners)) in setups.iter().enumerate() {
                let label = format!("round {round}/{ROUNDS}: {name}");
                runs[i].push(load(&script, &label, *port, *listeners)?);
            }
        }
        Ok::<_, String>(runs)
    })();
    proc::signal(child.id(), "TERM");
    let _ = child.wait();
    let runs = result?;
    let mut t = format!(
        "{NOTIFICATIONS} notifications 20 ms apart to every listener, {ROUNDS} interleaved rounds, medians (range)\n\n\
         | path | listeners | server connections of the listeners' database | delivered / expected (all rounds) | delivery p50 ms | delivery p99 ms |\n\
         |---|---|---|---|---|---|\n"
    );
    for ((name, _, listeners), rs) in setups.iter().zip(&runs) {
        let of = |f: fn(&Run) -> f64| median(rs.iter().map(f).collect());
        let range = |f: fn(&Run) -> f64| spread(&rs.iter().map(f).collect::<Vec<_>>());
        t.push_str(&format!(
            "| {name} | {listeners} | {:.0} | {} / {} | {:.2} {} | {:.2} {} |\n",
            of(|r| r.servers as f64),
            rs.iter().map(|r| r.delivered).sum::<u64>(),
            rs.iter().map(|r| r.expected).sum::<u64>(),
            of(|r| r.p50),
            range(|r| r.p50),
            of(|r| r.p99),
            range(|r| r.p99),
        ));
    }
    println!("\n{t}");
    let out = xtask::workspace_root().join("target/bench-notify.md");
    std::fs::write(&out, &t).map_err(|e| e.to_string())?;
    step(&format!("table written to {}", out.display()));
    Ok(())
}

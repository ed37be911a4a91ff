//! `cargo xtask bench mcp`: `run_sql_readonly` through the MCP endpoint with 16 agents (the
//! MCP Python SDK) against the same point select sent straight to the replica (PyMySQL, 16
//! threads), p50/p99 and calls per second; and the data path's sysbench point selects through
//! Sluice with the MCP endpoint off and on-but-idle, side by side. `BENCH_TIME` (seconds per
//! run, default 20) and `BENCH_CLIENTS` (default 16) tune it.

use crate::bench::{DB, Sample, build_release, env_num, prepare_data, run_one, spawn_sluice};
use std::process::Command;
use xtask::proc::{run_capture, step};

const OFF_PORT: u16 = 16041;
const ON_PORT: u16 = 16042;
const MCP_PORT: u16 = 16073;
const TOKEN: &str = "bench-token";

fn config(port: u16, mcp: bool) -> String {
    let mcp = if mcp {
        format!(
            "[mcp_variables]\nenabled = \"true\"\nport = \"{MCP_PORT}\"\nuse_ssl = \"false\"\nquery_endpoint_auth = \"{TOKEN}\"\nmax_rows = \"10\"\n"
        )
    } else {
        String::new()
    };
    format!(
        "[admin_variables]\nmysql_ifaces = \"127.0.0.1:0\"\npgsql_ifaces = \"127.0.0.1:0\"\n[pgsql_variables]\ninterfaces = \"127.0.0.1:0\"\n\
         [mysql_variables]\ninterfaces = \"127.0.0.1:{port}\"\n{mcp}\
         [[mysql_servers]]\nhostname = \"127.0.0.1\"\nport = {primary}\n\
         [[mysql_servers]]\nhostgroup_id = 1\nhostname = \"127.0.0.1\"\nport = {replica}\n\
         [[mysql_users]]\nusername = \"app\"\npassword = \"app\"\n\
         [[mysql_replication_hostgroups]]\nwriter_hostgroup = 0\nreader_hostgroup = 1\n",
        primary = xtask::ports::MY_PRIMARY,
        replica = xtask::ports::MY_REPLICA,
    )
}

/// Runs the benchmark and prints (and writes to `target/bench-mcp.md`) its table.
pub(crate) fn mcp() -> xtask::Result<()> {
    xtask::packages::ensure_bench_tools()?;
    xtask::packages::ensure_test_tools()?;
    xtask::backends_up()?;
    let state = xtask::state_dir();
    prepare_data(&state)?;
    build_release()?;
    let dir = state.join("bench");
    let mut off = spawn_sluice(&dir, "sluice-mcp-off", &config(OFF_PORT, false), OFF_PORT)?;
    let mut on = spawn_sluice(&dir, "sluice-mcp-on", &config(ON_PORT, true), ON_PORT)?;
    let secs = env_num("BENCH_TIME", 20);
    let clients = env_num("BENCH_CLIENTS", 16);
    let mut samples: Vec<Sample> = Vec::new();
    for (target, port, pid) in [
        ("sluice, MCP off", OFF_PORT, off.id()),
        ("sluice, MCP on and idle", ON_PORT, on.id()),
        ("sluice, MCP off", OFF_PORT, off.id()),
        ("sluice, MCP on and idle", ON_PORT, on.id()),
    ] {
        samples.push(run_one("oltp_point_select", target, port, Some(pid), secs)?);
    }
    step(&format!(
        "MCP: {clients} agents calling run_sql_readonly for {secs}s, then PyMySQL direct"
    ));
    let script = dir.join("bench_mcp.py");
    std::fs::write(&script, include_str!("bench_mcp.py")).map_err(|e| e.to_string())?;
    let before = crate::bench::cpu_ticks(on.id());
    let started = std::time::Instant::now();
    let out = run_capture(
        Command::new("python3")
            .arg(&script)
            .arg(format!("http://127.0.0.1:{MCP_PORT}/mcp/query"))
            .arg(TOKEN)
            .arg(xtask::ports::MY_REPLICA.to_string())
            .arg(clients.to_string())
            .arg(secs.to_string())
            .arg(DB),
    );
    let mcp_cpu_pct = before
        .zip(crate::bench::cpu_ticks(on.id()))
        .map(|(b, a)| (a - b) as f64 / started.elapsed().as_secs_f64());
    let _ = off.kill();
    let _ = on.kill();
    let _ = off.wait();
    let _ = on.wait();
    let out = out?;
    let mut table = format!(
        "### MCP endpoint (`cargo xtask bench mcp`, BENCH_TIME={secs}, {clients} clients)\n\n\
         | target | calls/s | p50 ms | p99 ms | errors |\n|---|---|---|---|---|\n"
    );
    for line in out.lines().filter(|l| l.starts_with('{')) {
        let v: serde_json::Value = serde_json::from_str(line).map_err(|e| e.to_string())?;
        table.push_str(&format!(
            "| {} | {:.0} | {:.2} | {:.2} | {} |\n",
            v["target"].as_str().unwrap_or(""),
            v["per_sec"].as_f64().unwrap_or(0.0),
            v["p50_ms"].as_f64().unwrap_or(f64::NAN),
            v["p99_ms"].as_f64().unwrap_or(f64::NAN),
            v["errors"]
        ));
    }
    if let Some(cpu) = mcp_cpu_pct {
        table.push_str(&format!(
            "\nSluice's CPU during the MCP phase (both loads): {cpu:.0} % of one core (the first half of the phase is MCP; the direct load does not touch Sluice).\n"
        ));
    }
    table.push_str(
        "\nThe data path with the MCP endpoint off and on-but-idle, sysbench oltp_point_select, 16 threads, alternated:\n\n\
         | target | QPS | p95 ms | Sluice CPU % |\n|---|---|---|---|\n",
    );
    for s in &samples {
        table.push_str(&format!(
            "| {} | {:.0} | {:.2} | {} |\n",
            s.target,
            s.qps,
            s.p95_ms,
            s.proxy_cpu_pct.map_or("-".into(), |c| format!("{c:.0}"))
        ));
    }
    println!("\n{table}");
    let path = xtask::workspace_root().join("target/bench-mcp.md");
    std::fs::write(&path, &table).map_err(|e| e.to_string())?;
    step(&format!("table written to {}", path.display()));
    Ok(())
}

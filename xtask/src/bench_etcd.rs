//! `cargo xtask bench etcd`: the configuration store's client, measured. A three-member etcd
//! cluster and a group of three Sluice nodes following it (and, with `BENCH_BASELINE_BIN`, a
//! second group of that build's nodes under another prefix, measured in the same rounds). Per
//! round and group: [`SAVES`] saves on the first node, each timed (`SAVE MYSQL SERVERS TO
//! CLUSTER`) and its arrival on the two other nodes timed from the save's start; then the
//! nodes' CPU while idle (lease renewals, announcements, membership reads) over [`IDLE_S`]
//! seconds, and their RSS. [`ROUNDS`] interleaved rounds, medians with the range in brackets.

use crate::bench::{build_release, cpu_ticks, median, spawn_sluice_bin, spread};
use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::time::Duration;
use xtask::etcd::EtcdCluster;
use xtask::proc::{self, run_capture, step};

const SAVES: u32 = 50;
const ROUNDS: usize = 3;
const IDLE_S: u64 = 20;
const ETCD_PORTS: [(u16, u16); 3] = [(16790, 16791), (16792, 16793), (16794, 16795)];

/// One group of three nodes of one build.
struct Group {
    name: &'static str,
    admin_ports: Vec<u16>,
    nodes: Vec<Child>,
    runs: Vec<Run>,
}

#[derive(Default)]
struct Run {
    save_p50: f64,
    save_p99: f64,
    arrival_p50: f64,
    arrival_p99: f64,
    idle_cpu_ms_per_min: f64,
    rss_kib: f64,
}

fn node_config(admin: u16, port: u16, store: &str) -> String {
    let replica = xtask::ports::MY_REPLICA;
    format!(
        "[admin_variables]\nmysql_ifaces = \"127.0.0.1:{admin}\"\npgsql_ifaces = \"127.0.0.1:0\"\n\
         [mysql_variables]\ninterfaces = \"127.0.0.1:{port}\"\nmonitor_enabled = false\n\
         [pgsql_variables]\ninterfaces = \"127.0.0.1:0\"\n\
         [cluster]\nconfig_store = \"{store}\"\n\
         [[mysql_servers]]\nhostgroup_id = 1\nhostname = \"127.0.0.1\"\nport = {replica}\n"
    )
}

fn start_group(
    name: &'static str,
    bin: &Path,
    dir: &Path,
    store: &EtcdCluster,
    first_port: u16,
) -> xtask::Result<Group> {
    let mut group = Group {
        name,
        admin_ports: Vec::new(),
        nodes: Vec::new(),
        runs: Vec::new(),
    };
    for i in 0..3u16 {
        let (admin, port) = (first_port + 2 * i, first_port + 2 * i + 1);
        let config = node_config(admin, port, &store.url(name));
        let node = spawn_sluice_bin(bin, dir, &format!("{name}-{i}"), &config, admin)?;
        group.admin_ports.push(admin);
        group.nodes.push(node);
    }
    Ok(group)
}

fn percentile(mut v: Vec<f64>, p: f64) -> f64 {
    v.sort_by(f64::total_cmp);
    let at = ((v.len() as f64 - 1.0) * p).round() as usize;
    v.get(at).copied().unwrap_or(f64::NAN)
}

fn measure(script: &Path, group: &Group, first_weight: u32) -> xtask::Result<Run> {
    let ports: Vec<String> = group.admin_ports.iter().map(u16::to_string).collect();
    let out = run_capture(Command::new("python3").arg(script).args([
        ports.join(","),
        SAVES.to_string(),
        first_weight.to_string(),
    ]))?;
    let v: serde_json::Value =
        serde_json::from_str(out.trim()).map_err(|e| format!("{}: {e}: {out}", group.name))?;
    let list = |k: &str| -> Vec<f64> {
        v[k].as_array()
            .into_iter()
            .flatten()
            .filter_map(serde_json::Value::as_f64)
            .collect()
    };
    let pids: Vec<u32> = group.nodes.iter().map(Child::id).collect();
    let ticks = |pids: &[u32]| pids.iter().filter_map(|p| cpu_ticks(*p)).sum::<u64>();
    let before = ticks(&pids);
    std::thread::sleep(Duration::from_secs(IDLE_S));
    let used_ms = (ticks(&pids) - before) as f64 * 10.0 / pids.len() as f64;
    Ok(Run {
        save_p50: percentile(list("save_ms"), 0.5),
        save_p99: percentile(list("save_ms"), 0.99),
        arrival_p50: percentile(list("arrival_ms"), 0.5),
        arrival_p99: percentile(list("arrival_ms"), 0.99),
        idle_cpu_ms_per_min: used_ms * 60.0 / IDLE_S as f64,
        rss_kib: pids.iter().map(|p| proc::rss_kib(*p) as f64).sum::<f64>() / pids.len() as f64,
    })
}

fn table(groups: &[Group]) -> String {
    let mut t = format!(
        "3 nodes per build on one 3-member etcd 3.4; {SAVES} saves per round, {ROUNDS} interleaved rounds; medians (range)\n\n\
         | build | SAVE TO CLUSTER p50 ms | p99 ms | arrival on the other nodes p50 ms | p99 ms | idle CPU ms/min per node | RSS KiB per node |\n\
         |---|---|---|---|---|---|---|\n"
    );
    for g in groups {
        let col = |f: fn(&Run) -> f64| {
            let v: Vec<f64> = g.runs.iter().map(f).collect();
            format!("{:.2} {}", median(v.clone()), spread(&v))
        };
        t.push_str(&format!(
            "| {} | {} | {} | {} | {} | {} | {} |\n",
            g.name,
            col(|r| r.save_p50),
            col(|r| r.save_p99),
            col(|r| r.arrival_p50),
            col(|r| r.arrival_p99),
            col(|r| r.idle_cpu_ms_per_min),
            col(|r| r.rss_kib),
        ));
    }
    t
}

/// Runs the rounds and prints the table (also written to target/bench-etcd.md).
pub(crate) fn etcd() -> xtask::Result<()> {
    xtask::packages::ensure_test_tools()?;
    xtask::backends_up()?;
    build_release()?;
    let dir = xtask::state_dir().join("bench-etcd");
    let _ = std::fs::remove_dir_all(&dir);
    step("starting a three-member etcd cluster");
    let store = EtcdCluster::start(&dir.join("etcd"), &ETCD_PORTS)?;
    let mut builds: Vec<(&'static str, PathBuf)> = vec![(
        "sluice",
        xtask::workspace_root().join("target/release/sluice"),
    )];
    if let Some(bin) = std::env::var_os("BENCH_BASELINE_BIN") {
        builds.push(("sluice-baseline", PathBuf::from(bin)));
    }
    let mut groups = Vec::new();
    for (i, (name, bin)) in builds.iter().enumerate() {
        step(&format!("{name}: starting three nodes on the store"));
        groups.push(start_group(name, bin, &dir, &store, 16800 + 10 * i as u16)?);
    }
    let script = dir.join("bench_etcd.py");
    std::fs::write(&script, include_str!("bench_etcd.py")).map_err(|e| e.to_string())?;
    let result = (|| {
        for round in 0..ROUNDS {
            for g in groups.iter_mut() {
                step(&format!(
                    "round {}/{ROUNDS}: {}: {SAVES} saves, then {IDLE_S} s idle",
                    round + 1,
                    g.name
                ));
                let run = measure(&script, g, 100 + (round as u32) * SAVES)?;
                g.runs.push(run);
            }
        }
        Ok::<(), String>(())
    })();
    for g in groups.iter_mut() {
        for node in g.nodes.iter_mut() {
            proc::signal(node.id(), "TERM");
            let _ = node.wait();
        }
    }
    drop(store);
    result?;
    let t = table(&groups);
    println!("\n{t}");
    let out = xtask::workspace_root().join("target/bench-etcd.md");
    std::fs::write(&out, &t).map_err(|e| e.to_string())?;
    step(&format!("table written to {}", out.display()));
    Ok(())
}

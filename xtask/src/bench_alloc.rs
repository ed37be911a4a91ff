//! `cargo xtask bench alloc`: heap allocations per statement on the hot path, counted by a
//! `sluice` built with `--features count-allocations` (a counting global allocator whose totals
//! `stats_memory_metrics` shows).
//!
//! Each workload runs twice through the same Sluice with a different number of statements
//! (`BENCH_ALLOC_EVENTS`, default 20,000, and a tenth of it); the difference in allocations divided
//! by the difference in statements is the cost per statement, so connecting, logging in and
//! preparing (once per client) cancel out. The monitors are off, so nothing else allocates.

use crate::bench::{env_num, prepare_data, spawn_sluice_bin};
use crate::bench_pgsql::pgbench;
use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;
use xtask::proc::{self, run_capture, run_visible, step};

pub(crate) const MYSQL_PORT: u16 = 16634;
pub(crate) const PGSQL_PORT: u16 = 16635;
const ADMIN_PORT: u16 = 16632;
/// Clients per run: enough that sessions interleave on the pool, few enough that a 2-core
/// machine runs them without queueing.
const CLIENTS: u32 = 4;

/// The counters `stats_memory_metrics` shows in a counting build.
#[derive(Debug, Clone, Copy, Default)]
struct Heap {
    allocations: u64,
    reallocations: u64,
    bytes: u64,
}

impl Heap {
    fn minus(self, o: Heap) -> Heap {
        Heap {
            allocations: self.allocations.saturating_sub(o.allocations),
            reallocations: self.reallocations.saturating_sub(o.reallocations),
            bytes: self.bytes.saturating_sub(o.bytes),
        }
    }
}

fn heap() -> xtask::Result<Heap> {
    let out = crate::soak_faults::admin_sql(
        ADMIN_PORT,
        "SELECT Variable_Name, Variable_Value FROM stats_memory_metrics WHERE Variable_Name LIKE 'heap_%'",
    )?;
    let mut h = Heap::default();
    for line in out.lines() {
        let mut f = line.split('\t');
        let (Some(k), Some(v)) = (f.next(), f.next().and_then(|v| v.trim().parse().ok())) else {
            continue;
        };
        match k {
            "heap_allocations" => h.allocations = v,
            "heap_reallocations" => h.reallocations = v,
            "heap_bytes_allocated" => h.bytes = v,
            _ => {}
        }
    }
    if h.allocations == 0 {
        return Err(format!(
            "stats_memory_metrics has no heap_allocations: is this a count-allocations build?\n{out}"
        ));
    }
    Ok(h)
}

/// One workload: a command that runs `n` statements in total.
pub(crate) struct Workload {
    pub(crate) name: &'static str,
    pub(crate) run: fn(u64) -> Command,
}

fn sysbench(n: u64, extra: &[&str]) -> Command {
    let mut c = Command::new("sysbench");
    c.args(["--db-driver=mysql", "--mysql-host=127.0.0.1"])
        .arg(format!("--mysql-port={MYSQL_PORT}"))
        .args(["--mysql-user=app", "--mysql-password=app"])
        .arg(format!("--mysql-db={}", crate::bench::DB))
        .arg(format!("--tables={}", crate::bench::TABLES))
        .arg(format!("--table-size={}", crate::bench::ROWS))
        .arg(format!("--threads={CLIENTS}"))
        .arg(format!("--events={n}"))
        .args(["--time=0", "--report-interval=0"])
        .args(extra)
        .args(["oltp_point_select", "run"]);
    c
}

fn pgbench_n(n: u64, mode: &str) -> Command {
    let per_client = (n / u64::from(CLIENTS)).max(1);
    pgbench(
        PGSQL_PORT,
        &[
            "-n".into(),
            "-S".into(),
            "-M".into(),
            mode.into(),
            "-c".into(),
            CLIENTS.to_string(),
            "-j".into(),
            "2".into(),
            "-t".into(),
            per_client.to_string(),
        ],
    )
}

pub(crate) const WORKLOADS: [Workload; 5] = [
    Workload {
        name: "sysbench oltp_point_select, prepared (COM_STMT_EXECUTE)",
        run: |n| sysbench(n, &[]),
    },
    Workload {
        name: "sysbench oltp_point_select, text (COM_QUERY)",
        run: |n| sysbench(n, &["--db-ps-mode=disable"]),
    },
    Workload {
        name: "pgbench -S simple (one Query per transaction)",
        run: |n| pgbench_n(n, "simple"),
    },
    Workload {
        name: "pgbench -S extended (Parse/Bind/Describe/Execute/Sync)",
        run: |n| pgbench_n(n, "extended"),
    },
    Workload {
        name: "pgbench -S prepared (Bind/Execute/Sync)",
        run: |n| pgbench_n(n, "prepared"),
    },
];

/// Builds `sluice` with the counting allocator and returns its path (beside the release build;
/// the release `sluice` the other benches run is rebuilt by them as usual).
fn build_counting() -> xtask::Result<PathBuf> {
    step("building sluice (release, --features count-allocations)");
    let root = xtask::workspace_root();
    run_visible(Command::new("cargo").current_dir(&root).args([
        "build",
        "--release",
        "--quiet",
        "-p",
        "sluice-bin",
        "--features",
        "count-allocations",
    ]))?;
    let counting = root.join("target/release/sluice-count-allocations");
    std::fs::copy(root.join("target/release/sluice"), &counting).map_err(|e| e.to_string())?;
    Ok(counting)
}

pub(crate) fn config() -> String {
    format!(
        "[admin_variables]\nmysql_ifaces = \"127.0.0.1:{ADMIN_PORT}\"\npgsql_ifaces = \"127.0.0.1:0\"\n\
         [mysql_variables]\ninterfaces = \"127.0.0.1:{MYSQL_PORT}\"\nthreads = 2\nmonitor_enabled = false\n\
         [pgsql_variables]\ninterfaces = \"127.0.0.1:{PGSQL_PORT}\"\nmonitor_enabled = false\n\
         [[mysql_servers]]\nhostname = \"127.0.0.1\"\nport = {}\nmax_connections = 32\n\
         [[mysql_users]]\nusername = \"app\"\npassword = \"app\"\n\
         [[pgsql_servers]]\nhostname = \"127.0.0.1\"\nport = {}\nmax_connections = 32\n\
         [[pgsql_users]]\nusername = \"app\"\npassword = \"app\"\n",
        xtask::ports::MY_PRIMARY,
        xtask::ports::PG_PRIMARY,
    )
}

/// Allocations of one run of `n` statements.
fn measure(w: &Workload, n: u64) -> xtask::Result<Heap> {
    let before = heap()?;
    run_capture(&mut (w.run)(n))?;
    // Sessions release their connections and drop their state after the client left.
    std::thread::sleep(Duration::from_millis(300));
    Ok(heap()?.minus(before))
}

/// The clients, the servers and the data the [`WORKLOADS`] need; returns the state directory.
pub(crate) fn prepare_workloads() -> xtask::Result<PathBuf> {
    xtask::packages::ensure_test_tools()?;
    xtask::backends_up()?;
    let state = xtask::state_dir();
    prepare_data(&state)?;
    step("pgbench -i -s 10 (direct)");
    run_capture(&mut pgbench(
        xtask::ports::PG_PRIMARY,
        &["-i".into(), "-q".into(), "-s".into(), "10".into()],
    ))?;
    Ok(state)
}

/// Runs the allocation benchmark and prints the table (also written to target/bench-alloc.md).
pub(crate) fn alloc() -> xtask::Result<()> {
    let state = prepare_workloads()?;
    let bin = build_counting()?;
    let dir = state.join("bench-alloc");
    let mut sluice = spawn_sluice_bin(&bin, &dir, "sluice", &config(), MYSQL_PORT)?;
    let result = run_all();
    proc::signal(sluice.id(), "TERM");
    let _ = sluice.wait();
    let table = result?;
    println!("\n{table}");
    let out = xtask::workspace_root().join("target/bench-alloc.md");
    std::fs::write(&out, &table).map_err(|e| e.to_string())?;
    step(&format!("table written to {}", out.display()));
    Ok(())
}

fn run_all() -> xtask::Result<String> {
    proc::wait_until(Duration::from_secs(10), || proc::port_open(PGSQL_PORT));
    let large = env_num("BENCH_ALLOC_EVENTS", 20_000);
    let small = (large / 10).max(u64::from(CLIENTS));
    // What one reading of the counters costs (the admin query runs in SQLite), then what an
    // idle Sluice allocates in 2 s without it.
    let first = heap()?;
    let second = heap()?;
    let read_cost = second.minus(first).allocations;
    std::thread::sleep(Duration::from_secs(2));
    let idle = heap()?.minus(second).allocations.saturating_sub(read_cost);
    let mut t = format!(
        "Heap allocations per statement through Sluice ({CLIENTS} clients; runs of {small} and \
         {large} statements, the difference divided by {} statements; monitors off; idle: {idle} \
         allocations in 2 s; a reading of the counters: {read_cost})\n\n\
         | workload | allocations / statement | reallocations / statement | bytes allocated / statement |\n\
         |---|---|---|---|\n",
        large - small,
    );
    for w in &WORKLOADS {
        step(&format!("{}: {small} then {large} statements", w.name));
        let a = measure(w, small)?;
        let b = measure(w, large)?;
        let d = (large - small) as f64;
        let per = |x: u64, y: u64| (y as f64 - x as f64) / d;
        t.push_str(&format!(
            "| {} | {:.2} | {:.2} | {:.0} |\n",
            w.name,
            per(a.allocations, b.allocations),
            per(a.reallocations, b.reallocations),
            per(a.bytes, b.bytes),
        ));
    }
    Ok(t)
}

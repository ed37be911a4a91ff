//! `cargo xtask bench mysql`: sysbench direct to MariaDB, through HAProxy (TCP mode) and through
//! Sluice, run back to back in one go, printed as a table with QPS, p95, the ratios to direct and
//! to HAProxy, and the proxy's CPU per query. Each round runs the targets in a random order (the
//! order is printed): with a fixed order the last targets of a round measured lower.
//!
//! `BENCH_TIME` (seconds per run, default 20) and `BENCH_ROUNDS` (default 1) tune the run.
//! `BENCH_BASELINE_BIN=/path/to/sluice` adds a `sluice-baseline` target run from that binary
//! (e.g. built from the commit before a change), interleaved with the others, and to the
//! 256-client multiplexing table. The
//! `sluice+scrape` target is the same Sluice with `/metrics` fetched every second during its
//! runs: the metrics endpoint's cost, side by side with plain `sluice`. `sluice` runs the default
//! `mysql-threads`; `sluice-per-cpu` the same build with one session thread per CPU, the rule the
//! default had before 2026-12-05 and what a host dedicating its cores to Sluice would set.

use crate::bench_scrape::Scraper;
use std::path::Path;
use std::process::Command;
use std::time::Duration;
use xtask::proc::{self, run_capture, run_visible, step};

const HAPROXY_PORT: u16 = 16033;
const SLUICE_PORT: u16 = 16034;
const SLUICE_MUX_PORT: u16 = 16035;
const SLUICE_RULES_PORT: u16 = 16036;
const SLUICE_BASELINE_PORT: u16 = 16037;
const SLUICE_SCRAPE_PORT: u16 = 16038;
const SLUICE_BASELINE_MUX_PORT: u16 = 16039;
const SLUICE_SCRAPE_HTTP_PORT: u16 = 16070;
const SLUICE_PER_CPU_PORT: u16 = 16040;

/// The classic read/write split, with hostgroup 1 on the same primary: the run measures what
/// digesting and evaluating the rules costs, not a different server.
const SPLIT_RULES: &str = "[[mysql_query_rules]]\nrule_id = 1\nactive = 1\nmatch_digest = '^SELECT.*FOR UPDATE'\ndestination_hostgroup = 0\napply = 1\n\
     [[mysql_query_rules]]\nrule_id = 2\nactive = 1\nmatch_digest = '^SELECT'\ndestination_hostgroup = 1\napply = 1\n";
pub(crate) const DB: &str = "sbbench";
pub(crate) const TABLES: u32 = 4;
pub(crate) const ROWS: u32 = 100_000;

pub(crate) struct Sample {
    pub(crate) workload: &'static str,
    pub(crate) target: &'static str,
    pub(crate) qps: f64,
    pub(crate) p95_ms: f64,
    pub(crate) proxy_cpu_pct: Option<f64>,
}

/// A number from the environment, or `default`.
pub(crate) fn env_num(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn sysbench(port: u16, workload: &str, action: &str, extra: &[String]) -> Command {
    let mut c = Command::new("sysbench");
    c.args(["--db-driver=mysql", "--mysql-host=127.0.0.1"])
        .arg(format!("--mysql-port={port}"))
        .args(["--mysql-user=app", "--mysql-password=app"])
        .arg(format!("--mysql-db={DB}"))
        .arg(format!("--tables={TABLES}"))
        .arg(format!("--table-size={ROWS}"))
        .args(extra)
        .arg(workload)
        .arg(action);
    c
}

pub(crate) fn prepare_data(state: &Path) -> xtask::Result<()> {
    let primary = xtask::mariadb::primary(state);
    let have = primary
        .sql(&format!(
            "SELECT COUNT(*) FROM information_schema.tables WHERE table_schema='{DB}'"
        ))
        .unwrap_or_default();
    if have.trim() == TABLES.to_string() {
        return Ok(());
    }
    step(&format!(
        "preparing sysbench data: {TABLES} tables x {ROWS} rows in {DB}"
    ));
    primary.sql(&format!(
        "DROP DATABASE IF EXISTS {DB}; CREATE DATABASE {DB};"
    ))?;
    run_capture(&mut sysbench(
        xtask::ports::MY_PRIMARY,
        "oltp_point_select",
        "prepare",
        &["--threads=4".into()],
    ))?;
    Ok(())
}

/// User+system CPU ticks (1/100 s) a process has used.
pub(crate) fn cpu_ticks(pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = &stat[stat.rfind(')')? + 2..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    Some(f.get(11)?.parse::<u64>().ok()? + f.get(12)?.parse::<u64>().ok()?)
}

pub(crate) fn run_one(
    workload: &'static str,
    target: &'static str,
    port: u16,
    pid: Option<u32>,
    secs: u64,
) -> xtask::Result<Sample> {
    run_threads(workload, target, port, pid, secs, 16)
}

fn run_threads(
    workload: &'static str,
    target: &'static str,
    port: u16,
    pid: Option<u32>,
    secs: u64,
    threads: u32,
) -> xtask::Result<Sample> {
    step(&format!(
        "{workload} via {target} ({secs}s, {threads} threads)"
    ));
    let before = pid.and_then(cpu_ticks);
    let out = run_capture(&mut sysbench(
        port,
        workload,
        "run",
        &[
            format!("--threads={threads}"),
            format!("--time={secs}"),
            "--percentile=95".into(),
            "--report-interval=0".into(),
        ],
    ))?;
    let after = pid.and_then(cpu_ticks);
    let qps = out
        .lines()
        .find(|l| l.trim_start().starts_with("queries:"))
        .and_then(|l| l.split('(').nth(1))
        .and_then(|s| s.split_whitespace().next())
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| format!("cannot read QPS from sysbench output:\n{out}"))?;
    let p95_ms = out
        .lines()
        .find(|l| l.contains("95th percentile:"))
        .and_then(|l| l.split(':').nth(1))
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(f64::NAN);
    // /proc ticks are 1/100 s: ticks / secs = % of one core.
    let proxy_cpu_pct = match (before, after) {
        (Some(b), Some(a)) => Some((a - b) as f64 / secs as f64),
        _ => None,
    };
    Ok(Sample {
        workload,
        target,
        qps,
        p95_ms,
        proxy_cpu_pct,
    })
}

/// HAProxy in TCP mode on `port` with `threads` threads, in front of the MariaDB primary.
pub(crate) fn haproxy_config(port: u16, threads: u32) -> String {
    format!(
        "global\n  maxconn 4000\n  nbthread {threads}\ndefaults\n  mode tcp\n  timeout connect 5s\n  timeout client 1h\n  timeout server 1h\n\
         listen mysql\n  bind 127.0.0.1:{port}\n  server primary 127.0.0.1:{}\n",
        xtask::ports::MY_PRIMARY
    )
}

fn start_haproxy(state: &Path) -> xtask::Result<u32> {
    let dir = state.join("bench");
    std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
    let cfg = dir.join("haproxy.cfg");
    let pidfile = dir.join("haproxy.pid");
    std::fs::write(&cfg, haproxy_config(HAPROXY_PORT, 2)).map_err(|e| e.to_string())?;
    run_capture(
        Command::new("haproxy")
            .arg("-f")
            .arg(&cfg)
            .arg("-D")
            .arg("-p")
            .arg(&pidfile),
    )?;
    proc::wait_until(Duration::from_secs(5), || proc::port_open(HAPROXY_PORT));
    proc::read_pid(&pidfile).ok_or_else(|| "haproxy did not write its pid file".to_string())
}

/// Builds the release `sluice` the benchmarks run.
/// Puts `targets` in a random order for one round and says which: the last targets of a round
/// measured lower when the order was fixed (the machine warms, other work starts).
pub(crate) fn shuffle_round<T>(
    targets: &mut [T],
    name: impl Fn(&T) -> &str,
    round: u64,
    what: &str,
) {
    let mut x = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0x9e37_79b9_7f4a_7c15, |d| d.as_nanos() as u64)
        | 1;
    for i in (1..targets.len()).rev() {
        // xorshift64: enough to vary the order between rounds and runs.
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        targets.swap(i, (x % (i as u64 + 1)) as usize);
    }
    let order: Vec<&str> = targets.iter().map(name).collect();
    step(&format!(
        "round {}, {what}: {}",
        round + 1,
        order.join(", ")
    ));
}

/// The median of interleaved runs' values (NaN for none).
pub(crate) fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v.get(v.len() / 2).copied().unwrap_or(f64::NAN)
}

/// The runs' spread, `[lo–hi]`, shown beside a median.
pub(crate) fn spread(v: &[f64]) -> String {
    let lo = v.iter().copied().fold(f64::INFINITY, f64::min);
    let hi = v.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    format!("[{lo:.2}–{hi:.2}]")
}

pub(crate) fn build_release() -> xtask::Result<()> {
    xtask::packages::ensure_build_tools()?;
    step("building sluice (release)");
    run_visible(
        Command::new("cargo")
            .current_dir(xtask::workspace_root())
            .args(["build", "--release", "--quiet", "-p", "sluice-bin"]),
    )
}

/// Writes `config` to `dir/<name>.toml`, starts the release `sluice` on it (log in
/// `dir/<name>.log`, admin state in `dir/<name>-data`) and waits for `port` to open.
pub(crate) fn spawn_sluice(
    dir: &Path,
    name: &str,
    config: &str,
    port: u16,
) -> xtask::Result<std::process::Child> {
    let bin = xtask::workspace_root().join("target/release/sluice");
    spawn_sluice_bin(&bin, dir, name, config, port)
}

/// [`spawn_sluice`] with another `sluice` binary, e.g. one built from an earlier commit to
/// compare side by side in one run.
pub(crate) fn spawn_sluice_bin(
    bin: &Path,
    dir: &Path,
    name: &str,
    config: &str,
    port: u16,
) -> xtask::Result<std::process::Child> {
    std::fs::create_dir_all(dir).map_err(|e| e.to_string())?;
    let cfg = dir.join(format!("{name}.toml"));
    std::fs::write(&cfg, config).map_err(|e| e.to_string())?;
    let log = std::fs::File::create(dir.join(format!("{name}.log"))).map_err(|e| e.to_string())?;
    let child = Command::new(bin)
        .arg("--config")
        .arg(&cfg)
        .arg("--initial")
        .arg("--datadir")
        .arg(dir.join(format!("{name}-data")))
        .env("RUST_LOG", "warn")
        .env("NO_COLOR", "1")
        .stdout(log.try_clone().map_err(|e| e.to_string())?)
        .stderr(log)
        .spawn()
        .map_err(|e| format!("cannot start {}: {e}", bin.display()))?;
    proc::wait_until(Duration::from_secs(10), || proc::port_open(port));
    Ok(child)
}

/// One session thread per CPU (what `*-threads` defaulted to before 2026-12-05).
pub(crate) fn per_cpu_threads() -> usize {
    std::thread::available_parallelism().map_or(1, usize::from)
}

/// The bench's Sluice config: MySQL on `port`, hostgroups 0 and 1 on the primary.
fn sluice_config(port: u16, max_connections: u32, rules: &str) -> String {
    format!(
        "[admin_variables]\nmysql_ifaces = \"127.0.0.1:0\"\npgsql_ifaces = \"127.0.0.1:0\"\n[pgsql_variables]\ninterfaces = \"127.0.0.1:0\"\n[mysql_variables]\ninterfaces = \"127.0.0.1:{port}\"\n\
         [[mysql_servers]]\nhostname = \"127.0.0.1\"\nport = {primary}\nmax_connections = {max_connections}\n\
         [[mysql_servers]]\nhostgroup_id = 1\nhostname = \"127.0.0.1\"\nport = {primary}\nmax_connections = {max_connections}\n\
         [[mysql_users]]\nusername = \"app\"\npassword = \"app\"\n{rules}",
        primary = xtask::ports::MY_PRIMARY
    )
}

fn start_sluice(
    state: &Path,
    port: u16,
    max_connections: u32,
    rules: &str,
) -> xtask::Result<std::process::Child> {
    let config = sluice_config(port, max_connections, rules);
    spawn_sluice(
        &state.join("bench"),
        &format!("sluice-{port}"),
        &config,
        port,
    )
}

/// `sluice-core`'s criterion benchmarks: the query processor (digest, rules) and the
/// per-statement statistics under two threads at once.
pub(crate) fn core() -> xtask::Result<()> {
    step("criterion: digest and rule evaluation (crates/core/benches/query_processor.rs)");
    run_visible(
        Command::new("cargo")
            .args(["bench", "-p", "sluice-core", "--bench", "query_processor"])
            .current_dir(xtask::workspace_root()),
    )?;
    step(
        "criterion: statistics updated from two threads (crates/core/benches/stats_contention.rs)",
    );
    run_visible(
        Command::new("cargo")
            .args(["bench", "-p", "sluice-core", "--bench", "stats_contention"])
            .current_dir(xtask::workspace_root()),
    )
}

/// The processes a benchmark run started, stopped when it ends however it ends.
#[derive(Default)]
struct Started {
    children: Vec<std::process::Child>,
    pids: Vec<u32>,
}

impl Drop for Started {
    fn drop(&mut self) {
        for pid in &self.pids {
            proc::stop_pid(*pid, Duration::from_secs(5));
        }
        for child in &mut self.children {
            proc::signal(child.id(), "TERM");
            let _ = child.wait();
        }
    }
}

impl Started {
    /// Starts the bench's plain Sluice config on `port` with `find` replaced by `with` (its
    /// log and state under `name`), keeps it to stop at the end and returns its pid.
    fn variant(
        &mut self,
        state: &Path,
        (name, port): (&str, u16),
        (find, with): (&str, &str),
    ) -> xtask::Result<u32> {
        let config = sluice_config(port, 1000, "").replacen(find, with, 1);
        let child = spawn_sluice(&state.join("bench"), name, &config, port)?;
        let pid = child.id();
        self.children.push(child);
        Ok(pid)
    }
}

/// Runs the MySQL benchmark and prints the table (also written to target/bench-mysql.md).
pub(crate) fn mysql() -> xtask::Result<()> {
    let root = xtask::workspace_root();
    xtask::packages::ensure_bench_tools()?;
    xtask::backends_up()?;
    let state = xtask::state_dir();
    prepare_data(&state)?;
    build_release()?;
    let mut started = Started::default();
    let haproxy = start_haproxy(&state)?;
    started.pids.push(haproxy);
    let sluice = start_sluice(&state, SLUICE_PORT, 1000, "")?;
    let sluice_pid = sluice.id();
    started.children.push(sluice);
    let threads = format!("[mysql_variables]\nthreads = {}\n", per_cpu_threads());
    let per_cpu_pid = started.variant(
        &state,
        ("sluice-per-cpu", SLUICE_PER_CPU_PORT),
        ("[mysql_variables]\n", &threads),
    )?;
    let rules = start_sluice(&state, SLUICE_RULES_PORT, 1000, SPLIT_RULES)?;
    let rules_pid = rules.id();
    started.children.push(rules);
    // The same Sluice with its HTTP port on, scraped every second during its runs.
    let http = format!(
        "[admin_variables]\nmysql_ifaces = \"127.0.0.1:0\"\npgsql_ifaces = \"127.0.0.1:0\"\nrestapi_enabled = true\nrestapi_port = {SLUICE_SCRAPE_HTTP_PORT}\n"
    );
    let scraped_pid = started.variant(
        &state,
        ("sluice-scraped", SLUICE_SCRAPE_PORT),
        (
            "[admin_variables]\nmysql_ifaces = \"127.0.0.1:0\"\npgsql_ifaces = \"127.0.0.1:0\"\n",
            &http,
        ),
    )?;
    let baseline = match std::env::var_os("BENCH_BASELINE_BIN") {
        None => None,
        Some(bin) => {
            let config = sluice_config(SLUICE_BASELINE_PORT, 1000, "");
            let b = spawn_sluice_bin(
                Path::new(&bin),
                &state.join("bench"),
                "sluice-baseline",
                &config,
                SLUICE_BASELINE_PORT,
            )?;
            let pid = b.id();
            started.children.push(b);
            Some(pid)
        }
    };
    let secs = env_num("BENCH_TIME", 20);
    let rounds = env_num("BENCH_ROUNDS", 1);
    let mut samples = Vec::new();
    let mut scrapes = 0;
    for round in 0..rounds {
        for workload in ["oltp_point_select", "oltp_read_only"] {
            let mut targets = vec![
                ("direct", xtask::ports::MY_PRIMARY, None),
                ("haproxy", HAPROXY_PORT, Some(haproxy)),
                ("sluice", SLUICE_PORT, Some(sluice_pid)),
                ("sluice-per-cpu", SLUICE_PER_CPU_PORT, Some(per_cpu_pid)),
                ("sluice+rules", SLUICE_RULES_PORT, Some(rules_pid)),
                ("sluice+scrape", SLUICE_SCRAPE_PORT, Some(scraped_pid)),
            ];
            if let Some(pid) = baseline {
                targets.push(("sluice-baseline", SLUICE_BASELINE_PORT, Some(pid)));
            }
            shuffle_round(&mut targets, |t| t.0, round, workload);
            for (target, port, pid) in targets {
                let scraper =
                    (target == "sluice+scrape").then(|| Scraper::start(SLUICE_SCRAPE_HTTP_PORT));
                samples.push(run_one(workload, target, port, pid, secs)?);
                scrapes += scraper.map_or(0, Scraper::finish);
            }
        }
    }
    drop(started);
    step(&format!(
        "sluice+scrape: {scrapes} scrapes of /metrics answered during its runs"
    ));
    let mux = multiplexing_runs(&state, secs)?;
    let table = format!("{}\n{mux}", render(&samples, secs, rounds));
    println!("\n{table}");
    let out = root.join("target/bench-mysql.md");
    std::fs::write(&out, &table).map_err(|e| e.to_string())?;
    step(&format!("table written to {}", out.display()));
    Ok(())
}

fn render(samples: &[Sample], secs: u64, rounds: u64) -> String {
    let mut t = format!(
        "sysbench 16 threads, {secs}s per run, {rounds} round(s), {TABLES} tables x {ROWS} rows; QPS and p95 are means over rounds\n\n\
         | workload | target | QPS | p95 ms | ratio to direct | ratio to HAProxy | proxy CPU (% of a core) | proxy CPU µs per query |\n|---|---|---|---|---|---|---|---|\n"
    );
    for workload in ["oltp_point_select", "oltp_read_only"] {
        let mean = |target: &str| -> Option<(f64, f64, Option<f64>)> {
            let v: Vec<&Sample> = samples
                .iter()
                .filter(|s| s.workload == workload && s.target == target)
                .collect();
            if v.is_empty() {
                return None;
            }
            let n = v.len() as f64;
            let cpu: Vec<f64> = v.iter().filter_map(|s| s.proxy_cpu_pct).collect();
            let cpu = (!cpu.is_empty()).then(|| cpu.iter().sum::<f64>() / cpu.len() as f64);
            Some((
                v.iter().map(|s| s.qps).sum::<f64>() / n,
                v.iter().map(|s| s.p95_ms).sum::<f64>() / n,
                cpu,
            ))
        };
        let direct = mean("direct").map(|m| m.0).unwrap_or(f64::NAN);
        let peer = mean("haproxy").map(|m| m.0).unwrap_or(f64::NAN);
        for target in [
            "direct",
            "haproxy",
            "sluice",
            "sluice-per-cpu",
            "sluice+rules",
            "sluice+scrape",
            "sluice-baseline",
        ] {
            if let Some((qps, p95, cpu)) = mean(target) {
                let per_op = cpu.map_or("–".into(), |c| format!("{:.1}", c / 100.0 * 1e6 / qps));
                let cpu = cpu.map(|c| format!("{c:.0}")).unwrap_or_else(|| "–".into());
                t.push_str(&format!(
                    "| {workload} | {target} | {qps:.0} | {p95:.2} | {:.2} | {:.2} | {cpu} | {per_op} |\n",
                    qps / direct,
                    qps / peer
                ));
            }
        }
    }
    t
}

/// 256 client threads direct to MariaDB and through Sluice limited to 32 backend connections
/// (and through the `BENCH_BASELINE_BIN` build, when set), with the server's Threads_connected
/// sampled during each run. Each Sluice runs only for its own run, so the peak counts its
/// connections alone.
fn multiplexing_runs(state: &Path, secs: u64) -> xtask::Result<String> {
    let primary = xtask::mariadb::primary(state);
    let release = xtask::workspace_root().join("target/release/sluice");
    let mut targets = vec![
        ("direct", xtask::ports::MY_PRIMARY, None),
        ("sluice (32 backend conns)", SLUICE_MUX_PORT, Some(release)),
    ];
    if let Some(bin) = std::env::var_os("BENCH_BASELINE_BIN") {
        targets.push((
            "sluice-baseline (32 backend conns)",
            SLUICE_BASELINE_MUX_PORT,
            Some(bin.into()),
        ));
    }
    let mut rows = Vec::new();
    for (target, port, bin) in targets {
        let mut sluice = match bin {
            None => None,
            Some(bin) => Some(spawn_sluice_bin(
                &bin,
                &state.join("bench"),
                &format!("sluice-{port}"),
                &sluice_config(port, 32, ""),
                port,
            )?),
        };
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let sampler = {
            let (stop, primary) = (stop.clone(), primary.clone());
            std::thread::spawn(move || {
                let mut peak = 0u64;
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    let v = primary
                        .sql("SELECT VARIABLE_VALUE FROM information_schema.global_status WHERE VARIABLE_NAME = 'THREADS_CONNECTED'")
                        .ok()
                        .and_then(|s| s.trim().parse::<u64>().ok())
                        .unwrap_or(0);
                    peak = peak.max(v);
                    std::thread::sleep(Duration::from_millis(500));
                }
                peak
            })
        };
        let pid = sluice.as_ref().map(std::process::Child::id);
        let r = run_threads("oltp_point_select", "mux", port, pid, secs, 256);
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        let peak = sampler.join().unwrap_or(0);
        if let Some(s) = sluice.as_mut() {
            proc::signal(s.id(), "TERM");
            let _ = s.wait();
        }
        rows.push((target, r?, peak));
    }
    let direct = rows.first().map(|r| r.1.qps).unwrap_or(f64::NAN);
    let mut t = format!(
        "oltp_point_select, 256 client threads, {secs}s per run; Threads_connected is the peak seen on MariaDB (includes 1 monitor/sampler connection)\n\n\
         | target | QPS | p95 ms | ratio to direct | Threads_connected (peak) | proxy CPU (% of a core) |\n|---|---|---|---|---|---|\n"
    );
    for (target, s, peak) in rows {
        let cpu = s
            .proxy_cpu_pct
            .map(|c| format!("{c:.0}"))
            .unwrap_or_else(|| "–".into());
        t.push_str(&format!(
            "| {target} | {:.0} | {:.2} | {:.2} | {peak} | {cpu} |\n",
            s.qps,
            s.p95_ms,
            s.qps / direct
        ));
    }
    Ok(t)
}

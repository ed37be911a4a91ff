//! `cargo xtask bench scale`: multiplexing at scale. 16, 1,000 and 4,000 clients through one
//! Sluice whose servers allow 32 backend connections each: sysbench `oltp_point_select`
//! (MySQL) and `pgbench -S` (PostgreSQL, simple protocol). Per row: throughput and its ratio to
//! the 16-client row, p95 and p99 latency, the peak number of backend connections the server saw,
//! and client errors (which must be zero).
//!
//! `BENCH_TIME` (default 15 s) per run; `BENCH_SCALE_CLIENTS` (default `16,1000,4000`).

use crate::bench::{build_release, cpu_ticks, env_num, spawn_sluice};
use std::path::Path;
use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;
use xtask::proc::{run_capture, step};

const MYSQL_PORT: u16 = 16536;
const PGSQL_PORT: u16 = 16537;
/// Backend connections each server row allows.
const POOL: u32 = 32;

/// One run's numbers.
struct Row {
    clients: u64,
    throughput: f64,
    p95_ms: f64,
    p99_ms: f64,
    peak_backends: u64,
    errors: u64,
    proxy_cpu_pct: f64,
}

/// Latency percentile `p` (0–100) of a histogram of (latency ms, count) pairs.
fn percentile(hist: &[(f64, u64)], p: f64) -> f64 {
    let total: u64 = hist.iter().map(|(_, n)| n).sum();
    if total == 0 {
        return f64::NAN;
    }
    let want = (total as f64 * p / 100.0).ceil() as u64;
    let mut seen = 0;
    for (v, n) in hist {
        seen += n;
        if seen >= want {
            return *v;
        }
    }
    hist.last().map_or(f64::NAN, |(v, _)| *v)
}

/// Samples `query` (a count) every 250 ms on a thread until stopped; the peak.
struct PeakSampler {
    stop: Arc<AtomicBool>,
    thread: std::thread::JoinHandle<u64>,
}

impl PeakSampler {
    fn start(sample: impl Fn() -> Option<u64> + Send + 'static) -> PeakSampler {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let thread = std::thread::spawn(move || {
            let mut peak = 0;
            while !flag.load(Ordering::Relaxed) {
                peak = peak.max(sample().unwrap_or(0));
                std::thread::sleep(Duration::from_millis(250));
            }
            peak
        });
        PeakSampler { stop, thread }
    }

    fn finish(self) -> u64 {
        self.stop.store(true, Ordering::Relaxed);
        self.thread.join().unwrap_or(0)
    }
}

/// How the clients send: as fast as they can (closed loop), or at a fixed total rate (open loop,
/// latency counted from each transaction's scheduled start).
#[derive(Clone, Copy)]
enum Load {
    Unlimited,
    Rate(u64),
}

impl Load {
    fn describe(self) -> String {
        match self {
            Load::Unlimited => "as fast as they can".into(),
            Load::Rate(r) => format!("{r} transactions/s in total"),
        }
    }
}

fn mysql_row(state: &Path, pid: u32, clients: u64, secs: u64, load: Load) -> xtask::Result<Row> {
    step(&format!(
        "sysbench oltp_point_select via sluice, {clients} clients on {POOL} backend connections, {} ({secs}s)",
        load.describe()
    ));
    let rate = match load {
        Load::Unlimited => 0,
        Load::Rate(r) => r,
    };
    let primary = xtask::mariadb::primary(state);
    let sampler = PeakSampler::start(move || {
        primary
            .sql("SELECT COUNT(*) FROM information_schema.processlist WHERE user = 'app'")
            .ok()?
            .trim()
            .parse()
            .ok()
    });
    let before = cpu_ticks(pid);
    let out = run_capture(
        Command::new("sysbench")
            .args(["--db-driver=mysql", "--mysql-host=127.0.0.1"])
            .arg(format!("--mysql-port={MYSQL_PORT}"))
            .args(["--mysql-user=app", "--mysql-password=app"])
            .arg(format!("--mysql-db={}", crate::bench::DB))
            .arg(format!("--tables={}", crate::bench::TABLES))
            .arg(format!("--table-size={}", crate::bench::ROWS))
            .arg(format!("--threads={clients}"))
            .arg(format!("--time={secs}"))
            .args(["--percentile=99", "--histogram=on", "--report-interval=0"])
            .arg(format!("--rate={rate}"))
            .args(["oltp_point_select", "run"]),
    );
    let after = cpu_ticks(pid);
    let peak_backends = sampler.finish();
    let out = out?;
    let number = |label: &str, at: usize| -> f64 {
        out.lines()
            .find(|l| l.trim_start().starts_with(label))
            .and_then(|l| l.split_whitespace().nth(at))
            .and_then(|s| s.trim_start_matches('(').parse().ok())
            .unwrap_or(f64::NAN)
    };
    // Histogram lines: "       0.161 |****          28".
    let hist: Vec<(f64, u64)> = out
        .lines()
        .filter_map(|l| {
            let (v, rest) = l.split_once('|')?;
            Some((
                v.trim().parse().ok()?,
                rest.split_whitespace().last()?.parse().ok()?,
            ))
        })
        .collect();
    let errors = number("ignored errors:", 2) as u64
        + number("reconnects:", 1) as u64
        + out.matches("FATAL").count() as u64;
    Ok(Row {
        clients,
        throughput: number("transactions:", 2),
        p95_ms: percentile(&hist, 95.0),
        p99_ms: number("99th percentile:", 2),
        peak_backends,
        errors,
        proxy_cpu_pct: cpu_pct(before, after, secs),
    })
}

fn cpu_pct(before: Option<u64>, after: Option<u64>, secs: u64) -> f64 {
    match (before, after) {
        (Some(b), Some(a)) => (a - b) as f64 / secs as f64,
        _ => f64::NAN,
    }
}

fn pgsql_row(
    (state, dir): (&Path, &Path),
    pid: u32,
    clients: u64,
    secs: u64,
    load: Load,
) -> xtask::Result<Row> {
    step(&format!(
        "pgbench -S via sluice, {clients} clients on {POOL} server connections, {} ({secs}s)",
        load.describe()
    ));
    let logs = dir.join(format!("pgbench-{clients}"));
    let _ = std::fs::remove_dir_all(&logs);
    std::fs::create_dir_all(&logs).map_err(|e| e.to_string())?;
    let primary = xtask::postgres::primary(state);
    let sampler = PeakSampler::start(move || {
        primary
            .sql("SELECT count(*) FROM pg_stat_activity WHERE usename = 'app'")
            .ok()?
            .trim()
            .parse()
            .ok()
    });
    let before = cpu_ticks(pid);
    let mut args = vec![
        "-S".to_string(),
        "-M".into(),
        "simple".into(),
        "-j".into(),
        "2".into(),
        "--log".into(),
        format!("-c{clients}"),
        // pgbench's -T includes its connects (serial per thread, ~2.3 ms each through Sluice
        // here): the run is lengthened so `secs` of it are transactions.
        format!("-T{}", secs + clients / 200),
    ];
    if let Load::Rate(r) = load {
        args.push(format!("-R{r}"));
    }
    let out = run_capture(crate::bench_pgsql::pgbench(PGSQL_PORT, &args).current_dir(&logs));
    let after = cpu_ticks(pid);
    let peak_backends = sampler.finish();
    let out = out?;
    let tps = out
        .lines()
        .find_map(|l| l.strip_prefix("tps = "))
        .and_then(|s| s.split_whitespace().next())
        .and_then(|s| s.parse().ok())
        .unwrap_or(f64::NAN);
    let failed = out
        .lines()
        .find_map(|l| l.trim().strip_prefix("number of failed transactions: "))
        .and_then(|s| s.split_whitespace().next())
        .and_then(|s| s.parse::<u64>().ok())
        .unwrap_or(0);
    // Per-transaction logs: "client tx latency_us script epoch_s epoch_us".
    let mut latencies_us: Vec<u64> = Vec::new();
    for entry in std::fs::read_dir(&logs)
        .map_err(|e| e.to_string())?
        .flatten()
    {
        let text = std::fs::read_to_string(entry.path()).unwrap_or_default();
        latencies_us.extend(
            text.lines()
                .filter_map(|l| l.split_whitespace().nth(2)?.parse::<u64>().ok()),
        );
    }
    latencies_us.sort_unstable();
    let pick = |p: f64| {
        if latencies_us.is_empty() {
            return f64::NAN;
        }
        let i = ((latencies_us.len() as f64 * p / 100.0).ceil() as usize).saturating_sub(1);
        latencies_us[i.min(latencies_us.len() - 1)] as f64 / 1000.0
    };
    Ok(Row {
        clients,
        throughput: tps,
        p95_ms: pick(95.0),
        p99_ms: pick(99.0),
        peak_backends,
        errors: failed + out.matches("error").count() as u64,
        proxy_cpu_pct: cpu_pct(before, after, secs),
    })
}

/// Every client count as fast as it can, then every client count at half the first row's
/// throughput (the same load for all, so the latencies compare). Returns both series and the
/// rate.
fn series(
    clients: &[u64],
    mut run: impl FnMut(u64, Load) -> xtask::Result<Row>,
) -> xtask::Result<(Vec<Row>, Vec<Row>, u64)> {
    let mut unlimited = Vec::new();
    for &n in clients {
        unlimited.push(run(n, Load::Unlimited)?);
    }
    let rate = unlimited
        .first()
        .map_or(1000, |r| (r.throughput / 2.0).max(1.0) as u64);
    let mut rated = Vec::new();
    for &n in clients {
        rated.push(run(n, Load::Rate(rate))?);
    }
    Ok((unlimited, rated, rate))
}

fn render(title: &str, unit: &str, rows: &[Row]) -> String {
    let base = rows.first().map_or(f64::NAN, |r| r.throughput);
    let base_p99 = rows.first().map_or(f64::NAN, |r| r.p99_ms);
    let mut t = format!(
        "{title}\n\n| clients | {unit} | ratio to {} clients | p95 ms | p99 ms | p99 / {}-client p99 | peak backend connections | client errors | Sluice CPU (% of a core) |\n|---|---|---|---|---|---|---|---|---|\n",
        rows.first().map_or(0, |r| r.clients),
        rows.first().map_or(0, |r| r.clients),
    );
    for r in rows {
        t.push_str(&format!(
            "| {} | {:.0} | {:.2} | {:.2} | {:.2} | {:.1} | {} | {} | {:.0} |\n",
            r.clients,
            r.throughput,
            r.throughput / base,
            r.p95_ms,
            r.p99_ms,
            r.p99_ms / base_p99,
            r.peak_backends,
            r.errors,
            r.proxy_cpu_pct
        ));
    }
    t
}

/// Runs the scale benchmark and prints the tables (also written to target/bench-scale.md).
pub(crate) fn scale() -> xtask::Result<()> {
    let root = xtask::workspace_root();
    xtask::packages::ensure_bench_tools()?;
    xtask::backends_up()?;
    let state = xtask::state_dir();
    crate::bench::prepare_data(&state)?;
    step("pgbench -i -s 10 (direct)");
    run_capture(&mut crate::bench_pgsql::pgbench(
        xtask::ports::PG_PRIMARY,
        &["-i".into(), "-s".into(), "10".into(), "-q".into()],
    ))?;
    build_release()?;
    let dir = state.join("bench");
    let config = format!(
        "[admin_variables]\nmysql_ifaces = \"127.0.0.1:0\"\npgsql_ifaces = \"127.0.0.1:0\"\n\
         [mysql_variables]\ninterfaces = \"127.0.0.1:{MYSQL_PORT}\"\nmax_connections = 100000\n\
         [pgsql_variables]\ninterfaces = \"127.0.0.1:{PGSQL_PORT}\"\nmax_connections = 100000\n\
         [[mysql_servers]]\nhostname = \"127.0.0.1\"\nport = {}\nmax_connections = {POOL}\n\
         [[mysql_users]]\nusername = \"app\"\npassword = \"app\"\n\
         [[pgsql_servers]]\nhostname = \"127.0.0.1\"\nport = {}\nmax_connections = {POOL}\n\
         [[pgsql_users]]\nusername = \"app\"\npassword = \"app\"\n",
        xtask::ports::MY_PRIMARY,
        xtask::ports::PG_PRIMARY,
    );
    let mut sluice = spawn_sluice(&dir, "sluice-scale", &config, MYSQL_PORT)?;
    let pid = sluice.id();
    let secs = env_num("BENCH_TIME", 15);
    let clients: Vec<u64> = std::env::var("BENCH_SCALE_CLIENTS")
        .unwrap_or_else(|_| "16,1000,4000".into())
        .split(',')
        .filter_map(|n| n.trim().parse().ok())
        .collect();
    let result = (|| -> xtask::Result<String> {
        let (my, my_rated, my_rate) =
            series(&clients, |n, load| mysql_row(&state, pid, n, secs, load))?;
        let (pg, pg_rated, pg_rate) = series(&clients, |n, load| {
            pgsql_row((&state, &dir), pid, n, secs, load)
        })?;
        let my_what = format!(
            "sysbench oltp_point_select through Sluice, {POOL} backend connections, {secs}s per run; backend connections counted on MariaDB (processlist, user app)"
        );
        let pg_what = format!(
            "pgbench -S (simple), scale 10, 2 threads, {POOL} server connections, {secs}s per run; server connections counted on PostgreSQL (pg_stat_activity, user app)"
        );
        Ok([
            render(&format!("{my_what}; clients as fast as they can"), "TPS", &my),
            render(
                &format!("{my_what}; {my_rate} transactions/s in total (half the 16-client maximum), latency from each transaction's scheduled start"),
                "TPS",
                &my_rated,
            ),
            render(&format!("{pg_what}; clients as fast as they can"), "TPS", &pg),
            render(
                &format!("{pg_what}; {pg_rate} transactions/s in total (half the 16-client maximum), latency from each transaction's scheduled start"),
                "TPS",
                &pg_rated,
            ),
        ]
        .join("\n"))
    })();
    let _ = sluice.kill();
    let _ = sluice.wait();
    let table = result?;
    println!("\n{table}");
    let out = root.join("target/bench-scale.md");
    std::fs::write(&out, &table).map_err(|e| e.to_string())?;
    step(&format!("table written to {}", out.display()));
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_come_from_the_histogram_counts() {
        let h = [(1.0, 90), (2.0, 5), (5.0, 4), (9.0, 1)];
        assert_eq!(percentile(&h, 50.0), 1.0);
        assert_eq!(percentile(&h, 95.0), 2.0);
        assert_eq!(percentile(&h, 99.0), 5.0);
        assert_eq!(percentile(&h, 100.0), 9.0);
        assert!(percentile(&[], 99.0).is_nan());
    }
}

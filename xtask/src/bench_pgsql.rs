//! `cargo xtask bench pgsql`: `pgbench -S` (scale 10) in simple and extended mode, direct to
//! PostgreSQL, through PgBouncer (transaction pooling) and through Sluice, back to back in one go,
//! printed as a table with TPS, average latency, the ratios to direct and to PgBouncer, and the
//! proxy's CPU per transaction. Each round runs the targets in a random order (printed).
//!
//! `BENCH_TIME` (seconds per run, default 20), `BENCH_ROUNDS` (default 1), `BENCH_CLIENTS`
//! (default 16) and `BENCH_POOL` (server connections for PgBouncer and Sluice, default 32) tune
//! the run. `BENCH_BASELINE_BIN=/path/to/sluice` adds a `sluice-baseline` target run from that
//! binary (e.g. built from the commit before a change), interleaved with the others so the two
//! are compared under the same machine load. `BENCH_PGSQL_VARS` adds lines to the
//! `[pgsql_variables]` of the `sluice` target (e.g. `handoff_reset_all = false`; the baseline
//! binary may not know a new variable, so it runs with its defaults). `sluice` runs the default
//! `pgsql-threads`; `sluice-per-cpu` the same build with one session thread per CPU, the rule the
//! default had before 2026-12-05 and what a host dedicating its cores to Sluice would set.
//! `pgbouncer+tls` and `sluice+tls` are the same PgBouncer (its client TLS on, test-CA
//! certificate) and the same `sluice` (`pgsql-have_ssl`, its own certificate) with pgbench
//! connecting over TLS (`sslmode=require`); their ratio column is to `pgbouncer+tls`. With
//! `BENCH_BASELINE_BIN`, `sluice-baseline+tls` is the baseline build over TLS.

use crate::bench::{build_release, cpu_ticks, env_num, spawn_sluice, spawn_sluice_bin};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;
use xtask::proc::{self, is_root, run_capture, step};

const PGBOUNCER_PORT: u16 = 16433;
const SLUICE_PORT: u16 = 16434;
const BASELINE_PORT: u16 = 16435;
const PER_CPU_PORT: u16 = 16436;
const TARGETS: [&str; 8] = [
    "direct",
    "pgbouncer",
    "sluice",
    "sluice-per-cpu",
    "sluice-baseline",
    "pgbouncer+tls",
    "sluice+tls",
    "sluice-baseline+tls",
];
const MODES: [&str; 2] = ["simple", "extended"];

pub(crate) struct Sample {
    mode: &'static str,
    target: &'static str,
    pub(crate) tps: f64,
    pub(crate) latency_ms: f64,
    pub(crate) proxy_cpu_pct: Option<f64>,
}

pub(crate) fn pgbench(port: u16, args: &[String]) -> Command {
    // Plaintext unless a target asks for TLS: libpq's default (`prefer`) would negotiate TLS
    // wherever it is offered, which measures encryption instead of pooling.
    pgbench_over(port, args, false)
}

/// `pgbench` against `port`, over TLS (`sslmode=require`) when `tls`.
fn pgbench_over(port: u16, args: &[String], tls: bool) -> Command {
    let mut c = Command::new("pgbench");
    c.env("PGPASSWORD", "app")
        .env("PGSSLMODE", if tls { "require" } else { "disable" })
        .args(["-h", "127.0.0.1", "-p", &port.to_string(), "-U", "app"])
        .args(args)
        .arg("app");
    c
}

fn field(out: &str, prefix: &str) -> Option<f64> {
    out.lines()
        .find_map(|l| l.strip_prefix(prefix))
        .and_then(|s| s.split_whitespace().next())
        .and_then(|s| s.parse().ok())
}

/// One `pgbench -S` run of `secs` with `clients` against `port` (`pid`: the proxy whose CPU to
/// count).
pub(crate) fn run_one(
    mode: &'static str,
    target: &'static str,
    port: u16,
    pid: Option<u32>,
    secs: u64,
    clients: u64,
) -> xtask::Result<Sample> {
    step(&format!(
        "pgbench -S -M {mode} via {target} ({secs}s, {clients} clients)"
    ));
    let tls = target.ends_with("+tls");
    let before = pid.and_then(cpu_ticks);
    let args: Vec<String> = [
        "-n",
        "-S",
        "-c",
        &clients.to_string(),
        "-j",
        "2",
        "-T",
        &secs.to_string(),
        "-M",
        mode,
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    let out = run_capture(&mut pgbench_over(port, &args, tls))?;
    let after = pid.and_then(cpu_ticks);
    let failed = out
        .lines()
        .find(|l| l.starts_with("number of failed transactions:"))
        .is_some_and(|l| !l.contains(": 0 "));
    if failed {
        return Err(format!("pgbench via {target} reported failures:\n{out}"));
    }
    let tps = field(&out, "tps = ")
        .ok_or_else(|| format!("cannot read tps from pgbench output:\n{out}"))?;
    let latency_ms = field(&out, "latency average = ").unwrap_or(f64::NAN);
    Ok(Sample {
        mode,
        target,
        tps,
        latency_ms,
        proxy_cpu_pct: match (before, after) {
            (Some(b), Some(a)) => Some((a - b) as f64 / secs as f64),
            _ => None,
        },
    })
}

/// Writes PgBouncer's config (listening on `port`, transaction pooling, `BENCH_POOL` server
/// connections, pid file `dir/pgbouncer.pid`) into `dir` and returns its path. PgBouncer refuses
/// to run as root: as root, `dir` is handed to the postgres user.
pub(crate) fn pgbouncer_ini(dir: &Path, port: u16) -> xtask::Result<PathBuf> {
    proc::make_traversable(dir)?;
    let ini = dir.join("pgbouncer.ini");
    let pidfile = dir.join("pgbouncer.pid");
    std::fs::write(dir.join("userlist.txt"), "\"app\" \"app\"\n").map_err(|e| e.to_string())?;
    // Client TLS for the `+tls` targets (plain clients are served as before).
    let (key, cert) = (dir.join("bouncer.key"), dir.join("bouncer.pem"));
    if !cert.exists() {
        xtask::tls::server_cert(&xtask::state_dir(), &key, &cert, "localhost")?;
    }
    std::fs::write(
        &ini,
        format!(
            "[databases]\napp = host=127.0.0.1 port={pg}\n\n[pgbouncer]\nlisten_addr = 127.0.0.1\n\
             listen_port = {port}\nauth_type = scram-sha-256\nauth_file = {users}\n\
             pool_mode = transaction\nmax_client_conn = 1000\ndefault_pool_size = {pool}\n\
             logfile = {log}\npidfile = {pid}\nunix_socket_dir =\n\
             client_tls_sslmode = allow\nclient_tls_key_file = {key}\nclient_tls_cert_file = {cert}\n",
            pg = xtask::ports::PG_PRIMARY,
            users = dir.join("userlist.txt").display(),
            log = dir.join("pgbouncer.log").display(),
            pid = pidfile.display(),
            pool = env_num("BENCH_POOL", 32),
            key = key.display(),
            cert = cert.display(),
        ),
    )
    .map_err(|e| e.to_string())?;
    let _ = std::fs::remove_file(&pidfile);
    if is_root() {
        run_capture(Command::new("chown").arg("-R").arg("postgres").arg(dir))?;
    }
    Ok(ini)
}

fn start_pgbouncer(dir: &Path) -> xtask::Result<u32> {
    let ini = pgbouncer_ini(dir, PGBOUNCER_PORT)?;
    let pidfile = dir.join("pgbouncer.pid");
    let mut cmd = if is_root() {
        let mut c = Command::new("runuser");
        c.args(["-u", "postgres", "--", "pgbouncer"]);
        c
    } else {
        Command::new("pgbouncer")
    };
    run_capture(cmd.arg("-d").arg(&ini))?;
    // The daemon writes its pid file after it starts listening: wait for both.
    proc::wait_until(Duration::from_secs(5), || {
        proc::port_open(PGBOUNCER_PORT) && proc::read_pid(&pidfile).is_some()
    });
    proc::read_pid(&pidfile).ok_or_else(|| {
        format!(
            "pgbouncer did not start:\n{}",
            proc::tail(&dir.join("pgbouncer.log"), 10)
        )
    })
}

/// Which Sluice a target runs.
#[derive(Clone, Copy)]
enum Build<'a> {
    /// The release build, default `pgsql-threads`, plus `BENCH_PGSQL_VARS`.
    Release,
    /// The release build with one session thread per CPU.
    PerCpu,
    /// An older binary, with its defaults.
    Baseline(&'a Path),
}

/// Sluice (`build`, each on its own port) with `BENCH_POOL` server connections.
fn start_sluice(dir: &Path, build: Build<'_>) -> xtask::Result<std::process::Child> {
    let port = match build {
        Build::Release => SLUICE_PORT,
        Build::PerCpu => PER_CPU_PORT,
        Build::Baseline(_) => BASELINE_PORT,
    };
    let config = format!(
        "[admin_variables]\nmysql_ifaces = \"127.0.0.1:0\"\npgsql_ifaces = \"127.0.0.1:0\"\n\
         [mysql_variables]\ninterfaces = \"127.0.0.1:0\"\n\
         [pgsql_variables]\ninterfaces = \"127.0.0.1:{port}\"\n{vars}\n\
         [[pgsql_servers]]\nhostname = \"127.0.0.1\"\nport = {}\nmax_connections = {}\n\
         [[pgsql_users]]\nusername = \"app\"\npassword = \"app\"\n",
        xtask::ports::PG_PRIMARY,
        env_num("BENCH_POOL", 32),
        vars = match build {
            Build::Release => std::env::var("BENCH_PGSQL_VARS").unwrap_or_default(),
            Build::PerCpu => format!("threads = {}", crate::bench::per_cpu_threads()),
            Build::Baseline(_) => String::new(),
        },
    );
    match build {
        Build::Baseline(bin) => spawn_sluice_bin(bin, dir, "sluice-baseline", &config, port),
        Build::PerCpu => spawn_sluice(dir, "sluice-per-cpu", &config, port),
        Build::Release => spawn_sluice(dir, "sluice", &config, port),
    }
}

/// Runs the PostgreSQL benchmark and prints the table (also written to target/bench-pgsql.md).
pub(crate) fn pgsql() -> xtask::Result<()> {
    let root = xtask::workspace_root();
    xtask::packages::ensure_pgbouncer()?;
    xtask::backends_up()?;
    step("pgbench -i -s 10 (direct)");
    run_capture(&mut pgbench(
        xtask::ports::PG_PRIMARY,
        &["-i".into(), "-q".into(), "-s".into(), "10".into()],
    ))?;
    build_release()?;
    let dir: PathBuf = xtask::state_dir().join("bench-pgsql");
    let bouncer = start_pgbouncer(&dir)?;
    let baseline_bin = std::env::var_os("BENCH_BASELINE_BIN").map(PathBuf::from);
    let mut builds = vec![Build::Release, Build::PerCpu];
    builds.extend(baseline_bin.as_deref().map(Build::Baseline));
    let mut sluices = Vec::new();
    for build in builds {
        match start_sluice(&dir, build) {
            Ok(c) => sluices.push(c),
            Err(e) => {
                proc::stop_pid(bouncer, Duration::from_secs(5));
                stop_all(&mut sluices);
                return Err(e);
            }
        }
    }
    let secs = env_num("BENCH_TIME", 20);
    let rounds = env_num("BENCH_ROUNDS", 1);
    let clients = env_num("BENCH_CLIENTS", 16);
    let mut samples = Vec::new();
    let mut result = Ok(());
    'outer: for round in 0..rounds {
        for mode in MODES {
            let mut targets = vec![
                ("direct", xtask::ports::PG_PRIMARY, None),
                ("pgbouncer", PGBOUNCER_PORT, Some(bouncer)),
                ("sluice", SLUICE_PORT, Some(sluices[0].id())),
                ("sluice-per-cpu", PER_CPU_PORT, Some(sluices[1].id())),
                ("pgbouncer+tls", PGBOUNCER_PORT, Some(bouncer)),
                ("sluice+tls", SLUICE_PORT, Some(sluices[0].id())),
            ];
            if let Some(b) = sluices.get(2) {
                targets.push(("sluice-baseline", BASELINE_PORT, Some(b.id())));
                targets.push(("sluice-baseline+tls", BASELINE_PORT, Some(b.id())));
            }
            crate::bench::shuffle_round(&mut targets, |t| t.0, round, mode);
            for (target, port, pid) in targets {
                match run_one(mode, target, port, pid, secs, clients) {
                    Ok(s) => samples.push(s),
                    Err(e) => {
                        result = Err(e);
                        break 'outer;
                    }
                }
            }
        }
    }
    proc::stop_pid(bouncer, Duration::from_secs(5));
    stop_all(&mut sluices);
    result?;
    let table = render(&samples, secs, rounds, clients);
    println!("\n{table}");
    let out = root.join("target/bench-pgsql.md");
    std::fs::write(&out, &table).map_err(|e| e.to_string())?;
    step(&format!("table written to {}", out.display()));
    Ok(())
}

/// Stops the Sluice processes this bench started.
fn stop_all(sluices: &mut [std::process::Child]) {
    for c in sluices {
        proc::signal(c.id(), "TERM");
        let _ = c.wait();
    }
}

fn render(samples: &[Sample], secs: u64, rounds: u64, clients: u64) -> String {
    let pool = env_num("BENCH_POOL", 32);
    let mut t = format!(
        "pgbench -S, scale 10, {clients} clients, 2 threads, {pool} server connections, {secs}s per run, {rounds} round(s); means over rounds\n\n\
         | mode | target | TPS | avg latency ms | ratio to direct | ratio to PgBouncer | proxy CPU (% of a core) | proxy CPU µs per transaction |\n|---|---|---|---|---|---|---|---|\n"
    );
    for mode in MODES {
        let mean = |target: &str| -> Option<(f64, f64, Option<f64>)> {
            let v: Vec<&Sample> = samples
                .iter()
                .filter(|s| s.mode == mode && s.target == target)
                .collect();
            if v.is_empty() {
                return None;
            }
            let n = v.len() as f64;
            let cpu: Vec<f64> = v.iter().filter_map(|s| s.proxy_cpu_pct).collect();
            Some((
                v.iter().map(|s| s.tps).sum::<f64>() / n,
                v.iter().map(|s| s.latency_ms).sum::<f64>() / n,
                (!cpu.is_empty()).then(|| cpu.iter().sum::<f64>() / cpu.len() as f64),
            ))
        };
        let direct = mean("direct").map(|m| m.0);
        for target in TARGETS {
            let peer = match target.ends_with("+tls") {
                true => mean("pgbouncer+tls").map(|m| m.0),
                false => mean("pgbouncer").map(|m| m.0),
            };
            let Some((tps, lat, cpu)) = mean(target) else {
                continue;
            };
            let ratio = direct.map_or("-".to_string(), |d| format!("{:.2}", tps / d));
            let to_peer = peer.map_or("-".to_string(), |p| format!("{:.2}", tps / p));
            let per_op = cpu.map_or("-".to_string(), |c| format!("{:.1}", c / 100.0 * 1e6 / tps));
            let cpu = cpu.map_or("-".to_string(), |c| format!("{c:.0}"));
            t.push_str(&format!(
                "| {mode} | {target} | {tps:.0} | {lat:.3} | {ratio} | {to_peer} | {cpu} | {per_op} |\n"
            ));
        }
    }
    t
}

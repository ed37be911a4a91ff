//! `cargo xtask bench memory`: Sluice's resident memory idle, then with N idle logged-in MySQL
//! clients and (after those leave) N idle PostgreSQL clients, printed as KiB per client; each
//! protocol plaintext and over TLS (`+tls` rows: the TLS library's per-connection state is
//! part of the cost).
//!
//! `BENCH_IDLE_CLIENTS` (default 10,000) sets N. The clients are PyMySQL and psycopg connections
//! held open by one Python process; the file-descriptor limit is raised as far as the hard limit
//! allows (Sluice needs one per client, the Python side one per client too, one protocol at a
//! time).

use crate::bench::{build_release, env_num, spawn_sluice, spawn_sluice_bin};
use std::process::Command;
use xtask::proc::{self, run_capture, step};

const MYSQL_PORT: u16 = 16534;
const PGSQL_PORT: u16 = 16535;

/// Holds N connections of one protocol open, prints Sluice's RSS (KiB) with them, then closes.
const CLIENT: &str = r#"
import resource, sys, time
proto, port, n, pid = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
def rss():
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
tls = proto.endswith("+tls")
def connect():
    if proto.startswith("mysql"):
        import pymysql
        # PyMySQL negotiates TLS whenever the server offers it; ssl_disabled keeps it plain.
        return pymysql.connect(host="127.0.0.1", port=port, user="app", password="app",
                               autocommit=True, ssl_disabled=not tls)
    import psycopg
    return psycopg.connect(host="127.0.0.1", port=port, user="app", password="app", dbname="app",
                           sslmode="require" if tls else "disable", autocommit=True)
conns, t0 = [], time.time()
for i in range(n):
    conns.append(connect())
# Every client runs one statement and goes idle, as pooled application clients do (a session
# that ran a statement keeps what it allocated for it); then the sessions settle.
for c in conns:
    cur = c.cursor()
    cur.execute("SELECT 1")
    cur.fetchall()
time.sleep(2)
print(rss(), len(conns), round(time.time() - t0, 1))
for c in conns:
    c.close()
"#;

/// Runs the memory benchmark and prints the table (also written to target/bench-memory.md).
pub(crate) fn memory() -> xtask::Result<()> {
    let root = xtask::workspace_root();
    xtask::packages::ensure_test_tools()?;
    xtask::backends_up()?;
    build_release()?;
    let n = env_num("BENCH_IDLE_CLIENTS", 10_000);
    let config = format!(
        "[admin_variables]\nmysql_ifaces = \"127.0.0.1:0\"\npgsql_ifaces = \"127.0.0.1:0\"\n\
         [mysql_variables]\ninterfaces = \"127.0.0.1:{MYSQL_PORT}\"\nmax_connections = 100000\n\
         [pgsql_variables]\ninterfaces = \"127.0.0.1:{PGSQL_PORT}\"\nmax_connections = 100000\nauthentication_method = 2\n\
         [[mysql_servers]]\nhostname = \"127.0.0.1\"\nport = {}\nmax_connections = 32\n\
         [[mysql_users]]\nusername = \"app\"\npassword = \"app\"\n\
         [[pgsql_servers]]\nhostname = \"127.0.0.1\"\nport = {}\nmax_connections = 32\n\
         [[pgsql_users]]\nusername = \"app\"\npassword = \"app\"\n",
        xtask::ports::MY_PRIMARY,
        xtask::ports::PG_PRIMARY
    );
    let dir = xtask::state_dir().join("bench-memory");
    let mut rows = Vec::new();
    // A fresh Sluice per protocol: memory one protocol's sessions freed would otherwise be
    // reused by the other's and hide its cost.
    // BENCH_BASELINE_BIN: the same rows for another build, one after the other.
    let baseline = std::env::var_os("BENCH_BASELINE_BIN").map(std::path::PathBuf::from);
    let mut builds = vec![("sluice", None)];
    if let Some(b) = &baseline {
        builds.push(("baseline", Some(b.as_path())));
    }
    let runs = builds.iter().flat_map(|(build, bin)| {
        [
            ("mysql", MYSQL_PORT),
            ("mysql+tls", MYSQL_PORT),
            ("pgsql", PGSQL_PORT),
            ("pgsql+tls", PGSQL_PORT),
        ]
        .map(|(proto, port)| (*build, *bin, proto, port))
    });
    for (build, bin, proto, port) in runs {
        let name = format!("sluice-{proto}");
        let mut sluice = match bin {
            None => spawn_sluice(&dir, &name, &config, MYSQL_PORT)?,
            Some(bin) => spawn_sluice_bin(bin, &dir, &name, &config, MYSQL_PORT)?,
        };
        proc::wait_until(std::time::Duration::from_secs(10), || {
            proc::port_open(PGSQL_PORT)
        });
        let pid = sluice.id();
        std::thread::sleep(std::time::Duration::from_secs(1));
        let idle = proc::rss_kib(pid);
        step(&format!("{n} idle {proto} clients ({build})"));
        let out = run_capture(Command::new("python3").args([
            "-c",
            CLIENT,
            proto,
            &port.to_string(),
            &n.to_string(),
            &pid.to_string(),
        ]));
        // Let the sessions end, then see what memory went back.
        std::thread::sleep(std::time::Duration::from_secs(3));
        let after = proc::rss_kib(pid);
        proc::signal(pid, "TERM");
        let _ = sluice.wait();
        let text = out?;
        let f: Vec<u64> = text
            .split_whitespace()
            .filter_map(|w| w.parse::<f64>().ok())
            .map(|v| v as u64)
            .collect();
        let with = f.first().copied().unwrap_or(0);
        let per = with.saturating_sub(idle) as f64 / n as f64;
        rows.push((
            format!("{build} {proto}"),
            idle,
            with,
            per,
            after,
            f.get(2).copied().unwrap_or(0),
        ));
    }
    let mut t = format!(
        "| clients | RSS idle (KiB) | RSS with {n} idle clients (KiB) | KiB per idle client | RSS after they left (KiB) | seconds to connect |\n|---|---|---|---|---|---|\n"
    );
    for (proto, idle, with, per, after, secs) in rows {
        t.push_str(&format!(
            "| {n} {proto} | {idle} | {with} | {per:.1} | {after} | {secs} |\n"
        ));
    }
    println!("\n{t}");
    let out = root.join("target/bench-memory.md");
    std::fs::write(&out, &t).map_err(|e| e.to_string())?;
    step(&format!("table written to {}", out.display()));
    Ok(())
}

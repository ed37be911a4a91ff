//! `cargo xtask soak [--minutes N]`: sysbench read/write and pgbench through Sluice, a ledger
//! writer per protocol that records every commit it was told succeeded, and faults on a timer
//! (xtask/src/soak_faults.rs). At the end: every acknowledged commit is on the surviving primary
//! exactly once, no uncommitted insert of a killed client is anywhere, no client saw a wrong
//! result, Sluice's RSS and open files came back to their level after warm-up, and every
//! warning or error in its log names a server a fault was injected into.

use crate::soak_faults::{self as faults, FaultCounts};
use crate::soak_ledger::{LedgerReport, check_ledgers, read_report};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};
use xtask::ports;
use xtask::proc::{rss_kib, run_capture, step};

const MY_PORT: u16 = 16200;
const MY_ADMIN: u16 = 16201;
const PG_PORT: u16 = 16202;
const PG_ADMIN: u16 = 16203;
const SB_DB: &str = "sbsoak";

/// The soak's Sluice: replication hostgroups on both sides (writer 0, reader 1), reads split
/// to the readers, monitors every second; server connects (TCP + TLS + SCRAM) may take 5 s, as
/// the 2,000-connect burst on a loaded 2-core machine needs (with the default 1 s, 23 of 1,000
/// PostgreSQL logins of a 10-minute run timed out opening their server connection). The
/// monitor's connects and read_only checks get 2 s for the same reason: during a burst the
/// default 600 ms / 500 ms timed out three times in a row on the MariaDB primary, which then
/// counted as read_only and left the writer hostgroup for a second (one client got 1927). A
/// crashed server still refuses at once, so failover detection is as fast as before.
fn config() -> String {
    format!(
        r#"[admin_variables]
mysql_ifaces = "127.0.0.1:{MY_ADMIN}"
pgsql_ifaces = "127.0.0.1:{PG_ADMIN}"

[mysql_variables]
interfaces = "127.0.0.1:{MY_PORT}"
max_connections = 20000
connect_timeout_server = 5000
connect_timeout_server_max = 20000
monitor_read_only_interval = 1000
monitor_ping_interval = 1000
monitor_connect_interval = 2000
monitor_connect_timeout = 2000
monitor_read_only_timeout = 2000

[pgsql_variables]
interfaces = "127.0.0.1:{PG_PORT}"
max_connections = 20000
connect_timeout_server = 5000
connect_timeout_server_max = 20000
monitor_read_only_interval = 1000
monitor_ping_interval = 1000
monitor_connect_interval = 2000
monitor_connect_timeout = 2000
monitor_read_only_timeout = 2000

[[mysql_servers]]
hostgroup_id = 0
hostname = "127.0.0.1"
port = {my1}

[[mysql_servers]]
hostgroup_id = 1
hostname = "127.0.0.1"
port = {my2}

[[mysql_replication_hostgroups]]
writer_hostgroup = 0
reader_hostgroup = 1

[[mysql_users]]
username = "app"
password = "app"
default_hostgroup = 0
max_connections = 5000

[[mysql_query_rules]]
rule_id = 1
active = 1
match_digest = "^SELECT.*FOR UPDATE"
destination_hostgroup = 0
apply = 1

[[mysql_query_rules]]
rule_id = 2
active = 1
match_digest = "^SELECT"
destination_hostgroup = 1
apply = 1

[[pgsql_servers]]
hostgroup_id = 0
hostname = "127.0.0.1"
port = {pg1}

[[pgsql_servers]]
hostgroup_id = 1
hostname = "127.0.0.1"
port = {pg2}

[[pgsql_replication_hostgroups]]
writer_hostgroup = 0
reader_hostgroup = 1

[[pgsql_users]]
username = "app"
password = "app"
default_hostgroup = 0
max_connections = 5000
"#,
        my1 = ports::MY_PRIMARY,
        my2 = ports::MY_REPLICA,
        pg1 = ports::PG_PRIMARY,
        pg2 = ports::PG_REPLICA,
    )
}

/// Entry point: `args` follow `soak` on the command line.
pub(crate) fn run(args: &[&str]) -> xtask::Result<()> {
    let minutes: f64 = match args {
        [] => 30.0,
        ["--minutes", n] => n.parse().map_err(|_| "--minutes needs a number")?,
        _ => return Err("usage: cargo xtask soak [--minutes N]".into()),
    };
    let result = Soak::prepare().and_then(|s| s.run(Duration::from_secs_f64(minutes * 60.0)));
    // The MariaDB pair was failed over and the servers were reconfigured: start fresh.
    step("soak: rebuilding the test backends (the MariaDB primary was failed over)");
    let reset = xtask::backends_reset();
    result.and(reset)
}

/// Sluice's resident memory and open files at one moment, and how many of those files are
/// sockets it reports (clients and pooled server connections of both protocols).
#[derive(Debug, Clone, Copy, Default)]
struct Footprint {
    rss_kib: u64,
    fds: u64,
    connections: u64,
}

impl Footprint {
    /// Open files that are not a reported connection: listeners, epoll, logs — and leaks.
    fn other_fds(&self) -> u64 {
        self.fds.saturating_sub(self.connections)
    }
}

fn footprint(pid: u32) -> Footprint {
    let fds = std::fs::read_dir(format!("/proc/{pid}/fd")).map_or(0, |d| d.count() as u64);
    let sum = |sql: &str| -> u64 {
        faults::admin_sql(MY_ADMIN, sql)
            .ok()
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or(0)
    };
    let mut connections = 0;
    for p in ["mysql", "pgsql"] {
        connections += sum(&format!(
            "SELECT COALESCE(SUM(ConnUsed + ConnFree), 0) FROM stats_{p}_connection_pool"
        ));
        connections += sum(&format!(
            "SELECT Variable_Value FROM stats_{p}_global WHERE Variable_Name = 'Client_Connections_connected'"
        ));
    }
    Footprint {
        rss_kib: rss_kib(pid),
        fds,
        connections,
    }
}

struct Soak {
    dir: PathBuf,
    script: PathBuf,
    sluice: Child,
}

impl Drop for Soak {
    fn drop(&mut self) {
        let _ = self.sluice.kill();
        let _ = self.sluice.wait();
    }
}

impl Soak {
    /// Backends with durable commits (semi-sync MariaDB, synchronous PostgreSQL), the ledger
    /// tables, sysbench and pgbench data, and Sluice started.
    fn prepare() -> xtask::Result<Soak> {
        xtask::backends_up()?;
        let state = xtask::state_dir();
        let (my1, my2) = (
            xtask::mariadb::primary(&state),
            xtask::mariadb::replica(&state),
        );
        let pg1 = xtask::postgres::primary(&state);
        step(
            "soak: durable commits (MariaDB semi-sync after sync, sync_binlog; PostgreSQL synchronous_commit)",
        );
        my1.sql(
            "SET GLOBAL rpl_semi_sync_master_enabled = ON; SET GLOBAL rpl_semi_sync_master_timeout = 120000; \
             SET GLOBAL rpl_semi_sync_master_wait_point = 'AFTER_SYNC'; \
             SET GLOBAL innodb_flush_log_at_trx_commit = 1; SET GLOBAL sync_binlog = 1;",
        )?;
        my2.sql("SET GLOBAL rpl_semi_sync_slave_enabled = ON; STOP SLAVE IO_THREAD; START SLAVE IO_THREAD;")?;
        let semi = xtask::proc::wait_until(Duration::from_secs(10), || {
            my1.sql("SHOW STATUS LIKE 'Rpl_semi_sync_master_clients'")
                .is_ok_and(|s| s.trim().ends_with('1'))
        });
        if !semi {
            return Err("the MariaDB replica did not connect as a semi-sync replica".into());
        }
        pg1.sql("ALTER SYSTEM SET synchronous_commit = on; SELECT pg_reload_conf();")?;
        my1.sql(&format!(
            "DROP TABLE IF EXISTS app.ledger; CREATE TABLE app.ledger (id BIGINT AUTO_INCREMENT PRIMARY KEY, \
             writer INT NOT NULL, seq BIGINT NOT NULL, KEY (writer, seq)) ENGINE=InnoDB; \
             DROP DATABASE IF EXISTS {SB_DB}; CREATE DATABASE {SB_DB};"
        ))?;
        pg_app(
            "DROP TABLE IF EXISTS ledger; CREATE TABLE ledger (id BIGSERIAL PRIMARY KEY, \
             writer INT NOT NULL, seq BIGINT NOT NULL); CREATE INDEX ON ledger (writer, seq);",
        )?;
        step("soak: sysbench data (2 tables x 10000 rows) and pgbench data (scale 1)");
        run_capture(&mut sysbench(ports::MY_PRIMARY, "prepare", 0))?;
        run_capture(
            xtask::postgres::as_app("pgbench", ports::PG_PRIMARY)
                .args(["-i", "-s", "1", "-q", "app"]),
        )?;
        let dir = state.join("soak");
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
        let script = dir.join("soak_clients.py");
        std::fs::write(&script, include_str!("soak_clients.py")).map_err(|e| e.to_string())?;
        let bin = xtask::workspace_root().join("target/debug/sluice");
        if !bin.exists() {
            xtask::packages::ensure_build_tools()?;
            xtask::proc::run_visible(
                Command::new("cargo")
                    .current_dir(xtask::workspace_root())
                    .args(["build", "--quiet", "-p", "sluice-bin"]),
            )?;
        }
        step("soak: starting Sluice (replication hostgroups on both protocols)");
        let mut sluice = crate::bench::spawn_sluice_bin(&bin, &dir, "sluice", &config(), MY_PORT)?;
        let ready = xtask::proc::wait_until(Duration::from_secs(20), || {
            xtask::proc::port_open(PG_PORT) && xtask::proc::port_open(MY_ADMIN)
        });
        if !ready {
            let _ = sluice.kill();
            return Err(format!(
                "Sluice did not open its ports:\n{}",
                xtask::proc::tail(&dir.join("sluice.log"), 20)
            ));
        }
        Ok(Soak {
            dir,
            script,
            sluice,
        })
    }

    fn run(mut self, length: Duration) -> xtask::Result<()> {
        let secs = length.as_secs().max(60);
        step(&format!("soak: {secs}s of load and faults"));
        let stop = Arc::new(AtomicBool::new(false));
        let load = [
            spawn_loop(stop.clone(), move |secs| sysbench(MY_PORT, "run", secs)),
            spawn_loop(stop.clone(), pgbench),
        ];
        let ledgers = [("mysql", MY_PORT, 1), ("pgsql", PG_PORT, 2)].map(|(proto, port, w)| {
            let out = self.dir.join(format!("ledger-{proto}.json"));
            let child = Command::new("python3")
                .arg(&self.script)
                .args(["ledger", proto, &port.to_string(), &w.to_string()])
                .arg((secs - 10).to_string())
                .arg(&out)
                .stdout(Stdio::null())
                .spawn();
            (proto, out, child)
        });
        let injected = self.inject_faults(secs);
        stop.store(true, Ordering::Relaxed);
        let (counts, warm, peak) = match injected {
            Ok(v) => v,
            Err(e) => {
                for (_, _, child) in ledgers {
                    if let Ok(mut c) = child {
                        let _ = c.kill();
                        let _ = c.wait();
                    }
                }
                return Err(e);
            }
        };
        let mut load_runs = Vec::new();
        for l in load {
            load_runs.push(l.join().unwrap_or_default());
        }
        let mut reports = Vec::new();
        for (proto, out, child) in ledgers {
            if let Ok(mut c) = child {
                let _ = c.wait();
            }
            reports.push((proto, read_report(&out)?));
        }
        // Clients are gone: give Sluice a moment to drop idle connections' buffers.
        std::thread::sleep(Duration::from_secs(5));
        let end = footprint(self.sluice.id());
        let verdict = self.verify(&reports, &counts, (warm, peak, end), &load_runs);
        let _ = self.sluice.kill();
        verdict
    }

    /// The fault timeline; returns what was injected and Sluice's footprint after warm-up
    /// and its peak.
    fn inject_faults(&mut self, secs: u64) -> xtask::Result<(FaultCounts, Footprint, Footprint)> {
        let state = xtask::state_dir();
        let (my1, my2) = (
            xtask::mariadb::primary(&state),
            xtask::mariadb::replica(&state),
        );
        let (pg1, pg2) = (
            xtask::postgres::primary(&state),
            xtask::postgres::replica(&state),
        );
        let mut c = FaultCounts::default();
        let (mut warm, mut peak) = (Footprint::default(), Footprint::default());
        let mut victims: Vec<Child> = Vec::new();
        let started = Instant::now();
        let at = |fraction: f64| (secs as f64 * fraction) as u64;
        let (mut pg_crashed, mut failed_over, mut burst_done) = (false, false, false);
        let mut writer = my1.clone();
        for tick in 1..secs.saturating_sub(10) {
            let due = Duration::from_secs(tick);
            if let Some(wait) = due.checked_sub(started.elapsed()) {
                std::thread::sleep(wait);
            }
            // The reference comes after the one-time faults (crash, failover, burst): from
            // there on only the recurring faults run, and nothing may keep growing.
            if tick % 5 == 0 || tick == at(0.4) {
                let now = footprint(self.sluice.id());
                if tick == at(0.4) {
                    warm = now;
                }
                peak.rss_kib = peak.rss_kib.max(now.rss_kib);
                peak.fds = peak.fds.max(now.fds);
            }
            if self.sluice.try_wait().ok().flatten().is_some() {
                return Err("Sluice exited during the soak".into());
            }
            if tick % 5 == 0 {
                match faults::reload_runtime(MY_ADMIN, tick) {
                    Ok(()) => c.reloads += 1,
                    Err(e) => step(&format!("soak: reload failed: {e}")),
                }
            }
            if tick % 7 == 0 {
                for mut v in victims.drain(..) {
                    let _ = v.kill();
                    let _ = v.wait();
                    c.victims_killed += 1;
                }
                for (proto, port) in [("mysql", MY_PORT), ("pgsql", PG_PORT)] {
                    victims.extend(faults::spawn_victim(&self.script, proto, port));
                }
            }
            if tick % 11 == 0 {
                c.backend_kills += faults::kill_backend_connections(&writer, &pg1);
            }
            if tick % 23 == 0 {
                // After the failover the MariaDB server left is the promoted writer.
                let which = if failed_over {
                    "MariaDB promoted primary"
                } else {
                    "MariaDB replica"
                };
                faults::pause_replica(which, my2.pid(), 3);
                faults::pause_replica("PostgreSQL replica", pg2.pid(), 3);
                c.replica_stops += 2;
            }
            if !pg_crashed && tick >= at(0.2) {
                faults::crash_and_restart_pg(&pg1)?;
                c.pg_primary_crashes += 1;
                pg_crashed = true;
            }
            if !failed_over && tick >= at(0.25) {
                faults::crash_primary_and_promote(&my1, &my2)?;
                c.mariadb_failovers += 1;
                failed_over = true;
                writer = my2.clone();
            }
            if !burst_done && tick >= at(0.1).max(15) {
                let (ok, failed) = faults::connect_burst(
                    &self.script,
                    [("mysql", MY_PORT), ("pgsql", PG_PORT)],
                    1000,
                );
                c.burst_ok = ok;
                c.burst_failed = failed;
                burst_done = true;
            }
        }
        for mut v in victims {
            let _ = v.kill();
            let _ = v.wait();
            c.victims_killed += 1;
        }
        Ok((c, warm, peak))
    }

    /// Checks the ledgers on the surviving primaries, the footprint and the log; prints the
    /// summary table.
    fn verify(
        &self,
        reports: &[(&str, LedgerReport)],
        c: &FaultCounts,
        (warm, peak, end): (Footprint, Footprint, Footprint),
        load_runs: &[(u64, u64)],
    ) -> xtask::Result<()> {
        let (rows, mut problems) = check_ledgers(reports)?;
        let grew = |a: u64, b: u64| b as f64 > a as f64 * 1.10 + 1024.0;
        if grew(warm.rss_kib, end.rss_kib) {
            problems.push(format!(
                "RSS {} KiB after warm-up, {} KiB at the end",
                warm.rss_kib, end.rss_kib
            ));
        }
        if end.fds > warm.fds + warm.fds / 10 + 2 {
            problems.push(format!(
                "{} open files after warm-up, {} at the end",
                warm.fds, end.fds
            ));
        }
        let log = std::fs::read_to_string(self.dir.join("sluice.log")).unwrap_or_default();
        let unexplained = unexplained_log_lines(&log);
        if !unexplained.is_empty() {
            problems.push(format!(
                "{} unexplained log line(s), first: {}",
                unexplained.len(),
                unexplained[0]
            ));
        }
        println!("\n| check | what happened | result | detail |\n|---|---|---|---|");
        for r in rows {
            println!("{r}");
        }
        println!(
            "| faults | {} reloads, {} replica stops, {} backend kills, {} clients killed mid-transaction, {} PostgreSQL primary crash+restart, {} MariaDB failover | | |",
            c.reloads,
            c.replica_stops,
            c.backend_kills,
            c.victims_killed,
            c.pg_primary_crashes,
            c.mariadb_failovers
        );
        println!(
            "| connect burst | {} ok, {} failed | | |",
            c.burst_ok, c.burst_failed
        );
        println!(
            "| load | sysbench {} run(s), pgbench {} run(s) | restarted after faults | |",
            load_runs.first().map_or(0, |r| r.0),
            load_runs.get(1).map_or(0, |r| r.0)
        );
        println!(
            "| Sluice footprint | RSS {} KiB after the one-time faults, {} peak, {} at the end; open files {} / {} / {} ({} / {} besides connections) | | |",
            warm.rss_kib,
            peak.rss_kib,
            end.rss_kib,
            warm.fds,
            peak.fds,
            end.fds,
            warm.other_fds(),
            end.other_fds()
        );
        println!(
            "| log | {} warning/error lines, {} unexplained | | |",
            log.lines()
                .filter(|l| l.contains(" WARN ") || l.contains(" ERROR "))
                .count(),
            unexplained.len()
        );
        if c.burst_failed > 0 {
            problems.push(format!("{} connects of the burst failed", c.burst_failed));
        }
        if problems.is_empty() {
            step("soak passed");
            Ok(())
        } else {
            Err(format!("soak failed:\n  {}", problems.join("\n  ")))
        }
    }
}

/// Error and warning lines that name no server a fault was injected into, and every panic.
fn unexplained_log_lines(log: &str) -> Vec<String> {
    let faulted = [
        ports::MY_PRIMARY,
        ports::MY_REPLICA,
        ports::PG_PRIMARY,
        ports::PG_REPLICA,
    ];
    log.lines()
        .filter(|l| l.contains("panicked") || l.contains(" ERROR "))
        .filter(|l| {
            l.contains("panicked")
                || !faulted
                    .iter()
                    .any(|p| l.contains(&format!(":{p}")) || l.contains(&format!("port={p}")))
        })
        .map(str::to_string)
        .collect()
}

/// Runs `one(seconds_left)` again and again until `stop`, counting runs and failed runs (a
/// load tool exits on the first error a fault causes; it is restarted).
fn spawn_loop(
    stop: Arc<AtomicBool>,
    one: impl Fn(u64) -> Command + Send + 'static,
) -> std::thread::JoinHandle<(u64, u64)> {
    let failed = AtomicU64::new(0);
    std::thread::spawn(move || {
        let mut runs = 0;
        while !stop.load(Ordering::Relaxed) {
            runs += 1;
            let out = one(15).stdin(Stdio::null()).output();
            if !out.is_ok_and(|o| o.status.success()) {
                failed.fetch_add(1, Ordering::Relaxed);
                std::thread::sleep(Duration::from_millis(500));
            }
        }
        (runs, failed.load(Ordering::Relaxed))
    })
}

/// Runs SQL as app/app in the `app` database of the PostgreSQL primary (directly, not through
/// Sluice); unaligned tuples.
pub(super) fn pg_app(sql: &str) -> xtask::Result<String> {
    run_capture(
        xtask::postgres::as_app("psql", ports::PG_PRIMARY)
            .args(["-d", "app", "-X", "-q", "-At", "-v", "ON_ERROR_STOP=1"])
            .args(["-c", sql]),
    )
}

fn sysbench(port: u16, action: &str, seconds: u64) -> Command {
    let mut c = Command::new("sysbench");
    c.args(["--db-driver=mysql", "--mysql-host=127.0.0.1"])
        .arg(format!("--mysql-port={port}"))
        .args([
            "--mysql-user=app",
            "--mysql-password=app",
            "--mysql-ssl=off",
        ])
        .arg(format!("--mysql-db={SB_DB}"))
        .args(["--tables=2", "--table-size=10000", "--threads=4"])
        .arg(format!("--time={seconds}"))
        .args(["--mysql-ignore-errors=all", "oltp_read_write", action]);
    c.stdout(Stdio::null()).stderr(Stdio::null());
    c
}

fn pgbench(seconds: u64) -> Command {
    let mut c = xtask::postgres::as_app("pgbench", PG_PORT);
    c.args(["-n", "-c", "4", "-T", &seconds.to_string(), "app"]);
    c.stdout(Stdio::null()).stderr(Stdio::null());
    c
}

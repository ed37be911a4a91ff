//! The faults `cargo xtask soak` injects, each logged as it happens so the Sluice log's
//! warnings can be matched to a cause: runtime reloads, stopped replicas, killed backend
//! connections, clients killed mid-transaction, a crashed and restarted PostgreSQL primary, a
//! crashed MariaDB primary with its replica promoted, a burst of connects.

use std::process::{Child, Command, Stdio};
use std::time::Duration;
use xtask::mariadb::MariaDb;
use xtask::postgres::Postgres;
use xtask::proc::{run_capture, signal, step};

/// The process and its direct children (a PostgreSQL postmaster's backends and workers).
pub(crate) fn family(pid: u32) -> Vec<u32> {
    let mut out = vec![pid];
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return out;
    };
    for e in entries.flatten() {
        let Some(child) = e.file_name().to_str().and_then(|n| n.parse::<u32>().ok()) else {
            continue;
        };
        let stat = std::fs::read_to_string(format!("/proc/{child}/stat")).unwrap_or_default();
        let ppid = stat
            .rfind(')')
            .and_then(|i| stat[i + 2..].split_whitespace().nth(1))
            .and_then(|p| p.parse::<u32>().ok());
        if ppid == Some(pid) {
            out.push(child);
        }
    }
    out
}

/// What happened, for the summary table.
#[derive(Debug, Default)]
pub(crate) struct FaultCounts {
    pub reloads: u32,
    pub replica_stops: u32,
    pub backend_kills: u32,
    pub victims_killed: u32,
    pub pg_primary_crashes: u32,
    pub mariadb_failovers: u32,
    pub burst_ok: u64,
    pub burst_failed: u64,
}

/// Changes servers, rules and users of both protocols in the admin and loads them to runtime.
pub(crate) fn reload_runtime(admin_port: u16, tick: u64) -> xtask::Result<()> {
    let weight = tick % 3 + 1;
    let sql = format!(
        "UPDATE mysql_servers SET weight = {weight} WHERE hostgroup_id = 1; LOAD MYSQL SERVERS TO RUNTIME; \
         UPDATE mysql_query_rules SET comment = 'soak tick {tick}'; LOAD MYSQL QUERY RULES TO RUNTIME; \
         UPDATE mysql_users SET max_connections = {}; LOAD MYSQL USERS TO RUNTIME; \
         UPDATE pgsql_servers SET weight = {weight} WHERE hostgroup_id = 1; LOAD PGSQL SERVERS TO RUNTIME; \
         UPDATE pgsql_users SET max_connections = {}; LOAD PGSQL USERS TO RUNTIME;",
        5000 + tick,
        5000 + tick
    );
    admin_sql(admin_port, &sql).map(|_| ())
}

/// Runs SQL on Sluice's MySQL admin port.
pub(crate) fn admin_sql(admin_port: u16, sql: &str) -> xtask::Result<String> {
    run_capture(
        Command::new("mariadb")
            .args([
                "--no-defaults",
                "-h127.0.0.1",
                "-uadmin",
                "-padmin",
                "--skip-ssl",
            ])
            .arg(format!("-P{admin_port}"))
            .args(["-N", "-B", "-e", sql]),
    )
}

/// SIGSTOP for `secs`, then SIGCONT, of a server and its children.
pub(crate) fn pause_replica(what: &str, pid: Option<u32>, secs: u64) {
    let Some(pid) = pid else {
        return;
    };
    let pids = family(pid);
    step(&format!("fault: SIGSTOP {what} (pid {pid}) for {secs}s"));
    for p in &pids {
        signal(*p, "STOP");
    }
    std::thread::sleep(Duration::from_secs(secs));
    for p in &pids {
        signal(*p, "CONT");
    }
}

/// Kills one of Sluice's backend connections on each primary (`KILL`, `pg_terminate_backend`).
pub(crate) fn kill_backend_connections(my: &MariaDb, pg: &Postgres) -> u32 {
    let mut n = 0;
    let my_id = my
        .sql("SELECT id FROM information_schema.processlist WHERE user = 'app' ORDER BY RAND() LIMIT 1")
        .unwrap_or_default();
    if let Ok(id) = my_id.trim().parse::<u64>() {
        step(&format!("fault: KILL {id} on MariaDB :{}", my.port));
        if my.sql(&format!("KILL {id}")).is_ok() {
            n += 1;
        }
    }
    let killed = pg
        .sql(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = 'app' \
             AND pid <> pg_backend_pid() ORDER BY random() LIMIT 1",
        )
        .unwrap_or_default();
    if killed.trim() == "t" {
        step(&format!(
            "fault: pg_terminate_backend on PostgreSQL :{}",
            pg.port
        ));
        n += 1;
    }
    n
}

/// kill -9 of the PostgreSQL primary and every process of it, then a restart (crash recovery).
pub(crate) fn crash_and_restart_pg(pg: &Postgres) -> xtask::Result<()> {
    let Some(pid) = pg.pid() else {
        return Err("the PostgreSQL primary is not running".into());
    };
    step(&format!(
        "fault: kill -9 PostgreSQL primary :{} (pid {pid} and its children)",
        pg.port
    ));
    for p in family(pid) {
        signal(p, "KILL");
    }
    xtask::proc::wait_until(Duration::from_secs(20), || {
        family(pid).iter().all(|p| !xtask::proc::alive(*p))
    });
    std::thread::sleep(Duration::from_secs(3));
    step(&format!(
        "fault: restarting PostgreSQL primary :{}",
        pg.port
    ));
    pg.start_existing()
}

/// kill -9 of the MariaDB primary; the replica applies what it received (semi-sync: every
/// acknowledged commit) and is promoted (`read_only=0`), as an orchestrator would. The old
/// primary stays down: it may hold a transaction nobody acknowledged and is rebuilt at the end.
pub(crate) fn crash_primary_and_promote(primary: &MariaDb, replica: &MariaDb) -> xtask::Result<()> {
    let pid = primary.pid().ok_or("the MariaDB primary is not running")?;
    step(&format!(
        "fault: kill -9 MariaDB primary :{} (pid {pid})",
        primary.port
    ));
    signal(pid, "KILL");
    xtask::proc::wait_until(Duration::from_secs(20), || !xtask::proc::alive(pid));
    let status = replica.sql_headed("SHOW SLAVE STATUS\\G")?;
    let io_pos = status
        .lines()
        .find_map(|l| l.trim().strip_prefix("Gtid_IO_Pos:"))
        .map(str::trim)
        .unwrap_or_default()
        .to_string();
    step(&format!(
        "fault: promoting MariaDB replica :{} after it applies {io_pos}",
        replica.port
    ));
    let waited = replica.sql(&format!("SELECT MASTER_GTID_WAIT('{io_pos}', 60)"))?;
    if waited.trim() != "0" {
        return Err(format!(
            "the MariaDB replica did not apply {io_pos} within 60s"
        ));
    }
    replica.sql("STOP SLAVE; SET GLOBAL read_only = 0;")?;
    Ok(())
}

/// The victim client: a transaction with an insert that never commits, killed later.
pub(crate) fn spawn_victim(script: &std::path::Path, proto: &str, port: u16) -> Option<Child> {
    Command::new("python3")
        .arg(script)
        .args(["victim", proto, &port.to_string()])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .ok()
}

/// `count` connect+login+query+close cycles on each protocol; returns (ok, failed).
pub(crate) fn connect_burst(
    script: &std::path::Path,
    ports: [(&str, u16); 2],
    count: u32,
) -> (u64, u64) {
    let (mut ok, mut failed) = (0, 0);
    for (proto, port) in ports {
        step(&format!("fault: burst of {count} {proto} connects"));
        let out = run_capture(Command::new("python3").arg(script).args([
            "burst",
            proto,
            &port.to_string(),
            &count.to_string(),
        ]))
        .unwrap_or_default();
        let ok_n = field(&out, "\"ok\": ").unwrap_or(0);
        ok += ok_n;
        failed += u64::from(count).saturating_sub(ok_n);
        if ok_n < u64::from(count) {
            step(&format!("burst {proto}: {}", out.trim()));
        }
    }
    (ok, failed)
}

fn field(json: &str, key: &str) -> Option<u64> {
    let rest = &json[json.find(key)? + key.len()..];
    rest.split(|c: char| !c.is_ascii_digit())
        .next()?
        .parse()
        .ok()
}

//! Replication lag monitoring against the real MariaDB replica: a delayed replica
//! (`MASTER_DELAY`) is shunned within interval × count and comes back when it catches up, a
//! stopped replica (NULL lag) follows `monitor_slave_lag_when_null`, and a lagging replica that
//! stops answering (SIGSTOP) stays out. The replica is restored afterwards.

use sluice_tests::*;
use std::time::{Duration, Instant};

/// Runs `sql` as root on the replica.
fn replica_query(sql: &str) -> std::process::Output {
    mariadb(ports::MY_REPLICA, "root", "root", &["--skip-ssl"], sql)
}

/// Runs `sql` as root on the replica and returns its output; it must succeed.
fn replica_root(sql: &str) -> String {
    ok_stdout(&replica_query(sql))
}

/// Undoes what the test did to the replica, also when it fails.
struct Restore;

impl Drop for Restore {
    fn drop(&mut self) {
        let dir = xtask::state_dir();
        if let Some(pid) = xtask::mariadb::replica(&dir).pid() {
            xtask::proc::signal(pid, "CONT");
        }
        let _ = replica_query("STOP SLAVE; CHANGE MASTER TO MASTER_DELAY = 0; START SLAVE;");
    }
}

/// Hostgroup 0 has the primary; hostgroup 1 (readers) the replica with a 2 s lag threshold and
/// the primary as fallback. `variables` are extra `[mysql_variables]` lines.
fn lag_config(variables: &str) -> String {
    let (p, r) = (ports::MY_PRIMARY, ports::MY_REPLICA);
    format!(
        r#"
[mysql_variables]
interfaces = "127.0.0.1:{{port}}"
{variables}

[[mysql_servers]]
hostgroup_id = 0
hostname = "127.0.0.1"
port = {p}

[[mysql_servers]]
hostgroup_id = 1
hostname = "127.0.0.1"
port = {r}
max_replication_lag = 2

[[mysql_servers]]
hostgroup_id = 1
hostname = "127.0.0.1"
port = {p}
weight = 1

[[mysql_users]]
username = "app"
password = "app"
"#
    )
}

/// The replica's status in the reader hostgroup, as `stats_mysql_connection_pool` shows it.
fn status(s: &Sluice) -> String {
    s.admin_ok(&format!(
        "SELECT status FROM stats_mysql_connection_pool WHERE hostgroup = 1 AND srv_port = {}",
        ports::MY_REPLICA
    ))
    .trim()
    .to_string()
}

#[test]
fn lagging_replica_is_shunned_reads_move_and_it_returns() {
    // Stops and reconfigures the replica the other tests read from: it runs alone.
    if !backends_exclusive(Servers::MariaDb) {
        return;
    }
    let _restore = Restore;
    primary_root(
        "CREATE DATABASE IF NOT EXISTS lagtest; CREATE TABLE IF NOT EXISTS lagtest.t (id INT AUTO_INCREMENT PRIMARY KEY, at TIMESTAMP(6) DEFAULT CURRENT_TIMESTAMP(6));",
    );
    let (p, r) = (ports::MY_PRIMARY, ports::MY_REPLICA);
    let cfg = lag_config(
        "monitor_replication_lag_interval = 500\nmonitor_replication_lag_count = 2\nmonitor_ping_interval = 500",
    );
    let s = Sluice::start(&cfg);
    assert_eq!(status(&s), "ONLINE");
    let checked = xtask::proc::wait_until(Duration::from_secs(5), || {
        s.admin_ok(&format!("SELECT COUNT(*) FROM monitor.mysql_server_replication_lag_log WHERE port = {r} AND repl_lag = 0")).trim() != "0"
    });
    assert!(checked, "lag checks run: {}", s.log());
    assert_eq!(
        s.admin_ok("SELECT hostgroup_id, port, max_replication_lag FROM runtime_mysql_servers WHERE max_replication_lag > 0"),
        format!("1\t{r}\t2\n")
    );

    // A delayed replica with writes flowing: its lag grows past 2 s.
    replica_root("STOP SLAVE; CHANGE MASTER TO MASTER_DELAY = 30; START SLAVE;");
    let t0 = Instant::now();
    let mut shunned_after = None;
    while t0.elapsed() < Duration::from_secs(20) {
        primary_root("INSERT INTO lagtest.t () VALUES ();");
        if status(&s) == "SHUNNED_REPLICATION_LAG" {
            shunned_after = Some(t0.elapsed());
            break;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    let shunned_after = shunned_after.unwrap_or_else(|| panic!("never shunned: {}", s.log()));
    eprintln!(
        "replica shunned for lag {shunned_after:?} after writes began (lag > 2 s, 2 checks of 500 ms)"
    );
    assert!(s.log().contains(&format!(
        "Shunning server 127.0.0.1:{r} with replication lag of"
    )));
    // Reads of hostgroup 1 go to the remaining server.
    assert_eq!(
        s.admin_ok(&format!(
            "SELECT status FROM runtime_mysql_servers WHERE hostgroup_id = 1 AND port = {r}"
        ))
        .trim(),
        "SHUNNED",
        "runtime tables keep ProxySQL's four states"
    );
    let reads = ok_stdout(&mariadb(
        s.port,
        "app",
        "app",
        &["--skip-ssl", "--comments"],
        &"SELECT /* hostgroup=1 */ @@port;".repeat(20),
    ));
    assert!(reads.lines().all(|l| l == p.to_string()), "{reads}");

    // Catching up brings it back.
    replica_root("STOP SLAVE; CHANGE MASTER TO MASTER_DELAY = 0; START SLAVE;");
    let back = xtask::proc::wait_until(Duration::from_secs(20), || status(&s) == "ONLINE");
    assert!(back, "{}", s.log());
    assert!(
        s.log()
            .contains(&format!("Re-enabling server 127.0.0.1:{r}"))
    );

    // NULL lag (replication stopped) counts as monitor_slave_lag_when_null (60 s by default).
    replica_root("STOP SLAVE;");
    let null_shunned = xtask::proc::wait_until(Duration::from_secs(10), || {
        status(&s) == "SHUNNED_REPLICATION_LAG"
    });
    assert!(null_shunned, "{}", s.log());
    let nulls = s.admin_ok(&format!(
        "SELECT COUNT(*) FROM monitor.mysql_server_replication_lag_log WHERE port = {r} AND repl_lag IS NULL AND error IS NULL"
    ));
    assert_ne!(nulls.trim(), "0");
    s.admin_ok("SET mysql-monitor_slave_lag_when_null = 0; LOAD MYSQL VARIABLES TO RUNTIME;");
    let lenient = xtask::proc::wait_until(Duration::from_secs(10), || status(&s) == "ONLINE");
    assert!(
        lenient,
        "when_null = 0 reads a stopped replica as not lagging: {}",
        s.log()
    );

    // A lagging replica that stops answering stays out: timeouts never re-enable it.
    s.admin_ok("SET mysql-monitor_slave_lag_when_null = 60; LOAD MYSQL VARIABLES TO RUNTIME;");
    let again = xtask::proc::wait_until(Duration::from_secs(10), || {
        status(&s) == "SHUNNED_REPLICATION_LAG"
    });
    assert!(again, "{}", s.log());
    let pid = xtask::mariadb::replica(&xtask::state_dir())
        .pid()
        .expect("replica pid");
    xtask::proc::signal(pid, "STOP");
    let t = Instant::now();
    let mut seen = Vec::new();
    while t.elapsed() < Duration::from_secs(4) {
        seen.push(status(&s));
        std::thread::sleep(Duration::from_millis(250));
    }
    xtask::proc::signal(pid, "CONT");
    assert!(
        seen.iter().all(|st| st != "ONLINE"),
        "a stopped lagging replica came back: {seen:?}"
    );
    let timeouts = s.admin_ok(&format!(
        "SELECT COUNT(*) FROM monitor.mysql_server_replication_lag_log WHERE port = {r} AND error IS NOT NULL"
    ));
    assert_ne!(timeouts.trim(), "0", "lag checks timed out while stopped");
    replica_root("START SLAVE;");
    let recovered = xtask::proc::wait_until(Duration::from_secs(20), || status(&s) == "ONLINE");
    assert!(recovered, "{}", s.log());
}

#[test]
fn pt_heartbeat_table_gives_the_lag_when_replication_reports_null() {
    // Stops and reconfigures the replica the other tests read from: it runs alone.
    if !backends_exclusive(Servers::MariaDb) {
        return;
    }
    let _restore = Restore;
    primary_root(
        "CREATE DATABASE IF NOT EXISTS percona; CREATE TABLE IF NOT EXISTS percona.heartbeat (ts VARCHAR(26) NOT NULL, server_id INT UNSIGNED NOT NULL PRIMARY KEY); REPLACE INTO percona.heartbeat VALUES (NOW(6), 1); GRANT SELECT ON percona.heartbeat TO 'monitor'@'%';",
    );
    let r = ports::MY_REPLICA;
    let cfg = lag_config(
        "monitor_replication_lag_interval = 500\nmonitor_slave_lag_when_null = 0\nmonitor_replication_lag_use_percona_heartbeat = \"percona.heartbeat\"",
    );
    let s = Sluice::start(&cfg);
    let replicated = xtask::proc::wait_until(Duration::from_secs(20), || {
        replica_query("SELECT COUNT(*) FROM percona.heartbeat")
            .stdout
            .starts_with(b"1")
    });
    assert!(replicated);
    // Replication stops: Seconds_Behind_Master is NULL (read as 0 here), but the heartbeat the
    // replica holds gets older while the primary keeps writing new ones.
    replica_root("STOP SLAVE;");
    let t0 = Instant::now();
    let mut shunned = false;
    while t0.elapsed() < Duration::from_secs(15) {
        primary_root("REPLACE INTO percona.heartbeat VALUES (NOW(6), 1);");
        if status(&s) == "SHUNNED_REPLICATION_LAG" {
            shunned = true;
            break;
        }
        std::thread::sleep(Duration::from_millis(250));
    }
    assert!(
        shunned,
        "{}\n{}",
        s.admin_ok(&format!(
            "SELECT time_start_us, repl_lag, error FROM monitor.mysql_server_replication_lag_log WHERE port = {r} ORDER BY time_start_us DESC LIMIT 5"
        )),
        s.log()
    );
    let lags = s.admin_ok(&format!(
        "SELECT MAX(repl_lag) > 2 FROM monitor.mysql_server_replication_lag_log WHERE port = {r}"
    ));
    assert_eq!(lags.trim(), "1");
    replica_root("START SLAVE;");
    let back = xtask::proc::wait_until(Duration::from_secs(20), || {
        primary_root("REPLACE INTO percona.heartbeat VALUES (NOW(6), 1);");
        status(&s) == "ONLINE"
    });
    assert!(back, "{}", s.log());
}

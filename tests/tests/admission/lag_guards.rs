//! Workload guards on replica lag (seed 002): the batch class delayed, then shed, while the replica
//! lags; the app never; on MariaDB and PostgreSQL.

use super::*;

/// Puts the replica back as the other tests expect it, also when the lag test fails.
struct RestoreReplica;

impl Drop for RestoreReplica {
    fn drop(&mut self) {
        let _ = mariadb(
            ports::MY_REPLICA,
            "root",
            "root",
            &["--skip-ssl"],
            "STOP SLAVE; CHANGE MASTER TO MASTER_DELAY = 0; START SLAVE;",
        );
    }
}

/// Seed 002's scenario as one guard row: `batch`'s writes are delayed while the replica lags,
/// shed above 5 s, and run again once the lag is back under the hysteresis floor; `app` is
/// never touched; NULL lag (replication stopped) counts as bad; `/throttler/check` follows.
fn lag_guard_config(http_port: u16) -> String {
    format!(
        r#"
[admin_variables]
mysql_ifaces = "127.0.0.1:{{admin_port}}"
pgsql_ifaces = "127.0.0.1:{{pg_admin_port}}"
restapi_enabled = true
restapi_port = {http_port}

[mysql_variables]
interfaces = "127.0.0.1:{{port}}"
monitor_replication_lag_interval = 200

[[mysql_servers]]
hostgroup_id = 0
hostname = "127.0.0.1"
port = {primary}

[[mysql_servers]]
hostgroup_id = 1
hostname = "127.0.0.1"
port = {replica}
max_replication_lag = 100000

[[mysql_users]]
username = "app"
password = "app"

[[mysql_users]]
username = "batch"
password = "batch"

[[workload_classes]]
name = "batch"
priority = "background"
max_concurrency = 4

[[workload_guards]]
guard_id = 1
classes = "batch"
signal = "replica_lag"
hostgroup = 1
low = 1
high = 3
reject_above = 5
max_delay_ms = 1500
hysteresis_pct = 50
min_open_ms = 1000
apps = "gh-ost"
comment = "seed 002: slow the batch writer while the replica lags"

[[mysql_query_rules]]
rule_id = 1
active = 1
username = "batch"
workload_class = "batch"
"#,
        primary = ports::MY_PRIMARY,
        replica = ports::MY_REPLICA,
    )
}

#[test]
fn seed_002_lag_guard_slows_then_sheds_batch_and_never_app() {
    // Delays and stops replication on the replica the other tests read from: it runs alone.
    if !backends_exclusive(Servers::MariaDb) {
        return;
    }
    let _one = exclusive();
    primary_root(
        "CREATE DATABASE IF NOT EXISTS admission; CREATE USER IF NOT EXISTS 'batch'@'%' IDENTIFIED BY 'batch'; \
         GRANT ALL ON admission.* TO 'batch'@'%';",
    );
    let _restore = RestoreReplica;
    let http = free_port();
    let s = Sluice::start(&lag_guard_config(http));
    let args = [
        http.to_string(),
        ports::MY_PRIMARY.to_string(),
        ports::MY_REPLICA.to_string(),
    ];
    let out = clients("lag", Side::Mysql, s.port, &args);
    let v: serde_json::Value = serde_json::from_str(out.trim()).expect("lag prints JSON");
    let log = s.log();
    for step in ["opened", "closed", "stopped", "back"] {
        assert_eq!(v[step], true, "phase {step} reached\n{out}\n{log}");
    }
    let statements = v["statements"].as_array().expect("statements");
    let of = |user: &str, phase: &str| -> Vec<&serde_json::Value> {
        statements
            .iter()
            .filter(|s| s[1] == user && (phase.is_empty() || s[2] == phase))
            .collect()
    };
    // app: every statement answered, in every phase.
    let app_errors: Vec<_> = of("app", "").into_iter().filter(|s| s[4] != "ok").collect();
    assert!(
        app_errors.is_empty(),
        "app is never delayed or shed: {app_errors:?}"
    );
    // batch: delayed while the lag ramps, shed while it is over 5 s, never before.
    assert!(of("batch", "baseline").iter().all(|s| s[4] == "ok"));
    let lagging = of("batch", "lagging");
    let slowest = lagging
        .iter()
        .filter_map(|s| s[3].as_f64())
        .fold(0.0, f64::max);
    assert!(
        slowest >= 300.0,
        "the ramp delays batch (max_delay_ms 1500): slowest {slowest} ms\n{out}\n{log}"
    );
    let shed: Vec<_> = lagging.iter().filter(|s| s[4] == "9102").collect();
    assert!(!shed.is_empty(), "batch is shed above reject_above");
    let msg = shed[0][5].as_str().unwrap_or("");
    assert!(
        msg.starts_with("Sluice: workload 'batch' shed: replica lag ")
            && msg.ends_with(" s >= 5 s on hostgroup 1"),
        "{msg}"
    );
    // Stopped replication (NULL lag = monitor_slave_lag_when_null, 60 s) sheds too.
    assert!(
        of("batch", "stopped").iter().any(|s| s[4] == "9102"),
        "NULL lag counts as bad"
    );
    // The check endpoint: 200 before, 429 while open, 200 after.
    let checks = v["checks"].as_array().expect("checks");
    let status_in = |phase: &str| -> Vec<u64> {
        checks
            .iter()
            .filter(|c| c[1] == phase)
            .filter_map(|c| c[2].as_u64())
            .collect()
    };
    assert!(
        status_in("baseline").iter().all(|c| *c == 200),
        "{:?}",
        status_in("baseline")
    );
    assert!(status_in("lagging").contains(&429));
    assert_eq!(status_in("restarted").last(), Some(&200));
    // The guard closed only under the hysteresis floor (low 1 s less 50 %), and said so.
    let closing: Vec<&str> = log
        .lines()
        .filter(|l| l.contains("workload guard 1: open -> "))
        .collect();
    assert!(closing.len() >= 2, "two closings logged:\n{log}");
    for line in &closing {
        let lag: f64 = line
            .split("replica lag ")
            .nth(1)
            .and_then(|r| r.split(' ').next())
            .and_then(|n| n.parse().ok())
            .expect("the lag in the log line");
        assert!(lag < 0.5, "closed at {lag} s, over the floor: {line}");
    }
    assert!(
        log.contains("-> open: replica lag ")
            && log.contains("new statements of classes batch are shed")
    );
    // Stats and metrics agree with what the clients saw.
    let guard =
        ok_stdout(&s.admin("SELECT state, changes FROM stats_workload_guards WHERE guard_id = 1"));
    let changes: u64 = guard
        .split('\t')
        .nth(1)
        .and_then(|c| c.trim().parse().ok())
        .unwrap_or(0);
    assert!(changes >= 4, "{guard}");
    let m = metrics(&s);
    assert!(
        m.contains(&format!(
            r#"sluice_guard_changes_total{{guard="1",signal="replica_lag"}} {changes}"#
        )),
        "{m}"
    );
    let st = class_stats(&s, "batch");
    let shed_total = statements
        .iter()
        .filter(|s| s[1] == "batch" && s[4] == "9102")
        .count();
    assert_eq!(st["shed_guard"], shed_total.to_string(), "{st:?}");
    assert!(
        st["guard_delayed"].parse::<u64>().unwrap_or(0) > 0,
        "{st:?}"
    );
}

fn pg_lag_guard_config() -> String {
    format!(
        r#"
[pgsql_variables]
interfaces = "127.0.0.1:{{pg_port}}"
monitor_replication_lag_interval = 200

[mysql_variables]
interfaces = "127.0.0.1:{{port}}"

[[mysql_servers]]
hostgroup_id = 0
hostname = "127.0.0.1"
port = {my_primary}

[[mysql_users]]
username = "app"
password = "app"

[[pgsql_servers]]
hostgroup_id = 0
hostname = "127.0.0.1"
port = {pg_primary}

[[pgsql_servers]]
hostgroup_id = 1
hostname = "127.0.0.1"
port = {pg_replica}
max_replication_lag = 100000

[[pgsql_users]]
username = "app"
password = "app"

[[workload_classes]]
name = "batch"

[[workload_guards]]
guard_id = 7
classes = "batch"
signal = "replica_lag"
protocol = "pgsql"
hostgroup = 1
low = 1
high = 2
reject_above = 3
min_open_ms = 500
"#,
        my_primary = ports::MY_PRIMARY,
        pg_primary = ports::PG_PRIMARY,
        pg_replica = ports::PG_REPLICA,
    )
}

#[test]
fn pgsql_lag_guard_sheds_while_replay_is_paused() {
    // Pauses WAL replay on the standby the other tests read from: it runs alone.
    if !backends_exclusive(Servers::Postgres) {
        return;
    }
    let _one = exclusive();
    let _resume = ResumeReplay;
    let s = Sluice::start(&pg_lag_guard_config());
    let replica = xtask::postgres::replica(&xtask::state_dir());
    let batch = |s: &Sluice| psql_app(s.pg_port, "/* workload=batch */ SELECT 1");
    ok_stdout(&batch(&s));
    ok_stdout(&psql_app(
        ports::PG_PRIMARY,
        "CREATE TABLE IF NOT EXISTS admission_ticks (id serial PRIMARY KEY, at timestamptz DEFAULT now())",
    ));
    replica
        .sql("SELECT pg_wal_replay_pause()")
        .expect("pause replay");
    // Commits keep arriving, replay does not follow: the lag grows a second per second.
    let mut refused = None;
    for _ in 0..150 {
        ok_stdout(&psql_app(
            ports::PG_PRIMARY,
            "INSERT INTO admission_ticks DEFAULT VALUES",
        ));
        let out = batch(&s);
        if !out.status.success() {
            refused = Some(String::from_utf8_lossy(&out.stderr).into_owned());
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    let refused =
        refused.unwrap_or_else(|| panic!("never shed while replay was paused\n{}", s.log()));
    assert!(
        refused.contains("Sluice: workload 'batch' shed: replica lag ")
            && refused.contains(" s >= 3 s on hostgroup 1"),
        "{refused}"
    );
    ok_stdout(&psql_app(s.pg_port, "SELECT 1"));
    replica
        .sql("SELECT pg_wal_replay_resume()")
        .expect("resume replay");
    wait_for("the guard to close after replay resumed", || {
        batch(&s).status.success()
    });
    let log = s.log();
    // Replay paused: the lag is the time since the last replayed commit, which may jump past
    // the threshold at once (closed -> open) or climb through the ramp first.
    assert!(
        log.contains(" -> open: replica lag ") && log.contains("workload guard 7: "),
        "{log}"
    );
    assert!(
        log.contains("workload guard 7: open -> closed: replica lag 0 s < 3 s"),
        "{log}"
    );
}

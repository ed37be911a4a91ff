//! Workload guards on the servers' own load, against real servers: MariaDB's
//! `Threads_running` climbing under statements run straight on the primary, a MariaDB replica's
//! GTID backlog and the age of Sluice's heartbeat while its SQL thread is stopped, and a
//! PostgreSQL standby's replay backlog and heartbeat age while replay is paused. Each guard opens (its class is shed with the reading in the
//! message, other traffic is served), then closes when the load is gone.

use sluice_tests::*;

/// The guard's `state` and `value` in `stats_workload_guards`.
fn guard_state(s: &Sluice, id: u32) -> (String, f64) {
    let out = s.admin_ok(&format!(
        "SELECT state, value FROM stats_workload_guards WHERE guard_id = {id}"
    ));
    let mut cells = out.trim().split('\t');
    let state = cells.next().unwrap_or("").to_string();
    let value = cells.next().and_then(|v| v.parse().ok()).unwrap_or(-1.0);
    (state, value)
}

fn wait_state(s: &Sluice, id: u32, want: &str) {
    wait_for(&format!("guard {id} {want}"), || {
        guard_state(s, id).0 == want
    });
}

/// `sql` through Sluice's MySQL port as app, comments kept (the `workload=` hint).
fn via_sluice(s: &Sluice, sql: &str) -> std::process::Output {
    mariadb(s.port, "app", "app", &["--comments"], sql)
}

fn mysql_config() -> String {
    standard_config(
        "",
        r#"
[[workload_classes]]
name = "report"

[[workload_classes]]
name = "reader"

[[workload_guards]]
guard_id = 1
classes = "report"
signal = "threads_running"
hostgroup = 0
low = 6
high = 10
reject_above = 10
min_open_ms = 300

[[workload_guards]]
guard_id = 2
classes = "reader"
signal = "replica_backlog"
hostgroup = 1
low = 3
high = 5
reject_above = 5
min_open_ms = 300

[[workload_classes]]
name = "fresh"

[[mysql_replication_hostgroups]]
writer_hostgroup = 0
reader_hostgroup = 1

[[workload_guards]]
guard_id = 6
classes = "fresh"
signal = "heartbeat_lag"
hostgroup = 1
low = 400
high = 800
reject_above = 800
min_open_ms = 300
"#,
    )
}

/// Kills the statements marked `marker` on the primary, also when the test fails.
struct KillMarked(&'static str);

impl Drop for KillMarked {
    fn drop(&mut self) {
        let ids = primary_root(&format!(
            "SELECT ID FROM information_schema.PROCESSLIST WHERE INFO LIKE '%{}%' \
             AND INFO NOT LIKE '%PROCESSLIST%'",
            self.0
        ));
        for id in ids.lines().filter(|l| !l.trim().is_empty()) {
            let _ = mariadb(
                ports::MY_PRIMARY,
                "root",
                "root",
                &["--skip-ssl"],
                &format!("KILL QUERY {}", id.trim()),
            );
        }
    }
}

/// Starts the replica's SQL thread again, also when the test fails.
struct StartSqlThread;

impl Drop for StartSqlThread {
    fn drop(&mut self) {
        let _ = mariadb(
            ports::MY_REPLICA,
            "root",
            "root",
            &["--skip-ssl"],
            "START SLAVE SQL_THREAD",
        );
    }
}

#[test]
fn mysql_guards_follow_threads_running_and_the_replica_gtid_backlog() {
    // Loads the primary and stops the replica's SQL thread: it runs alone.
    if !backends_exclusive(Servers::MariaDb) {
        return;
    }
    let s = Sluice::start(&mysql_config());
    let report = "/* workload=report */ SELECT 1";
    let reader = "/* workload=reader */ SELECT 1";
    let fresh = "/* workload=fresh */ SELECT 1";
    wait_for("the guards read their servers", || {
        [1, 2, 6].iter().all(|id| guard_state(&s, *id).1 >= 0.0)
    });
    // The heartbeat Sluice writes on the primary reaches the replica within a fraction of a
    // second: a lag Seconds_Behind_Master could only give as 0 or 1.
    wait_for("a sub-second heartbeat lag", || {
        let (state, ms) = guard_state(&s, 6);
        state == "closed" && (0.0..400.0).contains(&ms)
    });
    ok_stdout(&via_sluice(&s, report));
    ok_stdout(&via_sluice(&s, reader));

    // Twelve statements running straight on the primary: Threads_running climbs past 10.
    let marker = "load_guard_hold";
    let kill = KillMarked(marker);
    let sleepers: Vec<_> = (0..12)
        .map(|_| {
            std::thread::spawn(move || {
                mariadb(
                    ports::MY_PRIMARY,
                    "root",
                    "root",
                    &["--skip-ssl", "--comments"],
                    &format!("SELECT SLEEP(60) /* {marker} */"),
                )
            })
        })
        .collect();
    wait_state(&s, 1, "open");
    let out = via_sluice(&s, report);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success()
            && err.contains("ERROR 9102")
            && err.contains("Sluice: workload 'report' shed: threads running ")
            && err.contains(" >= 10 on hostgroup 0"),
        "{err}"
    );
    ok_stdout(&via_sluice(&s, "SELECT 1"));
    ok_stdout(&via_sluice(&s, reader));
    drop(kill);
    for t in sleepers {
        let _ = t.join();
    }
    wait_state(&s, 1, "closed");
    ok_stdout(&via_sluice(&s, report));

    // The replica receives but does not apply: its GTID backlog grows with each write.
    let _start = StartSqlThread;
    ok_stdout(&mariadb(
        ports::MY_REPLICA,
        "root",
        "root",
        &["--skip-ssl"],
        "STOP SLAVE SQL_THREAD",
    ));
    primary_root(
        "CREATE DATABASE IF NOT EXISTS admission; \
         CREATE TABLE IF NOT EXISTS admission.backlog (id INT AUTO_INCREMENT PRIMARY KEY)",
    );
    for _ in 0..8 {
        primary_root("INSERT INTO admission.backlog VALUES ()");
    }
    wait_state(&s, 2, "open");
    // The applier is stopped: the replica's heartbeat row ages by the millisecond.
    wait_state(&s, 6, "open");
    let out = via_sluice(&s, fresh);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success()
            && err.contains("Sluice: workload 'fresh' shed: heartbeat lag ")
            && err.contains(" ms >= 800 ms on hostgroup 1"),
        "{err}"
    );
    let out = via_sluice(&s, reader);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success()
            && err.contains("Sluice: workload 'reader' shed: replica backlog ")
            && err.contains(" transactions >= 5 transactions on hostgroup 1"),
        "{err}"
    );
    ok_stdout(&via_sluice(&s, report));
    drop(_start);
    wait_state(&s, 2, "closed");
    wait_state(&s, 6, "closed");
    ok_stdout(&via_sluice(&s, reader));
    ok_stdout(&via_sluice(&s, fresh));
    let log = s.log();
    for line in [
        "workload guard 1: ",
        "workload guard 1: open -> closed: threads running ",
        // The heartbeat's own writes keep a transaction or two in flight.
        "workload guard 2: open -> closed: replica backlog ",
        " transactions < 5 transactions on hostgroup 1",
        "workload guard 6: open -> closed: heartbeat lag ",
    ] {
        assert!(log.contains(line), "{line:?} not in\n{log}");
    }
}

fn pg_config() -> String {
    standard_config(
        "",
        r#"
[[workload_classes]]
name = "ingest"

[[workload_guards]]
guard_id = 3
classes = "ingest"
signal = "replica_backlog"
protocol = "pgsql"
hostgroup = 1
low = 4096
high = 8192
reject_above = 8192
min_open_ms = 300

[[workload_classes]]
name = "fresh"

[[pgsql_replication_hostgroups]]
writer_hostgroup = 0
reader_hostgroup = 1

[[workload_guards]]
guard_id = 4
classes = "fresh"
signal = "heartbeat_lag"
protocol = "pgsql"
hostgroup = 1
low = 400
high = 800
reject_above = 800
min_open_ms = 300
"#,
    )
}

#[test]
fn pgsql_guard_follows_the_standby_replay_backlog() {
    // Pauses WAL replay on the standby the other tests read from: it runs alone.
    if !backends_exclusive(Servers::Postgres) {
        return;
    }
    let s = Sluice::start(&pg_config());
    let ingest = "/* workload=ingest */ SELECT 1";
    let fresh = "/* workload=fresh */ SELECT 1";
    wait_for("the guards read the standby", || {
        guard_state(&s, 3).1 >= 0.0 && guard_state(&s, 4).1 >= 0.0
    });
    wait_for("a sub-second heartbeat lag", || {
        let (state, ms) = guard_state(&s, 4);
        state == "closed" && (0.0..400.0).contains(&ms)
    });
    // The standby may still be replaying what an earlier test left (the clean-clone CI failure
    // of 41cd710: guard 3 was open, held by min_open_ms, as this test began).
    wait_state(&s, 3, "closed");
    ok_stdout(&psql_app(s.pg_port, ingest));
    let replica = xtask::postgres::replica(&xtask::state_dir());
    let _resume = ResumeReplay;
    replica
        .sql("SELECT pg_wal_replay_pause()")
        .expect("pause replay");
    // Each insert of 1,000 rows writes far more than 8 KiB of WAL the standby receives and
    // does not replay.
    ok_stdout(&psql_app(
        ports::PG_PRIMARY,
        "CREATE TABLE IF NOT EXISTS admission_backlog (id serial PRIMARY KEY, pad text)",
    ));
    ok_stdout(&psql_app(
        ports::PG_PRIMARY,
        "INSERT INTO admission_backlog (pad) SELECT repeat('x', 100) FROM generate_series(1, 1000)",
    ));
    wait_state(&s, 3, "open");
    // Replay is paused: the standby's heartbeat row ages by the millisecond.
    wait_state(&s, 4, "open");
    let out = psql_app(s.pg_port, fresh);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success()
            && err.contains("Sluice: workload 'fresh' shed: heartbeat lag ")
            && err.contains(" ms >= 800 ms on hostgroup 1"),
        "{err}"
    );
    let out = psql_app(s.pg_port, ingest);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success()
            && err.contains("Sluice: workload 'ingest' shed: replica backlog ")
            && err.contains(" bytes >= 8192 bytes on hostgroup 1"),
        "{err}"
    );
    ok_stdout(&psql_app(s.pg_port, "SELECT 1"));
    drop(_resume);
    wait_state(&s, 3, "closed");
    wait_state(&s, 4, "closed");
    ok_stdout(&psql_app(s.pg_port, ingest));
    ok_stdout(&psql_app(s.pg_port, fresh));
    let log = s.log();
    // The heartbeat's own writes keep a little WAL in flight.
    for line in [
        "workload guard 3: open -> closed: replica backlog ",
        " bytes < 8192 bytes on hostgroup 1",
        "workload guard 4: open -> closed: heartbeat lag ",
    ] {
        assert!(log.contains(line), "{line:?} not in\n{log}");
    }
}

fn p99_config(guard_active: u8) -> String {
    standard_config(
        "",
        &format!(
            r#"
[[workload_classes]]
name = "oltp"

[[workload_classes]]
name = "heavy"
priority = "low"

[[workload_guards]]
guard_id = 5
active = {guard_active}
classes = "heavy"
signal = "class_p99"
watch_class = "oltp"
window_s = 1
low = 50
high = 150
reject_above = 150
min_open_ms = 1000
"#
        ),
    )
}

/// Runs the `p99` scenario (tests/python/admission_clients.py) through `s`: OLTP updates of
/// one row every 20 ms, and from 2 s to 7 s two `heavy` sessions locking that row 0.4 s at a
/// time. Returns (OLTP statements during the burst, those slower than 100 ms, heavy refused
/// with 9102, the first refusal's message).
fn p99_run(s: &Sluice) -> (usize, usize, usize, String) {
    let script = sluice_tests::mcp::python_dir().join("admission_clients.py");
    let out = std::process::Command::new("python3")
        .arg(script)
        .args(["p99", "mysql", &s.port.to_string(), "2"])
        .output()
        .expect("python3");
    let v: serde_json::Value = serde_json::from_str(ok_stdout(&out).trim()).expect("p99 JSON");
    let oltp = v["oltp"].as_array().expect("oltp");
    assert!(
        oltp.iter().all(|r| r[2] == "ok"),
        "OLTP is never refused: {oltp:?}"
    );
    let during: Vec<f64> = oltp
        .iter()
        .filter(|r| (2.5..7.0).contains(&r[0].as_f64().unwrap_or(0.0)))
        .filter_map(|r| r[1].as_f64())
        .collect();
    let slow = during.iter().filter(|ms| **ms > 100.0).count();
    let heavy = v["heavy"].as_array().expect("heavy");
    let shed: Vec<&serde_json::Value> = heavy.iter().filter(|r| r[1] == "9102").collect();
    let first = shed
        .first()
        .and_then(|r| r[2].as_str())
        .unwrap_or("")
        .to_string();
    (during.len(), slow, shed.len(), first)
}

#[test]
fn a_p99_guard_sheds_the_heavy_class_while_oltp_is_slow() {
    if !backends_ready(Servers::MariaDb) {
        return;
    }
    primary_root(
        "CREATE TABLE IF NOT EXISTS app.p99_row (id INT PRIMARY KEY, n INT NOT NULL); \
         INSERT IGNORE INTO app.p99_row VALUES (1, 0);",
    );
    // Without the guard: the heavy statements hold the row, OLTP waits behind them throughout.
    let s = Sluice::start(&p99_config(0));
    let (unguarded_n, unguarded_slow, unguarded_shed, _) = p99_run(&s);
    drop(s);
    assert_eq!(unguarded_shed, 0);
    // With it: OLTP's p99 over the last second crosses 150 ms, the guard opens and sheds the
    // heavy class, OLTP is fast again until the guard closes and the heavy class comes back.
    let s = Sluice::start(&p99_config(1));
    let (guarded_n, guarded_slow, guarded_shed, first) = p99_run(&s);
    let log = s.log();
    assert!(guarded_shed > 0, "the guard shed heavy statements\n{log}");
    assert!(
        first.starts_with("Sluice: workload 'heavy' shed: p99 of 'oltp' ")
            && first.ends_with(" ms >= 150 ms over 1 s"),
        "{first}"
    );
    assert!(
        log.contains("workload guard 5: ") && log.contains(" -> open: p99 of 'oltp' "),
        "{log}"
    );
    // The share of slow OLTP statements falls to well under half of the unguarded run's.
    let share = |slow: usize, n: usize| slow as f64 / n.max(1) as f64;
    assert!(
        share(guarded_slow, guarded_n) * 2.0 < share(unguarded_slow, unguarded_n),
        "slow OLTP statements: {guarded_slow}/{guarded_n} guarded vs {unguarded_slow}/{unguarded_n} unguarded"
    );
}

/// The operator's hand (freno's "throttle app"): an active `operator` guard sheds its class on
/// both protocols with its comment in the message, `/throttler/check` answers 417 to its app
/// (read with curl) and 200 to another, other traffic is served, and deactivating the row
/// (LOAD) lets everything through again.
#[test]
fn an_operator_guard_denies_its_app_and_sheds_its_class() {
    if !backends_ready(Servers::Both) {
        return;
    }
    let http = free_port();
    let s = Sluice::start(&format!(
        "[admin_variables]\nmysql_ifaces = \"127.0.0.1:{{admin_port}}\"\npgsql_ifaces = \"127.0.0.1:{{pg_admin_port}}\"\n\
         restapi_enabled = true\nrestapi_port = {http}\n\
         [pgsql_variables]\ninterfaces = \"127.0.0.1:{{pg_port}}\"\n{}",
        standard_config(
            "",
            r#"
[[workload_classes]]
name = "migration"

[[workload_guards]]
guard_id = 9
classes = "migration"
signal = "operator"
low = 0
high = 1
reject_above = 1
apps = "gh-ost"
comment = "paused for the failover drill"
"#,
        )
    ));
    // Before the guard has been read once, nothing is denied at the check; wait for the board.
    wait_state(&s, 9, "open");
    let (code, body) = curl(http, "/throttler/check?app=gh-ost");
    assert_eq!(code, 417, "{body}");
    assert!(
        body.contains("denied by the operator (guard 9: paused for the failover drill)"),
        "{body}"
    );
    let (code, body) = curl(http, "/throttler/check?app=pt-archiver");
    assert_eq!(code, 200, "another app: {body}");

    let my = via_sluice(&s, "/* workload=migration */ SELECT 1");
    let err = String::from_utf8_lossy(&my.stderr);
    assert!(!my.status.success(), "the class is shed");
    assert!(
        err.contains("ERROR 9102")
            && err.contains("held by the operator (guard 9: paused for the failover drill)"),
        "{err}"
    );
    let pg = psql_app(s.pg_port, "/* workload=migration */ SELECT 1");
    let err = String::from_utf8_lossy(&pg.stderr);
    assert!(
        !pg.status.success() && err.contains("held by the operator"),
        "{err}"
    );
    // Other traffic is served meanwhile.
    let ok = via_sluice(&s, "SELECT 41 + 1");
    assert_eq!(String::from_utf8_lossy(&ok.stdout).trim(), "42");
    assert_eq!(
        String::from_utf8_lossy(&psql_app(s.pg_port, "SELECT 41 + 1").stdout).trim(),
        "42"
    );

    s.admin_ok("UPDATE workload_guards SET active = 0 WHERE guard_id = 9; LOAD WORKLOAD CLASSES TO RUNTIME");
    let (code, body) = curl(http, "/throttler/check?app=gh-ost");
    assert_eq!(code, 200, "released: {body}");
    // The check answers from the loaded rows; the classes are released once the guard runner,
    // woken by the LOAD, has evaluated the new rows (the guard's row then reads closed).
    wait_state(&s, 9, "closed");
    let my = via_sluice(&s, "/* workload=migration */ SELECT 7");
    assert_eq!(String::from_utf8_lossy(&my.stdout).trim(), "7", "{my:?}");
}

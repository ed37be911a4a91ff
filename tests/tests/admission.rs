//! Admission control with real clients against real servers: a `vector` workload class
//! (statements calling a stored function that sleeps, standing in for a vector search) capped
//! in concurrency, queued and shed, on MariaDB (PyMySQL) and PostgreSQL (psycopg); what the
//! servers themselves saw running; the errors clients get; transactions never shed half-way;
//! the class time limit; bad rows refused at LOAD; an older disk database migrated.

use sluice_tests::*;
use std::sync::{Mutex, MutexGuard};

/// Held by the tests whose clients log in as `app`: the bursts count the server's `app`
/// connections and running probes, which another test's clients would add to. Taken after the
/// backends' hold (`backends_ready` / `backends_exclusive`), never before: a test holding this
/// while it waited for the backends would deadlock with one holding the backends exclusively
/// while it waited for this.
static SERVER_COUNTS: Mutex<()> = Mutex::new(());

fn exclusive() -> MutexGuard<'static, ()> {
    SERVER_COUNTS.lock().unwrap_or_else(|p| p.into_inner())
}

/// The stand-in for a vector search: a function that sleeps `s` seconds.
const MY_PROBE: &str = "CREATE DATABASE IF NOT EXISTS admission; \
     CREATE FUNCTION IF NOT EXISTS admission.vec_probe(s DOUBLE) RETURNS INT NOT DETERMINISTIC NO SQL \
     RETURN SLEEP(s) + 1";
const PG_PROBE: &str = "CREATE OR REPLACE FUNCTION public.vec_probe(s float8) RETURNS int \
     LANGUAGE plpgsql AS $$ BEGIN PERFORM pg_sleep(s); RETURN 1; END $$";

fn config(max_concurrency: u32, max_queue: u32, queue_timeout_ms: u32, extra: &str) -> String {
    standard_config(
        "",
        &format!(
            r#"
[[workload_classes]]
name = "vector"
priority = "low"
max_concurrency = {max_concurrency}
max_queue = {max_queue}
queue_timeout_ms = {queue_timeout_ms}
{extra}

[[mysql_query_rules]]
rule_id = 1
active = 1
match_pattern = "vec_probe"
workload_class = "vector"

[[pgsql_query_rules]]
rule_id = 1
active = 1
match_pattern = "vec_probe"
attributes = '{{"workload_class": "vector"}}'
"#
        ),
    )
}

/// Which protocol a test drives, with its ports and error codes.
#[derive(Clone, Copy)]
enum Side {
    Mysql,
    Pgsql,
}

impl Side {
    fn kind(self) -> &'static str {
        match self {
            Side::Mysql => "mysql",
            Side::Pgsql => "pgsql",
        }
    }
    fn port(self, s: &Sluice) -> u16 {
        match self {
            Side::Mysql => s.port,
            Side::Pgsql => s.pg_port,
        }
    }
    fn primary(self) -> u16 {
        match self {
            Side::Mysql => ports::MY_PRIMARY,
            Side::Pgsql => ports::PG_PRIMARY,
        }
    }
    fn servers(self) -> Servers {
        match self {
            Side::Mysql => Servers::MariaDb,
            Side::Pgsql => Servers::Postgres,
        }
    }
    /// Creates the stand-in vector function on the primary.
    fn create_probe(self) {
        match self {
            Side::Mysql => {
                primary_root(MY_PROBE);
            }
            Side::Pgsql => {
                ok_stdout(&psql_app(ports::PG_PRIMARY, PG_PROBE));
            }
        }
    }
    fn queue_full(self) -> &'static str {
        match self {
            Side::Mysql => "9100",
            Side::Pgsql => "53000",
        }
    }
    fn queue_timeout(self) -> &'static str {
        match self {
            Side::Mysql => "9101",
            Side::Pgsql => "53000",
        }
    }
    /// The code a statement cancelled by `max_execution_ms` gets.
    fn cancelled(self) -> &'static str {
        match self {
            Side::Mysql => "1317",
            Side::Pgsql => "57014",
        }
    }
    fn probe(self, seconds: &str) -> String {
        match self {
            Side::Mysql => format!("SELECT admission.vec_probe({seconds})"),
            Side::Pgsql => format!("SELECT vec_probe({seconds})"),
        }
    }
}

/// `tests/python/admission_clients.py COMMAND KIND PORT ARGS…`: its stdout.
fn clients(command: &str, side: Side, port: u16, args: &[String]) -> String {
    let script = sluice_tests::mcp::python_dir().join("admission_clients.py");
    let out = std::process::Command::new("python3")
        .arg(script)
        .args([command, side.kind(), &port.to_string()])
        .args(args)
        .output()
        .expect("python3");
    ok_stdout(&out)
}

struct Burst {
    /// [code, message, detail, hint] per vector client.
    results: Vec<Vec<String>>,
    oltp_errors: Vec<serde_json::Value>,
    max_running: u64,
    max_app_conns: u64,
}

/// `clients` vector statements of `seconds` at once, an OLTP session beside them, and what the
/// server itself saw (see the script).
fn burst(side: Side, s: &Sluice, clients_n: u32, seconds: f64) -> Burst {
    let args = [
        side.primary().to_string(),
        clients_n.to_string(),
        seconds.to_string(),
    ];
    let out = clients("burst", side, side.port(s), &args);
    let v: serde_json::Value = serde_json::from_str(out.trim()).expect("burst prints JSON");
    let text = |c: &serde_json::Value| c.as_str().unwrap_or("").to_string();
    Burst {
        results: v["results"]
            .as_array()
            .expect("results")
            .iter()
            .map(|r| r.as_array().expect("a result").iter().map(text).collect())
            .collect(),
        oltp_errors: v["oltp_errors"].as_array().expect("oltp_errors").clone(),
        max_running: v["max_running"].as_u64().expect("max_running"),
        max_app_conns: v["max_app_conns"].as_u64().expect("max_app_conns"),
    }
}

impl Burst {
    fn count(&self, code: &str) -> usize {
        self.results.iter().filter(|r| r[0] == code).count()
    }
}

/// `stats_workload_classes` of `class`: column → value.
fn class_stats(s: &Sluice, class: &str) -> std::collections::HashMap<String, String> {
    let out = ok_stdout(&s.psql_admin(
        &format!("SELECT * FROM stats_workload_classes WHERE class = '{class}'"),
        true,
    ));
    let mut lines = out.lines();
    let header: Vec<&str> = lines.next().unwrap_or("").split('\t').collect();
    let row: Vec<&str> = lines.next().unwrap_or("").split('\t').collect();
    header
        .into_iter()
        .zip(row)
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

fn metrics(s: &Sluice) -> String {
    ok_stdout(&s.admin("SHOW PROMETHEUS METRICS"))
}

/// 40 clients against 4 slots and a queue of 8: 12 answered, 28 refused at once; the server
/// never runs more than 4; the OLTP session is untouched; queued clients hold no connection.
fn caps_concurrency_queues_and_sheds(side: Side) {
    if !backends_ready(side.servers()) {
        return;
    }
    let _one = exclusive();
    side.create_probe();
    let s = Sluice::start(&config(4, 8, 20_000, ""));
    let b = burst(side, &s, 40, 1.0);
    let log = s.log();
    assert_eq!(
        b.count("ok"),
        12,
        "4 running + 8 queued answered: {:?}\n{log}",
        b.results
    );
    assert_eq!(
        b.count(side.queue_full()),
        28,
        "the rest refused: {:?}",
        b.results
    );
    let refused = b
        .results
        .iter()
        .find(|r| r[0] == side.queue_full())
        .expect("a refusal");
    assert_eq!(
        refused[1],
        "Sluice: workload 'vector' shed: queue full (4 in flight, 8 waiting, max_queue 8)"
    );
    if let Side::Pgsql = side {
        assert_eq!(
            refused[2],
            "workload class 'vector': 4 statements in flight, 8 waiting, max_queue 8"
        );
        assert!(
            refused[3].starts_with("retry after ") && refused[3].ends_with(" ms"),
            "{refused:?}"
        );
    }
    assert_eq!(
        b.max_running, 4,
        "the server never ran more than max_concurrency of them"
    );
    assert!(
        b.oltp_errors.is_empty(),
        "OLTP untouched: {:?}",
        b.oltp_errors
    );
    assert!(
        b.max_app_conns <= 5,
        "queued clients hold no backend connection: at most 4 vector + 1 OLTP, saw {}",
        b.max_app_conns
    );
    let st = class_stats(&s, "vector");
    assert_eq!(st["admitted"], "12", "{st:?}");
    assert_eq!(st["waited"], "8", "{st:?}");
    assert_eq!(st["shed_queue_full"], "28", "{st:?}");
    assert_eq!(st["in_flight"], "0", "{st:?}");
    assert_eq!(st["priority"], "low");
    let m = metrics(&s);
    assert!(
        m.contains(r#"sluice_workload_shed_total{class="vector",reason="queue_full"} 28"#),
        "{m}"
    );
    assert!(m.contains(r#"sluice_workload_admitted_total{class="vector"} 12"#));
    assert!(m.contains(r#"sluice_workload_limit{class="vector"} 4"#));
    assert!(
        log.contains("workload 'vector' shed: queue full"),
        "a log line per refusal"
    );
}

#[test]
fn mysql_vector_class_caps_concurrency_queues_and_sheds_the_rest() {
    caps_concurrency_queues_and_sheds(Side::Mysql);
}

#[test]
fn pgsql_vector_class_caps_concurrency_queues_and_sheds_the_rest() {
    caps_concurrency_queues_and_sheds(Side::Pgsql);
}

/// Session A holds the class's one slot with a transaction while B waits and times out; A's
/// own statements never queue; COMMIT gives the slot back; the class time limit cancels a long
/// statement and the connection stays open.
fn queue_timeout_transactions_and_time_limit(side: Side) {
    if !backends_ready(side.servers()) {
        return;
    }
    let _one = exclusive();
    side.create_probe();
    let s = Sluice::start(&config(1, 4, 300, "max_execution_ms = 500"));
    let steps = [
        "A:/* workload=vector */ BEGIN".to_string(),
        format!("B:{}", side.probe("0.01")),
        format!("A:{}", side.probe("0.01")),
        "A:COMMIT".to_string(),
        format!("B:{}", side.probe("0.01")),
        format!("B:{}", side.probe("5")),
        "B:SELECT 1".to_string(),
    ];
    let out = clients("steps", side, side.port(&s), &steps);
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines[0], "ok", "BEGIN takes the class's one slot: {out}");
    let refused = format!(
        "{} Sluice: workload 'vector' shed: no slot after ",
        side.queue_timeout()
    );
    assert!(
        lines[1].starts_with(&refused),
        "B waits queue_timeout_ms and is refused: {out}"
    );
    assert_eq!(
        lines[2], "ok",
        "inside the admitted transaction nothing queues"
    );
    assert_eq!(lines[3], "ok", "COMMIT never waits");
    assert_eq!(lines[4], "ok", "the slot came back at COMMIT");
    assert!(
        lines[5].starts_with(&format!("{} ", side.cancelled())),
        "max_execution_ms cancels the statement on the server: {out}\n{}",
        s.log()
    );
    assert_eq!(lines[6], "ok", "the connection stays open");
    let st = class_stats(&s, "vector");
    assert_eq!(st["shed_queue_timeout"], "1", "{st:?}");
    assert_eq!(st["in_flight"], "0", "{st:?}");
}

#[test]
fn mysql_queue_timeout_transactions_and_the_class_time_limit() {
    queue_timeout_transactions_and_time_limit(Side::Mysql);
}

#[test]
fn pgsql_queue_timeout_transactions_and_the_class_time_limit() {
    queue_timeout_transactions_and_time_limit(Side::Pgsql);
}

#[test]
fn bad_classes_and_unknown_class_names_are_refused_at_load() {
    if !backends_ready(Servers::MariaDb) {
        return;
    }
    let s = Sluice::start(&config(4, 8, 1000, ""));
    let out = s.admin(
        "UPDATE workload_classes SET max_concurrency = -1 WHERE name = 'vector'; LOAD WORKLOAD CLASSES TO RUNTIME",
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        err.contains("workload_classes.max_concurrency: -1"),
        "{err}"
    );
    assert_eq!(
        ok_stdout(&s.admin("SELECT max_concurrency FROM runtime_workload_classes")).trim(),
        "4",
        "the running config stays"
    );
    ok_stdout(&s.admin("UPDATE workload_classes SET max_concurrency = 4"));
    for (row, why) in [
        (
            "(1, 'vector', 'replica_lag', 1, 5, 2)",
            "workload_guards.low: 5 is above high 2 (guard 1)",
        ),
        (
            "(1, 'vectr', 'replica_lag', 1, 1, 2)",
            "workload_guards.classes: \"vectr\" is not in workload_classes (guard 1)",
        ),
        (
            "(1, 'vector', 'replica_lag', NULL, 1, 2)",
            "workload_guards.hostgroup: replica_lag watches a hostgroup; set one (guard 1)",
        ),
    ] {
        let out = s.admin(&format!(
            "DELETE FROM workload_guards; INSERT INTO workload_guards (guard_id, classes, signal, hostgroup, low, high) VALUES {row}; LOAD WORKLOAD CLASSES TO RUNTIME"
        ));
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success() && err.contains(why), "{row}: {err}");
    }
    assert_eq!(
        ok_stdout(&s.admin("SELECT COUNT(*) FROM runtime_workload_guards")).trim(),
        "0",
        "no refused guard reached the runtime"
    );
    let out = s.admin(
        "INSERT INTO mysql_query_rules (rule_id, active, match_pattern, workload_class) VALUES (2, 1, 'x', 'vectr'); LOAD MYSQL QUERY RULES TO RUNTIME",
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        err.contains("mysql_query_rules.workload_class: rule 2 names class \"vectr\""),
        "{err}"
    );
}

#[test]
fn a_disk_database_from_before_workload_classes_gains_the_column() {
    if !backends_ready(Servers::MariaDb) {
        return;
    }
    let dir = scratch_dir("admission-migrate");
    std::fs::create_dir_all(dir.join("data")).expect("datadir");
    // The disk database an older Sluice wrote: mysql_query_rules without workload_class.
    let old = r#"
import sqlite3, sys
db = sqlite3.connect(sys.argv[1])
db.execute("CREATE TABLE mysql_query_rules (rule_id INTEGER PRIMARY KEY AUTOINCREMENT NOT NULL, active INT NOT NULL DEFAULT 0, match_pattern VARCHAR, destination_hostgroup INT, apply INT NOT NULL DEFAULT 0, attributes VARCHAR NOT NULL DEFAULT '', comment VARCHAR)")
db.execute("INSERT INTO mysql_query_rules (rule_id, active, match_pattern, apply) VALUES (7, 1, 'old', 1)")
db.commit()
"#;
    let db = dir.join("data/sluice.db");
    ok_stdout(&python(old, &[&db.display().to_string()]));
    let s = Sluice::start_with(&config(4, 8, 1000, ""), dir, &[]);
    let cols = ok_stdout(&s.admin(
        "SELECT name FROM pragma_table_info('mysql_query_rules', 'disk') WHERE name IN ('workload_class', 'match_digest')",
    ));
    assert!(cols.contains("workload_class"), "{cols}\n{}", s.log());
    assert!(s.log().contains("ADD COLUMN workload_class VARCHAR"));
    // The config file was saved over the old rows at start, through the new column.
    assert_eq!(
        ok_stdout(&s.admin("SELECT rule_id, workload_class FROM disk.mysql_query_rules")).trim(),
        "1\tvector"
    );
}

#[test]
fn the_shipped_vector_rules_classify_each_dialect() {
    if !backends_ready(Servers::Both) {
        return;
    }
    let _one = exclusive();
    let shipped =
        std::fs::read_to_string(xtask::workspace_root().join("docs/workload-classes.toml"))
            .expect("docs/workload-classes.toml");
    let s = Sluice::start(&standard_config("", &shipped));
    let mysql = [
        "SELECT id FROM t WHERE MYVECTOR_IS_ANN('db.t.v', 'id', '[1,2]')",
        "SELECT myvector_distance('[1,2]', '[2,3]')",
        "SELECT VEC_DISTANCE_COSINE(VEC_FromText('[1,2]'), VEC_FromText('[2,3]'))",
        "SELECT vec_distance (a, b) FROM t",
        "SELECT DISTANCE(STRING_TO_VECTOR('[1,2]'), STRING_TO_VECTOR('[2,3]'), 'COSINE')",
        // Not vector statements:
        "SELECT distance_km FROM places",
        "SELECT 'my vector' AS x",
    ];
    // The functions do not exist on MariaDB 10.11 (nor pgvector here): the statements fail on
    // the server, and only the class they were admitted under counts.
    let mysql: Vec<String> = mysql.iter().map(|q| q.to_string()).collect();
    clients("each", Side::Mysql, s.port, &mysql);
    assert_eq!(class_stats(&s, "vector")["admitted"], "5");
    let pgsql = [
        "SELECT id FROM items ORDER BY embedding <-> '[3,1,2]' LIMIT 5",
        "SELECT embedding <=> '[3,1,2]' FROM items",
        "SELECT (embedding <#> '[3,1,2]') * -1 FROM items",
        "SELECT '[1,2,3]'::vector",
        "SELECT '[1,2]'::halfvec(2)",
        // Not vector statements:
        "SELECT 1 WHERE 2 <> 3",
        "SELECT '{\"a\":1}'::jsonb -> 'a'",
    ];
    let pgsql: Vec<String> = pgsql.iter().map(|q| q.to_string()).collect();
    clients("each", Side::Pgsql, s.pg_port, &pgsql);
    assert_eq!(class_stats(&s, "vector")["admitted"], "10", "{}", s.log());
}

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

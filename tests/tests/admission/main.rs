//! Admission control with real clients against real servers: a `vector` workload class
//! (statements calling a stored function that sleeps, standing in for a vector search) capped
//! in concurrency, queued and shed, on MariaDB (PyMySQL) and PostgreSQL (psycopg); what the
//! servers themselves saw running; the errors clients get; transactions never shed half-way;
//! the class time limit; bad rows refused at LOAD; an older disk database migrated.

use sluice_tests::*;
use std::sync::{Mutex, MutexGuard};

mod classes;
mod lag_guards;

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

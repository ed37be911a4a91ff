//! PostgreSQL startup parameters are session state: they reach the client's own statements and
//! ParameterStatus values, never another client's, however the pool hands out connections.
//! Every check compares with a direct connection to the same server with the same parameters.

use sluice_tests::*;
use std::process::{Command, Output};

/// The standard config with the PostgreSQL primary capped at `n` server connections and
/// `extra` in `[pgsql_variables]`.
fn pool_of(n: u32, extra: &str) -> String {
    let cfg = standard_config("", "").replacen(
        &format!("port = {}\n", ports::PG_PRIMARY),
        &format!("port = {}\nmax_connections = {n}\n", ports::PG_PRIMARY),
        1,
    );
    format!("[pgsql_variables]\ninterfaces = \"127.0.0.1:{{pg_port}}\"\n{extra}\n{cfg}")
}

/// psql with a libpq connection string and extra environment; unaligned tuples.
fn psql_conninfo(conninfo: &str, env: &[(&str, &str)], sql: &[&str]) -> Output {
    let mut cmd = Command::new("psql");
    cmd.env("PGPASSWORD", "app")
        .env("PGSSLMODE", "disable")
        .env_remove("PGTZ")
        .env_remove("PGDATESTYLE")
        .envs(env.iter().copied())
        .args(["-X", "-q", "-A", "-t", "-v", "ON_ERROR_STOP=1", conninfo]);
    for s in sql {
        cmd.args(["-c", s]);
    }
    cmd.output().expect("psql installed")
}

const SHOW: [&str; 5] = [
    "SELECT current_setting('statement_timeout')",
    "SELECT current_setting('search_path')",
    "SELECT current_setting('application_name')",
    "SELECT current_setting('TimeZone')",
    "SELECT current_setting('DateStyle')",
];

#[test]
fn psql_startup_parameters_never_reach_another_client() {
    if !backends_ready(Servers::Postgres) {
        return;
    }
    let s = Sluice::start(&pool_of(1, ""));
    let set = format!(
        "host=127.0.0.1 port={} user=app dbname=app application_name=myapp options='-c search_path=foo,public -c statement_timeout=1234'",
        s.pg_port
    );
    let plain = format!("host=127.0.0.1 port={} user=app dbname=app", s.pg_port);
    let env_set = [("PGTZ", "Europe/Paris"), ("PGDATESTYLE", "SQL, DMY")];
    // What a direct connection with the same parameters shows.
    let direct = |conninfo: &str, env: &[(&str, &str)]| {
        let c = conninfo.replace(
            &format!("port={}", s.pg_port),
            &format!("port={}", ports::PG_PRIMARY),
        );
        ok_stdout(&psql_conninfo(&c, env, &SHOW))
    };
    let want_set = direct(&set, &env_set);
    let want_plain = direct(&plain, &[]);
    assert_eq!(
        want_set,
        "1234ms\nfoo,public\nmyapp\nEurope/Paris\nSQL, DMY\n"
    );
    assert_ne!(want_set, want_plain);
    // Alternating on one server connection: each sees only its own values, 100 times in a row.
    for round in 0..50 {
        let got = ok_stdout(&psql_conninfo(&set, &env_set, &SHOW));
        assert_eq!(got, want_set, "client with settings, round {round}");
        let got = ok_stdout(&psql_conninfo(&plain, &[], &SHOW));
        assert_eq!(got, want_plain, "plain client, round {round}");
    }
}

#[test]
fn psycopg_sessions_alternating_on_one_connection_keep_their_own_settings() {
    if !backends_ready(Servers::Postgres) {
        return;
    }
    let s = Sluice::start(&pool_of(1, ""));
    let script = r#"
import os, sys, psycopg
port, direct_port = sys.argv[1], sys.argv[2]
SETTINGS = ["statement_timeout", "search_path", "application_name", "TimeZone", "DateStyle",
            "extra_float_digits", "work_mem", "lock_timeout"]
REPORTED = ["client_encoding", "DateStyle", "TimeZone", "application_name", "IntervalStyle",
            "standard_conforming_strings", "integer_datetimes"]
def connect(p, configured):
    env = {"PGTZ": "America/New_York", "PGDATESTYLE": "German"} if configured else {}
    for k in ("PGTZ", "PGDATESTYLE"):
        os.environ.pop(k, None)
    os.environ.update(env)
    kw = dict(host="127.0.0.1", port=p, user="app", password="app", dbname="app",
              sslmode="disable", autocommit=True)
    if configured:
        kw.update(application_name="alpha",
                  options="-c search_path=foo,public -c statement_timeout=4321 -c extra_float_digits=1")
    c = psycopg.connect(**kw)
    for k in ("PGTZ", "PGDATESTYLE"):
        os.environ.pop(k, None)
    return c
def settings(c):
    return c.execute("SELECT " + ", ".join(f"current_setting('{n}')" for n in SETTINGS)).fetchone()
def reported(c):
    return [c.info.parameter_status(n) for n in REPORTED]
want = {}
for configured in (True, False):
    d = connect(direct_port, configured)
    want[configured] = (settings(d), reported(d))
    d.close()
assert want[True] != want[False], want
a, b = connect(port, True), connect(port, False)
assert reported(a) == want[True][1], ("alpha ParameterStatus", reported(a), want[True][1])
assert reported(b) == want[False][1], ("plain ParameterStatus", reported(b), want[False][1])
for i in range(100):
    for c, configured in ((a, True), (b, False)):
        got = settings(c)
        assert got == want[configured][0], (i, configured, got, want[configured][0])
        # A transaction of its own, with a SET LOCAL that must not survive it.
        with c.transaction():
            c.execute("SET LOCAL work_mem = '7MB'")
# SET and RESET: RESET returns to the startup value, as on a direct connection.
a.execute("SET search_path = bar")
assert settings(b) == want[False][0]
assert a.execute("SHOW search_path").fetchone()[0] == "bar"
a.execute("RESET search_path")
assert b.execute("SHOW search_path").fetchone()[0] == want[False][0][1]
assert a.execute("SHOW search_path").fetchone()[0] == want[True][0][1]
print("ok")
"#;
    assert_eq!(python_pg_pair(script, s.pg_port), "ok");
}

#[test]
fn state_changed_without_set_is_cleared_before_another_client() {
    if !backends_ready(Servers::Postgres) {
        return;
    }
    let s = Sluice::start(&pool_of(1, ""));
    let script = r#"
import sys, psycopg
port, direct_port = sys.argv[1], sys.argv[2]
def connect(p):
    return psycopg.connect(host="127.0.0.1", port=p, user="app", password="app", dbname="app",
                           sslmode="disable", autocommit=True)
Q = "SELECT current_setting('work_mem'), current_setting('lock_timeout'), current_setting('geqo')"
d = connect(direct_port)
default = d.execute(Q).fetchone()
d.close()
# A function changes a setting and a DO block another: nothing in the statements' text says so.
with connect(port) as c:
    c.execute("""CREATE OR REPLACE FUNCTION pg_e2e_sneaky() RETURNS int LANGUAGE plpgsql AS
                 $$ BEGIN PERFORM set_config('geqo', 'off', false); RETURN 1; END $$""")
a, b = connect(port), connect(port)
for i in range(20):
    a.execute("DO $$ BEGIN EXECUTE 'SET lock_timeout = 4321'; END $$")
    a.execute("SELECT pg_e2e_sneaky()")
    assert b.execute(Q).fetchone() == default, (i, b.execute(Q).fetchone())
# set_config(…, false) in the text pins the session (like an ambiguous SET): its value stays
# its own, and the connection is reset when it leaves.
a.execute("SELECT set_config('work_mem', '11MB', false)")
assert a.execute(Q).fetchone()[0] == "11MB"
assert a.execute(Q).fetchone()[0] == "11MB"
a.close()
assert b.execute(Q).fetchone() == default, b.execute(Q).fetchone()
with connect(port) as c:
    assert c.execute(Q).fetchone() == default
    c.execute("DROP FUNCTION pg_e2e_sneaky()")
print("ok")
"#;
    assert_eq!(python_pg_pair(script, s.pg_port), "ok");
}

#[test]
fn without_handoff_reset_all_only_tracked_settings_follow_sessions() {
    if !backends_ready(Servers::Postgres) {
        return;
    }
    // The documented trade-off of pgsql-handoff_reset_all=false: a setting changed inside a
    // function reaches the next session on the connection (as with PgBouncer); tracked SETs
    // and startup parameters still never do.
    let s = Sluice::start(&pool_of(1, "handoff_reset_all = false"));
    let script = r#"
import sys, psycopg
port = sys.argv[1]
def connect(**kw):
    return psycopg.connect(host="127.0.0.1", port=port, user="app", password="app", dbname="app",
                           sslmode="disable", autocommit=True, **kw)
a, b = connect(application_name="alpha"), connect()
a.execute("SET work_mem = '9MB'")
a.execute("DO $$ BEGIN EXECUTE 'SET lock_timeout = 4321'; END $$")
row = b.execute("SELECT current_setting('work_mem'), current_setting('lock_timeout'), current_setting('application_name')").fetchone()
print(*row)
"#;
    let out = python_pg_pair(script, s.pg_port);
    // Trimmed output: the last value, application_name, is empty.
    assert_eq!(out, "4MB 4321ms");
}

#[test]
fn a_rejected_startup_parameter_fails_the_login_and_can_be_ignored() {
    if !backends_ready(Servers::Postgres) {
        return;
    }
    let s = Sluice::start(&pool_of(
        2,
        "ignore_startup_parameters = \"geqo_seed,extra_float_digits\"",
    ));
    let conninfo = |opts: &str, port: u16| {
        format!("host=127.0.0.1 port={port} user=app dbname=app options='{opts}'")
    };
    // The server's own error, at login, as from a direct connection.
    let bad = "-c TimeZone=Nowhere/Foo";
    let direct = psql_conninfo(&conninfo(bad, ports::PG_PRIMARY), &[], &["SELECT 1"]);
    let via = psql_conninfo(&conninfo(bad, s.pg_port), &[], &["SELECT 1"]);
    assert!(!direct.status.success() && !via.status.success());
    let err = String::from_utf8_lossy(&via.stderr);
    assert!(
        err.contains("FATAL:  invalid value for parameter \"TimeZone\": \"Nowhere/Foo\""),
        "{err}"
    );
    let unknown = psql_conninfo(
        &conninfo("-c no_such_setting=1", s.pg_port),
        &[],
        &["SELECT 1"],
    );
    let err = String::from_utf8_lossy(&unknown.stderr);
    assert!(
        err.contains("unrecognized configuration parameter \"no_such_setting\""),
        "{err}"
    );
    // Sluice keeps serving: the next login works, and the pool holds no broken connection.
    assert_eq!(
        ok_stdout(&psql_app(
            s.pg_port,
            "SELECT current_setting('TimeZone') <> 'Nowhere/Foo'"
        ))
        .trim(),
        "t"
    );
    // Ignored names are dropped; the rest apply.
    let out = ok_stdout(&psql_conninfo(
        &conninfo(
            "-c geqo_seed=0.5 -c extra_float_digits=-5 -c work_mem=9MB",
            s.pg_port,
        ),
        &[],
        &[
            "SELECT current_setting('geqo_seed'), current_setting('extra_float_digits'), current_setting('work_mem')",
        ],
    ));
    assert_eq!(out.trim(), "0|1|9MB");
    // Replication connections cannot be pooled: refused with a clear error.
    let out = Command::new("psql")
        .env("PGPASSWORD", "app")
        .env("PGSSLMODE", "disable")
        .args([
            "-X",
            &format!(
                "host=127.0.0.1 port={} user=app dbname=app replication=database",
                s.pg_port
            ),
            "-c",
            "IDENTIFY_SYSTEM",
        ])
        .output()
        .expect("psql");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("replication connections are not supported through Sluice"),
        "{err}"
    );
}

#[test]
fn fifty_clients_with_their_own_application_name_on_five_connections() {
    if !backends_ready(Servers::Postgres) {
        return;
    }
    let s = Sluice::start(&pool_of(5, ""));
    let script = r#"
import sys, threading, psycopg
port = sys.argv[1]
errors, served_by = [], set()
def client(i):
    try:
        name = f"e2e-client-{i}"
        with psycopg.connect(host="127.0.0.1", port=port, user="app", password="app",
                             dbname="app", sslmode="disable", autocommit=True,
                             application_name=name) as c:
            for _ in range(4):
                # What the server itself says about the backend running this statement.
                row = c.execute("SELECT application_name, pg_backend_pid(), pg_sleep(0.02) "
                                "FROM pg_stat_activity WHERE pid = pg_backend_pid()").fetchone()
                if row[0] != name:
                    errors.append((name, row[0]))
                served_by.add(row[1])
    except Exception as e:
        errors.append((i, repr(e)))
threads = [threading.Thread(target=client, args=(i,)) for i in range(50)]
for t in threads: t.start()
for t in threads: t.join(120)
assert not errors, errors[:5]
assert 1 <= len(served_by) <= 5, served_by
print("ok")
"#;
    let out = ok_stdout(&python(script, &[&s.pg_port.to_string()]));
    assert_eq!(out.trim(), "ok");
}

#[test]
fn pgjdbc_sessions_keep_their_settings_prepared_statements_batches_and_timeouts() {
    if !backends_ready(Servers::Postgres) {
        return;
    }
    let s = Sluice::start(&pool_of(1, ""));
    // The program checks each client's settings against a direct connection with the same
    // properties in every round, prepared statements past prepareThreshold, a batch rolled back
    // and one committed, and a setQueryTimeout that cancels within 2 s.
    let out = java(
        xtask::packages::PGJDBC_JAR,
        "PgJdbc.java",
        &[s.pg_port.to_string(), ports::PG_PRIMARY.to_string()],
        &s.log(),
    );
    assert_eq!(out, "cancelled by the timeout\nok\n");
}

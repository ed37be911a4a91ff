//! PostgreSQL session pins: each cause holds the server connection and shows in
//! `stats_pgsql_processlist.pin_reason`, and the pin ends when its cause does (UNLISTEN, DROP of
//! the temporary table, advisory unlock, end of transaction) — the connection goes back to the
//! pool, as a second client waiting on a one-connection pool proves.

use sluice_tests::*;

/// Python: `reason()` and `pinned()`, the first session's `pin_reason` and `pinned_seconds`
/// in `stats_pgsql_processlist` (`-` for none), read through the admin port with psql.
fn reason_py(s: &Sluice) -> String {
    format!(
        r#"def first_session(column):
    out = subprocess.run(["psql", "-h", "127.0.0.1", "-p", "{admin}", "-U", "admin", "-XAt", "-c",
        f"SELECT COALESCE(CAST({{column}} AS TEXT), '-') FROM stats_pgsql_processlist ORDER BY SessionID LIMIT 1"],
        capture_output=True, text=True, env={{"PGPASSWORD": "admin", "PATH": "/usr/bin:/bin"}})
    return out.stdout.strip() or out.stderr.strip()
def reason():
    return first_session("pin_reason")
def pinned():
    return first_session("pinned_seconds")
"#,
        admin = s.pg_admin_port
    )
}

/// The standard config with a pool of one server connection to the PostgreSQL primary.
fn one_connection_config() -> String {
    standard_config("", "").replacen(
        &format!("port = {}\n", ports::PG_PRIMARY),
        &format!("port = {}\nmax_connections = 1\n", ports::PG_PRIMARY),
        1,
    )
}

#[test]
fn pins_show_in_the_processlist_and_end_with_their_cause() {
    if !backends_ready(Servers::Postgres) {
        return;
    }
    let s = Sluice::start(&one_connection_config());
    // LISTEN pins only in `pin` mode (the default fans out: tests/tests/pgsql_listen.rs).
    s.admin_ok("SET pgsql-listen_mode = 'pin'");
    s.admin_ok("LOAD PGSQL VARIABLES TO RUNTIME");
    let script = format!(
        r#"
import psycopg, subprocess, threading, time
dsn = "host=127.0.0.1 port={port} user=app password=app dbname=app sslmode=disable"
a = psycopg.connect(dsn, autocommit=True)
{reason}steps = [
    ("LISTEN jobs", "UNLISTEN jobs"),
    ("CREATE TEMP TABLE tt (x int)", "DROP TABLE tt"),
    ("CREATE TEMP VIEW tv AS SELECT 1 AS x", "DROP VIEW tv"),
    ("SELECT pg_advisory_lock(42)", "SELECT pg_advisory_unlock(42)"),
    ("DECLARE cur CURSOR WITH HOLD FOR SELECT 1", "CLOSE cur"),
    ("BEGIN", "COMMIT"),
]
for pin, unpin in steps:
    a.execute(pin)
    held = reason()
    # A second client needs the only server connection: it must wait while the pin holds it.
    done = []
    b = threading.Thread(target=lambda: done.append(psycopg.connect(dsn, autocommit=True).execute("SELECT 7").fetchone()[0]))
    b.start()
    time.sleep(0.7)
    waited = not done
    a.execute(unpin)
    b.join(10)
    print(pin, "|", held, "|", "waited" if waited else "did not wait", "|", reason(), "|", done)
"#,
        port = s.pg_port,
        reason = reason_py(&s)
    );
    let out = ok_stdout(&python(&script, &[]));
    assert_eq!(
        out,
        "LISTEN jobs | LISTEN | waited | - | [7]\n\
         CREATE TEMP TABLE tt (x int) | temporary table | waited | - | [7]\n\
         CREATE TEMP VIEW tv AS SELECT 1 AS x | temporary view or sequence | waited | - | [7]\n\
         SELECT pg_advisory_lock(42) | advisory lock | waited | - | [7]\n\
         DECLARE cur CURSOR WITH HOLD FOR SELECT 1 | WITH HOLD cursor | waited | - | [7]\n\
         BEGIN | transaction | waited | - | [7]\n"
    );
}

/// Advisory locks are counted per key and kind: releasing a lock the session never took (the
/// server answers false) or the exclusive lock of a key also held shared keeps the pin; the
/// last release ends it. `pinned_seconds` is there while the pin is, and NULL after.
#[test]
fn advisory_lock_pins_are_counted_per_key() {
    if !backends_ready(Servers::Postgres) {
        return;
    }
    let s = Sluice::start(&standard_config("", ""));
    let script = format!(
        r#"
import psycopg, subprocess
dsn = "host=127.0.0.1 port={port} user=app password=app dbname=app sslmode=disable"
a = psycopg.connect(dsn, autocommit=True)
{reason}a.execute("SELECT pg_advisory_lock(1)")
assert a.execute("SELECT pg_advisory_unlock(2)").fetchone()[0] is False
print(reason())
assert pinned().isdigit(), pinned()
a.execute("SELECT pg_advisory_lock_shared(1)")
assert a.execute("SELECT pg_advisory_unlock(1)").fetchone()[0] is True
print(reason())
assert a.execute("SELECT pg_advisory_unlock_shared(1)").fetchone()[0] is True
print(reason())
assert pinned() == "-", pinned()
"#,
        port = s.pg_port,
        reason = reason_py(&s)
    );
    let out = ok_stdout(&python(&script, &[]));
    assert_eq!(out, "advisory lock\nadvisory lock\n-\n", "{}", s.log());
}

/// SQL-level `PREPARE` follows its session instead of pinning it: two clients alternating on a
/// pool of one server connection each `EXECUTE` their own statement and never the other's, as
/// `pg_prepared_statements` shows; `DEALLOCATE` and `DEALLOCATE ALL` end them; a PREPARE
/// survives the ROLLBACK of its transaction, as in PostgreSQL (prepared statements are not
/// transactional); and nobody is pinned.
#[test]
fn sql_prepared_statements_follow_their_session_on_a_shared_connection() {
    if !backends_ready(Servers::Postgres) {
        return;
    }
    let s = Sluice::start(&one_connection_config());
    let script = format!(
        r#"
import psycopg, subprocess
dsn = "host=127.0.0.1 port={port} user=app password=app dbname=app sslmode=disable"
a = psycopg.connect(dsn, autocommit=True)
b = psycopg.connect(dsn, autocommit=True)
{reason}def run(c, sql):
    try:
        return c.execute(sql).fetchone()[0]
    except psycopg.errors.InvalidSqlStatementName:
        return "missing"
def mine(c):
    return sorted(r[0] for r in c.execute("SELECT name FROM pg_prepared_statements WHERE from_sql").fetchall())
a.execute("PREPARE qa (int) AS SELECT 'a' || $1")
b.execute("PREPARE qb AS SELECT 'b'")
print(run(a, "EXECUTE qa(1)"), run(b, "EXECUTE qa(2)"), run(b, "EXECUTE qb"), run(a, "EXECUTE qb"), reason())
print(mine(a), mine(b))
b.execute("BEGIN"); b.execute("PREPARE qc AS SELECT 'c'"); b.execute("ROLLBACK")
print(run(b, "EXECUTE qc"), run(a, "EXECUTE qc"))
a.execute("DEALLOCATE qa")
b.execute("DEALLOCATE ALL")
print(run(a, "EXECUTE qa(3)"), run(b, "EXECUTE qb"), mine(a), mine(b), reason())
"#,
        port = s.pg_port,
        reason = reason_py(&s)
    );
    let out = ok_stdout(&python(&script, &[]));
    assert_eq!(
        out,
        "a1 missing b missing -\n['qa'] ['qb']\nc missing\nmissing missing [] [] -\n",
        "{}",
        s.log()
    );
}

/// pg_regress horology: `RESET TIME ZONE`, `SET TIME ZONE DEFAULT` and `SET TIME ZONE LOCAL`
/// return to the client's startup time zone (`PGTZ`), not the server's (before, they pinned the
/// session to a connection left at the server's UTC).
#[test]
fn resetting_the_time_zone_returns_to_the_client_s_own() {
    if !backends_ready(Servers::Postgres) {
        return;
    }
    let s = Sluice::start(&standard_config("", ""));
    let mut c = std::process::Command::new("psql");
    c.env("PGPASSWORD", "app").env("PGTZ", "PST8PDT");
    c.args([
        "-h",
        "127.0.0.1",
        "-p",
        &s.pg_port.to_string(),
        "-U",
        "app",
        "-XAt",
        "app",
    ]);
    for reset in [
        "RESET TIME ZONE",
        "SET TIME ZONE DEFAULT",
        "SET TIME ZONE LOCAL",
    ] {
        c.args([
            "-c",
            "SET TIME ZONE 'UTC'",
            "-c",
            reset,
            "-c",
            "SHOW TimeZone",
        ]);
    }
    let out = ok_stdout(&c.output().expect("psql"));
    assert_eq!(
        out,
        "SET\nRESET\nPST8PDT\nSET\nSET\nPST8PDT\nSET\nSET\nPST8PDT\n",
        "{}",
        s.log()
    );
}

/// pg_regress horology sets `TIME ZONE INTERVAL '-08:00' HOUR TO MINUTE`: the setting follows
/// the session to a server connection another session used in between (it is applied again
/// there in a form PostgreSQL accepts; `SET timezone TO INTERVAL …` is a syntax error that ended
/// the session).
#[test]
fn a_time_zone_interval_follows_the_session_to_another_connection() {
    if !backends_ready(Servers::Postgres) {
        return;
    }
    let s = Sluice::start(&one_connection_config());
    let script = format!(
        r#"
import psycopg
dsn = "host=127.0.0.1 port={port} user=app password=app dbname=app sslmode=disable"
a = psycopg.connect(dsn, autocommit=True)
b = psycopg.connect(dsn, autocommit=True)
a.execute("SET TIME ZONE INTERVAL '-08:00' HOUR TO MINUTE")
b.execute("SET TIME ZONE 'UTC'")
print(a.execute("SHOW TimeZone").fetchone()[0], b.execute("SHOW TimeZone").fetchone()[0])
"#,
        port = s.pg_port
    );
    let out = ok_stdout(&python(&script, &[]));
    assert_eq!(out.trim(), "<-08>+08 UTC", "{}", s.log());
}

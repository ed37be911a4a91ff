//! `KILL [QUERY|CONNECTION] id`, COM_PROCESS_KILL and `CONNECTION_ID()` through Sluice with the
//! thread ids clients see (Sluice session ids): PyMySQL, the mariadb CLI and MariaDB
//! Connector/J's `setQueryTimeout` act on the right session and nothing else.

use sluice_tests::*;

/// The standard config plus a second user, `other`, who may not kill `app`'s sessions.
fn config() -> String {
    standard_config(
        "",
        "[[mysql_users]]\nusername = \"other\"\npassword = \"other\"\ndefault_hostgroup = 0\n",
    )
}

/// Sluice on [`config`], with `other` on the server too: PyMySQL sets autocommit at connect,
/// which needs it.
fn start_with_other_user() -> Sluice {
    primary_root(
        "CREATE USER IF NOT EXISTS 'other'@'%' IDENTIFIED BY 'other'; \
         CREATE USER IF NOT EXISTS 'other'@'localhost' IDENTIFIED BY 'other';",
    );
    Sluice::start(&config())
}

#[test]
fn pymysql_kill_query_and_connection_by_the_thread_id_it_was_given() {
    if !backends_ready(Servers::MariaDb) {
        return;
    }
    let s = start_with_other_user();
    let script = r#"
import sys, threading, time, pymysql
port, direct_port = int(sys.argv[1]), int(sys.argv[2])
def wait_running(sql):
    """Polls the server until `sql` runs (a fixed sleep races on a loaded machine)."""
    d = pymysql.connect(host="127.0.0.1", port=direct_port, user="root", password="root")
    try:
        for _ in range(400):
            with d.cursor() as cur:
                cur.execute("SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE INFO = %s", (sql,))
                if cur.fetchone()[0] > 0:
                    return time.time()
            time.sleep(0.025)
    finally:
        d.close()
    raise AssertionError(f"{sql} never started")
def connect(user="app"):
    return pymysql.connect(host="127.0.0.1", port=port, user=user, password=user, autocommit=True)
a, b, c = connect(), connect(), connect()
with a.cursor() as cur:
    cur.execute("SELECT CONNECTION_ID()")
    assert cur.fetchone()[0] == a.thread_id(), "CONNECTION_ID() is the handshake's thread id"
assert len({a.thread_id(), b.thread_id(), c.thread_id()}) == 3
# KILL QUERY from another connection stops A's statement; A goes on.
result = {}
def sleeper():
    try:
        with a.cursor() as cur:
            cur.execute("SELECT SLEEP(20)")
            result["row"] = cur.fetchone()
    except pymysql.MySQLError as e:
        result["error"] = e.args[0]
    result["end"] = time.time()
t = threading.Thread(target=sleeper)
t.start()
started = wait_running("SELECT SLEEP(20)")
with b.cursor() as cur:
    cur.execute(f"KILL QUERY {a.thread_id()}")
t.join(10)
assert not t.is_alive(), "KILL QUERY did not end the SLEEP(20)"
# MariaDB answers a killed SLEEP() with 1 (interrupted, where 0 is slept out) or error 1317.
assert result.get("row") == (1,) or result.get("error") == 1317, result
with a.cursor() as cur:
    cur.execute("SELECT 41 + 1")
    assert cur.fetchone()[0] == 42
# Unknown ids and other users' sessions are refused as MySQL refuses them.
for sql, code in ((f"KILL 999999", 1094), (f"KILL QUERY 999999", 1094)):
    try:
        b.cursor().execute(sql)
        raise AssertionError(sql + " accepted")
    except pymysql.MySQLError as e:
        assert e.args[0] == code, (sql, e.args)
o = connect("other")
try:
    o.cursor().execute(f"KILL {a.thread_id()}")
    raise AssertionError("another user killed app's session")
except pymysql.MySQLError as e:
    assert e.args[0] == 1095, e.args
with a.cursor() as cur:
    cur.execute("SELECT 1")
# COM_PROCESS_KILL (PyMySQL's kill()) ends the session.
b.kill(a.thread_id())
try:
    with a.cursor() as cur:
        cur.execute("SELECT 1")
    raise AssertionError("killed session still answers")
except pymysql.MySQLError as e:
    pass
# KILL CONNECTION of a session running a statement ends the statement and the session.
def sleeper_c():
    try:
        with c.cursor() as cur:
            cur.execute("SELECT SLEEP(20)")
            cur.fetchall()
            cur.execute("SELECT 1")
        result["c"] = "still alive"
    except pymysql.MySQLError as e:
        result["c"] = "ended"
tc = threading.Thread(target=sleeper_c)
tc.start()
started = wait_running("SELECT SLEEP(20)")
b.cursor().execute(f"KILL CONNECTION {c.thread_id()}")
tc.join(10)
assert not tc.is_alive(), "KILL CONNECTION did not end the SLEEP(20)"
assert result["c"] == "ended", result
# The killer itself is unharmed.
with b.cursor() as cur:
    cur.execute("SELECT 7")
    assert cur.fetchone()[0] == 7
print("ok")
"#;
    let out = python(
        script,
        &[&s.port.to_string(), &ports::MY_PRIMARY.to_string()],
    );
    assert_eq!(ok_stdout(&out).trim(), "ok", "{}", s.log());
    assert!(
        s.log().contains("sent KILL QUERY to the server"),
        "{}",
        s.log()
    );
}

#[test]
fn mariadb_cli_connection_id_matches_the_handshake_and_unknown_ids_are_refused() {
    if !backends_ready(Servers::MariaDb) {
        return;
    }
    let s = Sluice::start(&config());
    // `status` prints the thread id of the handshake; CONNECTION_ID() must agree.
    let out = ok_stdout(&mariadb(
        s.port,
        "app",
        "app",
        &["--skip-ssl"],
        "status\nSELECT CONNECTION_ID();\n",
    ));
    let handshake = out
        .lines()
        .find_map(|l| l.strip_prefix("Connection id:"))
        .map(str::trim)
        .unwrap_or_else(|| panic!("no connection id in {out:?}"));
    let selected = out.lines().last().map(str::trim).unwrap_or_default();
    assert_eq!(handshake, selected, "{out}");
    let out = mariadb(s.port, "app", "app", &["--skip-ssl"], "KILL 999999;");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("ERROR 1094") && err.contains("Unknown thread id: 999999"),
        "{err}"
    );
    let out = mariadb(s.port, "app", "app", &["--skip-ssl"], "KILL USER app;");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("KILL USER is not supported through Sluice"),
        "{err}"
    );
}

#[test]
fn connector_j_query_timeout_cancels_through_sluice() {
    if !backends_ready(Servers::MariaDb) {
        return;
    }
    // A pool of two backend connections: the timeout and cancel need the second for their KILL.
    let s = Sluice::start(&capped_config(
        2,
        "",
        "[[mysql_users]]\nusername = \"other\"\npassword = \"other\"\ndefault_hostgroup = 0\n",
    ));
    let out = java(
        xtask::packages::MARIADB_JDBC_JAR,
        "MariaDbJdbc.java",
        &[s.port.to_string()],
        &s.log(),
    );
    assert_eq!(out, "timeout ended the sleep\ncancel ended the sleep\nok\n");
}

/// PyMySQL's own `test_issue_36` through Sluice: `SHOW PROCESSLIST` on the data port lists the
/// user's Sluice sessions by the ids `KILL` takes (the session asking is `Query` with its own
/// statement as `Info`), `conn.kill()` (COM_PROCESS_KILL) from another connection ends the
/// session found there, and the next `SHOW FULL PROCESSLIST` no longer lists it. Another
/// user's sessions are not shown.
#[test]
fn pymysql_finds_its_id_in_show_processlist_and_kills_it_from_another_connection() {
    if !backends_ready(Servers::MariaDb) {
        return;
    }
    let s = start_with_other_user();
    let script = r#"
import sys, time, pymysql
port = int(sys.argv[1])
def connect(user="app", database="app"):
    return pymysql.connect(host="127.0.0.1", port=port, user=user, password=user, database=database)
killer, victim, stranger = connect(), connect(), connect("other", None)
c = victim.cursor()
c.execute("show processlist")
rows = c.fetchall()
assert len(c.description) == 8 and c.description[7][0] == "Info", c.description
kill_id = next((r[0] for r in rows if r[7] == "show processlist"), None)
assert kill_id == victim.thread_id(), (kill_id, victim.thread_id(), rows)
assert killer.thread_id() in [r[0] for r in rows], rows
assert stranger.thread_id() not in [r[0] for r in rows], "another user's session is shown"
assert all(r[1] == "app" for r in rows), rows
mine = next(r for r in rows if r[0] == kill_id)
assert mine[4] == "Query" and mine[3] == "app", mine
killer.kill(kill_id)
try:
    c.execute("show tables")
    raise AssertionError("the killed connection still answers")
except pymysql.err.MySQLError:
    pass
k = killer.cursor()
for _ in range(200):
    k.execute("SHOW FULL PROCESSLIST")
    ids = [r[0] for r in k.fetchall()]
    if kill_id not in ids:
        break
    time.sleep(0.025)
assert kill_id not in ids, ids
assert killer.thread_id() in ids, ids
print("ok")
"#;
    let out = python(script, &[&s.port.to_string()]);
    assert_eq!(ok_stdout(&out).trim(), "ok", "{}", s.log());
}

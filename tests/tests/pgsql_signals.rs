//! `pg_cancel_backend(pid)` / `pg_terminate_backend(pid)` with the pids Sluice hands out in
//! BackendKeyData, and NotificationResponse pids, checked with psycopg: the pid a client knows
//! for another client reaches that client's session through Sluice.

use sluice_tests::*;

#[test]
fn psycopg_cancel_terminate_and_notify_by_sluice_pid() {
    if !backends_ready(Servers::Postgres) {
        return;
    }
    let s = Sluice::start(&standard_config(
        "",
        "[[pgsql_users]]\nusername = \"postgres\"\npassword = \"postgres\"\ndefault_hostgroup = 0\n",
    ));
    let script = r#"
import sys, threading, time, psycopg
port, direct_port = sys.argv[1], sys.argv[2]
def wait_running(sql):
    """Polls the server until `sql` runs (a fixed sleep races on a loaded machine)."""
    d = psycopg.connect(host="127.0.0.1", port=direct_port, user="app", password="app",
                        dbname="app", sslmode="disable", autocommit=True)
    for _ in range(400):
        if d.execute("SELECT count(*) FROM pg_stat_activity WHERE query = %s AND state = 'active'",
                     (sql,)).fetchone()[0] > 0:
            d.close()
            return time.time()
        time.sleep(0.025)
    raise AssertionError(f"{sql} never started")
def connect(user="app"):
    return psycopg.connect(host="127.0.0.1", port=port, user=user, password=user, dbname="app",
                           sslmode="disable", autocommit=True)
a, b, c = connect(), connect(), connect()
pids = {a.info.backend_pid, b.info.backend_pid, c.info.backend_pid}
assert len(pids) == 3
# pg_cancel_backend with A's pid (the one its client knows) cancels A's statement; A goes on.
result = {}
def sleeper():
    try:
        a.execute("SELECT pg_sleep(20)")
        result["a"] = "finished"
    except psycopg.errors.QueryCanceled:
        result["a"] = "cancelled"
    result["end"] = time.time()
t = threading.Thread(target=sleeper)
t.start()
started = wait_running("SELECT pg_sleep(20)")
assert b.execute(f"SELECT pg_cancel_backend({a.info.backend_pid})").fetchone()[0] is True
t.join(10)
assert not t.is_alive(), "pg_cancel_backend did not end pg_sleep(20)"
assert result["a"] == "cancelled", result
assert a.execute("SELECT 42").fetchone()[0] == 42
# Another user may not signal A.
p = connect("postgres")
try:
    p.execute(f"SELECT pg_terminate_backend({a.info.backend_pid})")
    raise AssertionError("another user terminated app's session")
except psycopg.errors.InsufficientPrivilege:
    pass
assert a.execute("SELECT 1").fetchone()[0] == 1
# A server pid (from pg_stat_activity) still goes to the server, as on a direct connection.
server_pid = p.execute("SELECT pg_backend_pid()").fetchone()[0]
assert server_pid not in pids
# NOTIFY from B reaches LISTENing C with B's pid as B's client knows it.
c.execute("LISTEN sluice_e2e")
b.execute("NOTIFY sluice_e2e, 'hello'")
gen = c.notifies(timeout=5)
n = next(gen)
assert (n.channel, n.payload, n.pid) == ("sluice_e2e", "hello", b.info.backend_pid), (n, b.info.backend_pid)
gen.close()
# pg_terminate_backend ends A's session, running statement included.
def sleeper2():
    try:
        a.execute("SELECT pg_sleep(20)")
        result["a2"] = "finished"
    except psycopg.OperationalError as e:
        result["a2"] = "terminated"
    except psycopg.errors.QueryCanceled:
        result["a2"] = "terminated"
t = threading.Thread(target=sleeper2)
t.start()
wait_running("SELECT pg_sleep(20)")
assert b.execute(f"SELECT pg_terminate_backend({a.info.backend_pid})").fetchone()[0] is True
t.join(10)
assert result["a2"] == "terminated", result
try:
    a.execute("SELECT 1")
    raise AssertionError("terminated session still answers")
except psycopg.OperationalError:
    pass
# The terminator and the idle listener are unharmed; an idle session can be terminated too.
assert b.execute("SELECT 7").fetchone()[0] == 7
assert b.execute(f"SELECT pg_terminate_backend({c.info.backend_pid})").fetchone()[0] is True
# The idle session ends on its own thread; it may take a moment to be told.
ended = None
for _ in range(100):
    try:
        c.execute("SELECT 1")
        time.sleep(0.05)
    except psycopg.OperationalError as e:
        ended = str(e)
        break
assert ended is not None and "administrator command" in ended, ended
print("ok")
"#;
    assert_eq!(python_pg_pair(script, s.pg_port), "ok", "{}", s.log());
}

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

/// A client signalling its own session, as psycopg's own suite does (`test_broken`,
/// `test_right_exception_on_server_disconnect`): `pg_terminate_backend(<its backend_pid>)`
/// ends the session with FATAL 57P01 — by a Bind of `$1` (psycopg, extended protocol) on an
/// idle session and inside a transaction, and by a Query (asyncpg's `execute` without
/// arguments) — the way a PostgreSQL backend that signals itself ends; `pg_cancel_backend` of
/// its own pid cancels the statement that asked (57014) and the session goes on. Other
/// sessions are served throughout.
#[test]
fn a_session_terminating_itself_ends_with_57p01_and_cancelling_itself_gets_57014() {
    if !backends_ready(Servers::Postgres) {
        return;
    }
    let s = Sluice::start(&standard_config("", ""));
    let script = r#"
import asyncio, sys, psycopg, asyncpg
from psycopg import errors
port = sys.argv[1]
def connect(autocommit):
    return psycopg.connect(host="127.0.0.1", port=port, user="app", password="app", dbname="app",
                           sslmode="disable", autocommit=autocommit)
bystander = connect(True)
for autocommit in (True, False):
    conn = connect(autocommit)
    pid = conn.info.backend_pid
    assert pid >= 2**30, pid  # a Sluice pid, not a server's
    try:
        conn.execute("select pg_terminate_backend(%s)", [pid])
        raise AssertionError("the session outlived its own termination")
    except errors.AdminShutdown as e:
        assert e.sqlstate == "57P01", e.sqlstate
        assert "administrator command" in str(e), str(e)
    assert conn.closed and conn.broken, (conn.closed, conn.broken)
    assert bystander.execute("select 1").fetchone() == (1,)

async def simple_query():
    c = await asyncpg.connect(host="127.0.0.1", port=int(port), user="app", password="app",
                              database="app", ssl=False)
    pid = c.get_server_pid()
    try:
        await c.execute(f"select pg_cancel_backend({pid})")
        raise AssertionError("no cancel")
    except asyncpg.exceptions.QueryCanceledError as e:
        assert e.sqlstate == "57014", e.sqlstate
    assert await c.fetchval("select 2") == 2, "the session goes on after cancelling itself"
    try:
        await c.execute(f"select pg_terminate_backend({pid})")
        raise AssertionError("the session outlived its own termination")
    except asyncpg.exceptions.ConnectionDoesNotExistError as e:
        # asyncpg reports a FATAL mid-statement as the connection lost, caused by the error.
        cause = e.__cause__
        assert isinstance(cause, asyncpg.exceptions.AdminShutdownError), repr(cause)
        assert cause.sqlstate == "57P01", cause.sqlstate
    assert c.is_closed()
asyncio.run(simple_query())
assert bystander.execute("select 3").fetchone() == (3,)
print("ok")
"#;
    assert_eq!(python_pg_pair(script, s.pg_port), "ok", "{}", s.log());
    assert!(
        s.log()
            .contains("pgsql session ended by pg_terminate_backend()"),
        "{}",
        s.log()
    );
}

/// Another session terminated from inside a transaction, its pid bound as `$1` (psycopg's
/// `test_identify_closure`): the running `pg_sleep` ends at once with an OperationalError, the
/// server answers the terminator true (the target's server backend is the one terminated), and
/// an idle target ends too.
#[test]
fn a_session_terminated_from_inside_another_transaction_ends_at_once() {
    if !backends_ready(Servers::Postgres) {
        return;
    }
    let s = Sluice::start(&standard_config("", ""));
    let script = r#"
import sys, threading, time, psycopg
port = sys.argv[1]
def connect():
    return psycopg.connect(host="127.0.0.1", port=port, user="app", password="app", dbname="app",
                           sslmode="disable")
victim, killer = connect(), connect()
answered = []
def closer():
    time.sleep(0.3)
    answered.append(killer.execute("select pg_terminate_backend(%s)", [victim.info.backend_pid]).fetchone()[0])
t = threading.Thread(target=closer)
t.start()
t0 = time.time()
try:
    victim.execute("select pg_sleep(5)")
    raise AssertionError("pg_sleep(5) was not interrupted")
except psycopg.OperationalError:
    took = time.time() - t0
t.join()
assert took < 2.0, took
assert answered == [True], answered
killer.rollback()
idle = connect()
idle.execute("select 1"); idle.commit()
# An idle target holds no server backend to terminate: Sluice ends it, the server answers false
# (docs/ARCHITECTURE.md, "the session's id").
# (With the argument cast, as psycopg's own tests write it.)
assert killer.execute("select pg_terminate_backend(%s::int)", [idle.info.backend_pid]).fetchone()[0] is False
killer.rollback()
for _ in range(100):
    try:
        idle.execute("select 1"); idle.rollback()
        time.sleep(0.05)
    except psycopg.OperationalError as e:
        assert "administrator command" in str(e), e
        break
else:
    raise AssertionError("the idle session outlived its termination")
print("ok")
"#;
    assert_eq!(python_pg_pair(script, s.pg_port), "ok", "{}", s.log());
}

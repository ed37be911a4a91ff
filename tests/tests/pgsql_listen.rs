//! LISTEN/NOTIFY under transaction pooling (`pgsql-listen_mode=fanout`, the default), checked
//! with psycopg against the real PostgreSQL primary: listening costs no server connection per
//! client (1,000 listeners on a pool of 4 show as one listener connection in
//! `pg_stat_activity`), and what clients see is what PostgreSQL itself delivers — LISTEN and
//! NOTIFY take effect at COMMIT and never at ROLLBACK, duplicates are folded, commit order is
//! kept across channels and senders, a listener inside a transaction hears after it, the sender
//! pid is the one its client knows. A lost listener connection is opened again and every
//! channel listened to again; a client that does not keep up is told why it is disconnected.

use sluice_tests::*;

/// The standard config with the primary's pool capped at `max` server connections,
/// `listen_vars` in `[pgsql_variables]` and the HTTP endpoint on `http_port`.
fn config(max: u32, listen_vars: &str, http_port: u16) -> String {
    let standard = standard_config("", "").replacen(
        &format!("port = {}\n", ports::PG_PRIMARY),
        &format!("port = {}\nmax_connections = {max}\n", ports::PG_PRIMARY),
        1,
    );
    format!(
        "[admin_variables]\nmysql_ifaces = \"127.0.0.1:{{admin_port}}\"\npgsql_ifaces = \"127.0.0.1:{{pg_admin_port}}\"\n\
         restapi_enabled = true\nrestapi_port = {http_port}\n\
         [pgsql_variables]\ninterfaces = \"127.0.0.1:{{pg_port}}\"\n{listen_vars}\n{standard}"
    )
}

/// Python helpers: `admin(sql)` runs `sql` on Sluice's PostgreSQL admin port (psql, unaligned,
/// tab-separated, no headers) and returns its rows; `direct()` connects to the primary itself.
fn helpers(s: &Sluice) -> String {
    format!(
        r#"
import subprocess, psycopg, time
DSN = "host=127.0.0.1 port={port} user=app password=app dbname=app sslmode=disable"
def admin(sql):
    out = subprocess.run(["psql", "-h", "127.0.0.1", "-p", "{admin}", "-U", "admin", "-XAt",
        "-F", "\t", "-c", sql], capture_output=True, text=True,
        env={{"PGPASSWORD": "admin", "PATH": "/usr/bin:/bin"}})
    assert out.returncode == 0, out.stderr
    return [line.split("\t") for line in out.stdout.splitlines()]
def direct():
    return psycopg.connect(host="127.0.0.1", port={primary}, user="app", password="app",
                           dbname="app", sslmode="disable", autocommit=True)
def connect():
    return psycopg.connect(DSN, autocommit=True)
def heard(c, wait=0.6):
    """Every notification `c` receives within `wait` seconds, as (channel, payload, pid)."""
    return [(n.channel, n.payload, n.pid) for n in c.notifies(timeout=wait)]
"#,
        port = s.pg_port,
        admin = s.pg_admin_port,
        primary = ports::PG_PRIMARY,
    )
}

#[test]
fn notifications_follow_postgresql_semantics_without_pinning() {
    if !backends_ready(Servers::Postgres) {
        return;
    }
    let s = Sluice::start(&config(3, "", free_port()));
    let script = format!(
        r#"{helpers}
a, b, c = connect(), connect(), connect()
A, B, C = a.info.backend_pid, b.info.backend_pid, c.info.backend_pid
a.execute("LISTEN ch1")
b.execute("NOTIFY ch1, 'x'")
assert heard(a) == [("ch1", "x", B)], "plain delivery with the sender's pid"
a.execute("NOTIFY ch1, 'self'")
assert heard(a) == [("ch1", "self", A)], "self-notification carries the client's own pid"
# LISTEN inside a transaction: nothing after ROLLBACK, live after COMMIT.
a.execute("BEGIN"); a.execute("LISTEN ch2"); a.execute("ROLLBACK")
b.execute("NOTIFY ch2, 'rolled-back listen'")
assert heard(a) == [], "a rolled-back LISTEN delivers nothing"
a.execute("BEGIN"); a.execute("LISTEN ch3"); a.execute("COMMIT")
b.execute("NOTIFY ch3, 'after commit'")
assert heard(a) == [("ch3", "after commit", B)]
# A transaction that LISTENs and NOTIFYs hears its own notification once it commits.
a.execute("BEGIN"); a.execute("LISTEN ch4"); a.execute("NOTIFY ch4, 'own'"); a.execute("COMMIT")
assert heard(a) == [("ch4", "own", A)]
# NOTIFY in a transaction: only after COMMIT, never after ROLLBACK; duplicates folded.
b.execute("BEGIN"); b.execute("NOTIFY ch1, 'in-tx'"); b.execute("NOTIFY ch1, 'in-tx'")
assert heard(a, 0.4) == [], "delivered before the sender committed"
b.execute("COMMIT")
assert heard(a) == [("ch1", "in-tx", B)], "one delivery of two identical NOTIFYs"
b.execute("BEGIN"); b.execute("NOTIFY ch1, 'never'"); b.execute("ROLLBACK")
assert heard(a, 0.4) == []
# Commit order across channels and senders.
b.execute("NOTIFY ch1, '1'"); c.execute("NOTIFY ch3, '2'")
b.execute("SELECT pg_notify('ch3', '3')"); c.execute("SELECT pg_notify('ch1', '4')")
assert heard(a) == [("ch1", "1", B), ("ch3", "2", C), ("ch3", "3", B), ("ch1", "4", C)]
# A listener inside a transaction hears after it ends.
a.execute("BEGIN"); a.execute("SELECT 1")
b.execute("NOTIFY ch1, 'while busy'")
time.sleep(0.3)
a.execute("SELECT 2")
a.execute("COMMIT")
assert heard(a) == [("ch1", "while busy", B)]
# Payload limits are PostgreSQL's own.
b.execute("NOTIFY ch1, '" + "p" * 7999 + "'")
assert [len(n[1]) for n in heard(a)] == [7999]
try:
    b.execute("NOTIFY ch1, '" + "p" * 8000 + "'")
    raise AssertionError("an 8000-byte payload was accepted")
except psycopg.errors.InvalidParameterValue as e:
    assert "payload string too long" in str(e), e
# Listening pins nothing and shows in the processlist.
rows = admin("SELECT SessionID, pin_reason, info FROM stats_pgsql_processlist ORDER BY SessionID")
assert rows[0][1:] == ["", "listening: ch1,ch3,ch4"], rows
chans = {{r[1]: r for r in admin("SELECT * FROM stats_pgsql_listen_channels")}}
assert set(chans) == {{"ch1", "ch3", "ch4"}}, chans
assert chans["ch1"][2] == "1" and int(chans["ch1"][3]) >= 6 and int(chans["ch1"][4]) >= 6, chans
listeners = admin("SELECT hostgroup, srv_port, database, backend_pid, channels, reconnects FROM stats_pgsql_listeners")
assert len(listeners) == 1 and listeners[0][0] == "0" and listeners[0][2] == "app", listeners
assert listeners[0][4] == "3" and listeners[0][5] == "0", listeners
d = direct()
# Its last statement: a LISTEN, or the empty query a NOTIFY's sync round trip sends.
listening = d.execute("SELECT count(*) FROM pg_stat_activity WHERE pid = %s AND usename = 'app' AND (query LIKE 'LISTEN%%' OR query = '')",
                      (int(listeners[0][3]),)).fetchone()[0]
assert listening == 1, "the listener's backend pid is a live LISTEN connection"
# A self-notification arrives before the NOTIFY's ReadyForQuery, as from PostgreSQL (psycopg's
# notify handlers have it when execute() returns).
e = connect()
E = e.info.backend_pid
seen = []
e.add_notify_handler(lambda n: seen.append((n.channel, n.payload, n.pid)))
e.execute("LISTEN selfch")
e.execute("NOTIFY selfch, 'before ready'")
assert seen == [("selfch", "before ready", E)], seen
e.close()
# UNLISTEN and UNLISTEN *.
a.execute("UNLISTEN ch1")
b.execute("NOTIFY ch1, 'gone'"); b.execute("NOTIFY ch3, 'still'")
assert heard(a) == [("ch3", "still", B)]
a.execute("UNLISTEN *")
b.execute("NOTIFY ch3, 'none'"); b.execute("NOTIFY ch4, 'none'")
assert heard(a) == []
assert admin("SELECT info FROM stats_pgsql_processlist ORDER BY SessionID LIMIT 1") == [[""]]
print("ok")
"#,
        helpers = helpers(&s)
    );
    let out = python(&script, &[]);
    assert_eq!(ok_stdout(&out).trim(), "ok", "{}", s.log());
}

#[test]
fn a_thousand_listeners_share_one_server_connection() {
    if !backends_ready(Servers::Postgres) {
        return;
    }
    let s = Sluice::start(&config(4, "", free_port()));
    let script = format!(
        r#"{helpers}
import asyncio, resource
soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
N = 1000
# Its own database, so other tests' connections of user app do not count here.
DSN = DSN.replace("dbname=app", "dbname=postgres")
async def main():
    conns = []
    for i in range(0, N, 50):
        conns += await asyncio.gather(*[psycopg.AsyncConnection.connect(DSN, autocommit=True) for _ in range(50)])
    for i in range(0, N, 100):
        await asyncio.gather(*[c.execute("LISTEN fleet") for c in conns[i:i + 100]])
    d = direct()
    # Sluice's connections (this direct one is to database app).
    servers = d.execute("SELECT count(*) FROM pg_stat_activity WHERE usename = 'app' AND datname = 'postgres'").fetchone()[0]
    listening = d.execute("SELECT count(*) FROM pg_stat_activity WHERE usename = 'app' AND datname = 'postgres' AND query LIKE 'LISTEN%%'").fetchone()[0]
    sender = conns[0]
    await sender.execute("NOTIFY fleet, 'to all'")
    async def one(c):
        async for n in c.notifies(timeout=20, stop_after=1):
            return (n.channel, n.payload, n.pid)
    got = await asyncio.gather(*[one(c) for c in conns])
    want = ("fleet", "to all", sender.info.backend_pid)
    pins = admin("SELECT count(*) FROM stats_pgsql_processlist WHERE pin_reason IS NOT NULL")
    chans = admin("SELECT listeners, received, delivered FROM stats_pgsql_listen_channels")
    print(servers <= 5, listening, sum(1 for g in got if g == want), pins, chans)
    for c in conns:
        await c.close()
asyncio.run(main())
"#,
        helpers = helpers(&s)
    );
    let out = python(&script, &[]);
    assert_eq!(
        ok_stdout(&out).trim(),
        "True 1 1000 [['0']] [['1000', '1', '1000']]",
        "{}",
        s.log()
    );
}

#[test]
fn a_lost_listener_is_reopened_and_a_slow_client_is_told_why_it_is_cut_off() {
    if !backends_ready(Servers::Postgres) {
        return;
    }
    let http = free_port();
    let s = Sluice::start(&config(
        3,
        "listen_reset_channel = \"sluice_reset\"\nlisten_queue_max = 5\n",
        http,
    ));
    let script = format!(
        r#"{helpers}
a, b = connect(), connect()
A, B = a.info.backend_pid, b.info.backend_pid
a.execute("LISTEN jobs")
first = admin("SELECT backend_pid FROM stats_pgsql_listeners")[0][0]
d = direct()
assert d.execute("SELECT pg_terminate_backend(%s)", (int(first),)).fetchone()[0] is True
got = heard(a, 5)
assert len(got) == 1 and got[0][0] == "sluice_reset" and got[0][2] == 0, got
for _ in range(100):
    row = admin("SELECT backend_pid, reconnects, last_error FROM stats_pgsql_listeners")[0]
    if row[0] not in ("", first):
        break
    time.sleep(0.05)
assert row[0] not in ("", first) and row[1] == "1" and row[2] != "", row
b.execute("NOTIFY jobs, 'after the reconnect'")
assert heard(a) == [("jobs", "after the reconnect", B)]
# A client inside a transaction holds its notifications; past listen_queue_max it is ended.
c = connect()
c.execute("LISTEN jobs")
c.execute("BEGIN")
for i in range(6):
    b.execute(f"NOTIFY jobs, '{{i}}'")
assert [n[1] for n in heard(a)] == [str(i) for i in range(6)], "the other listener keeps up"
try:
    for _ in range(50):
        c.execute("SELECT 1")
        time.sleep(0.05)
    raise AssertionError("the overflowing client was not disconnected")
except psycopg.OperationalError as e:
    assert "pgsql-listen_queue_max" in str(e), e
dropped = admin("SELECT dropped FROM stats_pgsql_listen_channels WHERE channel = 'jobs'")
assert int(dropped[0][0]) >= 1, dropped
print("ok")
"#,
        helpers = helpers(&s)
    );
    let out = python(&script, &[]);
    assert_eq!(ok_stdout(&out).trim(), "ok", "{}", s.log());
    let log = s.log();
    assert!(log.contains("LISTEN connection was lost"), "{log}");
    assert!(log.contains("notification queue overflowed"), "{log}");
    let (_, metrics) = curl(http, "/metrics");
    assert!(
        metrics.contains("sluice_pg_listen_reconnects_total 1"),
        "{metrics}"
    );
}

#[test]
fn listen_modes_pin_and_reject() {
    if !backends_ready(Servers::Postgres) {
        return;
    }
    let s = Sluice::start(&config(2, "listen_mode = \"reject\"\n", free_port()));
    let script = format!(
        r#"{helpers}
a = connect()
try:
    a.execute("LISTEN jobs")
    raise AssertionError("LISTEN was accepted")
except psycopg.errors.FeatureNotSupported as e:
    assert "pgsql-listen_mode=reject" in str(e), e
assert a.execute("SELECT 1").fetchone()[0] == 1
admin("SET pgsql-listen_mode = 'pin'")
admin("LOAD PGSQL VARIABLES TO RUNTIME")
a.execute("LISTEN jobs")
assert admin("SELECT pin_reason FROM stats_pgsql_processlist") == [["LISTEN"]]
a.execute("UNLISTEN jobs")
assert admin("SELECT pin_reason FROM stats_pgsql_processlist") == [[""]]
print("ok")
"#,
        helpers = helpers(&s)
    );
    let out = python(&script, &[]);
    assert_eq!(ok_stdout(&out).trim(), "ok", "{}", s.log());
}

/// pg_regress `guc`: `SELECT pg_listening_channels()` of a session listening through Sluice
/// (whose server connections do not listen for it) lists its channels as PostgreSQL does — the
/// committed ones, a LISTEN of the open transaction from its COMMIT, none after `UNLISTEN *`.
#[test]
fn pg_listening_channels_shows_the_session_s_channels_as_directly() {
    if !backends_ready(Servers::Postgres) {
        return;
    }
    let s = Sluice::start(&config(2, "", free_port()));
    let script = "LISTEN a_chan;\nLISTEN b_chan;\nSELECT pg_listening_channels();\n\
        BEGIN;\nLISTEN c_chan;\nSELECT pg_listening_channels();\nCOMMIT;\n\
        SELECT * FROM pg_listening_channels();\nUNLISTEN *;\nSELECT pg_listening_channels();\n";
    let run = |port: u16| ok_stdout(&psql_script(port, script));
    let direct = run(ports::PG_PRIMARY);
    assert!(
        direct.contains("a_chan\nb_chan\nc_chan\n(3 rows)"),
        "{direct}"
    );
    assert_eq!(run(s.pg_port), direct, "{}", s.log());
}

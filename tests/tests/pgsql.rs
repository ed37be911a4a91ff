//! PostgreSQL clients through Sluice's port 6133 to the real PostgreSQL primary: psql and pgbench
//! with SCRAM-SHA-256, transaction pooling, errors seen by the client.

use sluice_tests::*;
use std::io::Write;
use std::process::{Command, Output, Stdio};

fn psql(port: u16, password: &str, sql: &str, stdin: &str) -> Output {
    psql_ssl(port, password, "prefer", sql, stdin)
}

/// psql as user `app` with libpq's `sslmode` set.
fn psql_ssl(port: u16, password: &str, sslmode: &str, sql: &str, stdin: &str) -> Output {
    let mut child = Command::new("psql")
        .env("PGPASSWORD", password)
        .env("PGSSLMODE", sslmode)
        .args([
            "-h",
            "127.0.0.1",
            "-p",
            &port.to_string(),
            "-U",
            "app",
            "-d",
            "app",
            "-X",
            "-q",
            "-A",
            "-t",
            "-v",
            "ON_ERROR_STOP=1",
        ])
        .args(["-c", sql])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("psql installed");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(stdin.as_bytes())
        .expect("stdin");
    child.wait_with_output().expect("psql ran")
}

/// The standard config with the PostgreSQL primary capped at `n` server connections.
fn pool_of(n: u32) -> String {
    standard_config("", "").replacen(
        &format!("port = {}\n", ports::PG_PRIMARY),
        &format!("port = {}\nmax_connections = {n}\n", ports::PG_PRIMARY),
        1,
    )
}

#[test]
fn psql_with_scram_reaches_the_primary() {
    if !backends_ready(Servers::Postgres) {
        return;
    }
    let s = Sluice::start(&standard_config("", ""));
    let out = ok_stdout(&psql(
        s.pg_port,
        "app",
        "SELECT inet_server_port(), current_user",
        "",
    ));
    assert_eq!(out.trim(), "15432|app");
    let out = ok_stdout(&psql(
        s.pg_port,
        "app",
        "DROP TABLE IF EXISTS pg_e2e; CREATE TABLE pg_e2e (id int primary key, v text); \
         INSERT INTO pg_e2e VALUES (1, 'a'), (2, 'b'); UPDATE pg_e2e SET v = 'c' WHERE id = 2; SELECT string_agg(v, ',' ORDER BY id) FROM pg_e2e",
        "",
    ));
    assert_eq!(out.trim(), "a,c");
    // COPY FROM STDIN through psql's \copy.
    let out = psql(
        s.pg_port,
        "app",
        "\\copy pg_e2e FROM STDIN",
        "3\td\n4\te\n\\.\n",
    );
    ok_stdout(&out);
    let out = ok_stdout(&psql(s.pg_port, "app", "SELECT count(*) FROM pg_e2e", ""));
    assert_eq!(out.trim(), "4");
    let bad = psql(s.pg_port, "wrong", "SELECT 1", "");
    let err = String::from_utf8_lossy(&bad.stderr);
    assert!(
        !bad.status.success() && err.contains("password authentication failed for user \"app\""),
        "{err}"
    );
}

#[test]
fn pgbench_in_every_query_mode_through_transaction_pooling() {
    if !backends_ready(Servers::Postgres) {
        return;
    }
    ok_stdout(&pgbench(ports::PG_PRIMARY, &["-i", "-q", "-s", "2"]));
    // Sixteen clients share four server connections between transactions.
    let cfg = pool_of(4);
    let capped = Sluice::start(&cfg);
    let run = |s: &Sluice, clients: &str, secs: &str, mode: &str| {
        let out = pgbench(
            s.pg_port,
            &["-n", "-c", clients, "-j", "2", "-T", secs, "-M", mode],
        );
        let text = ok_stdout(&out);
        assert!(
            text.contains("number of failed transactions: 0 (0.000%)"),
            "{clients} clients, {mode}:\n{text}"
        );
        let done = text
            .lines()
            .find_map(|l| l.strip_prefix("number of transactions actually processed: "))
            .and_then(|n| n.split('/').next()?.trim().parse::<u64>().ok())
            .unwrap_or(0);
        assert!(done > 0, "{text}");
        let tps = text.lines().find(|l| l.starts_with("tps")).unwrap_or("");
        eprintln!("pgbench -c {clients} -M {mode} through sluice: {tps}");
    };
    for mode in ["simple", "extended", "prepared"] {
        run(&capped, "16", "20", mode);
    }
    // 200 clients with named prepared statements share 10 server connections: statements are
    // re-parsed on whichever connection a transaction lands on.
    let ten = Sluice::start(&pool_of(10));
    run(&ten, "200", "10", "prepared");
}

#[test]
fn login_errors_are_proper_postgres_errors() {
    if !backends_ready(Servers::Postgres) {
        return;
    }
    let dead = free_port();
    let cfg = format!(
        "[mysql_variables]\ninterfaces = \"127.0.0.1:{{port}}\"\n\
         [pgsql_variables]\ninterfaces = \"127.0.0.1:{{pg_port}}\"\nconnect_timeout_server_max = 500\n\
         [[pgsql_servers]]\nhostname = \"127.0.0.1\"\nport = {dead}\n\
         [[pgsql_users]]\nusername = \"app\"\npassword = \"app\"\n\
         [[pgsql_users]]\nusername = \"tls_only\"\npassword = \"x\"\nuse_ssl = 1\n\
         [[mysql_servers]]\nhostname = \"127.0.0.1\"\nport = 13306\n"
    );
    let s = Sluice::start(&cfg);
    let out = psql(s.pg_port, "app", "SELECT 1", "");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("Max connect timeout reached while reaching hostgroup 0"),
        "{err}"
    );
    let tls = Command::new("psql")
        .env("PGPASSWORD", "x")
        .env("PGSSLMODE", "disable")
        .args([
            "-h",
            "127.0.0.1",
            "-p",
            &s.pg_port.to_string(),
            "-U",
            "tls_only",
            "-d",
            "app",
            "-c",
            "SELECT 1",
        ])
        .output()
        .expect("psql");
    let err = String::from_utf8_lossy(&tls.stderr);
    assert!(
        err.contains("must connect with SSL"),
        "a use_ssl=1 user never logs in over plaintext: {err}"
    );
}

#[test]
fn cancel_request_stops_a_running_query() {
    if !backends_ready(Servers::Postgres) {
        return;
    }
    let s = Sluice::start(&standard_config("", ""));
    let start = std::time::Instant::now();
    let child = Command::new("psql")
        .env("PGPASSWORD", "app")
        .args([
            "-h",
            "127.0.0.1",
            "-p",
            &s.pg_port.to_string(),
            "-U",
            "app",
            "-d",
            "app",
            "-X",
        ])
        .args(["-c", "SELECT pg_sleep(30)"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("psql");
    wait_pg_running(ports::PG_PRIMARY, "SELECT pg_sleep(30)");
    // psql answers SIGINT with a CancelRequest on a new connection, carrying Sluice's key.
    xtask::proc::signal(child.id(), "INT");
    let out = child.wait_with_output().expect("psql ran");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("canceling statement due to user request"),
        "{err}"
    );
    assert!(
        start.elapsed() < std::time::Duration::from_secs(5),
        "cancelled promptly, not after 30 s"
    );
    // Logged once the cancel went out, which may be after psql saw the statement end.
    wait_for("the cancel's log line", || {
        s.log().contains("forwarded a client's cancel request")
    });
}

const DRIVERS: &str = r#"
import sys, asyncio, psycopg, asyncpg
port, tls = int(sys.argv[1]), sys.argv[2] == "tls"
dsn = f"host=127.0.0.1 port={port} user=app password=app dbname=app sslmode={'require' if tls else 'disable'}"
with psycopg.connect(dsn) as c:
    with c.cursor() as cur:
        cur.execute("SELECT inet_server_port(), %s::int + 1", (41,))
        print("psycopg", *cur.fetchone())
        cur.execute("DROP TABLE IF EXISTS drv_t")
        cur.execute("CREATE TABLE drv_t (id int, v text)")
        cur.executemany("INSERT INTO drv_t VALUES (%s, %s)", [(1, "a"), (2, "b")])
        with cur.copy("COPY drv_t (id, v) FROM STDIN") as cp:
            cp.write_row((3, "c"))
        cur.execute("SELECT count(*) FROM drv_t WHERE id > %s", (0,), prepare=True)
        print("psycopg-prepared", *cur.fetchone())
    c.commit()
async def main():
    conn = await asyncpg.connect(host="127.0.0.1", port=port, user="app", password="app", database="app", ssl="require" if tls else False)
    print("asyncpg", await conn.fetchval("SELECT inet_server_port()"))
    rows = await conn.fetch("SELECT id, v FROM drv_t WHERE id >= $1 ORDER BY id", 2)
    print("asyncpg-rows", [tuple(r) for r in rows])
    async with conn.transaction():
        await conn.execute("INSERT INTO drv_t VALUES ($1, $2)", 9, "z")
    print("asyncpg-count", await conn.fetchval("SELECT count(*) FROM drv_t"))
    await conn.close()
asyncio.run(main())
"#;

#[test]
fn psycopg_and_asyncpg_with_copy_and_prepared_statements() {
    if !backends_ready(Servers::Postgres) {
        return;
    }
    let s = Sluice::start(&standard_config("", ""));
    for mode in ["plain", "tls"] {
        let out = ok_stdout(&python(DRIVERS, &[&s.pg_port.to_string(), mode]));
        assert_eq!(
            out,
            "psycopg 15432 42\npsycopg-prepared 3\nasyncpg 15432\nasyncpg-rows [(2, 'b'), (3, 'c')]\nasyncpg-count 4\n",
            "{mode}"
        );
    }
    assert!(s.log().contains("tls=true"), "{}", s.log());
}

#[test]
fn tls_login_and_use_ssl_enforcement() {
    if !backends_ready(Servers::Postgres) {
        return;
    }
    let s = Sluice::start(&standard_config("", ""));
    let info = |mode| ok_stdout(&psql_ssl(s.pg_port, "app", mode, "\\conninfo", ""));
    let tls = info("require");
    assert!(tls.contains("SSL connection (protocol: TLSv1.3"), "{tls}");
    assert!(!info("disable").contains("SSL connection"));
    let port = psql_ssl(s.pg_port, "app", "require", "SELECT inet_server_port()", "");
    assert_eq!(ok_stdout(&port), "15432\n");

    // use_ssl=1: the same user and password are refused over plaintext, accepted over TLS.
    ok_stdout(&s.psql_admin(
        "UPDATE pgsql_users SET use_ssl=1 WHERE username='app'; LOAD PGSQL USERS TO RUNTIME;",
        false,
    ));
    let refused = psql_ssl(s.pg_port, "app", "disable", "SELECT 1", "");
    assert!(!refused.status.success());
    let err = String::from_utf8_lossy(&refused.stderr);
    assert!(err.contains("must connect with SSL"), "{err}");
    let wrong_pw = psql_ssl(s.pg_port, "nope", "require", "SELECT 1", "");
    assert!(
        String::from_utf8_lossy(&wrong_pw.stderr).contains("password authentication failed"),
        "{wrong_pw:?}"
    );
    let ok = ok_stdout(&psql_ssl(s.pg_port, "app", "require", "SELECT 7", ""));
    assert_eq!(ok, "7\n");
}

/// Logs in with psycopg (libpq 18), allowing only the given authentication method.
const LOGIN_WITH_METHOD: &str = r#"
import sys, psycopg
port, method, password = sys.argv[1], sys.argv[2], sys.argv[3]
dsn = f"host=127.0.0.1 port={port} user=app password={password} dbname=app sslmode=disable require_auth={method}"
try:
    with psycopg.connect(dsn) as c:
        print(c.execute("SELECT inet_server_port()").fetchone()[0])
except psycopg.OperationalError as e:
    print("error:", e)
"#;

#[test]
fn md5_and_cleartext_authentication_methods() {
    if !backends_ready(Servers::Postgres) {
        return;
    }
    let s = Sluice::start(&standard_config("", ""));
    let port = s.pg_port.to_string();
    let login =
        |method: &str, pw: &str| ok_stdout(&python(LOGIN_WITH_METHOD, &[&port, method, pw]));
    assert_eq!(login("scram-sha-256", "app"), "15432\n");
    // libpq refuses a method it was not allowed: proof of what Sluice asked for.
    assert!(login("md5", "app").contains("SASL"), "default is SCRAM");
    for (method, libpq_name) in [(2, "md5"), (1, "password")] {
        ok_stdout(&s.psql_admin(
            &format!("SET pgsql-authentication_method={method}; LOAD PGSQL VARIABLES TO RUNTIME;"),
            false,
        ));
        assert_eq!(login(libpq_name, "app"), "15432\n", "{libpq_name}");
        let bad = login(libpq_name, "wrong");
        assert!(
            bad.contains("password authentication failed for user \"app\""),
            "{libpq_name}: {bad}"
        );
        assert!(login("scram-sha-256", "app").starts_with("error:"));
    }
}

/// asyncpg prepares every query; cycling through more than `pgsql-max_prepared_statements`
/// distinct ones makes Sluice close and re-parse statements on its one server connection.
const LRU_CYCLE: &str = r#"
import sys, asyncio, asyncpg
async def main():
    conns = [await asyncpg.connect(host="127.0.0.1", port=int(sys.argv[1]), user="app",
                                   password="app", database="app", ssl=False,
                                   statement_cache_size=100) for _ in range(2)]
    wrong = 0
    for rnd in range(3):
        for i in range(6):
            for n, c in enumerate(conns):
                v = await c.fetchval(f"SELECT $1::int * {i + 1} + {n}", rnd)
                wrong += v != rnd * (i + 1) + n
    held = await conns[0].fetchval("SELECT count(*) FROM pg_prepared_statements")
    print("wrong", wrong, "held", held)
asyncio.run(main())
"#;

#[test]
fn prepared_statements_survive_lru_eviction_on_a_shared_connection() {
    if !backends_ready(Servers::Postgres) {
        return;
    }
    let cfg = pool_of(1);
    let s = Sluice::start(&cfg);
    ok_stdout(&s.psql_admin(
        "SET pgsql-max_prepared_statements=3; LOAD PGSQL VARIABLES TO RUNTIME;",
        false,
    ));
    let out = ok_stdout(&python(LRU_CYCLE, &[&s.pg_port.to_string()]));
    // 2 clients × 6 statements shared one server connection that never held more than 3.
    let held: u32 = out
        .trim()
        .rsplit(' ')
        .next()
        .and_then(|n| n.parse().ok())
        .unwrap_or(99);
    assert!(out.starts_with("wrong 0 held "), "{out}");
    assert!((1..=3).contains(&held), "{out}");
}

/// Two sessions share ONE server connection, so each statement of each runs on it: their SET
/// values can only be right if Sluice replays the differences every time the session changes.
const SET_REPLAY: &str = r#"
import sys, psycopg
dsn = f"host=127.0.0.1 port={sys.argv[1]} user=app password=app dbname=app sslmode=disable"
a = psycopg.connect(dsn, autocommit=True, cursor_factory=psycopg.ClientCursor)
b = psycopg.connect(dsn, autocommit=True, cursor_factory=psycopg.ClientCursor)
one = lambda c, sql: c.execute(sql).fetchone()[0]
default = one(b, "SHOW work_mem")
a.execute("SET work_mem TO '7MB'")
a.execute("SET application_name = 'sess_a'")
seen = set()
for i in range(3):
    seen.add((one(a, "SHOW work_mem"), one(b, "SHOW work_mem"), one(a, "SHOW application_name"), one(b, "SHOW application_name")))
print("same-server", one(a, "SELECT pg_backend_pid()") == one(b, "SELECT pg_backend_pid()"))
print("seen", sorted(seen), "default", default)
print("reported", a.info.parameter_status("application_name"), repr(b.info.parameter_status("application_name")))
a.execute("BEGIN"); a.execute("SET work_mem TO '9MB'"); a.execute("ROLLBACK")
print("after-rollback", one(a, "SHOW work_mem"))
a.execute("RESET work_mem")
print("after-reset", one(a, "SHOW work_mem"), one(b, "SHOW work_mem"))
"#;

#[test]
fn set_and_reset_follow_the_session_across_pooled_connections() {
    if !backends_ready(Servers::Postgres) {
        return;
    }
    let cfg = pool_of(1);
    let s = Sluice::start(&cfg);
    let out = ok_stdout(&python(SET_REPLAY, &[&s.pg_port.to_string()]));
    assert_eq!(
        out,
        "same-server True\nseen [('7MB', '4MB', 'sess_a', '')] default 4MB\n\
         reported sess_a ''\nafter-rollback 7MB\nafter-reset 4MB 4MB\n"
    );
}

const TWO_CLIENTS: &str = r#"
import sys, psycopg
dsn = f"host=127.0.0.1 port={sys.argv[1]} user=app password=app dbname=app sslmode=disable"
first = psycopg.connect(dsn)
try:
    psycopg.connect(dsn)
    print("second admitted")
except psycopg.OperationalError as e:
    print("second refused:", str(e).strip().splitlines()[-1])
first.close()
print("after close:", psycopg.connect(dsn).execute("SELECT 1").fetchone()[0])
"#;

#[test]
fn client_connection_caps_refuse_with_53300() {
    if !backends_ready(Servers::Postgres) {
        return;
    }
    let s = Sluice::start(&standard_config("", ""));
    let port = s.pg_port.to_string();
    let two = || ok_stdout(&python(TWO_CLIENTS, &[&port]));
    assert!(two().starts_with("second admitted"));
    ok_stdout(&s.psql_admin(
        "UPDATE pgsql_users SET max_connections=1 WHERE username='app'; LOAD PGSQL USERS TO RUNTIME;",
        false,
    ));
    let out = two();
    assert!(
        out.starts_with("second refused:") && out.contains("too many connections for role \"app\""),
        "{out}"
    );
    assert!(out.ends_with("after close: 1\n"), "{out}");
    ok_stdout(&s.psql_admin(
        "UPDATE pgsql_users SET max_connections=10000; LOAD PGSQL USERS TO RUNTIME; \
         SET pgsql-max_connections=1; LOAD PGSQL VARIABLES TO RUNTIME;",
        false,
    ));
    let out = two();
    assert!(out.contains("sorry, too many clients already"), "{out}");
}

const SERVER_CLOSES_IDLE: &str = r#"
import sys, time, psycopg
via = psycopg.connect(f"host=127.0.0.1 port={sys.argv[1]} user=app password=app dbname=app sslmode=disable", autocommit=True)
direct = psycopg.connect(f"host=127.0.0.1 port={sys.argv[2]} user=app password=app dbname=app sslmode=disable", autocommit=True)
before = via.execute("SELECT pg_backend_pid()").fetchone()[0]
print("terminated", direct.execute("SELECT pg_terminate_backend(%s, 10000)", (before,)).fetchone()[0])
time.sleep(1.0)
after = via.execute("SELECT pg_backend_pid()").fetchone()[0]
print("new server connection", after != before)
"#;

#[test]
fn an_idle_server_connection_the_server_closed_is_not_reused() {
    if !backends_ready(Servers::Postgres) {
        return;
    }
    let s = Sluice::start(&pool_of(1));
    let out = ok_stdout(&python(
        SERVER_CLOSES_IDLE,
        &[&s.pg_port.to_string(), &ports::PG_PRIMARY.to_string()],
    ));
    assert_eq!(out, "terminated True\nnew server connection True\n");
    assert!(
        s.log()
            .contains("dropping an idle PostgreSQL connection the server closed"),
        "{}",
        s.log()
    );
}

#[test]
fn large_objects_through_function_calls() {
    if !backends_ready(Servers::Postgres) {
        return;
    }
    // psql's \lo_import / \lo_export use libpq's PQfn: FunctionCall messages, forwarded raw.
    let s = Sluice::start(&pool_of(2));
    let dir = s.dir.clone();
    let data: Vec<u8> = (0..200_000u32).map(|i| (i * 7 % 251) as u8).collect();
    std::fs::write(dir.join("lo.in"), &data).expect("write");
    let import = format!("\\lo_import {}", dir.join("lo.in").display());
    ok_stdout(&psql_ssl(s.pg_port, "app", "disable", &import, ""));
    let newest = "SELECT max(oid) FROM pg_largeobject_metadata";
    let oid = ok_stdout(&psql_ssl(s.pg_port, "app", "disable", newest, ""));
    let oid = oid.trim();
    assert!(oid.parse::<u32>().is_ok(), "{oid}");
    let export = format!("\\lo_export {oid} {}", dir.join("lo.out").display());
    ok_stdout(&psql_ssl(s.pg_port, "app", "disable", &export, ""));
    assert_eq!(std::fs::read(dir.join("lo.out")).expect("exported"), data);
    ok_stdout(&psql_ssl(
        s.pg_port,
        "app",
        "disable",
        &format!("\\lo_unlink {oid}"),
        "",
    ));
}

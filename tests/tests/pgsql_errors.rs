//! PostgreSQL errors from a client's point of view: an unknown database, the server connection
//! killed in the middle of a transaction, malformed and oversized messages (that session only),
//! and the extended protocol at the byte level — a Bind with one format code for all parameters
//! (ProxySQL 3.0.5's bug) — plus a user-level authentication method.

use sluice_tests::*;

/// A raw protocol client in Python (cleartext password login), shared by the byte-level tests.
const RAW: &str = r#"
import socket, struct, sys
def msg(kind, body): return kind + struct.pack("!I", len(body) + 4) + body
def read(s):
    head = b""
    while len(head) < 5:
        c = s.recv(5 - len(head))
        if not c: return None, None
        head += c
    kind, n = head[:1], struct.unpack("!I", head[1:5])[0]
    body = b""
    while len(body) < n - 4:
        c = s.recv(n - 4 - len(body))
        if not c: return None, None
        body += c
    return kind, body
def until_ready(s):
    seen = []
    while True:
        k, b = read(s)
        if k is None: return seen + [("closed", b"")]
        seen.append((k.decode(), b))
        if k == b"Z": return seen
def login(port, password="app"):
    s = socket.create_connection(("127.0.0.1", port))
    s.sendall(struct.pack("!II", 0, 196608)[4:] and (lambda p: struct.pack("!I", len(p) + 4) + p)(struct.pack("!I", 196608) + b"user\0app\0database\0app\0\0"))
    k, b = read(s)
    assert k == b"R" and struct.unpack("!I", b[:4])[0] == 3, (k, b)
    s.sendall(msg(b"p", password.encode() + b"\0"))
    until_ready(s)
    return s
def select_one(s):
    s.sendall(msg(b"Q", b"SELECT 1\0"))
    return [k for k, _ in until_ready(s)]
def field(err, code):
    for part in err.split(b"\0"):
        if part[:1] == code: return part[1:].decode()
"#;

fn cleartext_config() -> String {
    standard_config("", "").replace(
        "[[pgsql_users]]\nusername = \"app\"\npassword = \"app\"\n",
        "[[pgsql_users]]\nusername = \"app\"\npassword = \"app\"\nattributes = '{\"authentication_method\": 1}'\n",
    )
}

#[test]
fn bind_with_one_format_code_for_all_parameters() {
    if !backends_ready(Servers::Postgres) {
        return;
    }
    let s = Sluice::start(&cleartext_config());
    let script = format!(
        r#"{RAW}
s = login({port})
parse = msg(b"P", b"\0SELECT $1::int4 + $2::int4, $2::int4\0" + struct.pack("!HII", 2, 23, 23))
# One format code (1 = binary) that applies to both parameters; results in text.
bind = msg(b"B", b"\0\0" + struct.pack("!HH", 1, 1) + struct.pack("!H", 2)
           + struct.pack("!Ii", 4, 40) + struct.pack("!Ii", 4, 2) + struct.pack("!H", 0))
s.sendall(parse + bind + msg(b"E", b"\0" + struct.pack("!I", 0)) + msg(b"S", b""))
for k, b in until_ready(s):
    if k == "D":
        n = struct.unpack("!H", b[:2])[0]; pos = 2; vals = []
        for _ in range(n):
            l = struct.unpack("!i", b[pos:pos+4])[0]; vals.append(b[pos+4:pos+4+l].decode()); pos += 4 + l
        print("row", vals)
    elif k == "E":
        print("error", field(b, b"C"), field(b, b"M"))
    else:
        print(k)
"#,
        port = s.pg_port
    );
    assert_eq!(
        ok_stdout(&python(&script, &[])),
        "1\n2\nrow ['42', '2']\nC\nZ\n"
    );
}

#[test]
fn malformed_and_oversized_messages_end_only_that_session() {
    if !backends_ready(Servers::Postgres) {
        return;
    }
    let s = Sluice::start(&cleartext_config());
    let script = format!(
        r#"{RAW}
other = login({port})
for name, bad in [("short", b"Q" + struct.pack("!I", 3)), ("huge", b"Q" + struct.pack("!I", 0x7fffffff) + b"x" * 16)]:
    s = login({port})
    s.sendall(bad)
    seen = until_ready(s)
    errs = [field(b, b"C") + " " + field(b, b"M") for k, b in seen if k == "E"]
    print(name, errs, seen[-1][0])
# An unknown database: the login ends with PostgreSQL's own FATAL 3D000.
u = socket.create_connection(("127.0.0.1", {port}))
u.sendall((lambda p: struct.pack("!I", len(p) + 4) + p)(struct.pack("!I", 196608) + b"user\0app\0database\0nosuchdb\0\0"))
read(u)
u.sendall(msg(b"p", b"app\0"))
print("unknown database", [field(b, b"C") for k, b in until_ready(u) if k == "E"])
print("other session", select_one(other))
"#,
        port = s.pg_port
    );
    let out = ok_stdout(&python(&script, &[]));
    assert_eq!(
        out,
        "short ['08P01 invalid message from the client: malformed message: length below 4'] closed\n\
         huge ['08P01 invalid message from the client: message of 2147483647 bytes exceeds the limit'] closed\n\
         unknown database ['3D000']\n\
         other session ['T', 'D', 'C', 'Z']\n"
    );
    assert!(
        s.log()
            .contains("closing client session: malformed message"),
        "{}",
        s.log()
    );
}

#[test]
fn unknown_database_and_a_server_connection_killed_mid_transaction() {
    if !backends_ready(Servers::Postgres) {
        return;
    }
    let s = Sluice::start(&standard_config("", ""));
    let script = format!(
        r#"
import psycopg
dsn = "host=127.0.0.1 port={port} user=app password=app sslmode=disable"
try:
    psycopg.connect(dsn + " dbname=nosuchdb")
    print("connected")
except psycopg.Error as e:
    print("unknown database:", 'database "nosuchdb" does not exist' in str(e))
c = psycopg.connect(dsn + " dbname=app")
c.execute("BEGIN")
pid = c.execute("SELECT pg_backend_pid()").fetchone()[0]
k = psycopg.connect("host=127.0.0.1 port={primary} user=postgres password=postgres dbname=postgres sslmode=disable", autocommit=True)
k.execute("SELECT pg_terminate_backend(%s, 10000)", (pid,))
try:
    c.execute("SELECT 1")
    print("no error")
except psycopg.Error as e:
    print("killed:", e.sqlstate in ("57P01", "08006"), e.sqlstate)
try:
    c.rollback()
except psycopg.Error:
    pass
if c.closed:
    c = psycopg.connect(dsn + " dbname=app")
print("afterwards:", c.execute("SELECT 2").fetchone()[0], c.execute("SELECT pg_backend_pid()").fetchone()[0] != pid)
"#,
        port = s.pg_port,
        primary = ports::PG_PRIMARY
    );
    let out = ok_stdout(&python(&script, &[]));
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines[0], "unknown database: True", "{out}");
    assert!(lines[1].starts_with("killed: True"), "{out}");
    assert_eq!(lines[2], "afterwards: 2 True", "{out}");
}

/// A server connection terminated while it runs a statement: the client gets exactly what the
/// server itself gives (its FATAL, then the closed connection) — not a second error from Sluice
/// (psycopg refused "2 results from command BEGIN"; found by the soak), and no made-up
/// ReadyForQuery that later answers would be shifted by.
#[test]
fn a_terminated_statement_gets_what_postgresql_gives() {
    if !backends_ready(Servers::Postgres) {
        return;
    }
    let s = Sluice::start(&standard_config("", ""));
    let script = format!(
        r#"
import psycopg, time
k = psycopg.connect("host=127.0.0.1 port={primary} user=postgres password=postgres dbname=postgres sslmode=disable", autocommit=True)
def terminated_while_running(port):
    c = psycopg.connect(f"host=127.0.0.1 port={{port}} user=app password=app sslmode=disable dbname=app", autocommit=True)
    c.pgconn.send_query(b"SELECT pg_sleep(5)")
    for _ in range(100):
        n = k.execute("SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE query = 'SELECT pg_sleep(5)'").fetchone()[0]
        if n:
            break
        time.sleep(0.05)
    results = []
    while True:
        r = c.pgconn.get_result()
        if r is None:
            break
        code = r.error_field(psycopg.pq.DiagnosticField.SQLSTATE)
        results.append(code.decode() if code else None)
    return results, psycopg.pq.ConnStatus(c.pgconn.status).name
print("through sluice:", terminated_while_running({port}))
print("directly:", terminated_while_running({primary}))
"#,
        port = s.pg_port,
        primary = ports::PG_PRIMARY
    );
    let out = ok_stdout(&python(&script, &[]));
    let lines: Vec<&str> = out.lines().collect();
    let expected = "(['57P01', None], 'BAD')";
    assert_eq!(lines[0], format!("through sluice: {expected}"), "{out}");
    assert_eq!(lines[1], format!("directly: {expected}"), "{out}");
}

/// The server connection of a transaction dies while the client is idle in it (terminated,
/// crashed): the client's next command gets exactly what PostgreSQL itself gives (its FATAL, then
/// the closed connection), and no answer nobody asked for is left behind to be taken as the
/// answer to a later command (found by the 30-minute soak: psycopg saw "received 0 results from
/// command 'COMMIT'" and then acknowledged a COMMIT with another command's answer, so a commit
/// it reported was not there). A new session works.
#[test]
fn a_transaction_whose_server_connection_dies_while_idle_ends_cleanly() {
    if !backends_ready(Servers::Postgres) {
        return;
    }
    let s = Sluice::start(&standard_config("", ""));
    let script = format!(
        r#"
import psycopg, time
k = psycopg.connect("host=127.0.0.1 port={primary} user=postgres password=postgres dbname=postgres sslmode=disable", autocommit=True)
def after_termination(port):
    dsn = f"host=127.0.0.1 port={{port}} user=app password=app sslmode=disable dbname=app"
    c = psycopg.connect(dsn)
    pid = c.execute("SELECT pg_backend_pid()").fetchone()[0]  # opens a transaction
    k.execute("SELECT pg_terminate_backend(%s, 10000)", (pid,))
    time.sleep(0.5)
    c.pgconn.send_query(b"SELECT 7")
    results = []
    while True:
        r = c.pgconn.get_result()
        if r is None:
            break
        results.append(psycopg.pq.ExecStatus(r.status).name)
    return results, psycopg.pq.ConnStatus(c.pgconn.status).name
print("through sluice:", after_termination({port}))
print("directly:", after_termination({primary}))
d = psycopg.connect(f"host=127.0.0.1 port={port} user=app password=app sslmode=disable dbname=app", autocommit=True)
print("new session:", [d.execute(f"SELECT {{i}}").fetchone()[0] for i in range(3)])
"#,
        port = s.pg_port,
        primary = ports::PG_PRIMARY
    );
    let out = ok_stdout(&python(&script, &[]));
    let lines: Vec<&str> = out.lines().collect();
    // PostgreSQL's own answer: its FATAL, then libpq's "server closed the connection".
    let expected = "(['FATAL_ERROR', 'FATAL_ERROR'], 'BAD')";
    assert_eq!(lines[0], format!("through sluice: {expected}"), "{out}");
    assert_eq!(lines[1], format!("directly: {expected}"), "{out}");
    assert_eq!(lines[2], "new session: [0, 1, 2]", "{out}");
}

#[test]
fn servers_with_use_ssl_are_reached_over_tls() {
    if !backends_ready(Servers::Postgres) {
        return;
    }
    let cfg = standard_config("", "").replacen(
        &format!("port = {}\n", ports::PG_PRIMARY),
        &format!("port = {}\nuse_ssl = 1\n", ports::PG_PRIMARY),
        1,
    );
    let s = Sluice::start(&cfg);
    let check = |port: u16, hint: &str| {
        let out = std::process::Command::new("psql")
            .env("PGPASSWORD", "app")
            .env("PGSSLMODE", "disable")
            .args(["-h", "127.0.0.1", "-p", &port.to_string(), "-U", "app", "-d", "app", "-XAt", "-c"])
            .arg(format!("SELECT {hint} inet_server_port(), ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()"))
            .output()
            .expect("psql");
        ok_stdout(&out).trim().to_string()
    };
    // The client talks plaintext to Sluice; Sluice talks TLS to the use_ssl=1 server only.
    assert_eq!(check(s.pg_port, ""), format!("{}|t", ports::PG_PRIMARY));
    assert_eq!(
        check(s.pg_port, "/* hostgroup=1 */"),
        format!("{}|f", ports::PG_REPLICA)
    );
}

#[test]
fn pgsql_stats_tables_and_pgbouncer_console_show_users_errors_pool_and_free_connections() {
    if !backends_ready(Servers::Postgres) {
        return;
    }
    let s = Sluice::start(&standard_config("", ""));
    let script = format!(
        r#"
import psycopg, subprocess
dsn = "host=127.0.0.1 port={port} user=app password=app dbname=app sslmode=disable"
c = psycopg.connect(dsn, autocommit=True)
for i in range(5):
    c.execute("SELECT 1")
try:
    c.execute("SELECT 1/0")
except psycopg.Error as e:
    print("error", e.sqlstate)
def admin(sql):
    return subprocess.run(["psql", "-h", "127.0.0.1", "-p", "{admin}", "-U", "admin", "-XAt", "-F", "|", "-c", sql],
        capture_output=True, text=True, env={{"PGPASSWORD": "admin", "PATH": "/usr/bin:/bin"}}).stdout.strip()
print("users", admin("SELECT username, frontend_connections FROM stats_pgsql_users"))
print("errors", admin("SELECT hostgroup, port, username, database, sqlstate, count_star FROM stats_pgsql_errors"))
print("pool", admin("SELECT hostgroup, srv_port, ConnFree >= 1, Queries >= 6 FROM stats_pgsql_connection_pool WHERE hostgroup = 0"))
print("free", admin("SELECT hostgroup, srv_port, user, database, fd > 0 FROM stats_pgsql_free_connections"))
# PgBouncer's console on the same port: the idle server connection, the connected client.
servers = [l.split("|")[:6] for l in admin("SHOW SERVERS").splitlines()]
print("show servers", ["|".join(r) for r in servers if r[3] == "idle"])
print("show clients", [l.split("|")[1] for l in admin("SHOW CLIENTS").splitlines()])
"#,
        port = s.pg_port,
        admin = s.pg_admin_port
    );
    let out = ok_stdout(&python(&script, &[]));
    let p = ports::PG_PRIMARY;
    assert_eq!(
        out,
        format!(
            "error 22012\nusers app|1\nerrors 0|{p}|app|app|22012|1\npool 0|{p}|1|1\nfree 0|{p}|app|app|1\n\
             show servers ['S|app|hostgroup_0|idle|127.0.0.1|{p}']\nshow clients ['app']\n"
        )
    );
}

#[test]
fn a_server_that_never_answers_its_login_is_retried_on_another() {
    if !backends_ready(Servers::Postgres) {
        return;
    }
    // Fault injection: a "server" in hostgroup 0 that accepts connections and never says a
    // word, next to the real primary. A connect to it times out after
    // `connect_timeout_server`; that is worth another attempt within
    // `connect_timeout_server_max` (it used to fail the client at once, as if the login had
    // been refused).
    let silent = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let silent_port = silent.local_addr().expect("addr").port();
    std::thread::spawn(move || {
        let mut held = Vec::new();
        for c in silent.incoming().flatten() {
            held.push(c);
        }
    });
    let cfg = standard_config("", "").replacen(
        "[[pgsql_servers]]\n",
        &format!("[[pgsql_servers]]\nhostgroup_id = 0\nhostname = \"127.0.0.1\"\nport = {silent_port}\nweight = 1000\n\n[[pgsql_servers]]\n"),
        1,
    );
    let cfg = format!(
        "[pgsql_variables]\ninterfaces = \"127.0.0.1:{{pg_port}}\"\nconnect_timeout_server = 300\nconnect_timeout_server_max = 10000\n{cfg}"
    );
    let s = Sluice::start(&cfg);
    // Both servers are in hostgroup 0, the silent one weighted 1000 to the primary's 1: the
    // first login is all but certain to pick it (1000 in 1001; a pick is random by weight),
    // time out and be skipped for the primary, and across ten logins the chance that it is
    // never picked is 1 in 1001^10.
    for i in 0..10 {
        let out = psql_app(s.pg_port, &format!("SELECT {i} + 1, inet_server_port()"));
        assert_eq!(
            ok_stdout(&out).trim(),
            format!("{}|{}", i + 1, ports::PG_PRIMARY),
            "log:\n{}",
            s.log()
        );
    }
    assert!(
        s.log().contains(&format!(
            "connecting to 127.0.0.1:{silent_port} timed out after 300ms"
        )),
        "the timeout is logged with the server it concerns:\n{}",
        s.log()
    );
}

/// psycopg's pipeline mode: an error raised by a statement sent before COMMIT is the error the
/// COMMIT raises (UndefinedTable, not some other one), and after ROLLBACK the pipeline and the
/// connection go on (psycopg's `test_pipeline.py::test_errors_raised_on_commit`).
#[test]
fn a_pipeline_error_surfaces_at_commit_as_the_statement_s_own() {
    if !backends_ready(Servers::Postgres) {
        return;
    }
    let s = Sluice::start(&standard_config("", ""));
    let script = r#"
import sys, psycopg
conn = psycopg.connect(host="127.0.0.1", port=sys.argv[1], user="app", password="app",
                       dbname="app", sslmode="disable")
with conn.pipeline():
    conn.execute("select 1 from nosuchtable")
    try:
        conn.commit()
        raise AssertionError("COMMIT succeeded after a failed statement")
    except psycopg.errors.UndefinedTable:
        pass
    conn.rollback()
    cur1 = conn.execute("select 1")
cur2 = conn.execute("select 2")
assert (cur1.fetchone(), cur2.fetchone()) == ((1,), (2,))
print("ok")
"#;
    assert_eq!(python_pg_pair(script, s.pg_port), "ok", "{}", s.log());
}

#[test]
fn clients_that_stall_before_completing_their_login_are_disconnected() {
    if !backends_ready(Servers::Postgres) {
        return;
    }
    let config = format!(
        "[pgsql_variables]\ninterfaces = \"127.0.0.1:{{pg_port}}\"\nconnect_timeout_client = 1000\n{}",
        cleartext_config()
    );
    let s = Sluice::start(&config);
    // Three clients stall at three points of the login: before any byte, after the TLS
    // handshake (before the StartupMessage), and when asked for their password. A fourth logs
    // in meanwhile and is served before and after they are gone.
    let script = format!(
        r#"{RAW}
import ssl
def stalled(kind):
    s = socket.create_connection(("127.0.0.1", {port}))
    if kind == "after TLS":
        s.sendall(struct.pack("!II", 8, 80877103))
        assert s.recv(1) == b"S"
        ctx = ssl.create_default_context()
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
        s = ctx.wrap_socket(s)
    elif kind == "at the password":
        s.sendall((lambda p: struct.pack("!I", len(p) + 4) + p)(struct.pack("!I", 196608) + b"user\0app\0database\0app\0\0"))
        k, b = read(s)
        assert k == b"R", k
    return s
stalls = [(kind, stalled(kind)) for kind in ("silent", "after TLS", "at the password")]
other = login({port})
print("other session", select_one(other))
for kind, c in stalls:
    c.settimeout(30)
    try:
        got = "closed" if c.recv(1) == b"" else "data"
    except socket.timeout:
        got = "still open after 30 s"
    except (ConnectionResetError, ssl.SSLError):
        got = "closed"
    print(kind, got)
print("other session", select_one(other))
"#,
        port = s.pg_port
    );
    let out = ok_stdout(&python(&script, &[]));
    assert_eq!(
        out,
        "other session ['T', 'D', 'C', 'Z']\n\
         silent closed\n\
         after TLS closed\n\
         at the password closed\n\
         other session ['T', 'D', 'C', 'Z']\n"
    );
    let log = s.log();
    let warned = log
        .matches("did not complete its login within pgsql-connect_timeout_client (1000ms)")
        .count();
    assert_eq!(warned, 3, "{log}");
    let aborted = s.admin_ok(
        "SELECT Variable_Value FROM stats_pgsql_global WHERE Variable_Name = 'Client_Connections_aborted'",
    );
    assert_eq!(aborted.trim(), "3");
}

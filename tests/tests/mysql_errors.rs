//! The errors a user can act on, seen from the client: 1045, 1040, 9001 (no reachable backend),
//! a backend connection dying mid-query, malformed and oversized packets, bad config files.

use mysql_async::prelude::*;
use sluice_tests::*;
use std::time::{Duration, Instant};

fn stderr(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[test]
fn access_denied_inactive_and_tls_required() {
    if !backends_ready(Servers::MariaDb) {
        return;
    }
    let tables = r#"
[[mysql_users]]
username = "sleepy"
password = "pw"
active = 0

[[mysql_users]]
username = "secure"
password = "pw"
use_ssl = 1
"#;
    let s = Sluice::start(&standard_config("", tables));
    let wrong = mariadb(s.port, "app", "nope", &["--skip-ssl"], "SELECT 1;");
    assert!(
        stderr(&wrong).contains(
            "ERROR 1045 (28000): Access denied for user 'app'@'127.0.0.1' (using password: YES)"
        ),
        "{}",
        stderr(&wrong)
    );
    let unknown = mariadb(s.port, "ghost", "x", &["--skip-ssl"], "SELECT 1;");
    assert!(
        stderr(&unknown).contains("ERROR 1045"),
        "{}",
        stderr(&unknown)
    );
    let inactive = mariadb(s.port, "sleepy", "pw", &["--skip-ssl"], "SELECT 1;");
    assert!(
        stderr(&inactive).contains("ERROR 1045"),
        "{}",
        stderr(&inactive)
    );
    let plain = mariadb(s.port, "secure", "pw", &["--skip-ssl"], "SELECT 1;");
    assert!(
        stderr(&plain).contains("ERROR 1045") && stderr(&plain).contains("SSL is required"),
        "{}",
        stderr(&plain)
    );
    // Over TLS the same user gets in (authentication passes; it has no backend grant of its own,
    // so the query is refused by MariaDB itself, which proves the login succeeded at Sluice).
    let tls = mariadb(
        s.port,
        "secure",
        "pw",
        &["--ssl", "--ssl-verify-server-cert=0"],
        "SELECT 1;",
    );
    assert!(
        !stderr(&tls).contains("SSL is required"),
        "{}",
        stderr(&tls)
    );
    let log = s.log();
    assert!(
        log.contains("client login failed: Access denied for user 'ghost'"),
        "{log}"
    );
}

#[tokio::test]
async fn too_many_connections_per_user_and_global() {
    if !backends_ready(Servers::MariaDb) {
        return;
    }
    let cfg = standard_config("max_connections = 3", "").replace(
        "default_hostgroup = 0\n",
        "default_hostgroup = 0\nmax_connections = 2\n",
    );
    let s = Sluice::start(&cfg);
    let a = mysql_async::Conn::from_url(s.url("app", "app", "app"))
        .await
        .expect("first");
    let b = mysql_async::Conn::from_url(s.url("app", "app", "app"))
        .await
        .expect("second");
    match mysql_async::Conn::from_url(s.url("app", "app", "app")).await {
        Err(mysql_async::Error::Server(e)) => {
            assert_eq!((e.code, e.message.as_str()), (1040, "Too many connections"))
        }
        other => panic!("expected 1040 for the user's third connection, got {other:?}"),
    }
    // The global cap (3): a third client of another kind (failing login still counts while it
    // runs, so fill the last place with a connection that never logs in).
    let connected = || {
        s.admin_ok(
            "SELECT Variable_Value FROM stats_mysql_global WHERE Variable_Name = 'Client_Connections_connected'",
        )
        .trim()
        .to_string()
    };
    // The refused third session leaves the count when its task ends, moments after the client
    // got its error: only then is there exactly one place left.
    wait_for("the refused session to leave", || connected() == "2");
    let idle = std::net::TcpStream::connect(("127.0.0.1", s.port)).expect("raw connect");
    wait_for("the raw connection to be counted", || connected() == "3");
    let out = mariadb(s.port, "app", "app", &["--skip-ssl"], "SELECT 1;");
    assert!(stderr(&out).contains("ERROR 1040"), "{}", stderr(&out));
    drop(idle);
    drop((a, b));
}

#[test]
fn no_reachable_backend_names_the_hostgroup() {
    if !backends_ready(Servers::MariaDb) {
        return;
    }
    let dead_port = free_port();
    let cfg = format!(
        "[mysql_variables]\ninterfaces = \"127.0.0.1:{{port}}\"\nconnect_timeout_server = 200\nconnect_timeout_server_max = 1500\n\
         [[mysql_servers]]\nhostgroup_id = 5\nhostname = \"127.0.0.1\"\nport = {dead_port}\n\
         [[mysql_users]]\nusername = \"app\"\npassword = \"app\"\ndefault_hostgroup = 5\n"
    );
    let s = Sluice::start(&cfg);
    let start = Instant::now();
    let out = mariadb(s.port, "app", "app", &["--skip-ssl"], "SELECT 1;");
    let took = start.elapsed();
    let err = stderr(&out);
    assert!(
        err.contains("ERROR 9001 (HY000)")
            && err.contains("Max connect timeout reached while reaching hostgroup 5 after"),
        "{err}"
    );
    assert!(
        took >= Duration::from_millis(1400),
        "gave up after {took:?}, before the 1500 ms budget"
    );
    let log = s.log();
    assert!(
        log.contains("error connecting to backend")
            && log.contains(&format!("127.0.0.1:{dead_port}")),
        "{log}"
    );
    assert!(
        log.contains("max connect timeout reached while reaching hostgroup"),
        "{log}"
    );
}

#[tokio::test]
async fn backend_killed_mid_query_then_session_continues() {
    if !backends_ready(Servers::MariaDb) {
        return;
    }
    let s = Sluice::start(&standard_config("", ""));
    let mut conn = mysql_async::Conn::from_url(s.url("app", "app", "app"))
        .await
        .expect("connect");
    let backend_id: u64 = conn
        .query_first(BACKEND_THREAD_ID)
        .await
        .expect("id")
        .expect("row");
    let killer = tokio::spawn(async move {
        tokio::task::spawn_blocking(|| wait_mysql_running(ports::MY_PRIMARY, "SELECT SLEEP(20)"))
            .await
            .expect("poll");
        primary_root(&format!("KILL CONNECTION {backend_id};"));
    });
    let r: Result<Option<i32>, _> = conn.query_first("SELECT SLEEP(20)").await;
    killer.await.expect("killer");
    match r {
        Err(mysql_async::Error::Server(e)) => assert_eq!(e.code, 1927, "error {e:?}"),
        other => panic!("the killed query must fail, got {other:?}"),
    }
    // The same client session goes on, on a new backend connection.
    let again: u64 = conn
        .query_first(BACKEND_THREAD_ID)
        .await
        .expect("next query")
        .expect("row");
    assert_ne!(again, backend_id);
    conn.disconnect().await.expect("disconnect");
}

#[test]
fn malformed_and_oversized_packets_close_only_that_session() {
    if !backends_ready(Servers::MariaDb) {
        return;
    }
    let s = Sluice::start(&standard_config("max_allowed_packet = 16384", ""));
    let script = r#"
import sys, pymysql
port = int(sys.argv[1])
def conn():
    return pymysql.connect(host='127.0.0.1', port=port, user='app', password='app', database='app', ssl_disabled=True)
bystander = conn()
# 1. An empty command packet: the session is closed.
bad = conn()
bad._sock.sendall(b'\x00\x00\x00\x00')
try:
    bad.cursor().execute("SELECT 1"); print("empty: still open")
except Exception as e:
    print("empty: closed")
# 2. A query larger than mysql-max_allowed_packet: error 1153, then closed.
big = conn()
try:
    big.cursor().execute("SELECT '" + "x" * 40000 + "'"); print("big: accepted")
except pymysql.err.OperationalError as e:
    print("big:", e.args[0])
# 3. Garbage instead of a handshake response.
import socket
raw = socket.create_connection(('127.0.0.1', port))
raw.recv(1024)
raw.sendall(b'\x05\x00\x00\x01hello')
raw.settimeout(5)
try:
    print("garbage: reply", len(raw.recv(1024)) >= 0)
except Exception as e:
    print("garbage: reset")
# The bystander is unaffected.
cur = bystander.cursor(); cur.execute("SELECT @@port"); print("bystander:", cur.fetchone()[0])
"#;
    let out = ok_stdout(&python(script, &[&s.port.to_string()]));
    assert!(out.contains("empty: closed"), "{out}");
    assert!(out.contains("big: 1153"), "{out}");
    assert!(out.contains("bystander: 13306"), "{out}");
    let log = s.log();
    assert!(
        log.contains("closing client session: empty command packet"),
        "{log}"
    );
    assert!(
        log.contains("exceeds the limit of 16384 bytes (mysql-max_allowed_packet)"),
        "{log}"
    );
    assert!(log.contains("malformed handshake response packet"), "{log}");
    // Sluice is still serving.
    let fresh = ok_stdout(&mariadb(s.port, "app", "app", &["--skip-ssl"], "SELECT 7;"));
    assert_eq!(fresh.trim(), "7");
}

#[test]
fn bad_config_is_a_startup_error_naming_key_and_line() {
    let dir = scratch_dir("badcfg");
    let cases = [
        (
            "[mysql_variables]\ninterfaces = \"127.0.0.1:1\"\n\n[[mysql_servers]]\nhostname = \"h\"\nwieght = 3\n",
            "wieght",
            "line 6",
        ),
        (
            "[[mysql_servers]]\nhostname = \"h\"\nport = 99999\n",
            "port",
            "line 3",
        ),
        (
            "[mysql_variables]\nconnect_timeout_server_max = \"soon\"\n",
            "connect_timeout_server_max",
            "line 2",
        ),
        (
            "[[mysql_users]]\nusername = \"u\"\nactive = 7\n",
            "active",
            "line 3",
        ),
    ];
    for (i, (text, key, line)) in cases.iter().enumerate() {
        let cfg = write_file(&dir, &format!("bad{i}.toml"), text);
        let out = std::process::Command::new(sluice_bin())
            .arg("--config")
            .arg(&cfg)
            .output()
            .expect("run sluice");
        assert_eq!(out.status.code(), Some(64), "exit code for case {i}");
        let err = stderr(&out);
        assert!(err.contains(key) && err.contains(line), "case {i}: {err}");
    }
}

#[test]
fn health_check_connects_are_counted_but_not_warned_about() {
    if !backends_ready(Servers::MariaDb) {
        return;
    }
    let s = Sluice::start(&standard_config("", ""));
    let aborted = || -> u64 {
        s.admin_ok(
            "SELECT Variable_Value FROM stats_mysql_global WHERE Variable_Name = 'Client_Connections_aborted';",
        )
        .trim()
        .parse()
        .unwrap_or(0)
    };
    let before = aborted();
    // What load balancers do: connect and close (FIN), or connect and reset (RST).
    let script = r#"
import socket, struct, sys, time
port = int(sys.argv[1])
a = socket.create_connection(("127.0.0.1", port)); a.recv(1); a.close()
b = socket.create_connection(("127.0.0.1", port)); b.recv(1)
b.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0)); b.close()
print("done")
"#;
    assert_eq!(
        ok_stdout(&python(script, &[&s.port.to_string()])).trim(),
        "done"
    );
    // (At least: the harness's own start-up probes may still be counted meanwhile.)
    wait_for("both probes counted as aborted", || aborted() >= before + 2);
    let log = s.log();
    assert!(!log.contains("client login failed"), "{log}");
    assert!(!log.contains("WARN"), "{log}");
}

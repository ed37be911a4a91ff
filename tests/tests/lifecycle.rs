//! Process lifecycle: graceful stop on SIGTERM, and a backend server that goes away and returns.

use mysql_async::prelude::*;
use sluice_tests::*;
use std::time::Duration;
use xtask::mariadb::MariaDb;

#[tokio::test]
async fn sigterm_lets_the_running_statement_finish_then_exits_0() {
    if !backends_ready(Servers::MariaDb) {
        return;
    }
    let mut s = Sluice::start(&standard_config("", ""));
    let mut conn = mysql_async::Conn::from_url(s.url("app", "app", "app"))
        .await
        .expect("connect");
    let running = tokio::spawn(async move {
        let v: Option<i64> = conn
            .query_first("SELECT SLEEP(2)")
            .await
            .expect("statement finishes");
        v
    });
    tokio::task::spawn_blocking(|| wait_mysql_running(ports::MY_PRIMARY, "SELECT SLEEP(2)"))
        .await
        .expect("poll");
    s.terminate();
    let port = s.port;
    let refused = tokio::task::spawn_blocking(move || {
        xtask::proc::wait_until(Duration::from_secs(5), || {
            std::net::TcpStream::connect(("127.0.0.1", port)).is_err()
        })
    });
    assert!(
        refused.await.expect("poll"),
        "no new connections are accepted while stopping"
    );
    assert_eq!(
        running.await.expect("task"),
        Some(0),
        "SLEEP(2) completed normally"
    );
    let status = s.wait_exit(Duration::from_secs(20)).expect("sluice exits");
    assert_eq!(status.code(), Some(0));
    let log = s.log();
    assert!(
        log.contains("received SIGTERM") && log.contains("sluice stopped"),
        "{log}"
    );
}

/// Idle sessions of both protocols are told of the shutdown (each session's signal, raised by
/// its frontend's registry) and close at once: the process exits well before the 30 s it would
/// give busy sessions.
#[tokio::test]
async fn sigterm_closes_idle_sessions_of_both_protocols_at_once() {
    if !backends_ready(Servers::Both) {
        return;
    }
    let mut s = Sluice::start(&standard_config("", ""));
    let mut my = mysql_async::Conn::from_url(s.url("app", "app", "app"))
        .await
        .expect("connect");
    let one: Option<i64> = my.query_first("SELECT 1").await.expect("mysql select");
    assert_eq!(one, Some(1));
    let (pg, pg_conn) = tokio_postgres::connect(
        &format!(
            "host=127.0.0.1 port={} user=app password=app dbname=app",
            s.pg_port
        ),
        tokio_postgres::NoTls,
    )
    .await
    .expect("pgsql connect");
    let pg_closed = tokio::spawn(pg_conn);
    let row = pg.query_one("SELECT 1", &[]).await.expect("pgsql select");
    assert_eq!(row.get::<_, i32>(0), 1);
    // Both sessions idle, holding nothing.
    s.terminate();
    let status = s.wait_exit(Duration::from_secs(10)).expect("sluice exits");
    assert_eq!(status.code(), Some(0));
    // Told why, as PostgreSQL tells its clients at its own shutdown.
    let ended = pg_closed.await.expect("connection task");
    let err = ended.expect_err("the PostgreSQL session ends with an error");
    assert_eq!(
        err.code(),
        Some(&tokio_postgres::error::SqlState::ADMIN_SHUTDOWN),
        "{err}"
    );
    assert!(pg.is_closed(), "the PostgreSQL session is closed");
    assert!(
        my.query_drop("SELECT 1").await.is_err(),
        "the MySQL session is closed"
    );
    let log = s.log();
    assert!(!log.contains("still busy"), "{log}");
}

#[tokio::test]
async fn backend_stopped_and_restarted() {
    if !backends_ready(Servers::MariaDb) {
        return;
    }
    // A MariaDB of its own, so stopping it disturbs no other test.
    let db = MariaDb::new(xtask::state_dir().join("my-restart"), 13310, 10, &[]);
    if db.start().expect("start dedicated MariaDB") {
        db.create_users().expect("users");
    }
    let cfg = "[mysql_variables]\ninterfaces = \"127.0.0.1:{port}\"\nconnect_timeout_server_max = 2000\n\
         [[mysql_servers]]\nhostname = \"127.0.0.1\"\nport = 13310\n\
         [[mysql_users]]\nusername = \"app\"\npassword = \"app\"\n";
    let mut s = Sluice::start(cfg);
    let mut conn = mysql_async::Conn::from_url(s.url("app", "app", "app"))
        .await
        .expect("connect");
    let port: u16 = conn
        .query_first("SELECT @@port")
        .await
        .expect("q")
        .expect("row");
    assert_eq!(port, 13310);

    db.stop();
    let err = conn
        .query_drop("SELECT 1")
        .await
        .expect_err("backend is down");
    eprintln!("while down: {err}");
    assert!(s.exited().is_none(), "sluice keeps running");
    // A new client still logs in (Sluice answers the handshake) and gets an actionable error.
    let out = mariadb(s.port, "app", "app", &["--skip-ssl"], "SELECT 1;");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("ERROR 9001") && err.contains("hostgroup 0"),
        "{err}"
    );

    db.start().expect("restart MariaDB");
    let port: u16 = conn
        .query_first("SELECT @@port")
        .await
        .expect("old session works again")
        .expect("row");
    assert_eq!(port, 13310);

    // The server process dies mid-query (no error packet): the client gets 1927, Sluice logs
    // what happened, and the session continues once the server is back.
    let pid = db.pid().expect("mariadbd pid");
    let socket_db = MariaDb::new(xtask::state_dir().join("my-restart"), 13310, 10, &[]);
    let killer = tokio::task::spawn_blocking(move || {
        wait_for("SELECT SLEEP(20) to run on :13310", || {
            socket_db
                .sql("SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE INFO LIKE 'SELECT SLEEP(20)%'")
                .is_ok_and(|n| n.trim() != "0")
        });
        xtask::proc::signal(pid, "KILL");
    });
    match conn.query_drop("SELECT SLEEP(20)").await {
        Err(mysql_async::Error::Server(e)) => {
            assert_eq!(e.code, 1927, "{e:?}");
            assert!(
                e.message
                    .contains("Lost connection to backend server 127.0.0.1:13310"),
                "{e:?}"
            );
        }
        r => panic!("expected 1927, got {r:?}"),
    }
    killer.await.expect("killer");
    assert!(
        xtask::proc::wait_until(Duration::from_secs(10), || !xtask::proc::alive(pid)),
        "mariadbd gone"
    );
    db.start().expect("restart MariaDB after SIGKILL");
    let v: i32 = conn
        .query_first("SELECT 40 + 2")
        .await
        .expect("session continues")
        .expect("row");
    assert_eq!(v, 42);
    assert!(
        s.log().contains("backend connection lost during a command"),
        "{}",
        s.log()
    );

    let mut fresh = mysql_async::Conn::from_url(s.url("app", "app", "app"))
        .await
        .expect("new session");
    fresh
        .query_drop("SELECT 1")
        .await
        .expect("new session query");
    for c in [conn, fresh] {
        let _ = c.disconnect().await;
    }
    assert!(s.exited().is_none());
    db.stop();
}

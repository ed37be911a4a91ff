//! Sessions while the admin works: the processlist and KILL, reloads under sysbench, live stats and
//! OFFLINE_HARD, PAUSE/RESUME/SHUTDOWN and LOAD FROM CONFIG.

use super::*;

#[tokio::test]
async fn processlist_shows_pins_and_kill_ends_a_session() {
    if !backends_ready(Servers::Both) {
        return;
    }
    let s = Sluice::start(&standard_config("", ""));
    let mut a = mysql_async::Conn::from_url(s.url("app", "app", "app"))
        .await
        .expect("a");
    a.query_drop("BEGIN").await.expect("begin");
    let rows = s.admin_ok("SELECT SessionID, user, pin_reason FROM stats_mysql_processlist;");
    let line = rows
        .lines()
        .find(|l| l.contains("\tapp\t"))
        .unwrap_or_else(|| panic!("{rows}"));
    assert!(line.ends_with("\ttransaction"), "{rows}");
    let id = line.split('\t').next().unwrap_or_default();
    a.query_drop("COMMIT").await.expect("commit");
    let rows = s.admin_ok("SHOW PROCESSLIST;");
    assert!(rows.contains("\tapp\t"), "{rows}");
    s.admin_ok(&format!("KILL CONNECTION {id};"));
    let admin_port = s.admin_port;
    let gone = tokio::task::spawn_blocking(move || {
        xtask::proc::wait_until(Duration::from_secs(10), || {
            let rows = mariadb(
                admin_port,
                "admin",
                "admin",
                &["--skip-ssl"],
                "SHOW PROCESSLIST;",
            );
            !ok_stdout(&rows).contains("\tapp\t")
        })
    });
    assert!(
        gone.await.expect("poll"),
        "the killed session leaves the processlist"
    );
    assert!(
        a.query_drop("SELECT 1").await.is_err(),
        "the killed session is closed"
    );
    let unknown = s.admin("KILL CONNECTION 999999;");
    assert!(
        stderr(&unknown).contains("Unknown thread id"),
        "{}",
        stderr(&unknown)
    );
}

#[test]
fn reload_loop_under_sysbench_costs_no_client_errors() {
    if !backends_ready(Servers::Both) {
        return;
    }
    // Its own tables, prepared directly on the primary: this test must not depend on others.
    ok_stdout(&mariadb(
        ports::MY_PRIMARY,
        "app",
        "app",
        &["--skip-ssl"],
        "CREATE DATABASE IF NOT EXISTS sbreload;",
    ));
    let sysbench = |port: u16, action: &str| {
        sluice_tests::sysbench(
            port,
            ("sbreload", 2, 2000),
            "oltp_read_only",
            &["--threads=8", "--time=12"],
            action,
        )
    };
    let _ = sysbench(ports::MY_PRIMARY, "cleanup");
    ok_stdout(&sysbench(ports::MY_PRIMARY, "prepare"));
    let s = Sluice::start(&standard_config("", ""));
    let port = s.port;
    let bench = std::thread::spawn(move || sysbench(port, "run"));
    std::thread::sleep(Duration::from_secs(1));
    for i in 0..50 {
        s.admin_ok(&format!(
            "UPDATE mysql_servers SET comment = 'reload {i}'; LOAD MYSQL SERVERS TO RUNTIME; LOAD MYSQL USERS TO RUNTIME; LOAD MYSQL VARIABLES TO RUNTIME;"
        ));
        std::thread::sleep(Duration::from_millis(100));
    }
    let out = bench.join().expect("sysbench thread");
    let text = ok_stdout(&out);
    assert!(!text.contains("FATAL"), "{text}");
    assert_eq!(
        s.admin_ok("SELECT DISTINCT comment FROM runtime_mysql_servers;")
            .trim(),
        "reload 49"
    );
}

#[tokio::test]
async fn stats_tables_show_live_counters_and_offline_hard_drops_connections() {
    if !backends_ready(Servers::Both) {
        return;
    }
    let s = Sluice::start(&standard_config("", ""));
    let mut a = mysql_async::Conn::from_url(s.url("app", "app", "app"))
        .await
        .expect("a");
    for _ in 0..3 {
        a.query_drop("SELECT 1").await.expect("select");
    }
    assert!(
        a.query_drop("SELECT * FROM no_such_table_here")
            .await
            .is_err()
    );
    let counters =
        s.admin_ok("SELECT Total_cnt FROM stats_mysql_commands_counters WHERE Command = 'SELECT';");
    assert!(
        counters.trim().parse::<u64>().unwrap_or(0) >= 4,
        "{counters}"
    );
    let errors = s.admin_ok("SELECT hostgroup, srv, errno, count_star FROM (SELECT hostgroup, port AS srv, errno, count_star FROM stats_mysql_errors);");
    assert_eq!(errors.trim(), "0\t13306\t1146\t1", "{errors}");
    let free =
        s.admin_ok("SELECT hostgroup, srv_port, user, schema FROM stats_mysql_free_connections;");
    assert_eq!(free.trim(), "0\t13306\tapp\tapp", "{free}");
    // A session in a transaction on the primary when it goes OFFLINE_HARD loses that connection
    // and is told so; idle connections to it are closed; the next statement works elsewhere.
    a.query_drop("BEGIN").await.expect("begin");
    a.query_drop("SELECT 1").await.expect("in txn");
    s.admin_ok(
        "INSERT INTO mysql_servers (hostgroup_id, hostname, port) VALUES (0, '127.0.0.1', 13307); \
         UPDATE mysql_servers SET status = 'OFFLINE_HARD' WHERE hostgroup_id = 0 AND port = 13306; LOAD MYSQL SERVERS TO RUNTIME;",
    );
    match a.query_drop("SELECT 2").await {
        Err(mysql_async::Error::Server(e)) => {
            assert_eq!(e.code, 1927);
            assert!(e.message.contains("OFFLINE_HARD"), "{e:?}");
        }
        other => panic!("expected the transaction to be lost, got {other:?}"),
    }
    let port: u16 = a
        .query_first("SELECT @@port")
        .await
        .expect("next statement")
        .expect("row");
    assert_eq!(port, 13307);
    let free =
        s.admin_ok("SELECT srv_port FROM stats_mysql_free_connections WHERE srv_port = 13306;");
    assert!(
        free.trim().is_empty(),
        "idle connections to the OFFLINE_HARD server are closed: {free}"
    );
}

#[test]
fn pause_resume_shutdown_and_load_from_config() {
    if !backends_ready(Servers::Both) {
        return;
    }
    let mut s = Sluice::start(&standard_config("", ""));
    // LOAD ... FROM CONFIG brings the file's rows back into memory.
    s.admin_ok("DELETE FROM mysql_users;");
    assert_eq!(s.admin_ok("SELECT COUNT(*) FROM mysql_users;").trim(), "0");
    s.admin_ok("LOAD MYSQL USERS FROM CONFIG;");
    assert_eq!(
        s.admin_ok("SELECT username FROM mysql_users;").trim(),
        "app"
    );
    // PAUSE: new client connections wait on both data ports; RESUME lets them in.
    s.admin_ok("PROXYSQL PAUSE;");
    let (port, pg_port) = (s.port, s.pg_port);
    let waiting =
        std::thread::spawn(move || mariadb(port, "app", "app", &["--skip-ssl"], "SELECT 42;"));
    let pg_waiting = std::thread::spawn(move || psql_app(pg_port, "SELECT 43"));
    std::thread::sleep(Duration::from_millis(800));
    assert!(
        !waiting.is_finished(),
        "a new MySQL client waits while paused"
    );
    assert!(
        !pg_waiting.is_finished(),
        "a new PostgreSQL client waits while paused"
    );
    s.admin_ok("PROXYSQL RESUME;");
    let out = waiting.join().expect("client thread");
    assert_eq!(ok_stdout(&out).trim(), "42");
    let out = pg_waiting.join().expect("client thread");
    assert_eq!(ok_stdout(&out).trim(), "43");
    // SHUTDOWN stops the process cleanly.
    let _ = s.admin("PROXYSQL SHUTDOWN;");
    let status = s.wait_exit(Duration::from_secs(20)).expect("sluice exits");
    assert_eq!(status.code(), Some(0));
    assert!(
        s.log().contains("received PROXYSQL SHUTDOWN"),
        "{}",
        s.log()
    );
}

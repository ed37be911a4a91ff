//! The MySQL-protocol admin interface (6032): ProxySQL's statements verbatim, the config layers,
//! runtime swaps without disconnecting clients, persistence across restarts, validation.

use mysql_async::prelude::*;
use sluice_tests::*;
use std::time::Duration;

fn stderr(o: &std::process::Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

#[test]
fn seed_statements_run_verbatim_with_their_effect() {
    if !backends_ready(Servers::Both) {
        return;
    }
    let s = Sluice::start(&standard_config("", ""));
    // A client query so the connection pool has something to show.
    ok_stdout(&mariadb(s.port, "app", "app", &["--skip-ssl"], "SELECT 1;"));
    // The throttling script of seed 002, exactly as it calls the admin.
    let throttle = std::process::Command::new("mysql")
        .args([
            "-uadmin",
            "-padmin",
            "-h127.0.0.1",
            &format!("-P{}", s.admin_port),
            "--skip-ssl",
        ])
        .args([
            "-e",
            "set mysql-default_query_delay = 1 ; LOAD MYSQL VARIABLES TO RUNTIME;",
        ])
        .output()
        .expect("mysql client");
    ok_stdout(&throttle);
    let v = s.admin_ok("SELECT variable_value FROM runtime_global_variables WHERE variable_name = 'mysql-default_query_delay';");
    assert_eq!(v.trim(), "1");
    // The throttle's effect, seen by a client: 20 statements each wait the delay.
    let timed = |ms: u32| {
        s.admin_ok(&format!(
            "set mysql-default_query_delay = {ms} ; LOAD MYSQL VARIABLES TO RUNTIME;"
        ));
        let t = std::time::Instant::now();
        let sql = "SELECT 1;".repeat(20);
        ok_stdout(&mariadb(s.port, "app", "app", &["--skip-ssl"], &sql));
        t.elapsed()
    };
    let throttled = timed(50);
    assert!(
        throttled >= std::time::Duration::from_millis(1000),
        "20 queries x 50 ms took {throttled:?}"
    );
    let free = timed(0);
    assert!(free < throttled, "{free:?} vs {throttled:?}");
    s.admin_ok(
        "INSERT INTO mysql_query_rules (rule_id, active, match_digest, destination_hostgroup, apply) VALUES (3, 1, '^UPDATE .*', 0, 0);",
    );
    s.admin_ok("update mysql_query_rules set delay = 25 where rule_id = 3 ; LOAD MYSQL QUERY RULES TO RUNTIME;");
    assert_eq!(
        s.admin_ok("SELECT delay FROM runtime_mysql_query_rules WHERE rule_id = 3;")
            .trim(),
        "25"
    );
    for q in [
        "SELECT hits, mysql_query_rules.rule_id, match_digest, match_pattern, replace_pattern, cache_ttl, apply, delay FROM mysql_query_rules NATURAL JOIN stats.stats_mysql_query_rules ORDER BY mysql_query_rules.rule_id;",
        "SELECT hostgroup_id, hostname, port, max_replication_lag\n  FROM runtime_mysql_servers\n  WHERE max_replication_lag > 0;",
        "SELECT hostname, port, time_start_us, success_time_us, repl_lag, error\n  FROM monitor.mysql_server_replication_lag_log\n  ORDER BY time_start_us DESC LIMIT 20;",
        "SELECT Variable_Name, Variable_Value\n  FROM stats_mysql_global\n  WHERE Variable_Name IN ('MySQL_Monitor_replication_lag_check_OK',\n                          'MySQL_Monitor_replication_lag_check_ERR');",
    ] {
        s.admin_ok(q);
    }
    let pool = s.admin_ok(
        "SELECT hostgroup, srv_host, srv_port, status, ConnUsed, ConnFree, Latency_us\n  FROM stats_mysql_connection_pool\n  ORDER BY hostgroup, srv_host;",
    );
    assert!(
        pool.starts_with("0\t127.0.0.1\t13306\tONLINE\t0\t1"),
        "{pool}"
    );
    // Seed 003: forward version queries to the backend.
    s.admin_ok("SET mysql-select_version_forwarding = 1;\nLOAD MYSQL VARIABLES TO RUNTIME;\nSAVE MYSQL VARIABLES TO DISK;");
    let v = ok_stdout(&mariadb(
        s.port,
        "app",
        "app",
        &["--skip-ssl"],
        "SELECT @@version;",
    ));
    assert!(v.starts_with("10.11"), "{v}");
}

#[test]
fn column_names_and_canned_connector_answers() {
    if !backends_ready(Servers::Both) {
        return;
    }
    let s = Sluice::start(&standard_config("", ""));
    let out = ok_stdout(&mariadb(
        s.admin_port,
        "admin",
        "admin",
        &["--skip-ssl", "--column-names"],
        "SELECT hostgroup_id, hostname, port FROM mysql_servers ORDER BY hostgroup_id;",
    ));
    assert_eq!(
        out,
        "hostgroup_id\thostname\tport\n0\t127.0.0.1\t13306\n1\t127.0.0.1\t13307\n"
    );
    let script = r#"
import sys, pymysql
c = pymysql.connect(host='127.0.0.1', port=int(sys.argv[1]), user='admin', password='admin', ssl_disabled=True)
cur = c.cursor()
cur.execute("SHOW MYSQL VARIABLES")
print([d[0] for d in cur.description], len(cur.fetchall()) > 20)
cur.execute("SELECT * FROM stats_mysql_users")
print([d[0] for d in cur.description])
"#;
    let out = ok_stdout(&python(script, &[&s.admin_port.to_string()]));
    assert_eq!(
        out,
        "['Variable_name', 'Value'] True\n['username', 'frontend_connections', 'frontend_max_connections']\n"
    );
    // The stats user reads stats, nothing else.
    let r = mariadb(
        s.admin_port,
        "stats",
        "stats",
        &["--skip-ssl"],
        "SELECT COUNT(*) FROM stats_mysql_global;",
    );
    assert!(r.status.success(), "{}", stderr(&r));
    let w = mariadb(
        s.admin_port,
        "stats",
        "stats",
        &["--skip-ssl"],
        "UPDATE mysql_servers SET weight = 2;",
    );
    assert!(stderr(&w).contains("ERROR 1045"), "{}", stderr(&w));
    let bad = mariadb(s.admin_port, "admin", "nope", &["--skip-ssl"], "SELECT 1;");
    assert!(stderr(&bad).contains("ERROR 1045"));
    let unknown = s.admin("SELEC broken;");
    assert!(
        !unknown.status.success()
            && stderr(&unknown).contains("ERROR 1064 (42000)")
            && stderr(&unknown).contains("syntax error"),
        "{}",
        stderr(&unknown)
    );
}

#[tokio::test]
async fn servers_users_and_offline_soft_change_at_runtime_without_disconnects() {
    if !backends_ready(Servers::Both) {
        return;
    }
    primary_root(
        "CREATE USER IF NOT EXISTS 'rot'@'%' IDENTIFIED BY 'one'; ALTER USER 'rot'@'%' IDENTIFIED BY 'one'; GRANT ALL ON app.* TO 'rot'@'%';",
    );
    let cfg = "[mysql_variables]\ninterfaces = \"127.0.0.1:{port}\"\n\
               [[mysql_servers]]\nhostname = \"127.0.0.1\"\nport = 13306\n\
               [[mysql_users]]\nusername = \"app\"\npassword = \"app\"\n\
               [[mysql_users]]\nusername = \"rot\"\npassword = \"one\"\n";
    let s = Sluice::start(cfg);
    let mut a = mysql_async::Conn::from_url(s.url("app", "app", "app"))
        .await
        .expect("a");
    let mut b = mysql_async::Conn::from_url(s.url("app", "app", "app"))
        .await
        .expect("b");
    let port: u16 = a
        .query_first("SELECT @@port")
        .await
        .expect("q")
        .expect("row");
    assert_eq!(port, 13306);
    // B is inside a transaction on the primary when the primary goes OFFLINE_SOFT.
    b.query_drop("BEGIN").await.expect("begin");
    let bport: u16 = b
        .query_first("SELECT @@port")
        .await
        .expect("q")
        .expect("row");
    assert_eq!(bport, 13306);
    s.admin_ok(
        "INSERT INTO mysql_servers (hostgroup_id, hostname, port) VALUES (0, '127.0.0.1', 13307); \
         UPDATE mysql_servers SET status = 'OFFLINE_SOFT' WHERE port = 13306; LOAD MYSQL SERVERS TO RUNTIME;",
    );
    let moved: u16 = a
        .query_first("SELECT @@port")
        .await
        .expect("a continues")
        .expect("row");
    assert_eq!(
        moved, 13307,
        "new queries go to the added server, none to the OFFLINE_SOFT one"
    );
    let still: u16 = b
        .query_first("SELECT @@port")
        .await
        .expect("b continues")
        .expect("row");
    assert_eq!(
        still, 13306,
        "the in-flight transaction finishes where it started"
    );
    b.query_drop("COMMIT").await.expect("commit");
    let after: u16 = b
        .query_first("SELECT @@port")
        .await
        .expect("b after commit")
        .expect("row");
    assert_eq!(after, 13307);
    let runtime = s.admin_ok("SELECT port, status FROM runtime_mysql_servers ORDER BY port;");
    assert_eq!(runtime, "13306\tOFFLINE_SOFT\n13307\tONLINE\n");

    // A password change: new logins need the new password.
    primary_root("ALTER USER 'rot'@'%' IDENTIFIED BY 'two';");
    s.admin_ok("UPDATE mysql_users SET password = 'two' WHERE username = 'rot'; LOAD MYSQL USERS TO RUNTIME;");
    let old = mariadb(s.port, "rot", "one", &["--skip-ssl"], "SELECT 1;");
    assert!(stderr(&old).contains("ERROR 1045"), "{}", stderr(&old));
    let new = ok_stdout(&mariadb(s.port, "rot", "two", &["--skip-ssl"], "SELECT 1;"));
    assert_eq!(new.trim(), "1");
    primary_root("ALTER USER 'rot'@'%' IDENTIFIED BY 'one';");
}

#[test]
fn invalid_rows_are_rejected_and_the_runtime_stays() {
    if !backends_ready(Servers::Both) {
        return;
    }
    let s = Sluice::start(&standard_config("", ""));
    let before = s.admin_ok("SELECT * FROM runtime_mysql_servers ORDER BY hostgroup_id;");
    for (sql, expect) in [
        (
            "UPDATE mysql_servers SET port = -1 WHERE hostgroup_id = 1;",
            "CHECK constraint failed",
        ),
        (
            "UPDATE mysql_servers SET status = 'UP' WHERE hostgroup_id = 1;",
            "CHECK constraint failed",
        ),
        (
            "INSERT INTO mysql_users (username, password, default_hostgroup) VALUES ('ghost', 'x', 42); LOAD MYSQL USERS TO RUNTIME;",
            "default_hostgroup 42 is not a hostgroup",
        ),
        (
            "INSERT INTO mysql_query_rules (rule_id, active, match_pattern) VALUES (9, 1, '^SELECT ('); LOAD MYSQL QUERY RULES TO RUNTIME;",
            "rule_id=9: match_pattern \"^SELECT (\" is not a valid regular expression: unclosed group",
        ),
        (
            "UPDATE global_variables SET variable_value = 'zero' WHERE variable_name = 'mysql-max_connections'; LOAD MYSQL VARIABLES TO RUNTIME;",
            "mysql-max_connections",
        ),
        (
            "SET mysql-no_such_variable = 1;",
            "unknown variable mysql-no_such_variable",
        ),
    ] {
        let out = s.admin(sql);
        assert!(
            !out.status.success() && stderr(&out).contains(expect),
            "{sql}: {}",
            stderr(&out)
        );
    }
    assert_eq!(
        s.admin_ok("SELECT * FROM runtime_mysql_servers ORDER BY hostgroup_id;"),
        before
    );
    assert_eq!(
        s.admin_ok("SELECT COUNT(*) FROM runtime_mysql_users WHERE username = 'ghost';")
            .trim(),
        "0"
    );
    assert_eq!(
        s.admin_ok("SELECT variable_value FROM runtime_global_variables WHERE variable_name = 'mysql-max_connections';").trim(),
        "10000"
    );
    let ok = ok_stdout(&mariadb(s.port, "app", "app", &["--skip-ssl"], "SELECT 2;"));
    assert_eq!(ok.trim(), "2", "clients are served by the previous runtime");
}

#[test]
fn saved_config_survives_a_restart_unless_initial() {
    if !backends_ready(Servers::Both) {
        return;
    }
    let dir = scratch_dir("persist");
    let cfg = standard_config("", "");
    // Fixed ports: the disk database also keeps mysql-interfaces and admin-mysql_ifaces.
    let ports = (free_port(), free_port());
    let mut s = Sluice::start_on(&cfg, dir.clone(), &[], ports);
    s.admin_ok("UPDATE mysql_servers SET max_connections = 77 WHERE hostgroup_id = 1; SAVE MYSQL SERVERS TO DISK;");
    s.terminate();
    assert_eq!(
        s.wait_exit(Duration::from_secs(20))
            .and_then(|st| st.code()),
        Some(0)
    );
    drop(s);
    let mut s = Sluice::start_on(&cfg, dir.clone(), &[], ports);
    let v = s.admin_ok("SELECT max_connections FROM runtime_mysql_servers WHERE hostgroup_id = 1;");
    assert_eq!(v.trim(), "77", "the disk database wins");
    assert!(
        s.log()
            .contains("configuration loaded from the admin database on disk")
    );
    s.terminate();
    s.wait_exit(Duration::from_secs(20));
    drop(s);
    let s = Sluice::start_on(&cfg, dir, &["--initial"], ports);
    let v = s.admin_ok("SELECT max_connections FROM runtime_mysql_servers WHERE hostgroup_id = 1;");
    assert_eq!(v.trim(), "1000", "--initial takes the config file");
    // SAVE CONFIG TO FILE writes a config that loads back to the same configuration.
    let export = s.dir.join("export.toml");
    s.admin_ok(&format!("SAVE CONFIG TO FILE {};", export.display()));
    let text = std::fs::read_to_string(&export).expect("exported file");
    // Same configuration on fresh ports.
    let mut section = String::new();
    let template: String = text
        .lines()
        .map(|l| {
            if l.starts_with('[') {
                section = l.to_string();
            }
            match (section.as_str(), l.split_once(" = ")) {
                ("[pgsql_variables]", Some(("interfaces", _))) => {
                    "interfaces = \"127.0.0.1:{pg_port}\"".to_string()
                }
                (_, Some(("interfaces", _))) => "interfaces = \"127.0.0.1:{port}\"".to_string(),
                (_, Some(("mysql_ifaces", _))) => {
                    "mysql_ifaces = \"127.0.0.1:{admin_port}\"".to_string()
                }
                (_, Some(("pgsql_ifaces", _))) => {
                    "pgsql_ifaces = \"127.0.0.1:{pg_admin_port}\"".to_string()
                }
                _ => l.to_string(),
            }
        })
        .collect::<Vec<_>>()
        .join("\n");
    let again = Sluice::start(&template);
    assert_eq!(
        again.admin_ok("SELECT * FROM runtime_mysql_servers ORDER BY hostgroup_id;"),
        s.admin_ok("SELECT * FROM runtime_mysql_servers ORDER BY hostgroup_id;")
    );
}

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

#[test]
fn psql_reaches_the_same_admin_store() {
    if !backends_ready(Servers::Both) {
        return;
    }
    let s = Sluice::start(&standard_config("", ""));
    // Seed 003's statements, verbatim, on the PostgreSQL admin port.
    for sql in [
        "INSERT INTO pgsql_users (username,password,default_hostgroup) VALUES ('postgres','postgres',0);",
        "LOAD PGSQL USERS TO RUNTIME;",
        "UPDATE pgsql_users\nSET use_ssl = 1\nWHERE username = 'postgres';\n\nLOAD PGSQL USERS TO RUNTIME;\nSAVE PGSQL USERS TO DISK;",
        "DELETE FROM pgsql_replication_hostgroups;\nINSERT INTO\n    pgsql_replication_hostgroups (writer_hostgroup, reader_hostgroup, check_type, comment)\nVALUES\n    (0, 1, 'read_only', 'pg-replication');\n\nLOAD PGSQL SERVERS TO RUNTIME;\nSAVE PGSQL SERVERS TO DISK;",
        "INSERT INTO pgsql_query_rules (active,database,match_pattern,destination_hostgroup,apply) VALUES (1,'sysbench','SELECT c FROM sbtest*',1,1);",
        "LOAD PGSQL QUERY RULES TO RUNTIME;",
    ] {
        let out = s.psql_admin(sql, false);
        assert!(out.status.success(), "{sql}: {}", stderr(&out));
    }
    let runtime = ok_stdout(&s.psql_admin(
        "SELECT username, use_ssl FROM runtime_pgsql_users WHERE username = 'postgres';",
        false,
    ));
    assert_eq!(runtime.trim(), "postgres\t1");
    let disk = ok_stdout(&s.psql_admin("SELECT writer_hostgroup, reader_hostgroup, comment FROM disk.pgsql_replication_hostgroups;", false));
    assert_eq!(disk.trim(), "0\t1\tpg-replication");
    // Both protocols see the same rows, with the same column names.
    let q = "SELECT hostgroup_id, hostname, port FROM mysql_servers ORDER BY hostgroup_id;";
    let via_psql = ok_stdout(&s.psql_admin(q, true));
    let via_mysql = ok_stdout(&mariadb(
        s.admin_port,
        "admin",
        "admin",
        &["--skip-ssl", "--column-names"],
        q,
    ));
    let psql_lines: Vec<&str> = via_psql.lines().filter(|l| !l.starts_with('(')).collect();
    assert_eq!(psql_lines.join("\n"), via_mysql.trim_end());
    // A change through psql is what the MySQL admin port and the runtime see.
    ok_stdout(&s.psql_admin("UPDATE mysql_servers SET weight = 5 WHERE hostgroup_id = 1; LOAD MYSQL SERVERS TO RUNTIME;", false));
    assert_eq!(
        s.admin_ok("SELECT weight FROM runtime_mysql_servers WHERE hostgroup_id = 1;")
            .trim(),
        "5"
    );
    let bad = std::process::Command::new("psql")
        .env("PGPASSWORD", "wrong")
        .args([
            "-h",
            "127.0.0.1",
            "-p",
            &s.pg_admin_port.to_string(),
            "-U",
            "admin",
            "-c",
            "SELECT 1",
        ])
        .output()
        .expect("psql");
    assert!(
        stderr(&bad).contains("authentication failed"),
        "{}",
        stderr(&bad)
    );
    // A syntax error carries PostgreSQL's SQLSTATE for one (psql shows it when verbose).
    let syntax = std::process::Command::new("psql")
        .env("PGPASSWORD", "admin")
        .args(["-h", "127.0.0.1", "-p", &s.pg_admin_port.to_string()])
        .args([
            "-U",
            "admin",
            "-X",
            "-v",
            "VERBOSITY=verbose",
            "-c",
            "SELEC broken;",
        ])
        .output()
        .expect("psql");
    assert!(
        !syntax.status.success() && stderr(&syntax).contains("ERROR:  42601"),
        "{}",
        stderr(&syntax)
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

#[test]
fn the_admin_sqlite_refuses_files_code_and_writable_pragmas() {
    if !backends_ready(Servers::Both) {
        return;
    }
    let s = Sluice::start(&standard_config("", ""));
    let target = s.dir.join("attached.db");
    let copy = s.dir.join("copy.db");
    for sql in [
        format!("ATTACH DATABASE '{}' AS x;", target.display()),
        format!("/* sneaky */ attach '{}' as x;", target.display()),
        format!("VACUUM INTO '{}';", copy.display()),
        "SELECT load_extension('/nonexistent/evil.so');".to_string(),
        "PRAGMA writable_schema = 1;".to_string(),
        "DETACH disk;".to_string(),
    ] {
        let out = s.admin(&sql);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{sql} ran");
        assert!(
            err.contains("ERROR 1142") && err.contains("refused by Sluice's admin"),
            "{sql}: {err}"
        );
        // The same over the PostgreSQL admin port.
        let out = s.psql_admin(&sql, false);
        assert!(
            String::from_utf8_lossy(&out.stderr).contains("refused by Sluice's admin"),
            "{sql} over psql: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    assert!(!target.exists() && !copy.exists(), "no file was created");
    // Reading PRAGMAs, and the disk layer, still work.
    let cols = s.admin_ok("PRAGMA table_info(mysql_servers);");
    assert!(cols.contains("hostname"), "{cols}");
    s.admin_ok("SAVE MYSQL SERVERS TO DISK;");
}

#[test]
fn show_variables_lists_every_module_as_proxysql_does() {
    if !backends_ready(Servers::Both) {
        return;
    }
    let s = Sluice::start(&standard_config("", ""));
    let all = s.admin_ok("SHOW GLOBAL VARIABLES;");
    for name in [
        "admin-mysql_ifaces",
        "mysql-max_connections",
        "mysql-enable_load_data_local_infile",
        "pgsql-handoff_reset_all",
        "pgsql-ignore_startup_parameters",
    ] {
        assert!(
            all.lines().any(|l| l.split('\t').next() == Some(name)),
            "{name} missing from SHOW GLOBAL VARIABLES"
        );
    }
    let some = s.admin_ok("SHOW VARIABLES LIKE 'mysql-max_conn%';");
    assert_eq!(some.trim(), "mysql-max_connections\t10000", "{some}");
    let out = s.psql_admin("SHOW VARIABLES LIKE 'pgsql-handoff%'", false);
    assert_eq!(ok_stdout(&out).trim(), "pgsql-handoff_reset_all\ttrue");
}

/// `admin-stats_credentials` (stats/stats by default): a read-only account for dashboards. It
/// reads stats, monitor and runtime tables on both admin ports; configuration tables, runtime
/// tables with passwords and SQLite's own are refused however they are named; `SHOW VARIABLES`
/// masks every password and credential.
#[test]
fn the_stats_account_reads_statistics_and_nothing_that_holds_a_secret() {
    if !backends_ready(Servers::Both) {
        return;
    }
    let s = Sluice::start(&standard_config("", ""));
    ok_stdout(&mariadb(s.port, "app", "app", &["--skip-ssl"], "SELECT 1;"));
    let stats = |sql: &str| mariadb(s.admin_port, "stats", "stats", &["--skip-ssl"], sql);
    let questions = ok_stdout(&stats(
        "SELECT variable_value FROM stats_mysql_global WHERE variable_name = 'Questions';",
    ));
    assert!(
        questions.trim().parse::<u64>().unwrap_or(0) >= 1,
        "{questions}"
    );
    let servers = ok_stdout(&stats("SELECT hostname FROM runtime_mysql_servers;"));
    assert!(servers.contains("127.0.0.1"), "{servers}");
    for sql in [
        "SELECT username, password FROM mysql_users;",
        "SELECT password FROM disk.mysql_users;",
        "SELECT * FROM \"MYSQL_USERS\";",
        "SELECT (SELECT password FROM mysql_users LIMIT 1) FROM stats_mysql_global;",
        "SELECT * FROM runtime_mysql_users;",
        "SELECT sql FROM sqlite_master;",
        "UPDATE mysql_servers SET weight = 5;",
        "LOAD MYSQL SERVERS TO RUNTIME;",
    ] {
        let out = stats(sql);
        assert!(!out.status.success(), "the stats account ran {sql}");
        assert!(
            stderr(&out).contains("stats user"),
            "{sql}: {}",
            stderr(&out)
        );
    }
    let masked = ok_stdout(&stats("SHOW VARIABLES LIKE 'admin-%credentials';"));
    assert!(
        masked.contains("admin-admin_credentials\t********") && !masked.contains("admin:admin"),
        "{masked}"
    );
    let shown = s.admin_ok("SHOW VARIABLES LIKE 'admin-admin_credentials';");
    assert!(
        shown.contains("admin:admin"),
        "the admin sees the value: {shown}"
    );
    // The PostgreSQL admin port applies the same rules to the same account.
    let psql_stats = |sql: &str| {
        std::process::Command::new("psql")
            .env("PGPASSWORD", "stats")
            .args(["-h", "127.0.0.1", "-p", &s.pg_admin_port.to_string()])
            .args(["-U", "stats", "-X", "-A", "-t", "-c", sql])
            .output()
            .expect("psql installed")
    };
    let hosts = ok_stdout(&psql_stats("SELECT hostname FROM runtime_pgsql_servers"));
    assert!(hosts.contains("127.0.0.1"), "{hosts}");
    let refused = psql_stats("SELECT password FROM pgsql_users");
    assert!(!refused.status.success(), "psql as stats read pgsql_users");
    assert!(
        stderr(&refused).contains("stats user"),
        "{}",
        stderr(&refused)
    );
}

/// `admin-hash_passwords`, as ProxySQL: `LOAD MYSQL USERS TO RUNTIME` keeps only the
/// `mysql_native_password` hash in the runtime, `SAVE … FROM RUNTIME` and `SAVE … TO DISK` carry
/// it to memory and disk; clients still log in (and reach the server: Sluice learns what it needs
/// from their own scramble), a wrong password is still refused.
#[test]
fn hash_passwords_keeps_only_hashes_and_logins_still_work() {
    if !backends_ready(Servers::Both) {
        return;
    }
    let s = Sluice::start(&standard_config("", ""));
    s.admin_ok("SET admin-hash_passwords = 'true'; LOAD ADMIN VARIABLES TO RUNTIME; LOAD MYSQL USERS TO RUNTIME;");
    // SELECT PASSWORD('app') on MySQL/MariaDB.
    let hash = "*5BCB3E6AC345B435C7C2E6B7949A04CE6F6563D3";
    let runtime = s.admin_ok("SELECT password FROM runtime_mysql_users WHERE username = 'app';");
    assert_eq!(runtime.trim(), hash);
    let memory = s.admin_ok("SELECT password FROM mysql_users WHERE username = 'app';");
    assert_eq!(
        memory.trim(),
        "app",
        "memory keeps what the operator wrote until SAVE … FROM RUNTIME"
    );
    let out = mariadb(
        s.port,
        "app",
        "app",
        &["--skip-ssl", "--default-auth=mysql_native_password"],
        "SELECT @@port;",
    );
    assert_eq!(
        ok_stdout(&out).trim(),
        ports::MY_PRIMARY.to_string(),
        "the backend was reached"
    );
    let wrong = mariadb(s.port, "app", "nope", &["--skip-ssl"], "SELECT 1;");
    assert!(
        stderr(&wrong).contains("Access denied"),
        "{}",
        stderr(&wrong)
    );
    s.admin_ok("SAVE MYSQL USERS FROM RUNTIME; SAVE MYSQL USERS TO DISK;");
    let disk = s.admin_ok("SELECT password FROM disk.mysql_users WHERE username = 'app';");
    assert_eq!(disk.trim(), hash, "the disk holds only the hash");
    // Loading the hash again leaves it as it is.
    s.admin_ok("LOAD MYSQL USERS TO RUNTIME;");
    let again = s.admin_ok("SELECT password FROM runtime_mysql_users WHERE username = 'app';");
    assert_eq!(again.trim(), hash);
}

//! The MySQL-protocol admin interface (6032): ProxySQL's statements verbatim, the config layers,
//! runtime swaps without disconnecting clients, persistence across restarts, validation.

use mysql_async::prelude::*;
use sluice_tests::*;
use std::time::Duration;

mod sessions;
mod surface;

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

//! The admin surface beyond the config layers: psql on the PostgreSQL admin port, the SQLite
//! sandbox, SHOW VARIABLES, the stats account, hashed passwords.

use super::*;

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

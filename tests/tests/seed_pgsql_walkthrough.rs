//! Seed 003's PostgreSQL monitoring walk-through, its admin statements run verbatim with psql on
//! the PostgreSQL admin port: monitor variables and credentials, the check logs and counters,
//! replication hostgroups and read_only placement, `from_unixtime()`, users, query rules with
//! sysbench's pgsql driver through Sluice, and the digest and rule stats.

use sluice_tests::*;
use std::io::Write;
use std::process::{Command, Output, Stdio};
use std::time::Duration;

/// Statements fed to psql on the admin port, one by one as psql splits them; unaligned output.
fn radmin(s: &Sluice, sql: &str) -> String {
    let mut child = Command::new("psql")
        .env("PGPASSWORD", "admin")
        .env("PGSSLMODE", "disable")
        .args([
            "-h",
            "127.0.0.1",
            "-p",
            &s.pg_admin_port.to_string(),
            "-U",
            "admin",
        ])
        .args([
            "-X",
            "-A",
            "-t",
            "-F",
            "\t",
            "-v",
            "ON_ERROR_STOP=1",
            "-f",
            "-",
        ])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("psql");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(sql.as_bytes())
        .expect("sql");
    ok_stdout(&child.wait_with_output().expect("psql ran"))
}

fn psql_as(s: &Sluice, user: &str, db: &str, sql: &str) -> Output {
    Command::new("psql")
        .env("PGPASSWORD", user)
        .env("PGSSLMODE", "disable")
        .args([
            "-h",
            "127.0.0.1",
            "-p",
            &s.pg_port.to_string(),
            "-U",
            user,
            "-d",
            db,
        ])
        .args(["-X", "-q", "-A", "-t", "-c", sql])
        .output()
        .expect("psql")
}

fn counter(s: &Sluice, name: &str) -> u64 {
    radmin(
        s,
        "SELECT * FROM stats_pgsql_global WHERE variable_name LIKE '%PgSQL_Monitor%';",
    )
    .lines()
    .find_map(|l| l.strip_prefix(&format!("{name}\t")))
    .and_then(|v| v.trim().parse().ok())
    .unwrap_or(0)
}

#[test]
fn seed_003_postgresql_monitoring_walkthrough() {
    if !backends_ready(Servers::Postgres) {
        return;
    }
    let s = Sluice::start(&standard_config("", ""));
    let (p, r) = (ports::PG_PRIMARY, ports::PG_REPLICA);
    // Shorter intervals than the defaults, so the walk-through takes seconds.
    radmin(
        &s,
        "SET pgsql-monitor_ping_interval = 500; SET pgsql-monitor_connect_interval = 1000; LOAD PGSQL VARIABLES TO RUNTIME;",
    );
    assert_eq!(
        radmin(
            &s,
            "SELECT * FROM global_variables WHERE variable_name='pgsql-monitor_enabled';"
        ),
        "pgsql-monitor_enabled\ttrue\n"
    );
    let vars = radmin(
        &s,
        "SELECT * FROM global_variables WHERE variable_name LIKE 'pgsql-monitor_%';",
    );
    for want in [
        "pgsql-monitor_read_only_interval\t1000",
        "pgsql-monitor_read_only_timeout\t800",
        "pgsql-monitor_read_only_max_timeout_count\t3",
        "pgsql-monitor_ping_max_failures\t3",
        "pgsql-monitor_dbname\tpostgres",
        "pgsql-monitor_history\t600000",
    ] {
        assert!(vars.contains(want), "{want} missing:\n{vars}");
    }

    // Wrong monitor credentials: errors accumulate in the logs and the counters.
    radmin(
        &s,
        "SET pgsql-monitor_password='proxymon';\nSET pgsql-monitor_username='proxymon';\nLOAD PGSQL VARIABLES TO RUNTIME;\nSAVE PGSQL VARIABLES TO DISK;",
    );
    let failing = xtask::proc::wait_until(Duration::from_secs(10), || {
        counter(&s, "PgSQL_Monitor_connect_check_ERR") >= 2
    });
    assert!(failing, "{}", s.log());
    let errors = radmin(
        &s,
        "SELECT * FROM monitor.pgsql_server_connect_log ORDER BY time_start_us DESC LIMIT 5;",
    );
    assert!(
        errors.contains("password authentication failed for user \"proxymon\""),
        "{errors}"
    );
    assert!(
        s.log()
            .contains("PgSQL monitor connect failed addr='127.0.0.1:"),
        "{}",
        s.log()
    );
    // Fixed credentials: the checks succeed and Latency_us fills in.
    radmin(
        &s,
        "SET pgsql-monitor_password='monitor';\nSET pgsql-monitor_username='monitor';\nLOAD PGSQL VARIABLES TO RUNTIME;\nSAVE PGSQL VARIABLES TO DISK;",
    );
    let ok_before = counter(&s, "PgSQL_Monitor_ping_check_OK");
    let healthy = xtask::proc::wait_until(Duration::from_secs(10), || {
        counter(&s, "PgSQL_Monitor_ping_check_OK") > ok_before + 2
    });
    assert!(healthy, "{}", s.log());
    let pings = radmin(
        &s,
        "SELECT * FROM monitor.pgsql_server_ping_log ORDER BY time_start_us DESC LIMIT 5;",
    );
    assert!(
        pings.lines().next().is_some_and(|l| l.ends_with('\t')),
        "newest pings succeed:\n{pings}"
    );
    let pool = radmin(&s, "SELECT * FROM stats_pgsql_connection_pool;");
    for l in pool.lines() {
        let latency: u64 = l
            .rsplit('\t')
            .next()
            .and_then(|v| v.parse().ok())
            .unwrap_or(0);
        assert!(latency > 0, "Latency_us comes from the pings: {pool}");
    }

    // Users, and a hint to the reader hostgroup.
    let create = radmin(&s, "SHOW CREATE TABLE pgsql_users;");
    assert!(
        create.contains("CREATE TABLE pgsql_users") && create.contains("use_ssl INT"),
        "{create}"
    );
    radmin(
        &s,
        "INSERT INTO pgsql_users (username,password,default_hostgroup) VALUES ('postgres','postgres',0);\nLOAD PGSQL USERS TO RUNTIME;",
    );
    let hinted = ok_stdout(&psql_as(
        &s,
        "postgres",
        "postgres",
        "/* hostgroup=1 */ SELECT inet_server_port();",
    ));
    assert_eq!(hinted.trim(), r.to_string());

    // Replication hostgroups, verbatim.
    assert_eq!(
        radmin(&s, "SELECT COUNT(*) FROM pgsql_replication_hostgroups;"),
        "0\n"
    );
    radmin(
        &s,
        "DELETE FROM pgsql_replication_hostgroups;\nINSERT INTO\n    pgsql_replication_hostgroups (writer_hostgroup, reader_hostgroup, check_type, comment)\nVALUES\n    (0, 1, 'read_only', 'pg-replication');\nLOAD PGSQL SERVERS TO RUNTIME;\nSAVE PGSQL SERVERS TO DISK;",
    );
    let placed = xtask::proc::wait_until(Duration::from_secs(10), || {
        radmin(
            &s,
            "SELECT hostgroup_id, port FROM runtime_pgsql_servers ORDER BY hostgroup_id, port;",
        ) == format!("0\t{p}\n1\t{p}\n1\t{r}\n")
    });
    assert!(
        placed,
        "{}",
        radmin(&s, "SELECT * FROM runtime_pgsql_servers;")
    );
    let ro = radmin(
        &s,
        "SELECT * FROM monitor.pgsql_server_read_only_log ORDER BY time_start_us DESC LIMIT 5;",
    );
    assert!(
        ro.contains(&format!("127.0.0.1\t{p}\t")) && ro.contains(&format!("127.0.0.1\t{r}\t")),
        "{ro}"
    );
    assert!(
        ro.lines()
            .any(|l| l.starts_with(&format!("127.0.0.1\t{r}\t")) && l.contains("\t1\t")),
        "{ro}"
    );
    let dated = radmin(
        &s,
        "SELECT from_unixtime(time_start_us/1000/1000),* FROM monitor.pgsql_server_ping_log ORDER BY time_start_us DESC LIMIT 10;",
    );
    assert!(dated.lines().all(|l| l.starts_with("20")), "{dated}");

    // The primary placed only in the reader hostgroup is put back as the writer too.
    radmin(
        &s,
        "UPDATE pgsql_servers SET hostgroup_id=1;\nLOAD PGSQL SERVERS TO RUNTIME;",
    );
    let again = xtask::proc::wait_until(Duration::from_secs(5), || {
        radmin(
            &s,
            "SELECT hostgroup_id,hostname,port,status,weight,comment FROM runtime_pgsql_servers;",
        )
        .lines()
        .any(|l| l.starts_with(&format!("0\t127.0.0.1\t{p}\tONLINE")))
    });
    assert!(
        again,
        "{}",
        radmin(&s, "SELECT * FROM runtime_pgsql_servers;")
    );
    radmin(
        &s,
        "LOAD PGSQL SERVERS FROM DISK;\nLOAD PGSQL SERVERS TO RUNTIME;",
    );
    assert_eq!(
        radmin(
            &s,
            "SELECT hostgroup_id, port FROM pgsql_servers ORDER BY hostgroup_id, port;"
        ),
        format!("0\t{p}\n1\t{r}\n")
    );

    // sysbench's pgsql driver through Sluice, then a rule sending its point selects to the replica.
    let _ = psql_as(
        &s,
        "postgres",
        "postgres",
        "DROP DATABASE IF EXISTS sysbench;",
    );
    ok_stdout(&psql_as(
        &s,
        "postgres",
        "postgres",
        "CREATE DATABASE sysbench;",
    ));
    let sb = |action: &str, extra: &[&str]| {
        Command::new("sysbench")
            .args([
                "--db-driver=pgsql",
                "--db-ps-mode=disable",
                "--pgsql-user=postgres",
                "--pgsql_password=postgres",
            ])
            .args(["--pgsql-db=sysbench", "--pgsql-host=127.0.0.1"])
            .arg(format!("--pgsql-port={}", s.pg_port))
            .args(["--tables=2", "--table-size=1000", "--threads=4"])
            .args(extra)
            .args(["oltp_read_only", action])
            .output()
            .expect("sysbench")
    };
    ok_stdout(&sb("prepare", &[]));
    let replicated = xtask::proc::wait_until(Duration::from_secs(30), || {
        Command::new("psql")
            .env("PGPASSWORD", "postgres")
            .args([
                "-h",
                "127.0.0.1",
                "-p",
                &r.to_string(),
                "-U",
                "postgres",
                "-d",
                "sysbench",
                "-XAtc",
                "SELECT count(*) FROM sbtest2",
            ])
            .output()
            .is_ok_and(|o| o.stdout.starts_with(b"1000"))
    });
    assert!(replicated, "the replica did not get sysbench's tables");
    radmin(
        &s,
        "INSERT INTO pgsql_query_rules (active,database,match_pattern,destination_hostgroup,apply) VALUES (1,'sysbench','SELECT c FROM sbtest*',1,1);\nLOAD PGSQL QUERY RULES TO RUNTIME;",
    );
    let out = ok_stdout(&sb(
        "run",
        &["--skip-trx=1", "--time=3", "--report-interval=0"],
    ));
    assert!(out.contains("queries:"), "{out}");
    let hits = radmin(&s, "SELECT * FROM stats_pgsql_query_rules;");
    let n: u64 = hits
        .strip_prefix("1\t")
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0);
    assert!(n > 100, "{hits}");
    // The seed's statement, verbatim: up to ten digest rows, in no particular order.
    let digests = radmin(
        &s,
        "SELECT hostgroup,database,username,digest,digest_text,count_star FROM stats.stats_pgsql_query_digest LIMIT 10;",
    );
    assert!(
        !digests.trim().is_empty() && digests.lines().all(|l| l.contains("\t0x")),
        "{digests}"
    );
    // The routed point selects are among all of them, on the replica's hostgroup.
    let routed = radmin(
        &s,
        "SELECT hostgroup,database,username,digest,digest_text,count_star FROM stats.stats_pgsql_query_digest WHERE digest_text LIKE 'SELECT c FROM sbtest%';",
    );
    assert!(
        routed
            .lines()
            .any(|l| l.starts_with("1\tsysbench\tpostgres\t0x")),
        "{routed}"
    );
}

//! Read-your-writes through the read/write split on the real MariaDB pair: the replica applies
//! everything 2 s late (`MASTER_DELAY = 2`), reads go to it by rule, and each write's GTID (from
//! the OK packet's session tracking) gates the reads that must see it. Negative controls first:
//! without the gate the same loop reads stale rows.

use mysql_async::prelude::*;
use sluice_tests::*;
use std::time::{Duration, Instant};

/// Runs `sql` as root on the replica; it must succeed.
fn replica_root(sql: &str) -> String {
    ok_stdout(&mariadb(
        ports::MY_REPLICA,
        "root",
        "root",
        &["--skip-ssl"],
        sql,
    ))
}

/// Puts the replica back to no delay, also when the test fails.
struct Restore;

impl Drop for Restore {
    fn drop(&mut self) {
        let _ = mariadb(
            ports::MY_REPLICA,
            "root",
            "root",
            &["--skip-ssl"],
            "STOP SLAVE; CHANGE MASTER TO MASTER_DELAY = 0; START SLAVE;",
        );
    }
}

/// A fresh table, replicated, then a replica 2 s behind. Call holding the backends exclusively.
fn delayed_replica(table: &str) -> Restore {
    primary_root(&format!(
        "CREATE DATABASE IF NOT EXISTS causal; DROP TABLE IF EXISTS causal.{table}; \
         CREATE TABLE causal.{table} (id BIGINT PRIMARY KEY, v INT NOT NULL);"
    ));
    let restore = Restore;
    let replicated = xtask::proc::wait_until(Duration::from_secs(20), || {
        mariadb(
            ports::MY_REPLICA,
            "root",
            "root",
            &["--skip-ssl"],
            &format!("SELECT 1 FROM causal.{table} LIMIT 0"),
        )
        .status
        .success()
    });
    assert!(replicated, "causal.{table} reaches the replica");
    replica_root("STOP SLAVE; CHANGE MASTER TO MASTER_DELAY = 2; START SLAVE;");
    restore
}

/// Hostgroup 0 the primary (the user's default: writes), hostgroup 1 the replica, where a rule
/// sends every SELECT.
fn split_config() -> String {
    let (p, r) = (ports::MY_PRIMARY, ports::MY_REPLICA);
    format!(
        r#"
[mysql_variables]
interfaces = "127.0.0.1:{{port}}"
monitor_enabled = false

[[mysql_servers]]
hostgroup_id = 0
hostname = "127.0.0.1"
port = {p}

[[mysql_servers]]
hostgroup_id = 1
hostname = "127.0.0.1"
port = {r}

[[mysql_users]]
username = "app"
password = "app"
default_hostgroup = 0

[[mysql_query_rules]]
rule_id = 1
active = 1
match_digest = "^SELECT"
destination_hostgroup = 1
apply = 1
"#
    )
}

fn set_vars(s: &Sluice, assignments: &[(&str, &str)]) {
    for (k, v) in assignments {
        s.admin_ok(&format!("SET mysql-{k} = '{v}'"));
    }
    s.admin_ok("LOAD MYSQL VARIABLES TO RUNTIME");
}

/// A server's global status counter.
fn status(port: u16, name: &str) -> u64 {
    let out = ok_stdout(&mariadb(
        port,
        "root",
        "root",
        &["--skip-ssl", "-N"],
        &format!("SHOW GLOBAL STATUS LIKE '{name}'"),
    ));
    out.split_whitespace()
        .nth(1)
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("{name}: {out}"))
}

fn global(s: &Sluice, name: &str) -> u64 {
    s.admin_ok(&format!(
        "SELECT Variable_Value FROM stats_mysql_global WHERE Variable_Name = '{name}'"
    ))
    .trim()
    .parse()
    .unwrap_or_else(|_| panic!("{name} in stats_mysql_global"))
}

/// Writes row `id`, then reads it back through the split: (the port that answered, rows seen).
async fn write_then_read(c: &mut mysql_async::Conn, table: &str, id: u64) -> (u16, u64) {
    c.query_drop(format!("INSERT INTO causal.{table} VALUES ({id}, 1)"))
        .await
        .expect("insert");
    c.query_first(format!(
        "SELECT @@port, COUNT(*) FROM causal.{table} WHERE id = {id}"
    ))
    .await
    .expect("read")
    .expect("a row")
}

#[tokio::test]
async fn local_reads_see_their_writes_wait_on_the_replica_and_fall_back() {
    // Delays the replica the other tests read from: it runs alone.
    if !backends_exclusive(Servers::MariaDb) {
        return;
    }
    let _restore = delayed_replica("local_t");
    let s = Sluice::start(&split_config());
    let url = s.url("app", "app", "causal");
    let (primary, replica) = (ports::MY_PRIMARY, ports::MY_REPLICA);

    // Negative control: without the gate, reads right after writes miss them.
    let mut c = mysql_async::Conn::from_url(url.as_str())
        .await
        .expect("connect");
    let mut stale = 0;
    for id in 1..=10 {
        let (port, rows) = write_then_read(&mut c, "local_t", id).await;
        assert_eq!(port, replica, "reads go to the replica");
        stale += u64::from(rows == 0);
    }
    assert!(
        stale > 0,
        "causal_reads=none reads stale rows behind a 2 s delay"
    );
    eprintln!("causal_reads=none: {stale} of 10 reads missed their write");

    // local: 500 write-then-read iterations over 50 sessions, none stale.
    set_vars(
        &s,
        &[
            ("causal_reads", "local"),
            ("causal_reads_timeout_ms", "10000"),
        ],
    );
    let (waits_r, waits_p) = (
        status(replica, "Master_gtid_wait_count"),
        status(primary, "Master_gtid_wait_count"),
    );
    let started = Instant::now();
    let mut sessions = Vec::new();
    for session in 0..50u64 {
        let url = url.clone();
        sessions.push(tokio::spawn(async move {
            let mut c = mysql_async::Conn::from_url(url.as_str())
                .await
                .expect("connect");
            let mut results = Vec::new();
            for i in 0..10u64 {
                results.push(write_then_read(&mut c, "local_t", 1_000 + session * 100 + i).await);
            }
            results
        }));
    }
    let mut stale = 0;
    let mut ports_seen = std::collections::BTreeSet::new();
    for t in sessions {
        for (port, rows) in t.await.expect("session") {
            stale += u64::from(rows == 0);
            ports_seen.insert(port);
        }
    }
    eprintln!(
        "causal_reads=local: 500 iterations in {:?}, {stale} stale, answered by {ports_seen:?}",
        started.elapsed()
    );
    assert_eq!(stale, 0, "every read saw its own write");
    assert_eq!(
        ports_seen.into_iter().collect::<Vec<_>>(),
        vec![replica],
        "the replica answered every read (it waited; nothing fell back)"
    );
    assert!(
        status(replica, "Master_gtid_wait_count") > waits_r,
        "the wait ran on the replica"
    );
    assert_eq!(
        status(primary, "Master_gtid_wait_count"),
        waits_p,
        "never on the primary"
    );
    let waited: u64 = global(&s, "Queries_GTID_sync");
    assert!(waited >= 500, "Queries_GTID_sync {waited}");
    assert!(global(&s, "GTID_session_collected") >= 500);

    // A timeout shorter than the delay: the primary answers, with the row.
    set_vars(&s, &[("causal_reads_timeout_ms", "300")]);
    let timeouts = status(replica, "Master_gtid_wait_timeouts");
    let (port, rows) = write_then_read(&mut c, "local_t", 20_000).await;
    assert_eq!((port, rows), (primary, 1), "fallback to the writer");
    assert!(status(replica, "Master_gtid_wait_timeouts") > timeouts);

    // on_timeout = error: a retryable error naming the token instead.
    set_vars(&s, &[("causal_reads_on_timeout", "error")]);
    c.query_drop("INSERT INTO causal.local_t VALUES (20001, 1)")
        .await
        .expect("insert");
    let err = c
        .query_first::<(u16, u64), _>(
            "SELECT @@port, COUNT(*) FROM causal.local_t WHERE id = 20001",
        )
        .await
        .expect_err("the read times out");
    match err {
        mysql_async::Error::Server(e) => {
            assert_eq!(e.code, 9110, "{e:?}");
            assert!(e.message.contains("Causal read timed out"), "{e:?}");
        }
        e => panic!("expected error 9110, got {e:?}"),
    }
    // The session goes on; a write's OK still reaches the client whole (the tracking items
    // are the proxy's, not the client's).
    c.query_drop("INSERT INTO causal.local_t VALUES (20002, 1)")
        .await
        .expect("insert after the error");
    assert_eq!(c.affected_rows(), 1);
    let counts = s.admin_ok(
        "SELECT Variable_Name, Variable_Value FROM stats_mysql_global WHERE Variable_Name LIKE 'GTID%' OR Variable_Name LIKE 'Queries_GTID%' ORDER BY 1",
    );
    eprintln!("{counts}");
    drop(c);
}

#[tokio::test]
async fn user_scope_covers_another_connection_of_the_user_with_prepared_reads() {
    if !backends_exclusive(Servers::MariaDb) {
        return;
    }
    let _restore = delayed_replica("user_t");
    let s = Sluice::start(&split_config());
    let url = s.url("app", "app", "causal");
    let mut writer = mysql_async::Conn::from_url(url.as_str())
        .await
        .expect("writer");
    let mut reader = mysql_async::Conn::from_url(url.as_str())
        .await
        .expect("reader");
    // The pooled application: one connection writes, another (same user) reads, with a
    // prepared statement (binary protocol).
    async fn round(
        writer: &mut mysql_async::Conn,
        reader: &mut mysql_async::Conn,
        id: u64,
    ) -> (u16, u64) {
        writer
            .exec_drop("INSERT INTO causal.user_t VALUES (?, 1)", (id,))
            .await
            .expect("insert");
        reader
            .exec_first(
                "SELECT @@port, COUNT(*) FROM causal.user_t WHERE id = ?",
                (id,),
            )
            .await
            .expect("read")
            .expect("a row")
    }
    // Negative control: `local` protects only the writing session.
    set_vars(
        &s,
        &[
            ("causal_reads", "local"),
            ("causal_reads_timeout_ms", "10000"),
        ],
    );
    let mut stale = 0;
    for id in 1..=5 {
        stale += u64::from(round(&mut writer, &mut reader, id).await.1 == 0);
    }
    assert!(
        stale > 0,
        "another connection reads stale rows under `local`"
    );

    set_vars(&s, &[("causal_reads", "user")]);
    for id in 100..120 {
        let (port, rows) = round(&mut writer, &mut reader, id).await;
        assert_eq!((port, rows), (ports::MY_REPLICA, 1), "read {id}");
    }
    // A rule column and a hint choose per statement: `none` for one query reads stale again.
    writer
        .query_drop("INSERT INTO causal.user_t VALUES (500, 1)")
        .await
        .expect("insert");
    let rows: u64 = reader
        .query_first("SELECT /* causal_reads=none */ COUNT(*) FROM causal.user_t WHERE id = 500")
        .await
        .expect("read")
        .expect("row");
    assert_eq!(rows, 0, "the hint turned the gate off for that read");
    drop((writer, reader));
}

/// PostgreSQL: hostgroup 0 the primary (the user's default), hostgroup 1 the standby, where a
/// rule sends every SELECT.
fn pg_split_config(variables: &str) -> String {
    let (p, r) = (ports::PG_PRIMARY, ports::PG_REPLICA);
    format!(
        r#"
[pgsql_variables]
interfaces = "127.0.0.1:{{pg_port}}"
monitor_enabled = false
{variables}

[mysql_variables]
interfaces = "127.0.0.1:{{port}}"

[[pgsql_servers]]
hostgroup_id = 0
hostname = "127.0.0.1"
port = {p}

[[pgsql_servers]]
hostgroup_id = 1
hostname = "127.0.0.1"
port = {r}

[[pgsql_users]]
username = "app"
password = "app"
default_hostgroup = 0

[[pgsql_query_rules]]
rule_id = 1
active = 1
match_digest = "^SELECT"
destination_hostgroup = 1
apply = 1
"#
    )
}

async fn pg_connect(s: &Sluice) -> tokio_postgres::Client {
    let (c, conn) = tokio_postgres::connect(
        &format!(
            "host=127.0.0.1 port={} user=app password=app dbname=app",
            s.pg_port
        ),
        tokio_postgres::NoTls,
    )
    .await
    .expect("connect through sluice");
    tokio::spawn(conn);
    c
}

fn pg_set_vars(s: &Sluice, assignments: &[(&str, &str)]) {
    for (k, v) in assignments {
        s.admin_ok(&format!("SET pgsql-{k} = '{v}'"));
    }
    s.admin_ok("LOAD PGSQL VARIABLES TO RUNTIME");
}

/// Writes row `id` (simple protocol), then reads it back through the split with a prepared
/// statement (extended protocol): (the port that answered, rows seen).
async fn pg_write_then_read(c: &tokio_postgres::Client, id: i64) -> (i32, i64) {
    c.simple_query(&format!("INSERT INTO causal_pg VALUES ({id})"))
        .await
        .expect("insert");
    let row = c
        .query_one(
            "SELECT inet_server_port(), count(*) FROM causal_pg WHERE id = $1",
            &[&id],
        )
        .await
        .expect("read");
    (row.get(0), row.get(1))
}

#[tokio::test]
async fn pgsql_reads_wait_for_replay_or_fall_back_to_the_primary() {
    // Pauses WAL replay on the standby the other tests read from: it runs alone.
    if !backends_exclusive(Servers::Postgres) {
        return;
    }
    let _resume = ResumeReplay;
    ok_stdout(&psql_app(
        ports::PG_PRIMARY,
        "DROP TABLE IF EXISTS causal_pg; CREATE TABLE causal_pg (id bigint PRIMARY KEY)",
    ));
    let replica = xtask::postgres::replica(&xtask::state_dir());
    wait_for("causal_pg on the standby", || {
        psql_app(ports::PG_REPLICA, "SELECT 1 FROM causal_pg LIMIT 0")
            .status
            .success()
    });
    let s = Sluice::start(&pg_split_config(""));
    let c = pg_connect(&s).await;
    let (primary, standby) = (i32::from(ports::PG_PRIMARY), i32::from(ports::PG_REPLICA));

    // Negative control: replay paused, the standby answers without the row.
    replica.sql("SELECT pg_wal_replay_pause()").expect("pause");
    assert_eq!(
        pg_write_then_read(&c, 1).await,
        (standby, 0),
        "a stale read"
    );

    // local, 500 ms: the replica never catches up, the primary answers with the row.
    pg_set_vars(
        &s,
        &[
            ("causal_reads", "local"),
            ("causal_reads_timeout_ms", "500"),
        ],
    );
    assert_eq!(pg_write_then_read(&c, 2).await, (primary, 1), "fallback");

    // Resumed within the window: the standby answers, with the row.
    pg_set_vars(&s, &[("causal_reads_timeout_ms", "10000")]);
    c.simple_query("INSERT INTO causal_pg VALUES (3)")
        .await
        .expect("insert");
    let resume = tokio::spawn(async {
        tokio::time::sleep(Duration::from_millis(500)).await;
        xtask::postgres::replica(&xtask::state_dir())
            .sql("SELECT pg_wal_replay_resume()")
            .expect("resume");
    });
    let started = Instant::now();
    let row = c
        .query_one(
            "SELECT inet_server_port(), count(*) FROM causal_pg WHERE id = 3",
            &[],
        )
        .await
        .expect("read");
    resume.await.expect("resumed");
    assert_eq!((row.get::<_, i32>(0), row.get::<_, i64>(1)), (standby, 1));
    assert!(
        started.elapsed() >= Duration::from_millis(400),
        "the read waited for the replay ({:?})",
        started.elapsed()
    );

    // on_timeout = error: SQLSTATE 40001 (retryable), and the session goes on.
    replica.sql("SELECT pg_wal_replay_pause()").expect("pause");
    pg_set_vars(
        &s,
        &[
            ("causal_reads_timeout_ms", "300"),
            ("causal_reads_on_timeout", "error"),
        ],
    );
    c.simple_query("INSERT INTO causal_pg VALUES (4)")
        .await
        .expect("insert");
    let err = c
        .query_one("SELECT count(*) FROM causal_pg WHERE id = 4", &[])
        .await
        .expect_err("the read times out");
    let db = err.as_db_error().expect("a server error");
    assert_eq!(db.code().code(), "40001", "{db:?}");
    assert!(db.message().contains("causal read timed out"), "{db:?}");
    replica
        .sql("SELECT pg_wal_replay_resume()")
        .expect("resume");
    let rows: i64 = c
        .query_one("SELECT count(*) FROM causal_pg WHERE id = 4", &[])
        .await
        .expect("read after resume")
        .get(0);
    assert_eq!(rows, 1);
    let global = s.admin_ok(
        "SELECT Variable_Name, Variable_Value FROM stats_pgsql_global WHERE Variable_Name LIKE '%LSN%' ORDER BY 1",
    );
    eprintln!("{global}");
    // Three writes left a token (the first ran under `none`, which takes none); four reads
    // were gated: fallback, waited, error, then ready.
    assert!(global.contains("LSN_session_collected\t3"), "{global}");
    assert!(global.contains("LSN_consistent_queries\t4"), "{global}");
    assert!(global.contains("Queries_LSN_sync\t2"), "{global}");
}

#[tokio::test]
async fn pgsql_write_then_read_loop_never_reads_stale() {
    if !backends_ready(Servers::Postgres) {
        return;
    }
    ok_stdout(&psql_app(
        ports::PG_PRIMARY,
        "CREATE TABLE IF NOT EXISTS causal_pg_loop (session int, n int, PRIMARY KEY (session, n))",
    ));
    let s = Sluice::start(&pg_split_config(
        "causal_reads = \"user\"\ncausal_reads_timeout_ms = 5000",
    ));
    // 100 writers x 100 iterations; each writer's row n is read by another connection of the
    // same user (the pooled application). Under `synchronous_commit=off` a commit reaches the
    // standby only after the WAL writer flushes it (`wal_writer_delay`, 200 ms), so most reads
    // wait for it: the writers run side by side.
    let run = std::process::id() as i32;
    let mut tasks = Vec::new();
    for session in 0..100 {
        let (w, r) = (pg_connect(&s).await, pg_connect(&s).await);
        tasks.push(tokio::spawn(async move {
            let mut stale = 0;
            let key = run.wrapping_mul(100) + session;
            w.execute("DELETE FROM causal_pg_loop WHERE session = $1", &[&key])
                .await
                .expect("clean");
            for n in 0..100 {
                w.execute("INSERT INTO causal_pg_loop VALUES ($1, $2)", &[&key, &n])
                    .await
                    .expect("insert");
                let seen: i64 = r
                    .query_one(
                        "SELECT count(*) FROM causal_pg_loop WHERE session = $1 AND n = $2",
                        &[&key, &n],
                    )
                    .await
                    .expect("read")
                    .get(0);
                stale += i32::from(seen == 0);
            }
            stale
        }));
    }
    let mut stale = 0;
    for t in tasks {
        stale += t.await.expect("session");
    }
    let global = s.admin_ok(
        "SELECT Variable_Name, Variable_Value FROM stats_pgsql_global WHERE Variable_Name LIKE '%LSN%' ORDER BY 1",
    );
    eprintln!("10,000 write-then-read iterations, {stale} stale\n{global}");
    assert_eq!(stale, 0);
}

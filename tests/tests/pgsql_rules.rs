//! The query processor on the PostgreSQL side with real clients: the read/write split with
//! pgbench, blocking with error_msg (simple and extended protocol), rewrite, hints, digests.

use sluice_tests::*;
use std::process::{Command, Output};
use std::time::Duration;

fn psql(port: u16, sql: &str) -> Output {
    psql_app(port, sql)
}

fn admin(s: &Sluice, sql: &str) -> String {
    ok_stdout(&s.admin(sql))
}

/// Transactions the replica itself counted for database `app`.
fn replica_commits() -> u64 {
    ok_stdout(&psql(
        ports::PG_REPLICA,
        "SELECT xact_commit FROM pg_stat_database WHERE datname = 'app'",
    ))
    .trim()
    .parse()
    .unwrap_or(0)
}

/// (hostgroup, count_star) of the pgbench SELECT digest.
fn select_digest(s: &Sluice, table: &str) -> Vec<(i64, u64)> {
    admin(
        s,
        &format!("SELECT hostgroup, count_star FROM stats_pgsql_{table} WHERE digest_text LIKE 'SELECT abalance FROM pgbench_accounts%' ORDER BY hostgroup"),
    )
    .lines()
    .filter_map(|l| {
        let (h, c) = l.split_once('\t')?;
        Some((h.parse().ok()?, c.parse().ok()?))
    })
    .collect()
}

#[test]
fn pgbench_select_only_goes_to_the_replica_and_tpcb_stays_on_the_primary() {
    if !backends_ready(Servers::Postgres) {
        return;
    }
    ok_stdout(&pgbench(ports::PG_PRIMARY, &["-i", "-q", "-s", "1"]));
    let caught_up = xtask::proc::wait_until(Duration::from_secs(30), || {
        psql(ports::PG_REPLICA, "SELECT count(*) FROM pgbench_branches")
            .stdout
            .starts_with(b"1")
    });
    assert!(caught_up, "the replica did not receive the pgbench tables");
    let s = Sluice::start(&standard_config("", ""));
    admin(
        &s,
        "INSERT INTO pgsql_query_rules (rule_id, active, match_digest, destination_hostgroup, apply) VALUES (1, 1, '^SELECT.*FOR UPDATE', 0, 1), (2, 1, '^SELECT', 1, 1); LOAD PGSQL QUERY RULES TO RUNTIME;",
    );
    assert_eq!(
        admin(
            &s,
            "SELECT rule_id, database IS NULL, destination_hostgroup FROM runtime_pgsql_query_rules ORDER BY rule_id"
        ),
        "1\t1\t0\n2\t1\t1\n"
    );
    let before = replica_commits();
    for mode in ["simple", "prepared"] {
        let out = pgbench(s.pg_port, &["-n", "-S", "-M", mode, "-c", "4", "-T", "4"]);
        let text = ok_stdout(&out);
        assert!(text.contains("number of failed transactions: 0"), "{text}");
    }
    let digests = select_digest(&s, "query_digest_reset");
    eprintln!("pgbench -S: SELECT digest per hostgroup {digests:?}");
    assert!(
        digests.len() == 1 && digests[0].0 == 1 && digests[0].1 > 1000,
        "select-only reads must all go to hostgroup 1: {digests:?}"
    );
    // The replica's statistics are flushed asynchronously: poll until they settle.
    let want = digests[0].1 * 9 / 10;
    xtask::proc::wait_until(Duration::from_secs(10), || {
        replica_commits() - before >= want
    });
    let replica_delta = replica_commits() - before;
    eprintln!("replica counted {replica_delta} transactions");
    assert!(replica_delta >= want, "{replica_delta} vs {digests:?}");

    // The TPC-B-like default script runs BEGIN ... END: its SELECT stays on the primary.
    let out = pgbench(s.pg_port, &["-n", "-c", "4", "-T", "4"]);
    let text = ok_stdout(&out);
    assert!(text.contains("number of failed transactions: 0"), "{text}");
    let digests = select_digest(&s, "query_digest");
    eprintln!("pgbench tpcb-like: SELECT digest per hostgroup {digests:?}");
    assert!(
        digests.len() == 1 && digests[0].0 == 0 && digests[0].1 > 100,
        "reads inside write transactions must stay on hostgroup 0: {digests:?}"
    );
    let hits = admin(
        &s,
        "SELECT rule_id, hits > 0 FROM stats_pgsql_query_rules ORDER BY rule_id",
    );
    assert!(hits.contains("2\t1"), "{hits}");
    let counts = admin(
        &s,
        "SELECT Command, Total_cnt > 100, cnt_100us + cnt_500us + cnt_1ms + cnt_5ms + cnt_10ms + cnt_50ms + cnt_100ms + cnt_500ms + cnt_1s + cnt_5s + cnt_10s + cnt_INFs = Total_cnt FROM stats_pgsql_commands_counters WHERE Command IN ('SELECT', 'UPDATE', 'INSERT') ORDER BY Command",
    );
    assert_eq!(counts, "INSERT\t1\t1\nSELECT\t1\t1\nUPDATE\t1\t1\n");
}

#[test]
fn rules_block_rewrite_route_and_delay_for_psql_and_psycopg() {
    if !backends_ready(Servers::Postgres) {
        return;
    }
    let s = Sluice::start(&standard_config("", ""));
    admin(
        &s,
        r#"INSERT INTO pgsql_query_rules (rule_id, active, match_pattern, error_msg, apply) VALUES (10, 1, 'pg_blocked_table', 'no access to pg_blocked_table', 1);
INSERT INTO pgsql_query_rules (rule_id, active, match_pattern, replace_pattern, apply) VALUES (11, 1, '^SELECT rewrite_me\(\)', 'SELECT 42', 1);
INSERT INTO pgsql_query_rules (rule_id, active, match_pattern, delay, apply) VALUES (12, 1, 'slow_me', 100, 1);
INSERT INTO pgsql_query_rules (rule_id, active, database, match_pattern, destination_hostgroup, apply) VALUES (13, 1, 'other_db', '.', 1, 1);
LOAD PGSQL QUERY RULES TO RUNTIME;"#,
    );
    // error_msg over the simple protocol: psql sees the rule's text and SQLSTATE 42501.
    let out = Command::new("psql")
        .env("PGPASSWORD", "app")
        .env("PGSSLMODE", "disable")
        .args([
            "-h",
            "127.0.0.1",
            "-p",
            &s.pg_port.to_string(),
            "-U",
            "app",
            "-d",
            "app",
        ])
        .args([
            "-X",
            "-q",
            "-A",
            "-t",
            "-v",
            "ON_ERROR_STOP=1",
            "-v",
            "VERBOSITY=verbose",
        ])
        .args(["-c", "SELECT * FROM pg_blocked_table"])
        .output()
        .expect("psql");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success()
            && err.contains("42501")
            && err.contains("no access to pg_blocked_table"),
        "{err}"
    );
    // ... and over the extended protocol (psycopg binds parameters): the session goes on.
    let py = python(
        &format!(
            r#"
import psycopg
c = psycopg.connect("host=127.0.0.1 port={port} user=app password=app dbname=app sslmode=disable", autocommit=True)
try:
    c.execute("SELECT * FROM pg_blocked_table WHERE id = %s", (1,))
    print("not blocked")
except psycopg.Error as e:
    print("blocked:", e.sqlstate, str(e).strip())
print(c.execute("SELECT %s::int + 1", (41,)).fetchone()[0])
print(c.execute("SELECT rewrite_me()").fetchone()[0])
print(c.execute("SELECT /* hostgroup=1 */ inet_server_port()").fetchone()[0])
print(c.execute("SELECT inet_server_port()").fetchone()[0])
"#,
            port = s.pg_port
        ),
        &[],
    );
    let text = ok_stdout(&py);
    assert_eq!(
        text,
        format!(
            "blocked: 42501 no access to pg_blocked_table\n42\n42\n{}\n{}\n",
            ports::PG_REPLICA,
            ports::PG_PRIMARY
        )
    );
    // A rule's delay slows only its own queries: five of each on one connection, timed by the
    // client (starting a psql per query would put process start-up, which a loaded machine
    // stretches, into the comparison).
    let py = python(
        &format!(
            r#"
import time, psycopg
c = psycopg.connect("host=127.0.0.1 port={port} user=app password=app dbname=app sslmode=disable", autocommit=True)
def timed(sql):
    t = time.monotonic()
    for _ in range(5):
        c.execute(sql).fetchone()
    return int((time.monotonic() - t) * 1000)
print(timed("SELECT 'slow_me'"), timed("SELECT 'quick'"))
"#,
            port = s.pg_port
        ),
        &[],
    );
    let text = ok_stdout(&py);
    let ms: Vec<u64> = text
        .split_whitespace()
        .filter_map(|n| n.parse().ok())
        .collect();
    let [slow, fast] = ms[..] else {
        panic!("timings: {text}")
    };
    eprintln!("5 delayed queries {slow} ms, 5 others {fast} ms");
    assert!(slow >= 500, "{slow} ms");
    assert!(slow > fast + 350, "{slow} ms vs {fast} ms");
    let g = admin(
        &s,
        "SELECT hits FROM stats_pgsql_query_rules WHERE rule_id IN (10, 11, 12, 13) ORDER BY rule_id",
    );
    assert_eq!(g, "2\n1\n5\n", "rule 13 (another database) never matched");
    let d = admin(
        &s,
        "SELECT hostgroup, database, count_star FROM stats_pgsql_query_digest WHERE digest_text = 'SELECT * FROM pg_blocked_table WHERE id = ?'",
    );
    assert_eq!(d, "-1\tapp\t1\n");
}

#[test]
fn ok_msg_timeout_log_and_cache_through_psql_and_psycopg() {
    if !backends_ready(Servers::Postgres) {
        return;
    }
    ok_stdout(&psql(
        ports::PG_PRIMARY,
        "DROP TABLE IF EXISTS pg_cache_t; CREATE TABLE pg_cache_t (id int primary key, v text); INSERT INTO pg_cache_t VALUES (1, 'one');",
    ));
    let s = Sluice::start(&standard_config("", ""));
    admin(
        &s,
        r#"INSERT INTO pgsql_query_rules (rule_id, active, match_pattern, OK_msg, log, apply) VALUES (20, 1, '^DELETE FROM nowhere_at_all', 'DELETE 0', 1, 1);
INSERT INTO pgsql_query_rules (rule_id, active, match_pattern, timeout, apply) VALUES (21, 1, 'pg_sleep\(3\)', 500, 1);
INSERT INTO pgsql_query_rules (rule_id, active, match_digest, cache_ttl, apply) VALUES (22, 1, '^SELECT v FROM pg_cache_t', 600000, 1);
LOAD PGSQL QUERY RULES TO RUNTIME;"#,
    );
    // OK_msg answers without a server (the table exists nowhere); log=1 writes the query.
    let py = python(
        &format!(
            r#"
import psycopg, time
c = psycopg.connect("host=127.0.0.1 port={port} user=app password=app dbname=app sslmode=disable", autocommit=True)
cur = c.execute("DELETE FROM nowhere_at_all")
print(cur.statusmessage)
try:
    c.execute("SELECT pg_sleep(3)")
    print("not cancelled")
except psycopg.errors.QueryCanceled as e:
    print("cancelled", e.sqlstate)
print(c.execute("SELECT 7").fetchone()[0])
"#,
            port = s.pg_port
        ),
        &[],
    );
    assert_eq!(ok_stdout(&py), "DELETE 0\ncancelled 57014\n7\n");
    assert!(
        s.log().contains("query: DELETE FROM nowhere_at_all"),
        "{}",
        s.log()
    );
    // The canceller logs once the server took its request, which may be after the client saw
    // the cancel.
    wait_for("the timeout's cancel log line", || {
        s.log().contains("sent a cancel request to the server")
    });

    // The cache: psql sends simple-protocol queries.
    let q = "SELECT v FROM pg_cache_t WHERE id = 1";
    let hits = |s: &Sluice| -> u64 {
        admin(s, "SELECT Variable_Value FROM stats_pgsql_global WHERE Variable_Name = 'Query_Cache_count_GET_OK'")
            .trim()
            .parse()
            .unwrap_or(0)
    };
    let ask = |want: &str| {
        assert_eq!(ok_stdout(&psql(s.pg_port, q)).trim(), want);
    };
    ask("one");
    assert_eq!(hits(&s), 0);
    ask("one");
    ask("one");
    assert_eq!(hits(&s), 2, "served from the cache");
    ok_stdout(&psql(
        s.pg_port,
        "UPDATE pg_cache_t SET v = 'two' WHERE id = 1",
    ));
    ask("two");
    assert_eq!(
        hits(&s),
        2,
        "the UPDATE through Sluice invalidated the entry"
    );
    ask("two");
    assert_eq!(hits(&s), 3);
    // The hits above are checked under a TTL of ten minutes (each check starts client
    // processes, which a loaded machine can slow past a short TTL); the expiry on its own: an
    // entry stored under a TTL of 1.5 s is gone 1.7 s later.
    admin(
        &s,
        "UPDATE pgsql_query_rules SET cache_ttl = 1500 WHERE rule_id = 22; LOAD PGSQL QUERY RULES TO RUNTIME;",
    );
    ok_stdout(&psql(
        s.pg_port,
        "UPDATE pg_cache_t SET v = 'two' WHERE id = 1",
    ));
    ask("two");
    assert_eq!(hits(&s), 3, "invalidated by the UPDATE, stored again");
    std::thread::sleep(Duration::from_millis(1700));
    ask("two");
    assert_eq!(hits(&s), 3, "expired after cache_ttl");
    admin(&s, "PROXYSQL FLUSH PGSQL QUERY CACHE");
    ask("two");
    assert_eq!(hits(&s), 3, "flushed");
    let local = admin(
        &s,
        "SELECT count_star FROM stats_pgsql_query_digest WHERE hostgroup = -1 AND digest_text = 'SELECT v FROM pg_cache_t WHERE id = ?'",
    );
    assert_eq!(local.trim(), "3");
}

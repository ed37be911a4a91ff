//! The query processor on the MySQL side, end to end with real clients: the classic read/write
//! split with sysbench, every rule action, chains, hints, the cache and the digest stats.

use sluice_tests::*;
use std::time::{Duration, Instant};

/// SQL through Sluice with the mariadb CLI (no TLS), one connection; stdout.
fn sql(s: &Sluice, text: &str) -> String {
    ok_stdout(&mariadb(s.port, "app", "app", &["--skip-ssl"], text))
}

/// One admin statement (or several), checked.
fn admin(s: &Sluice, text: &str) -> String {
    ok_stdout(&s.admin(text))
}

/// `Queries` of a hostgroup in `stats_mysql_connection_pool`.
fn pool_queries(s: &Sluice, hostgroup: u32) -> u64 {
    admin(
        s,
        &format!("SELECT COALESCE(SUM(Queries),0) FROM stats.stats_mysql_connection_pool WHERE hostgroup={hostgroup}"),
    )
    .trim()
    .parse()
    .unwrap_or(0)
}

fn replica_root(text: &str) -> String {
    ok_stdout(&mariadb(
        ports::MY_REPLICA,
        "root",
        "root",
        &["--skip-ssl"],
        text,
    ))
}

fn replica_counter(names: &str) -> u64 {
    replica_root(&format!(
        "SELECT SUM(VARIABLE_VALUE) FROM information_schema.GLOBAL_STATUS WHERE VARIABLE_NAME IN ({names})"
    ))
    .trim()
    .parse()
    .unwrap_or(0)
}

/// The split test's own sysbench tables.
const SBSPLIT: (&str, u32, u32) = ("sbsplit", 1, 1000);

const SPLIT_RULES: &str = "INSERT INTO mysql_query_rules (rule_id, active, match_digest, destination_hostgroup, apply) VALUES (1, 1, '^SELECT.*FOR UPDATE', 0, 1), (2, 1, '^SELECT', 1, 1); LOAD MYSQL QUERY RULES TO RUNTIME; SAVE MYSQL QUERY RULES TO DISK;";

#[test]
fn classic_read_write_split_sends_sysbench_reads_to_the_replica() {
    if !backends_ready(Servers::MariaDb) {
        return;
    }
    primary_root("CREATE DATABASE IF NOT EXISTS sbsplit;");
    let _ = sysbench(ports::MY_PRIMARY, SBSPLIT, "oltp_read_only", &[], "cleanup");
    ok_stdout(&sysbench(
        ports::MY_PRIMARY,
        SBSPLIT,
        "oltp_read_only",
        &[],
        "prepare",
    ));
    let replicated = xtask::proc::wait_until(Duration::from_secs(60), || {
        mariadb(
            ports::MY_REPLICA,
            "root",
            "root",
            &["--skip-ssl"],
            "SELECT COUNT(*) FROM sbsplit.sbtest1",
        )
        .stdout
        .starts_with(b"1000")
    });
    assert!(replicated, "the replica did not receive sbsplit.sbtest1");

    let s = Sluice::start(&standard_config("", ""));
    admin(&s, SPLIT_RULES);
    assert_eq!(
        admin(
            &s,
            "SELECT rule_id, match_digest, destination_hostgroup FROM runtime_mysql_query_rules ORDER BY rule_id"
        ),
        "1\t^SELECT.*FOR UPDATE\t0\n2\t^SELECT\t1\n"
    );
    let replica_before = replica_counter("'COM_SELECT','COM_STMT_EXECUTE'");
    let out = sysbench(
        s.port,
        SBSPLIT,
        "oltp_read_only",
        &[
            "--threads=4",
            "--time=5",
            "--report-interval=0",
            "--skip_trx=on",
        ],
        "run",
    );
    let text = ok_stdout(&out);
    assert!(!text.contains("FATAL"), "{text}");
    let to_replica = pool_queries(&s, 1);
    let to_primary = pool_queries(&s, 0);
    let replica_delta = replica_counter("'COM_SELECT','COM_STMT_EXECUTE'") - replica_before;
    eprintln!(
        "oltp_read_only: hostgroup 1 (replica) {to_replica} queries, hostgroup 0 {to_primary}; replica's own counters +{replica_delta}"
    );
    assert!(
        to_replica > 1000,
        "reads did not reach the reader hostgroup: {to_replica}\n{text}"
    );
    assert!(
        to_primary * 100 <= to_replica,
        "reads leaked to the writer: {to_primary} vs {to_replica}"
    );
    assert!(
        replica_delta >= to_replica * 9 / 10,
        "replica counted {replica_delta} of {to_replica}"
    );

    // Read/write transactions stay on the writer (transaction_persistent), reads included.
    let (r0, p0) = (pool_queries(&s, 1), pool_queries(&s, 0));
    let out = sysbench(
        s.port,
        SBSPLIT,
        "oltp_read_write",
        &["--threads=4", "--time=5", "--report-interval=0"],
        "run",
    );
    let text = ok_stdout(&out);
    assert!(!text.contains("FATAL"), "{text}");
    let (r1, p1) = (pool_queries(&s, 1), pool_queries(&s, 0));
    eprintln!(
        "oltp_read_write: hostgroup 0 +{}, hostgroup 1 +{}",
        p1 - p0,
        r1 - r0
    );
    assert!(p1 - p0 > 1000, "{text}");
    assert_eq!(r1, r0, "a read inside a write transaction left the writer");
    // SELECT ... FOR UPDATE outside a transaction still goes to the writer (rule 1).
    assert_eq!(
        sql(
            &s,
            "SELECT @@port FROM sbsplit.sbtest1 WHERE id=1 FOR UPDATE"
        ),
        format!("{}\n", ports::MY_PRIMARY)
    );
    assert_eq!(sql(&s, "SELECT @@port"), format!("{}\n", ports::MY_REPLICA));
    let hits = admin(
        &s,
        "SELECT rule_id, hits > 0 FROM stats.stats_mysql_query_rules ORDER BY rule_id",
    );
    assert_eq!(hits, "1\t1\n2\t1\n");
}

#[test]
fn every_rule_action_with_a_real_client() {
    if !backends_ready(Servers::MariaDb) {
        return;
    }
    primary_root(
        "CREATE DATABASE IF NOT EXISTS qrtest; CREATE TABLE IF NOT EXISTS qrtest.mirror (id INT AUTO_INCREMENT PRIMARY KEY, tag VARCHAR(40)); DELETE FROM qrtest.mirror;",
    );
    let s = Sluice::start(&standard_config("", ""));
    let p = ports::MY_PRIMARY;
    let r = ports::MY_REPLICA;
    admin(
        &s,
        r#"INSERT INTO mysql_query_rules (rule_id, active, match_pattern, error_msg, apply) VALUES (10, 1, '^SELECT .blocked.', 'blocked by rule 10', 1);
INSERT INTO mysql_query_rules (rule_id, active, match_pattern, OK_msg, apply) VALUES (11, 1, '^DELETE FROM no_such_table', 'handled by sluice', 1);
INSERT INTO mysql_query_rules (rule_id, active, match_pattern, replace_pattern, apply) VALUES (12, 1, '^SELECT rewrite_me\(\)', 'SELECT 42', 1);
INSERT INTO mysql_query_rules (rule_id, active, match_pattern, replace_pattern, apply) VALUES (13, 1, 'swap (\w+) (\w+)', 'swap \2 \1', 1);
INSERT INTO mysql_query_rules (rule_id, active, match_pattern, flagOUT) VALUES (20, 1, 'chain_me', 5);
INSERT INTO mysql_query_rules (rule_id, active, flagIN, match_pattern, destination_hostgroup, apply) VALUES (21, 1, 5, '.', 1, 1);
INSERT INTO mysql_query_rules (rule_id, active, match_pattern, destination_hostgroup, apply) VALUES (30, 1, 'stop_here', 1, 1);
INSERT INTO mysql_query_rules (rule_id, active, match_pattern, destination_hostgroup) VALUES (31, 1, 'stop_here', 0);
INSERT INTO mysql_query_rules (rule_id, active, match_pattern, destination_hostgroup) VALUES (40, 1, 'override_me', 1);
INSERT INTO mysql_query_rules (rule_id, active, match_pattern, destination_hostgroup, apply) VALUES (41, 1, 'override_me', 0, 1);
INSERT INTO mysql_query_rules (rule_id, active, match_pattern, next_query_flagIN, apply) VALUES (60, 1, 'set_next_flag', 7, 1);
INSERT INTO mysql_query_rules (rule_id, active, flagIN, match_pattern, destination_hostgroup, apply) VALUES (61, 1, 7, '.', 1, 1);
INSERT INTO mysql_query_rules (rule_id, active, match_pattern, timeout, apply) VALUES (70, 1, 'SLEEP\(3\)', 500, 1);
INSERT INTO mysql_query_rules (rule_id, active, match_pattern, mirror_hostgroup, apply) VALUES (80, 1, 'mirror_me', 0, 1);
INSERT INTO mysql_query_rules (rule_id, active, match_pattern, mirror_hostgroup, mirror_flagOUT, apply) VALUES (81, 1, 'mirror_flag_me', 0, 8, 1);
INSERT INTO mysql_query_rules (rule_id, active, flagIN, match_pattern, replace_pattern, apply) VALUES (82, 1, 8, 'mirror_flag_me', 'mirror_flag_copy', 1);
INSERT INTO mysql_query_rules (rule_id, active, match_pattern, log, multiplex, apply) VALUES (90, 1, 'pin_me', 1, 0, 1);
INSERT INTO mysql_query_rules (rule_id, active, match_pattern, multiplex, apply) VALUES (91, 1, 'release_now', 1, 1);
INSERT INTO mysql_query_rules (rule_id, active, match_pattern, multiplex, apply) VALUES (92, 1, '@keep_multiplexing', 2, 1);
INSERT INTO mysql_query_rules (rule_id, active, match_pattern, sticky_conn, apply) VALUES (93, 1, 'stick_me', 1, 1);
INSERT INTO mysql_query_rules (rule_id, active, match_pattern, negate_match_pattern, flagIN, destination_hostgroup, apply) VALUES (95, 1, 'primary_please', 1, 9, 1, 1);
INSERT INTO mysql_query_rules (rule_id, active, match_pattern, flagOUT) VALUES (94, 1, 'negation_test', 9);
INSERT INTO mysql_query_rules (rule_id, active, username, match_pattern, destination_hostgroup, apply) VALUES (99, 1, 'nobody', '.', 1, 1);
LOAD MYSQL QUERY RULES TO RUNTIME;"#,
    );
    // error_msg: the client gets the rule's text as a MySQL error.
    let out = mariadb(s.port, "app", "app", &["--skip-ssl"], "SELECT 'blocked'");
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("1148") && err.contains("blocked by rule 10"),
        "{err}"
    );
    // OK_msg: answered without a backend (the table does not exist anywhere).
    assert_eq!(
        sql(&s, "DELETE FROM no_such_table; SELECT 'after ok'"),
        "after ok\n"
    );
    // Rewrites, with and without capture groups.
    assert_eq!(sql(&s, "SELECT rewrite_me()"), "42\n");
    assert_eq!(sql(&s, "SELECT 'swap left right'"), "swap right left\n");
    // flagOUT chains into flagIN rules; apply stops; later matches override earlier ones.
    let port_of = |q: &str| {
        sql(&s, q)
            .trim()
            .split('\t')
            .next()
            .unwrap_or_default()
            .to_string()
    };
    assert_eq!(port_of("SELECT @@port, 'chain_me'"), r.to_string());
    assert_eq!(port_of("SELECT @@port, 'stop_here'"), r.to_string());
    assert_eq!(port_of("SELECT @@port, 'override_me'"), p.to_string());
    // negate_match_pattern: in the flag-9 chain, anything NOT matching goes to the replica.
    assert_eq!(port_of("SELECT @@port, 'negation_test'"), r.to_string());
    assert_eq!(
        port_of("SELECT @@port, 'negation_test primary_please'"),
        p.to_string()
    );
    // username: a rule for another user never matches.
    assert_eq!(port_of("SELECT @@port"), p.to_string());
    // next_query_flagIN applies to the session's next query only.
    assert_eq!(
        sql(&s, "SELECT 'set_next_flag'; SELECT @@port; SELECT @@port;"),
        format!("set_next_flag\n{r}\n{p}\n")
    );
    // A first-comment hint routes one query.
    // (--comments: the CLI strips comments otherwise.)
    let hinted = mariadb(
        s.port,
        "app",
        "app",
        &["--skip-ssl", "--comments"],
        "SELECT /* hostgroup=1 */ @@port",
    );
    assert_eq!(ok_stdout(&hinted), format!("{r}\n"));
    // timeout: the server's query is killed after 500 ms.
    let out = mariadb(s.port, "app", "app", &["--skip-ssl"], "SELECT SLEEP(3)");
    // A killed SLEEP() returns 1 (0 when it slept its full time) or fails with error 1317.
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert!(
        stdout.trim() == "1" || stderr.contains("ERROR 1317"),
        "timeout did not stop the query: {out:?}"
    );
    // The killer logs after its KILL returns, which may be after the client saw the result.
    let logged = xtask::proc::wait_until(Duration::from_secs(5), || {
        s.log().contains("sent KILL QUERY to the server")
    });
    assert!(logged, "{out:?}\n{}", s.log());
    // mirror: a fire-and-forget copy runs too (here on the same writer: two rows).
    sql(&s, "INSERT INTO qrtest.mirror (tag) VALUES ('mirror_me')");
    let mirrored = xtask::proc::wait_until(Duration::from_secs(10), || {
        primary_root("SELECT COUNT(*) FROM qrtest.mirror WHERE tag='mirror_me'").trim() == "2"
    });
    assert!(mirrored, "mirror copy did not run");
    // mirror_flagOUT: the copy goes through the flag-8 rules, which rewrite it.
    sql(
        &s,
        "INSERT INTO qrtest.mirror (tag) VALUES ('mirror_flag_me')",
    );
    let rewritten_copy = xtask::proc::wait_until(Duration::from_secs(10), || {
        primary_root("SELECT GROUP_CONCAT(tag ORDER BY tag) FROM qrtest.mirror WHERE tag LIKE 'mirror_flag%'").trim()
            == "mirror_flag_copy,mirror_flag_me"
    });
    assert!(
        rewritten_copy,
        "mirror copy was not rewritten by its flag's rules"
    );
    // log=1 writes the query to the log; multiplex=0 pins the session.
    let py = python(
        &format!(
            r#"
import pymysql, subprocess
c = pymysql.connect(host="127.0.0.1", port={port}, user="app", password="app", autocommit=True)
cur = c.cursor()
def reason():
    out = subprocess.run(["mariadb", "--no-defaults", "-h127.0.0.1", "-P{admin}", "-uadmin", "-padmin", "--skip-ssl", "-N", "-B",
        "-e", "SELECT COALESCE(pin_reason, '-') FROM stats_mysql_processlist"], capture_output=True, text=True)
    return out.stdout.strip()
cur.execute("SELECT 'pin_me'")
print(reason())
cur.execute("SELECT 'release_now'")
print(reason())
# A user variable pins a session, except with a multiplex=2 rule.
cur.execute("SET @keep_multiplexing = 1")
print(reason())
cur.execute("SET @other_var = 1")
print(reason())
d = pymysql.connect(host="127.0.0.1", port={port}, user="app", password="app", autocommit=True)
d.cursor().execute("SELECT 'stick_me'")
print(reason().split()[-1])
"#,
            port = s.port,
            admin = s.admin_port
        ),
        &[],
    );
    assert_eq!(
        ok_stdout(&py).trim(),
        "query rule (multiplex=0)\n-\n-\nuser variable\n(multiplex=0)",
        "multiplex=0 pins, multiplex=1 unpins, multiplex=2 keeps a SET @var multiplexed, sticky_conn pins"
    );
    assert!(s.log().contains("query: SELECT 'pin_me'"), "{}", s.log());

    // Stats: hits per rule, digests with their text, the _reset table empties the map.
    let hits = admin(
        &s,
        "SELECT rule_id, hits FROM stats_mysql_query_rules WHERE rule_id IN (10, 31, 99) ORDER BY rule_id",
    );
    assert_eq!(hits, "10\t1\n");
    let digests = admin(
        &s,
        "SELECT hostgroup, digest_text, count_star FROM stats_mysql_query_digest WHERE digest_text LIKE 'SELECT @@port,?%' ORDER BY hostgroup",
    );
    assert!(digests.contains("1\tSELECT @@port,?\t"), "{digests}");
    let blocked = admin(
        &s,
        "SELECT hostgroup, count_star FROM stats_mysql_query_digest WHERE digest_text = 'SELECT ?' AND hostgroup = -1",
    );
    assert!(
        !blocked.trim().is_empty(),
        "blocked query recorded with hostgroup -1"
    );
    let n: u64 = admin(&s, "SELECT COUNT(*) FROM stats_mysql_query_digest_reset")
        .trim()
        .parse()
        .unwrap_or(0);
    assert!(n > 5, "{n}");
    assert_eq!(
        admin(&s, "SELECT COUNT(*) FROM stats_mysql_query_digest").trim(),
        "0"
    );
    // (The mirror task counts its copy after the server answered: poll.)
    let counters = || {
        admin(
            &s,
            "SELECT Variable_Value FROM stats_mysql_global WHERE Variable_Name IN ('Queries_blocked_by_rules', 'Queries_rewritten', 'Queries_killed_by_timeout', 'Queries_mirrored') ORDER BY Variable_Name",
        )
    };
    xtask::proc::wait_until(Duration::from_secs(5), || counters() == "1\n1\n2\n2\n");
    assert_eq!(
        counters(),
        "1\n1\n2\n2\n",
        "blocked, killed, mirrored, rewritten"
    );

    // mysql_query_rules_fast_routing: (user, schema, flagIN) → hostgroup when no rule chose one.
    admin(
        &s,
        "INSERT INTO mysql_query_rules_fast_routing (username, schemaname, flagIN, destination_hostgroup, comment) VALUES ('app', 'qrtest', 0, 1, 'reads of qrtest'); LOAD MYSQL QUERY RULES TO RUNTIME;",
    );
    assert_eq!(sql(&s, "USE qrtest; SELECT @@port"), format!("{r}\n"));
    assert_eq!(
        sql(&s, "SELECT @@port"),
        format!("{p}\n"),
        "other schemas unaffected"
    );
    assert_eq!(
        admin(
            &s,
            "SELECT username, schemaname, destination_hostgroup FROM runtime_mysql_query_rules_fast_routing"
        ),
        "app\tqrtest\t1\n"
    );
}

#[test]
fn query_cache_serves_expires_and_is_invalidated_by_writes() {
    if !backends_ready(Servers::MariaDb) {
        return;
    }
    primary_root(
        "CREATE DATABASE IF NOT EXISTS qrcache; CREATE TABLE IF NOT EXISTS qrcache.t (id INT PRIMARY KEY, v VARCHAR(20)); REPLACE INTO qrcache.t VALUES (1, 'one');",
    );
    let s = Sluice::start(&standard_config("", ""));
    admin(
        &s,
        "INSERT INTO mysql_query_rules (rule_id, active, match_pattern, cache_ttl, cache_empty_result, apply) VALUES (1, 1, 'id = 99', 600000, 0, 1); INSERT INTO mysql_query_rules (rule_id, active, match_digest, cache_ttl, apply) VALUES (2, 1, '^SELECT v FROM qrcache', 600000, 1); LOAD MYSQL QUERY RULES TO RUNTIME;",
    );
    // The hits are checked under a TTL of ten minutes: each check starts client processes,
    // which a loaded machine can slow past a short TTL. The expiry is checked apart below.
    let q = "SELECT v FROM qrcache.t WHERE id = 1";
    let ask = |want: &str| -> u64 {
        let before = pool_queries(&s, 0);
        assert_eq!(sql(&s, q), format!("{want}\n"));
        pool_queries(&s, 0) - before
    };
    assert_eq!(ask("one"), 1, "first read reaches the server");
    assert_eq!(ask("one"), 0, "second read is served from the cache");
    assert_eq!(ask("one"), 0);
    // A write through Sluice to the table invalidates its cached reads.
    sql(&s, "UPDATE qrcache.t SET v = 'two' WHERE id = 1");
    assert_eq!(ask("two"), 1, "invalidated by the UPDATE");
    assert_eq!(ask("two"), 0);
    // The TTL ends the entry: an entry stored under a TTL of 1.5 s is gone 1.7 s later.
    admin(
        &s,
        "UPDATE mysql_query_rules SET cache_ttl = 1500 WHERE rule_id = 2; LOAD MYSQL QUERY RULES TO RUNTIME;",
    );
    sql(&s, "UPDATE qrcache.t SET v = 'two' WHERE id = 1");
    assert_eq!(ask("two"), 1, "invalidated by the UPDATE, stored again");
    std::thread::sleep(Duration::from_millis(1700));
    assert_eq!(ask("two"), 1, "expired after cache_ttl");
    // cache_empty_result=0: a result without rows is not kept.
    for _ in 0..2 {
        let before = pool_queries(&s, 0);
        assert_eq!(sql(&s, "SELECT v FROM qrcache.t WHERE id = 99"), "");
        assert_eq!(
            pool_queries(&s, 0) - before,
            1,
            "empty results are not cached"
        );
    }
    let affected = s.admin("PROXYSQL FLUSH QUERY CACHE");
    ok_stdout(&affected);
    assert_eq!(ask("two"), 1, "flushed");
    let g = admin(
        &s,
        "SELECT Variable_Value FROM stats_mysql_global WHERE Variable_Name = 'Query_Cache_count_GET_OK'",
    );
    assert_eq!(g.trim(), "3");
    let hits = admin(
        &s,
        "SELECT count_star FROM stats_mysql_query_digest WHERE hostgroup = -1 AND digest_text = 'SELECT v FROM qrcache.t WHERE id = ?'",
    );
    assert_eq!(
        hits.trim(),
        "3",
        "cache hits are recorded with hostgroup -1"
    );
}

#[test]
fn seed_throttle_a_rule_delay_slows_only_its_queries_and_the_global_delay_slows_all() {
    if !backends_ready(Servers::MariaDb) {
        return;
    }
    primary_root(
        "CREATE DATABASE IF NOT EXISTS qrthrottle; CREATE TABLE IF NOT EXISTS qrthrottle.t (id INT PRIMARY KEY, v INT); REPLACE INTO qrthrottle.t VALUES (1, 0);",
    );
    let s = Sluice::start(&standard_config("", ""));
    admin(
        &s,
        "INSERT INTO mysql_query_rules (rule_id, active, match_digest, destination_hostgroup, apply) VALUES (3, 1, '^UPDATE .*', 0, 0); LOAD MYSQL QUERY RULES TO RUNTIME;",
    );
    // A bounded loop: 20 statements on one connection, timed.
    let timed = |q: &str| {
        let t = Instant::now();
        sql(&s, &format!("{q};").repeat(20));
        t.elapsed()
    };
    let update = "UPDATE qrthrottle.t SET v = v + 1 WHERE id = 1";
    let select = "SELECT v FROM qrthrottle.t WHERE id = 1";
    let (u0, s0) = (timed(update), timed(select));
    // The seed's per-rule throttle, verbatim.
    admin(
        &s,
        "update mysql_query_rules set delay = 50 where rule_id = 3 ; LOAD MYSQL QUERY RULES TO RUNTIME;",
    );
    // Which statements were held is counted (Queries_delayed, bumped before a held statement
    // is sent); the times show that the holds are as long as configured.
    let delayed = || -> u64 {
        admin(
            &s,
            "SELECT Variable_Value FROM stats_mysql_global WHERE Variable_Name = 'Queries_delayed'",
        )
        .trim()
        .parse()
        .unwrap_or(0)
    };
    let (u1, s1) = (timed(update), timed(select));
    assert_eq!(delayed(), 20, "the rule held its 20 UPDATEs and no SELECT");
    // The seed's global throttle.
    admin(
        &s,
        "set mysql-default_query_delay = 30 ; LOAD MYSQL VARIABLES TO RUNTIME;",
    );
    let (u2, s2) = (timed(update), timed(select));
    assert_eq!(delayed(), 60, "the global delay held all 40 statements");
    admin(
        &s,
        "set mysql-default_query_delay = 0 ; LOAD MYSQL VARIABLES TO RUNTIME; update mysql_query_rules set delay = 0 where rule_id = 3 ; LOAD MYSQL QUERY RULES TO RUNTIME;",
    );
    let (u3, s3) = (timed(update), timed(select));
    assert_eq!(delayed(), 60, "back to 0: nothing more is held");
    eprintln!(
        "20 UPDATEs / 20 SELECTs: no delay {u0:?}/{s0:?}; rule delay 50ms {u1:?}/{s1:?}; + global 30ms {u2:?}/{s2:?}; back to 0 {u3:?}/{s3:?}"
    );
    let ms = Duration::from_millis;
    assert!(u1 >= ms(1000), "the rule's delay holds each UPDATE: {u1:?}");
    assert!(
        u2 >= ms(1600) && s2 >= ms(600),
        "the global delay adds to every query: {u2:?} {s2:?}"
    );
}

use super::*;
use crate::readonly::corpus;

const TIMEOUT: u64 = 30_000;

fn my(sql: &str) -> Result<ReadKind, Refusal> {
    check_read(sql, Dialect::Mysql, TIMEOUT)
}

fn pg(sql: &str) -> Result<ReadKind, Refusal> {
    check_read(sql, Dialect::Pgsql, TIMEOUT)
}

#[test]
fn every_attempt_of_the_corpus_is_refused_by_the_lexer_alone() {
    for (dialect, list) in [
        (Dialect::Mysql, corpus::MYSQL),
        (Dialect::Pgsql, corpus::PGSQL),
    ] {
        assert!(list.len() >= 80, "{dialect:?}: {} attempts", list.len());
        for attempt in list {
            let sql = attempt.replace("{t}", "mcp_canary");
            let verdict = check_read(&sql, dialect, TIMEOUT);
            let Err(Refusal(why)) = verdict else {
                panic!("{dialect:?}: {sql:?} passed the lexer as {verdict:?}");
            };
            assert!(!why.is_empty(), "{sql:?}: a reason");
        }
    }
}

#[test]
fn ordinary_reads_pass_with_their_kind() {
    for sql in [
        "SELECT created_at, updated_at, start_date, `release`, payload FROM t WHERE deleted = 0",
        "select * from orders o join users u on u.id = o.user_id where o.total > 10 limit 5;",
        "WITH recent AS (SELECT * FROM t WHERE created_at > NOW() - INTERVAL 1 DAY) SELECT COUNT(*) FROM recent",
        "SELECT REPLACE(name, 'a', 'b'), INSERT(name, 1, 2, 'x'), CAST(x AS CHAR CHARACTER SET utf8mb4) FROM t",
        "SELECT t.update, t.delete FROM t",
        "SELECT merge FROM t",
        "SELECT SUBSTRING(name FROM 1 FOR 3) FROM t",
        "SELECT SLEEP(1)",
        "(SELECT 1) UNION ALL (SELECT 2)",
        "VALUES ROW(1, 2)",
        "TABLE t",
        "SELECT 'DROP TABLE t; --', \"; DELETE\" FROM dual",
        "SELECT 1 -- trailing comment ; DROP TABLE t",
    ] {
        assert_eq!(my(sql), Ok(ReadKind::Query), "{sql}");
    }
    assert_eq!(my("SHOW TABLES"), Ok(ReadKind::Show));
    assert_eq!(my("DESCRIBE t"), Ok(ReadKind::Show));
    assert_eq!(
        my("EXPLAIN FORMAT=JSON SELECT * FROM t"),
        Ok(ReadKind::Explain)
    );
    for sql in [
        "SELECT created_at::date, jsonb_build_object('a', 1) FROM t WHERE x = $1",
        "WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM r WHERE n < 5) SELECT * FROM r",
        "SELECT $$ ; DROP TABLE t $$ AS harmless",
        "SELECT \"update\", \"select\" FROM \"Weird Table\"",
        "SELECT pg_sleep(0.5)",
        "SELECT current_setting('search_path'), pg_backend_pid()",
    ] {
        assert_eq!(pg(sql), Ok(ReadKind::Query), "{sql}");
    }
    assert_eq!(
        pg("EXPLAIN (FORMAT JSON) SELECT * FROM t"),
        Ok(ReadKind::Explain)
    );
    assert_eq!(pg("SHOW search_path"), Ok(ReadKind::Show));
}

#[test]
fn a_sleep_within_the_timeout_runs_and_one_beyond_it_is_refused() {
    assert!(check_read("SELECT SLEEP(2)", Dialect::Mysql, 5_000).is_ok());
    let e = check_read("SELECT SLEEP(6)", Dialect::Mysql, 5_000).expect_err("beyond");
    assert!(e.0.contains("5000 ms"), "{e}");
}

#[test]
fn refusals_say_why() {
    let e = my("SELECT 1; RENAME TABLE t TO u").expect_err("stacked");
    assert!(e.0.contains("one statement"), "{e}");
    let e = pg("SELECT pg_advisory_lock(1)").expect_err("lock");
    assert!(e.0.contains("pg_advisory_lock()"), "{e}");
    let e = my("SELECT * FROM t /*!50000 INTO OUTFILE '/tmp/x' */").expect_err("comment");
    assert!(e.0.contains("executable comments"), "{e}");
    let e = pg("EXPLAIN (ANALYZE) DELETE FROM t").expect_err("analyze");
    assert!(e.0.contains("ANALYZE"), "{e}");
}

mod properties {
    use super::*;
    use proptest::prelude::*;

    const READS: &[&str] = &[
        "SELECT 1",
        "SELECT a FROM t WHERE b = 'x'",
        "WITH c AS (SELECT 1) SELECT * FROM c",
        "SHOW TABLES",
        "EXPLAIN SELECT 1",
    ];

    proptest! {
        /// Any text gets a verdict: the lexer never panics and never loops, whatever an agent
        /// sends (bounded by the request body).
        #[test]
        fn any_text_gets_a_verdict(sql in "\\PC{0,300}") {
            let _ = check_read(&sql, Dialect::Mysql, 30_000);
            let _ = check_read(&sql, Dialect::Pgsql, 30_000);
        }

        /// A read followed by `;` and any further statement is refused, however the second
        /// one is spelled.
        #[test]
        fn a_second_statement_is_always_refused(
            read in proptest::sample::select(READS),
            tail in "[A-Za-z_ (),*=0-9]{1,60}",
        ) {
            prop_assume!(tail.chars().any(|c| c.is_ascii_alphanumeric()));
            let sql = format!("{read}; {tail}");
            prop_assert!(check_read(&sql, Dialect::Mysql, 30_000).is_err(), "{}", sql);
            prop_assert!(check_read(&sql, Dialect::Pgsql, 30_000).is_err(), "{}", sql);
        }

        /// An identifier that merely contains a keyword is never what refuses a read.
        #[test]
        fn identifiers_containing_keywords_pass(
            prefix in "[a-z]{1,6}",
            kw in proptest::sample::select(&["update", "delete", "insert", "drop", "into", "set", "lock", "analyze"][..]),
            suffix in "[a-z]{0,6}",
        ) {
            let col = format!("{prefix}_{kw}_{suffix}");
            let sql = format!("SELECT {col} FROM t WHERE {col} > 0");
            prop_assert!(check_read(&sql, Dialect::Mysql, 30_000).is_ok(), "{}", sql);
            prop_assert!(check_read(&sql, Dialect::Pgsql, 30_000).is_ok(), "{}", sql);
        }
    }
}

//! Table-driven digest cases for both dialects, and properties that hold for any input.

use super::digest::{Dialect, Digest, StatementKind, digest, digest_reusing};
use proptest::prelude::*;

const MYSQL: &[(&str, &str)] = &[
    (
        "SELECT * FROM t WHERE id = 1",
        "SELECT * FROM t WHERE id = ?",
    ),
    ("select * from t where id=1", "SELECT * FROM t WHERE id=?"),
    ("SELECT 'abc'", "SELECT ?"),
    ("SELECT 'it''s'", "SELECT ?"),
    ("SELECT 'a\\'b', 1", "SELECT ?,..."),
    ("SELECT \"double quoted\"", "SELECT ?"),
    ("SELECT `col` FROM `t`", "SELECT `col` FROM `t`"),
    ("SELECT 0x1F", "SELECT ?"),
    ("SELECT X'1F'", "SELECT ?"),
    ("SELECT x'1f'", "SELECT ?"),
    ("SELECT b'101'", "SELECT ?"),
    ("SELECT B'101'", "SELECT ?"),
    ("SELECT 0b101", "SELECT ?"),
    ("SELECT N'abc'", "SELECT ?"),
    ("SELECT _utf8mb4'abc'", "SELECT ?"),
    ("SELECT 1.5e10", "SELECT ?"),
    ("SELECT 2.5E-3", "SELECT ?"),
    ("SELECT .5", "SELECT ?"),
    ("SELECT -1", "SELECT ?"),
    ("SELECT a - 1 FROM t", "SELECT a - ? FROM t"),
    ("SELECT a-1 FROM t", "SELECT a-? FROM t"),
    (
        "SELECT * FROM t WHERE x = -1.5",
        "SELECT * FROM t WHERE x = ?",
    ),
    (
        "SELECT * FROM t WHERE id IN (1,2,3)",
        "SELECT * FROM t WHERE id IN (?,...)",
    ),
    (
        "SELECT * FROM t WHERE id IN ( 1 , 2 , 3 )",
        "SELECT * FROM t WHERE id IN (?,...)",
    ),
    (
        "SELECT * FROM t WHERE id IN (1)",
        "SELECT * FROM t WHERE id IN (?)",
    ),
    (
        "SELECT * FROM t WHERE id IN ('a','b')",
        "SELECT * FROM t WHERE id IN (?,...)",
    ),
    (
        "INSERT INTO t VALUES (1,2),(3,4),(5,6)",
        "INSERT INTO t VALUES (?,...),...",
    ),
    (
        "INSERT INTO t VALUES (1), (2), (3)",
        "INSERT INTO t VALUES (?),...",
    ),
    (
        "INSERT INTO t (a,b) VALUES (1,'x')",
        "INSERT INTO t (a,b) VALUES (?,...)",
    ),
    (
        "SELECT * FROM t WHERE (a,b) IN ((1,2),(3,4))",
        "SELECT * FROM t WHERE (a,b) IN ((?,...),...)",
    ),
    ("SELECT /* comment */ 1", "SELECT ?"),
    ("/* hostgroup=1 */ SELECT 1", "SELECT ?"),
    ("SELECT 1 -- trailing", "SELECT ?"),
    ("SELECT 1 # hash comment", "SELECT ?"),
    ("SELECT 1--2", "SELECT ?-?"),
    ("SELECT 1 --\nFROM dual", "SELECT ? FROM dual"),
    ("SELECT\n\t*\nFROM   t", "SELECT * FROM t"),
    (
        "select count(*) from sbtest1",
        "SELECT count(*) FROM sbtest1",
    ),
    (
        "SELECT c FROM sbtest1 WHERE id BETWEEN 5 AND 10",
        "SELECT c FROM sbtest1 WHERE id BETWEEN ? AND ?",
    ),
    (
        "SELECT * FROM t1 JOIN t2 ON t1.a = t2.b WHERE t1.c = 'x'",
        "SELECT * FROM t1 JOIN t2 ON t1.a = t2.b WHERE t1.c = ?",
    ),
    (
        "UPDATE sbtest1 SET k=k+1 WHERE id=5",
        "UPDATE sbtest1 SET k=k+? WHERE id=?",
    ),
    (
        "DELETE FROM sbtest1 WHERE id=5",
        "DELETE FROM sbtest1 WHERE id=?",
    ),
    ("SELECT * FROM db1.t1", "SELECT * FROM db1.t1"),
    ("SELECT * FROM `db1`.`t1`", "SELECT * FROM `db1`.`t1`"),
    ("SELECT NULL", "SELECT NULL"),
    ("select true", "SELECT TRUE"),
    ("SELECT * FROM t LIMIT 10", "SELECT * FROM t LIMIT ?"),
    (
        "SELECT * FROM t WHERE a = ? AND b = ?",
        "SELECT * FROM t WHERE a = ? AND b = ?",
    ),
    ("SELECT 1; SELECT 2", "SELECT ?; SELECT ?"),
    ("SELECT 1;", "SELECT ?"),
    ("", ""),
    ("   \n ", ""),
    ("SELECT 'unterminated", "SELECT ?"),
    ("/* unterminated", ""),
    (
        "SELECT c FROM t WHERE id=1 FOR UPDATE",
        "SELECT c FROM t WHERE id=? FOR UPDATE",
    ),
    ("SELECT 1abc FROM t", "SELECT 1abc FROM t"),
    (
        "Select Id From T Where Name Like 'x%'",
        "SELECT Id FROM T WHERE Name LIKE ?",
    ),
    ("SHOW TABLES", "SHOW TABLES"),
    ("SET autocommit=1", "SET autocommit=?"),
    ("CALL proc(1, 'a')", "CALL proc(?,...)"),
    ("SELECT @var := 5", "SELECT @var := ?"),
    ("(SELECT 1) UNION (SELECT 2)", "(SELECT ?) UNION (SELECT ?)"),
    (
        "SELECT c FROM sbtest1 WHERE id=4711",
        "SELECT c FROM sbtest1 WHERE id=?",
    ),
    (
        "SELECT DISTINCT c FROM sbtest3 WHERE id BETWEEN 1 AND 100 ORDER BY c",
        "SELECT DISTINCT c FROM sbtest3 WHERE id BETWEEN ? AND ? ORDER BY c",
    ),
    ("SELECT 'é', `ü`", "SELECT ?,`ü`"),
];

const PGSQL: &[(&str, &str)] = &[
    ("SELECT $1", "SELECT ?"),
    (
        "SELECT * FROM t WHERE a = $1 AND b = $2",
        "SELECT * FROM t WHERE a = ? AND b = ?",
    ),
    ("SELECT $$abc$$", "SELECT ?"),
    ("SELECT $tag$ab$c$tag$", "SELECT ?"),
    ("SELECT E'a\\'b'", "SELECT ?"),
    ("SELECT e'x'", "SELECT ?"),
    ("SELECT '1'::int", "SELECT ?::int"),
    ("SELECT $1::text", "SELECT ?::text"),
    ("SELECT \"Col\" FROM \"T\"", "SELECT \"Col\" FROM \"T\""),
    ("SELECT 'a''b'", "SELECT ?"),
    ("SELECT 'a\\'", "SELECT ?"),
    ("SELECT 1 -- c", "SELECT ?"),
    ("SELECT 1--c", "SELECT ?"),
    ("SELECT a # b FROM t", "SELECT a # b FROM t"),
    ("SELECT B'101', X'1F'", "SELECT ?,..."),
    ("SELECT U&'d\\0061t'", "SELECT ?"),
    (
        "SELECT abalance FROM pgbench_accounts WHERE aid = 12345;",
        "SELECT abalance FROM pgbench_accounts WHERE aid = ?",
    ),
    (
        "UPDATE pgbench_accounts SET abalance = abalance + -4007 WHERE aid = 42;",
        "UPDATE pgbench_accounts SET abalance = abalance + ? WHERE aid = ?",
    ),
    (
        "INSERT INTO pgbench_history (tid, bid, aid, delta, mtime) VALUES (1, 2, 3, -4, CURRENT_TIMESTAMP);",
        "INSERT INTO pgbench_history (tid,bid,aid,delta,mtime) VALUES (?,...,CURRENT_TIMESTAMP)",
    ),
    ("SELECT 1.0e-3", "SELECT ?"),
    ("/*hostgroup=2*/SELECT 1", "SELECT ?"),
    ("COPY t FROM STDIN", "COPY t FROM STDIN"),
    ("SELECT $a$ unterminated", "SELECT ?"),
    ("SELECT \"a\"\"b\"", "SELECT \"a\"\"b\""),
    ("select now()", "SELECT now()"),
    (
        "SELECT * FROM t WHERE id = ANY($1)",
        "SELECT * FROM t WHERE id = ANY(?)",
    ),
    (
        "SELECT x FROM t WHERE y IN ($1, $2, $3)",
        "SELECT x FROM t WHERE y IN (?,...)",
    ),
];

#[test]
fn mysql_cases() {
    for (sql, want) in MYSQL {
        assert_eq!(
            digest(sql, Dialect::Mysql, 2048).text,
            *want,
            "input: {sql:?}"
        );
    }
}

#[test]
fn pgsql_cases() {
    for (sql, want) in PGSQL {
        assert_eq!(
            digest(sql, Dialect::Pgsql, 2048).text,
            *want,
            "input: {sql:?}"
        );
    }
}

#[test]
fn enough_cases() {
    assert!(MYSQL.len() + PGSQL.len() >= 60);
}

#[test]
fn every_keyword_folds_and_nothing_else() {
    let d = digest(
        "select from where and or in is not null like between group order by limit",
        Dialect::Mysql,
        2048,
    );
    assert_eq!(d.text, d.text.to_ascii_uppercase());
    // Every keyword is found, whatever its case, and a longer or shorter word is not one.
    for k in super::keywords::KEYWORDS {
        assert!(k.len() <= 16, "{k} is too long to be packed");
        let lower = k.to_ascii_lowercase();
        assert_eq!(digest(&lower, Dialect::Pgsql, 64).text, *k);
        let longer = format!("{lower}x");
        assert_eq!(digest(&longer, Dialect::Pgsql, 64).text, longer);
    }
    assert_eq!(digest("sel", Dialect::Mysql, 64).text, "sel");
    // Identifiers that share a keyword's first bytes, or are longer than any keyword.
    for w in [
        "selects",
        "fro",
        "transactions",
        "a_very_long_identifier_name",
        "x",
    ] {
        assert_eq!(digest(w, Dialect::Pgsql, 64).text, w);
    }
}

#[test]
fn kinds_tables_and_locking() {
    let cases: &[(&str, StatementKind, &[&str], bool)] = &[
        (
            "SELECT * FROM t1 JOIN t2 ON t1.a=t2.a",
            StatementKind::Select,
            &["t1", "t2"],
            false,
        ),
        (
            "SELECT * FROM a, b AS x, c WHERE 1",
            StatementKind::Select,
            &["a", "b", "c"],
            false,
        ),
        (
            "SELECT * FROM `db`.`T1`",
            StatementKind::Select,
            &["t1"],
            false,
        ),
        (
            "UPDATE sbtest1 SET k=k+1 WHERE id=5",
            StatementKind::Update,
            &["sbtest1"],
            false,
        ),
        (
            "DELETE FROM s.t WHERE id=5",
            StatementKind::Delete,
            &["t"],
            false,
        ),
        (
            "INSERT INTO t (a) VALUES (1)",
            StatementKind::Insert,
            &["t"],
            false,
        ),
        (
            "REPLACE INTO t VALUES (1)",
            StatementKind::Replace,
            &["t"],
            false,
        ),
        ("TRUNCATE TABLE t", StatementKind::Ddl, &["t"], false),
        (
            "LOAD DATA INFILE 'x' INTO TABLE t",
            StatementKind::Copy,
            &["t"],
            false,
        ),
        (
            "SELECT c FROM t WHERE id=1 FOR UPDATE",
            StatementKind::Select,
            &["t"],
            true,
        ),
        (
            "SELECT c FROM t LOCK IN SHARE MODE",
            StatementKind::Select,
            &["t"],
            true,
        ),
        (
            "WITH x AS (SELECT 1) SELECT * FROM x",
            StatementKind::Select,
            &["x"],
            false,
        ),
        (
            "WITH x AS (SELECT 1 FROM s) UPDATE t SET a=1",
            StatementKind::Update,
            &["s", "t"],
            false,
        ),
        (
            "(SELECT 1) UNION (SELECT 2)",
            StatementKind::Select,
            &[],
            false,
        ),
        ("/* c */ begin", StatementKind::Other, &[], false),
        ("SET NAMES utf8", StatementKind::Other, &[], false),
    ];
    for (sql, kind, tables, locking) in cases {
        let d = digest(sql, Dialect::Mysql, 2048);
        assert_eq!(d.kind, *kind, "{sql}");
        assert_eq!(d.tables, *tables, "{sql}");
        assert_eq!(d.locking_read, *locking, "{sql}");
    }
    let d = digest("COPY pgbench_accounts FROM STDIN", Dialect::Pgsql, 2048);
    assert_eq!(d.kind, StatementKind::Copy);
    assert!(d.tables.contains(&"pgbench_accounts".to_string()));
    let d = digest("SELECT * FROM \"Mixed\"", Dialect::Pgsql, 2048);
    assert_eq!(d.tables, vec!["mixed".to_string()]);
}

#[test]
fn first_comment_and_hash() {
    let sql = "/* hostgroup=2;query_delay=5 */ SELECT 1 /* second */";
    let d = digest(sql, Dialect::Mysql, 2048);
    assert_eq!(d.first_comment(sql), Some(" hostgroup=2;query_delay=5 "));
    let sql2 = "-- hostgroup=3\nSELECT 2";
    assert_eq!(
        digest(sql2, Dialect::Mysql, 2048).first_comment(sql2),
        Some(" hostgroup=3")
    );
    assert_eq!(
        d.hash,
        digest("select 7", Dialect::Mysql, 2048).hash,
        "same digest, same hash"
    );
    assert_ne!(d.hash, digest("SELECT 1 FROM t", Dialect::Mysql, 2048).hash);
    assert_eq!(d.hex().len(), 18);
}

#[test]
fn max_length_truncates_on_a_char_boundary() {
    let sql = format!("SELECT `{}` FROM t", "é".repeat(100));
    let d = digest(&sql, Dialect::Mysql, 20);
    assert!(d.text.len() <= 20, "{}", d.text);
    assert!(d.text.starts_with("SELECT `é"));
    assert_eq!(
        d.tables,
        vec!["t".to_string()],
        "the scan goes on past the cut"
    );
    let d = digest("SELECT a FROM tbl_after_cut WHERE 1", Dialect::Mysql, 8);
    assert_eq!(
        d.tables,
        vec!["tbl_after_cut".to_string()],
        "tables read past the cut"
    );
}

fn sqlish() -> impl Strategy<Value = String> {
    let atoms = prop::sample::select(vec![
        "SELECT", " ", "'", "\"", "`", "$", "$$", "$a$", "--", "-- ", "#", "/*", "*/", "(", ")",
        ",", "?", "1", "0x", "0x1f", "X'", "E'", "\\", "-", "+", ".", "..", "e", "::", ";", "FROM",
        "t", "IN", "\n", "é", "\u{0}", "VALUES", "=",
    ]);
    prop::collection::vec(atoms, 0..40).prop_map(|v| v.concat())
}

proptest! {
    #[test]
    fn never_panics_on_any_text(s in "\\PC{0,200}", max in 1usize..64) {
        for d in [Dialect::Mysql, Dialect::Pgsql] {
            let g = digest(&s, d, max);
            prop_assert!(g.text.len() <= max);
        }
    }

    #[test]
    fn idempotent_on_its_output(s in sqlish()) {
        for d in [Dialect::Mysql, Dialect::Pgsql] {
            let once = digest(&s, d, 100_000).text;
            let twice = digest(&once, d, 100_000).text;
            prop_assert_eq!(&once, &twice, "input {:?}", s);
        }
    }

    #[test]
    fn idempotent_on_arbitrary_text(s in "\\PC{0,120}") {
        for d in [Dialect::Mysql, Dialect::Pgsql] {
            let once = digest(&s, d, 100_000).text;
            prop_assert_eq!(&once, &digest(&once, d, 100_000).text);
        }
    }
}

/// Found by the `digest` fuzz target: an unterminated comment's range ended one byte short, in
/// the middle of a multi-byte character, so its hints could not be read.
#[test]
fn unterminated_comment_runs_to_the_end() {
    let sql = "SELECT 1 /* hostgroup=2 \u{fffd}";
    let d = digest(sql, Dialect::Mysql, 2048);
    assert_eq!(d.first_comment(sql), Some(" hostgroup=2 \u{fffd}"));
    let bare = "/*";
    assert_eq!(
        digest(bare, Dialect::Pgsql, 2048).first_comment(bare),
        Some("")
    );
}

#[test]
fn a_digest_written_into_old_buffers_equals_a_fresh_one() {
    let statements = [
        "SELECT * FROM db1.Orders o JOIN Customers c ON o.c = c.id JOIN x ON 1 WHERE id IN (1,2,3)",
        "SELECT c FROM sbtest1 WHERE id=42",
        "/* hostgroup=2 */ UPDATE s.T SET a = 'x' WHERE b = 7",
        "INSERT INTO Ä VALUES (1)",
        "SELECT 1",
        "SELECT * FROM a, b, c, d, e, f, g, h, i, j",
    ];
    let mut reused = Digest::default();
    // Every statement after every other: old table names, text and comments must never leak.
    for first in statements {
        for next in statements {
            reused = digest_reusing(first, Dialect::Mysql, 2048, reused);
            reused = digest_reusing(next, Dialect::Mysql, 2048, reused);
            assert_eq!(
                reused,
                digest(next, Dialect::Mysql, 2048),
                "{first} then {next}"
            );
        }
    }
    let mut copy = digest(statements[0], Dialect::Mysql, 2048);
    let other = digest(statements[2], Dialect::Pgsql, 2048);
    copy.assign_from(&other);
    assert_eq!(copy, other);
}

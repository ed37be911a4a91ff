//! Workload classes as configuration: bad rows refused at LOAD, an older disk database migrated,
//! the shipped vector rules for each dialect.

use super::*;

#[test]
fn bad_classes_and_unknown_class_names_are_refused_at_load() {
    if !backends_ready(Servers::MariaDb) {
        return;
    }
    let s = Sluice::start(&config(4, 8, 1000, ""));
    let out = s.admin(
        "UPDATE workload_classes SET max_concurrency = -1 WHERE name = 'vector'; LOAD WORKLOAD CLASSES TO RUNTIME",
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        err.contains("workload_classes.max_concurrency: -1"),
        "{err}"
    );
    assert_eq!(
        ok_stdout(&s.admin("SELECT max_concurrency FROM runtime_workload_classes")).trim(),
        "4",
        "the running config stays"
    );
    ok_stdout(&s.admin("UPDATE workload_classes SET max_concurrency = 4"));
    for (row, why) in [
        (
            "(1, 'vector', 'replica_lag', 1, 5, 2)",
            "workload_guards.low: 5 is above high 2 (guard 1)",
        ),
        (
            "(1, 'vectr', 'replica_lag', 1, 1, 2)",
            "workload_guards.classes: \"vectr\" is not in workload_classes (guard 1)",
        ),
        (
            "(1, 'vector', 'replica_lag', NULL, 1, 2)",
            "workload_guards.hostgroup: replica_lag watches a hostgroup; set one (guard 1)",
        ),
    ] {
        let out = s.admin(&format!(
            "DELETE FROM workload_guards; INSERT INTO workload_guards (guard_id, classes, signal, hostgroup, low, high) VALUES {row}; LOAD WORKLOAD CLASSES TO RUNTIME"
        ));
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success() && err.contains(why), "{row}: {err}");
    }
    assert_eq!(
        ok_stdout(&s.admin("SELECT COUNT(*) FROM runtime_workload_guards")).trim(),
        "0",
        "no refused guard reached the runtime"
    );
    let out = s.admin(
        "INSERT INTO mysql_query_rules (rule_id, active, match_pattern, workload_class) VALUES (2, 1, 'x', 'vectr'); LOAD MYSQL QUERY RULES TO RUNTIME",
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        err.contains("mysql_query_rules.workload_class: rule 2 names class \"vectr\""),
        "{err}"
    );
}

#[test]
fn a_disk_database_from_before_workload_classes_gains_the_column() {
    if !backends_ready(Servers::MariaDb) {
        return;
    }
    let dir = scratch_dir("admission-migrate");
    std::fs::create_dir_all(dir.join("data")).expect("datadir");
    // The disk database an older Sluice wrote: mysql_query_rules without workload_class.
    let old = r#"
import sqlite3, sys
db = sqlite3.connect(sys.argv[1])
db.execute("CREATE TABLE mysql_query_rules (rule_id INTEGER PRIMARY KEY AUTOINCREMENT NOT NULL, active INT NOT NULL DEFAULT 0, match_pattern VARCHAR, destination_hostgroup INT, apply INT NOT NULL DEFAULT 0, attributes VARCHAR NOT NULL DEFAULT '', comment VARCHAR)")
db.execute("INSERT INTO mysql_query_rules (rule_id, active, match_pattern, apply) VALUES (7, 1, 'old', 1)")
db.commit()
"#;
    let db = dir.join("data/sluice.db");
    ok_stdout(&python(old, &[&db.display().to_string()]));
    let s = Sluice::start_with(&config(4, 8, 1000, ""), dir, &[]);
    let cols = ok_stdout(&s.admin(
        "SELECT name FROM pragma_table_info('mysql_query_rules', 'disk') WHERE name IN ('workload_class', 'match_digest')",
    ));
    assert!(cols.contains("workload_class"), "{cols}\n{}", s.log());
    assert!(s.log().contains("ADD COLUMN workload_class VARCHAR"));
    // The config file was saved over the old rows at start, through the new column.
    assert_eq!(
        ok_stdout(&s.admin("SELECT rule_id, workload_class FROM disk.mysql_query_rules")).trim(),
        "1\tvector"
    );
}

#[test]
fn the_shipped_vector_rules_classify_each_dialect() {
    if !backends_ready(Servers::Both) {
        return;
    }
    let _one = exclusive();
    let shipped =
        std::fs::read_to_string(xtask::workspace_root().join("docs/workload-classes.toml"))
            .expect("docs/workload-classes.toml");
    let s = Sluice::start(&standard_config("", &shipped));
    let mysql = [
        "SELECT id FROM t WHERE MYVECTOR_IS_ANN('db.t.v', 'id', '[1,2]')",
        "SELECT myvector_distance('[1,2]', '[2,3]')",
        "SELECT VEC_DISTANCE_COSINE(VEC_FromText('[1,2]'), VEC_FromText('[2,3]'))",
        "SELECT vec_distance (a, b) FROM t",
        "SELECT DISTANCE(STRING_TO_VECTOR('[1,2]'), STRING_TO_VECTOR('[2,3]'), 'COSINE')",
        // Not vector statements:
        "SELECT distance_km FROM places",
        "SELECT 'my vector' AS x",
    ];
    // The functions do not exist on MariaDB 10.11 (nor pgvector here): the statements fail on
    // the server, and only the class they were admitted under counts.
    let mysql: Vec<String> = mysql.iter().map(|q| q.to_string()).collect();
    clients("each", Side::Mysql, s.port, &mysql);
    assert_eq!(class_stats(&s, "vector")["admitted"], "5");
    let pgsql = [
        "SELECT id FROM items ORDER BY embedding <-> '[3,1,2]' LIMIT 5",
        "SELECT embedding <=> '[3,1,2]' FROM items",
        "SELECT (embedding <#> '[3,1,2]') * -1 FROM items",
        "SELECT '[1,2,3]'::vector",
        "SELECT '[1,2]'::halfvec(2)",
        // Not vector statements:
        "SELECT 1 WHERE 2 <> 3",
        "SELECT '{\"a\":1}'::jsonb -> 'a'",
    ];
    let pgsql: Vec<String> = pgsql.iter().map(|q| q.to_string()).collect();
    clients("each", Side::Pgsql, s.pg_port, &pgsql);
    assert_eq!(class_stats(&s, "vector")["admitted"], "10", "{}", s.log());
}

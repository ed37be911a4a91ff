//! The pin tracker's unit tests.

use super::*;

fn after(stmts: &[&str]) -> Option<&'static str> {
    let mut p = PinSet::default();
    for s in stmts {
        p.apply(s);
    }
    p.reason()
}

#[test]
fn each_cause_pins_until_it_ends() {
    assert_eq!(after(&["LISTEN jobs"]), Some("LISTEN"));
    assert_eq!(
        after(&["LISTEN jobs", "LISTEN other", "UNLISTEN jobs"]),
        Some("LISTEN")
    );
    assert_eq!(after(&["LISTEN jobs", "UNLISTEN *"]), None);
    assert_eq!(
        after(&["CREATE TEMP TABLE t1 (id int)"]),
        Some("temporary table")
    );
    assert_eq!(
        after(&[
            "CREATE TEMPORARY TABLE IF NOT EXISTS t1 (id int)",
            "DROP TABLE IF EXISTS t1"
        ]),
        None
    );
    assert_eq!(
        after(&["CREATE TEMP TABLE t1 (id int) ON COMMIT DROP"]),
        None
    );
    // pg_regress rangefuncs: temporary views and sequences live as long as the session.
    let view_or_sequence = Some("temporary view or sequence");
    assert_eq!(after(&["CREATE TEMP VIEW v AS SELECT 1"]), view_or_sequence);
    assert_eq!(
        after(&["CREATE OR REPLACE TEMPORARY RECURSIVE VIEW v (n) AS SELECT 1"]),
        view_or_sequence
    );
    assert_eq!(after(&["CREATE TEMP SEQUENCE s"]), view_or_sequence);
    assert_eq!(
        after(&["CREATE VIEW pg_temp.v AS SELECT 1"]),
        view_or_sequence
    );
    assert_eq!(after(&["CREATE VIEW v AS SELECT 1"]), None);
    assert_eq!(
        after(&[
            "CREATE TEMP VIEW v AS SELECT 1",
            "CREATE TEMP SEQUENCE s",
            "DROP VIEW v",
            "DROP SEQUENCE IF EXISTS s"
        ]),
        None
    );
    assert_eq!(after(&["CREATE TEMP SEQUENCE s", "DISCARD TEMP"]), None);
    assert_eq!(
        after(&[
            "CREATE TEMP TABLE a (x int); CREATE TEMP TABLE b (x int)",
            "DROP TABLE a"
        ]),
        Some("temporary table")
    );
    assert_eq!(
        after(&[
            "SELECT pg_advisory_lock(1)",
            "SELECT pg_advisory_lock(2)",
            "SELECT pg_advisory_unlock(1)"
        ]),
        Some("advisory lock")
    );
    assert_eq!(
        after(&["SELECT pg_advisory_lock(1)", "SELECT pg_advisory_unlock(1)"]),
        None
    );
    assert_eq!(
        after(&[
            "SELECT pg_advisory_lock(1), pg_advisory_lock(2)",
            "SELECT pg_advisory_unlock_all()"
        ]),
        None
    );
    assert_eq!(
        after(&["SELECT pg_advisory_xact_lock(1)"]),
        None,
        "ends with the transaction"
    );
    assert_eq!(
        after(&["DECLARE c CURSOR WITH HOLD FOR SELECT 1"]),
        Some("WITH HOLD cursor")
    );
    assert_eq!(
        after(&["DECLARE c CURSOR WITH HOLD FOR SELECT 1", "CLOSE c"]),
        None
    );
    assert_eq!(
        after(&["PREPARE q AS SELECT 1", "DEALLOCATE PREPARE q"]),
        None
    );
    assert_eq!(after(&["PREPARE q AS SELECT 1", "DEALLOCATE ALL"]), None);
    assert_eq!(
        after(&[
            "LISTEN a",
            "CREATE TEMP TABLE t (x int)",
            "PREPARE q AS SELECT 1",
            "DISCARD ALL"
        ]),
        None
    );
}

#[test]
fn session_level_set_config_pins_until_discard_all() {
    let pinned = Some("set_config");
    assert_eq!(
        after(&["SELECT set_config('work_mem', '11MB', false)"]),
        pinned
    );
    assert_eq!(
        after(&["select pg_catalog.SET_CONFIG('a.b', format('%s', 1), true)"]),
        pinned,
        "arguments Sluice cannot read count as session-level"
    );
    assert_eq!(
        after(&["SELECT set_config('work_mem', '11MB', true)"]),
        None
    );
    assert_eq!(
        after(&["SELECT current_setting('work_mem'), 'set_config'"]),
        None
    );
    assert_eq!(
        after(&["SELECT set_config('a.b', 'x', false)", "DISCARD ALL"]),
        None
    );
}

#[test]
fn the_byte_test_passes_every_statement_that_pins_or_unpins() {
    for sql in [
        "LISTEN ch",
        "  unlisten *;",
        "Create Temp Table t (a int)",
        "declare c cursor with hold for select 1",
        "close c",
        "PREPARE p AS SELECT 1",
        "deallocate p",
        "DISCARD ALL",
        "load 'auto_explain'",
        "SELECT pg_advisory_lock(1)",
        "select SET_CONFIG('a.b', 'c', false)",
        "drop(table)",
        "SELECT 1; LISTEN ch",
        "\tLISTEN\x0bch",
        "\x0b\x0cLISTEN ch\x0b",
    ] {
        assert!(PinSet::may_concern(sql.as_bytes()), "{sql}");
    }
    for sql in [
        "SELECT abalance FROM pgbench_accounts WHERE aid = 5",
        "INSERT INTO t VALUES (1);",
        "update t set a = 1",
        "listener",
        "",
    ] {
        assert!(!PinSet::may_concern(sql.as_bytes()), "{sql}");
        let mut p = PinSet::default();
        p.apply(sql);
        assert_eq!(p.reason(), None, "{sql}");
    }
}

#[test]
fn sticky_causes_last() {
    let mut p = PinSet {
        sticky: Some("session state"),
        ..PinSet::default()
    };
    p.apply("DISCARD ALL");
    assert_eq!(p.reason(), Some("session state"));
}

#[test]
fn comments_and_quotes_are_not_words() {
    let mut p = PinSet::default();
    p.apply("LISTEN /* the queue */ jobs");
    p.apply("UNLISTEN \"jobs\"");
    assert_eq!(p.reason(), None, "one channel, listened to and left");
    assert_eq!(
        statement_words("DROP TABLE pg_temp.t, \"Odd\" -- x"),
        ["drop", "table", "pg_temp.t", "odd"]
    );
}

#[test]
fn a_function_body_is_not_read_as_statements() {
    // The body's `;` are inside a dollar-quoted string: one CREATE FUNCTION, no temp table.
    let create = "CREATE FUNCTION f() RETURNS void AS $body$ SELECT 1; \
                  CREATE TEMP TABLE scratch (a int); $body$ LANGUAGE sql; SELECT 1";
    assert_eq!(after(&[create]), None);
    assert_eq!(
        after(&["SELECT 1; CREATE TEMP TABLE scratch (a int)"]),
        Some("temporary table")
    );
}

#[test]
fn load_pins_for_the_session() {
    assert_eq!(after(&["LOAD 'auto_explain'"]), Some("LOAD"));
    assert_eq!(after(&["load 'auto_explain'", "DISCARD ALL"]), Some("LOAD"));
    assert_eq!(after(&["SELECT 'load'"]), None);
}

#[test]
fn advisory_locks_are_counted_per_key_and_kind() {
    let pinned = Some("advisory lock");
    // Releasing a lock never taken (the server answers false) does not end the pin.
    assert_eq!(
        after(&["SELECT pg_advisory_lock(1)", "SELECT pg_advisory_unlock(2)"]),
        pinned
    );
    assert_eq!(
        after(&[
            "SELECT pg_advisory_lock(1, 2)",
            "SELECT pg_advisory_unlock( 1,2 )"
        ]),
        None
    );
    // Shared and exclusive locks of one key are two locks.
    let both = ["SELECT pg_advisory_lock(7), pg_advisory_lock_shared(7)"];
    assert_eq!(after(&[both[0], "SELECT pg_advisory_unlock(7)"]), pinned);
    assert_eq!(
        after(&[
            both[0],
            "SELECT pg_advisory_unlock(7)",
            "select PG_ADVISORY_UNLOCK_SHARED(7)"
        ]),
        None
    );
    // try_ forms pin (whether they got the lock is in their result); _xact_ forms never.
    assert_eq!(
        after(&["SELECT pg_try_advisory_lock(hashtext('job'))"]),
        pinned
    );
    assert_eq!(after(&["SELECT pg_advisory_xact_lock(1)"]), None);
    assert_eq!(after(&["SELECT pg_try_advisory_xact_lock_shared(1)"]), None);
    // A key given as a parameter is released only by an unreadable release or all of them.
    assert_eq!(
        after(&[
            "SELECT pg_advisory_lock($1)",
            "SELECT pg_advisory_unlock(5)"
        ]),
        pinned
    );
    assert_eq!(
        after(&[
            "SELECT pg_advisory_lock($1)",
            "SELECT pg_advisory_unlock_all()"
        ]),
        None
    );
    // In one statement, in the order written.
    assert_eq!(
        after(&["SELECT pg_advisory_lock(3), pg_advisory_unlock(3)"]),
        None
    );
    assert_eq!(
        after(&["SELECT pg_advisory_unlock(3), pg_advisory_lock(3)"]),
        pinned
    );
}

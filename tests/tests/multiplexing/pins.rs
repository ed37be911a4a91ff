//! Pins: each cause keeps the backend connection and lets it go when it ends (SQL PREPARE,
//! SQL_CALC_FOUND_ROWS, user variables, unparsable SET, XA); LAST_INSERT_ID from the OK packet;
//! multiplexing turned off globally, per hostgroup and per user.

use super::*;

/// Each case: starts a pin, a query that needs the pinned connection, ends the pin.
const PIN_CASES: &[(&str, &str, &str)] = &[
    ("BEGIN", "SELECT 1", "COMMIT"),
    ("SET autocommit = 0", "SELECT 1", "SET autocommit = 1"),
    (
        "CREATE TEMPORARY TABLE tmp_pin (a INT)",
        "SELECT COUNT(*) FROM tmp_pin",
        "DROP TEMPORARY TABLE tmp_pin",
    ),
    (
        "SELECT GET_LOCK('sluice_pin', 1)",
        "SELECT IS_USED_LOCK('sluice_pin') = CONNECTION_ID()",
        "SELECT RELEASE_LOCK('sluice_pin')",
    ),
    // Releasing a lock the session does not hold (RELEASE_LOCK answers NULL) keeps the pin:
    // locks are counted per name.
    (
        "SELECT GET_LOCK('sluice_pin2', 1)",
        "SELECT RELEASE_LOCK('sluice_not_held')",
        "SELECT RELEASE_LOCK('sluice_pin2')",
    ),
    // A backslash-escaped quote before the call does not end the string: the call is seen.
    (
        r"SELECT 'it\'s', GET_LOCK('sluice_pin3', 1)",
        "SELECT IS_USED_LOCK('sluice_pin3') = CONNECTION_ID()",
        r"SELECT 'it\'s', RELEASE_LOCK('sluice_pin3')",
    ),
    (
        "LOCK TABLES pin_t READ",
        "SELECT COUNT(*) FROM pin_t",
        "UNLOCK TABLES",
    ),
];

/// SQL-level prepared statements from a literal follow their session (replayed like its
/// variables): two clients alternate on a pool of one connection with a statement of the same
/// name, and each runs its own.
#[tokio::test]
async fn sql_prepared_statements_follow_their_session_on_a_shared_connection() {
    if !backends_ready(Servers::MariaDb) {
        return;
    }
    let s = Sluice::start(&capped_config(1, "connect_timeout_server_max = 2000", ""));
    let mut a = conn(&s, "app").await;
    let mut b = conn(&s, "app").await;
    a.query_drop("PREPARE s1 FROM 'SELECT 40 + 2'")
        .await
        .expect("a prepares");
    // Not pinned: B gets the one connection, and prepares its own s1 there.
    b.query_drop("PREPARE s1 FROM 'SELECT ''b'''")
        .await
        .expect("b prepares on the shared connection");
    for _ in 0..2 {
        let mine: String = a.query_first("EXECUTE s1").await.expect("a").expect("row");
        assert_eq!(mine, "42", "A runs its own s1");
        let theirs: String = b.query_first("EXECUTE s1").await.expect("b").expect("row");
        assert_eq!(theirs, "b", "B runs its own s1");
    }
    b.query_drop("DEALLOCATE PREPARE s1")
        .await
        .expect("b deallocates");
    match b.query_drop("EXECUTE s1").await {
        Err(mysql_async::Error::Server(e)) => assert_eq!(e.code, 1243, "{e:?}"),
        r => panic!("B's s1 is gone: {r:?}"),
    }
    let mine: String = a.query_first("EXECUTE s1").await.expect("a").expect("row");
    assert_eq!(mine, "42", "A's s1 outlives B's DEALLOCATE");
    // A statement prepared from a user variable cannot be replayed: it pins.
    a.query_drop("SET @q = 'SELECT 7'").await.expect("set");
    a.query_drop("PREPARE s2 FROM @q")
        .await
        .expect("prepare from a variable");
    let pinned =
        s.admin_ok("SELECT pin_reason FROM stats_mysql_processlist WHERE pin_reason <> ''");
    assert_eq!(pinned.trim(), "SQL PREPARE", "{pinned}");
    for x in [a, b] {
        x.disconnect().await.expect("disconnect");
    }
}

async fn probe_fails(p: &mut Conn) -> bool {
    match p.query_drop("SELECT 1").await {
        Err(mysql_async::Error::Server(e)) => e.code == 9001,
        _ => false,
    }
}

#[tokio::test]
async fn each_pin_holds_the_connection_until_its_cause_ends() {
    if !backends_ready(Servers::MariaDb) {
        return;
    }
    primary_root(
        "CREATE TABLE IF NOT EXISTS app.pin_t (a INT); DELETE FROM app.pin_t; INSERT INTO app.pin_t VALUES (1),(2),(3);",
    );
    let s = Sluice::start(&capped_config(2, "connect_timeout_server_max = 600", ""));
    let mut probe = conn(&s, "app").await;
    for (start, during, end) in PIN_CASES {
        let mut a = conn(&s, "app").await;
        let mut b = conn(&s, "app").await;
        a.query_drop(*start)
            .await
            .unwrap_or_else(|e| panic!("{start}: {e}"));
        let pinned = conn_id(&mut a).await;
        b.query_drop("BEGIN").await.expect("begin");
        assert_ne!(
            conn_id(&mut b).await,
            pinned,
            "{start}: A keeps its connection"
        );
        a.query_drop(*during)
            .await
            .unwrap_or_else(|e| panic!("{during}: {e}"));
        assert_eq!(
            conn_id(&mut a).await,
            pinned,
            "{start}: still the same connection"
        );
        assert!(
            probe_fails(&mut probe).await,
            "{start}: both connections are held"
        );
        a.query_drop(*end)
            .await
            .unwrap_or_else(|e| panic!("{end}: {e}"));
        probe
            .query_drop("SELECT 1")
            .await
            .unwrap_or_else(|e| panic!("after {end}: the pin ended: {e}"));
        b.query_drop("ROLLBACK").await.expect("rollback");
        a.disconnect().await.expect("disconnect");
        b.disconnect().await.expect("disconnect");
    }
}

#[tokio::test]
async fn sql_calc_found_rows_pins_until_found_rows() {
    if !backends_ready(Servers::MariaDb) {
        return;
    }
    primary_root(
        "CREATE TABLE IF NOT EXISTS app.fr_t (a INT); DELETE FROM app.fr_t; INSERT INTO app.fr_t VALUES (1),(2),(3);",
    );
    let s = Sluice::start(&capped_config(2, "connect_timeout_server_max = 600", ""));
    let mut probe = conn(&s, "app").await;
    let mut a = conn(&s, "app").await;
    let mut b = conn(&s, "app").await;
    let first: Option<i32> = a
        .query_first("SELECT SQL_CALC_FOUND_ROWS a FROM fr_t ORDER BY a LIMIT 1")
        .await
        .expect("calc");
    assert_eq!(first, Some(1));
    b.query_drop("BEGIN").await.expect("begin");
    assert!(
        probe_fails(&mut probe).await,
        "A holds its connection for FOUND_ROWS()"
    );
    let n: u64 = a
        .query_first("SELECT FOUND_ROWS()")
        .await
        .expect("found rows")
        .expect("row");
    assert_eq!(n, 3, "answered by the connection that ran the query");
    probe
        .query_drop("SELECT 1")
        .await
        .expect("released after FOUND_ROWS()");
    b.query_drop("ROLLBACK").await.expect("rollback");
}

#[tokio::test]
async fn user_variables_and_unparsable_set_pin_until_reset() {
    if !backends_ready(Servers::MariaDb) {
        return;
    }
    let s = Sluice::start(&capped_config(2, "connect_timeout_server_max = 600", ""));
    let mut probe = conn(&s, "app").await;
    for start in [
        "SET @v = 42",
        "SET STATEMENT max_statement_time = 5 FOR SELECT 1",
    ] {
        let mut a = conn(&s, "app").await;
        let mut b = conn(&s, "app").await;
        a.query_drop(start).await.expect("start");
        let pinned = conn_id(&mut a).await;
        b.query_drop("BEGIN").await.expect("begin");
        if start.contains("@v") {
            let v: Option<i64> = a
                .query_first("SELECT @v")
                .await
                .expect("read var")
                .expect("row");
            assert_eq!(v, Some(42));
        }
        assert_eq!(conn_id(&mut a).await, pinned);
        assert!(probe_fails(&mut probe).await, "{start}: pinned");
        a.reset().await.expect("COM_RESET_CONNECTION");
        probe
            .query_drop("SELECT 1")
            .await
            .expect("released after reset");
        b.query_drop("ROLLBACK").await.expect("rollback");
        a.disconnect().await.expect("disconnect");
        b.disconnect().await.expect("disconnect");
    }
    assert!(
        s.log().contains("Unable to parse SET statement"),
        "{}",
        s.log()
    );
}

#[tokio::test]
async fn last_insert_id_is_answered_from_the_ok_packet() {
    if !backends_ready(Servers::MariaDb) {
        return;
    }
    primary_root("CREATE TABLE IF NOT EXISTS app.ai_t (id INT AUTO_INCREMENT PRIMARY KEY, v INT);");
    let s = Sluice::start(&capped_config(4, "", ""));
    let mut a = conn(&s, "app").await;
    a.query_drop("INSERT INTO ai_t (v) VALUES (1)")
        .await
        .expect("insert");
    let generated = a.last_insert_id().expect("id in OK packet");
    let mut others = Vec::new();
    for _ in 0..3 {
        let mut o = conn(&s, "app").await;
        o.query_drop("INSERT INTO ai_t (v) VALUES (2)")
            .await
            .expect("other insert");
        others.push(o);
    }
    let answered: u64 = a
        .query_first("SELECT LAST_INSERT_ID()")
        .await
        .expect("q")
        .expect("row");
    assert_eq!(answered, generated);
    // Inside another expression it goes to the server: the connection was kept for it.
    let plus: u64 = a
        .query_first("SELECT LAST_INSERT_ID() + 0")
        .await
        .expect("q")
        .expect("row");
    assert_eq!(plus, generated);
}

#[tokio::test]
async fn multiplexing_can_be_turned_off_globally_per_hostgroup_and_per_user() {
    if !backends_ready(Servers::MariaDb) {
        return;
    }
    make_user("solo");
    let solo = "[[mysql_users]]\nusername = \"solo\"\npassword = \"solo\"\nattributes = '{\"multiplexing\": false}'\n";
    let configs = [
        (
            "global",
            capped_config(4, "multiplexing = false", ""),
            "app",
        ),
        (
            "hostgroup",
            capped_config(
                4,
                "",
                "[[mysql_hostgroup_attributes]]\nhostgroup_id = 0\nmultiplex = 0\n",
            ),
            "app",
        ),
        ("user", capped_config(4, "", solo), "solo"),
    ];
    for (what, cfg, user) in configs {
        let s = Sluice::start(&cfg);
        let mut a = conn(&s, user).await;
        let mut b = conn(&s, user).await;
        // Plain selects one after the other: multiplexed, B would reuse the connection A just
        // released. With multiplexing off each session keeps its own.
        let ida = conn_id(&mut a).await;
        let idb = conn_id(&mut b).await;
        assert_ne!(ida, idb, "{what}: sessions keep their own connections");
        assert_eq!(conn_id(&mut a).await, ida, "{what}");
        a.disconnect().await.expect("disconnect");
        b.disconnect().await.expect("disconnect");
    }
    // Control: multiplexed, the second session gets the first one's connection. One server
    // connection at most, so which idle connection the pool prefers cannot decide it (with two,
    // a parallel test run once handed B the other, older one).
    let s = Sluice::start(&capped_config(1, "", ""));
    let mut a = conn(&s, "app").await;
    let mut b = conn(&s, "app").await;
    let ida = conn_id(&mut a).await;
    wait_all_released(&s);
    assert_eq!(ida, conn_id(&mut b).await);
}

/// mariadb-test's XA tests, through a pool of one connection: a client that leaves with an XA
/// transaction PREPAREd leaves it as a direct client would — detached and recoverable
/// (`XA RECOVER` lists it, `XA COMMIT` from another client commits its row) — and the next client
/// on the pool gets a clean connection, not one still inside the XA transaction (error 1031, or
/// an `XA COMMIT` that commits nothing).
#[tokio::test]
async fn a_prepared_xa_transaction_never_stays_on_a_pooled_connection() {
    if !backends_ready(Servers::MariaDb) {
        return;
    }
    // One an earlier failed run left prepared would hold the row lock this test needs.
    for line in primary_root("XA RECOVER").lines() {
        if let Some(old) = line
            .split('\t')
            .nth(3)
            .filter(|x| x.starts_with("sluice_xa_"))
        {
            primary_root(&format!("XA ROLLBACK '{old}'"));
        }
    }
    let s = Sluice::start(&capped_config(1, "connect_timeout_server_max = 2000", ""));
    let xid = format!("sluice_xa_{}", std::process::id());
    let mut a = conn(&s, "app").await;
    a.query_drop("CREATE TABLE IF NOT EXISTS app.xa_t (id INT PRIMARY KEY)")
        .await
        .expect("table");
    a.query_drop("DELETE FROM app.xa_t").await.expect("empty");
    for sql in [
        format!("XA START '{xid}'"),
        "INSERT INTO app.xa_t VALUES (1)".to_string(),
        format!("XA END '{xid}'"),
        format!("XA PREPARE '{xid}'"),
    ] {
        a.query_drop(&sql)
            .await
            .unwrap_or_else(|e| panic!("{sql}: {e}"));
    }
    a.disconnect().await.expect("disconnect");
    let mut b = conn(&s, "app").await;
    let none: Option<i64> = b
        .query_first("SELECT id FROM app.xa_t")
        .await
        .expect("a plain statement works on the next client's connection");
    assert_eq!(none, None, "the XA transaction is not committed yet");
    let recovered: Vec<String> = b
        .query_map("XA RECOVER", |row: mysql_async::Row| {
            row.get::<String, _>("data").unwrap_or_default()
        })
        .await
        .expect("xa recover");
    assert!(recovered.contains(&xid), "{recovered:?}");
    b.query_drop(format!("XA COMMIT '{xid}'"))
        .await
        .expect("xa commit from another client");
    let one: Option<i64> = b
        .query_first("SELECT id FROM app.xa_t")
        .await
        .expect("select");
    assert_eq!(one, Some(1), "the XA COMMIT committed the row");
    b.disconnect().await.expect("disconnect");
}

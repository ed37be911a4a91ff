//! Read-only in depth: the bypass corpus through the MCP endpoint against reader *and* writer
//! targets of both protocols, with everything checked afterwards on the servers themselves
//! (checksums, tables, sequences, large objects, files, locks, transactions, pooled
//! connections' state); and each server-side layer shown stopping, alone, what the others let
//! through.

use serde_json::Value;
use sluice_mcp::exec::{Conns, Limits, Place, run_mysql, run_pgsql};
use sluice_mcp::readonly::corpus;
use sluice_tests::mcp::{McpSluice, QUERY_TOKEN, create_schema};
use sluice_tests::{Servers, backends_ready, mariadb, ok_stdout, ports, primary_root, psql_app};
use std::time::Duration;

const CANARY: &str = "mcp_canary.t";

/// The canary table, a sequence and a writing procedure on both primaries, and the MySQL login
/// the agents run as (the same grants as `app`: the layers, not the grants, are under test).
fn create_canaries() {
    static CREATED: std::sync::Once = std::sync::Once::new();
    CREATED.call_once(create_canaries_now);
}

fn create_canaries_now() {
    create_schema();
    primary_root(
        "CREATE DATABASE IF NOT EXISTS mcp_canary;
         CREATE TABLE IF NOT EXISTS mcp_canary.t (v INT PRIMARY KEY);
         INSERT IGNORE INTO mcp_canary.t VALUES (1), (2), (3);
         CREATE SEQUENCE IF NOT EXISTS mcp_canary.s;
         CREATE PROCEDURE IF NOT EXISTS mcp_canary.mcp_writer() INSERT INTO mcp_canary.t VALUES (100);
         CREATE USER IF NOT EXISTS 'mcp_agent'@'%' IDENTIFIED BY 'mcp_agent';
         GRANT ALL ON *.* TO 'mcp_agent'@'%';
         REVOKE READ_ONLY ADMIN ON *.* FROM 'mcp_agent'@'%';",
    );
    ok_stdout(&psql_app(
        ports::PG_PRIMARY,
        "SELECT pg_advisory_xact_lock(7072);
         CREATE SCHEMA IF NOT EXISTS mcp_canary;
         CREATE TABLE IF NOT EXISTS mcp_canary.t (v int PRIMARY KEY);
         INSERT INTO mcp_canary.t VALUES (1), (2), (3) ON CONFLICT DO NOTHING;
         CREATE SEQUENCE IF NOT EXISTS mcp_canary.s;
         CREATE OR REPLACE PROCEDURE mcp_canary.mcp_writer() LANGUAGE sql AS $$ INSERT INTO mcp_canary.t VALUES (100) $$;",
    ));
    sluice_tests::wait_for("the replicas to have the canaries", || {
        let my = mariadb(
            ports::MY_REPLICA,
            "mcp_agent",
            "mcp_agent",
            &["--skip-ssl", "-N"],
            "SELECT COUNT(*) FROM mcp_canary.t",
        );
        let pg = psql_app(ports::PG_REPLICA, "SELECT count(*) FROM mcp_canary.t");
        my.stdout.starts_with(b"3") && pg.stdout.starts_with(b"3")
    });
}

/// What must not change, read from a MariaDB server.
fn my_state(port: u16) -> String {
    ok_stdout(&mariadb(
        port,
        "root",
        "root",
        &["--skip-ssl", "-N"],
        "CHECKSUM TABLE mcp_canary.t, mcp_e2e.customers, mcp_e2e.orders;
         SELECT GROUP_CONCAT(table_name ORDER BY table_name), GROUP_CONCAT(column_name ORDER BY column_name)
             FROM information_schema.columns WHERE table_schema IN ('mcp_e2e', 'mcp_canary');
         SELECT next_not_cached_value FROM mcp_canary.s;
         SELECT IS_FREE_LOCK('sluice_pwn'), IS_FREE_LOCK('x'), IS_FREE_LOCK('y');
         SELECT COUNT(*) FROM information_schema.innodb_trx t JOIN information_schema.processlist p
             ON p.id = t.trx_mysql_thread_id WHERE p.user = 'mcp_agent';
         SELECT COUNT(*) FROM information_schema.processlist WHERE user = 'mcp_agent' AND command = 'Query';",
    ))
}

/// What must not change, read from a PostgreSQL server.
fn pg_state(port: u16) -> String {
    ok_stdout(&psql_app(
        port,
        "SELECT md5(string_agg(v::text, ',' ORDER BY v)) FROM mcp_canary.t;
         SELECT md5(string_agg(c::text, ',' ORDER BY c::text)) FROM mcp_e2e.customers c;
         SELECT string_agg(table_name || '.' || column_name, ',' ORDER BY table_name, column_name)
             FROM information_schema.columns WHERE table_schema IN ('mcp_e2e', 'mcp_canary');
         SELECT last_value FROM mcp_canary.s;
         SELECT count(*) FROM pg_largeobject_metadata;
         SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND pid <> pg_backend_pid()
             AND objid NOT IN (7071, 7072);
         SELECT count(*) FROM pg_stat_activity WHERE application_name = 'sluice-mcp'
             AND state NOT IN ('idle');
         SELECT obj_description('mcp_canary.t'::regclass, 'pg_class') IS NULL;",
    ))
}

fn targets_config() -> String {
    r#"
[[mysql_users]]
username = "mcp_agent"
password = "mcp_agent"
default_hostgroup = 0

[[mcp_targets]]
target_id = "my_reader"
protocol = "mysql"
hostgroup_id = 1
username = "mcp_agent"
default_schema = "mcp_canary"

[[mcp_targets]]
target_id = "my_writer"
protocol = "mysql"
hostgroup_id = 0
username = "mcp_agent"
default_schema = "mcp_canary"
allow_writer = 1

[[mcp_targets]]
target_id = "pg_reader"
protocol = "pgsql"
hostgroup_id = 1
username = "app"
default_schema = "app"

[[mcp_targets]]
target_id = "pg_writer"
protocol = "pgsql"
hostgroup_id = 0
username = "app"
default_schema = "app"
allow_writer = 1
"#
    .to_string()
}

/// Both tests of this file run MCP statements on the same servers, and the corpus test's
/// snapshot of them counts every `sluice-mcp` session that is not idle: a statement of the other
/// test in flight at that moment made it fail (CI, 2026-12-06). They take turns.
static SERVERS: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// The servers to this test alone until the guard drops (a failed test's poison is ignored:
/// the next test still runs alone).
fn servers_alone() -> std::sync::MutexGuard<'static, ()> {
    SERVERS
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

#[test]
fn the_bypass_corpus_is_refused_with_a_reason_and_changes_nothing() {
    if !backends_ready(Servers::Both) {
        return;
    }
    let _alone = servers_alone();
    create_canaries();
    let _ = std::fs::remove_file("/tmp/sluice_pwn");
    let before = [
        my_state(ports::MY_PRIMARY),
        my_state(ports::MY_REPLICA),
        pg_state(ports::PG_PRIMARY),
        pg_state(ports::PG_REPLICA),
    ];
    let s = McpSluice::start("", &targets_config());
    let attempts =
        |list: &[&str]| -> Vec<String> { list.iter().map(|a| a.replace("{t}", CANARY)).collect() };
    let payload = serde_json::json!({
        "mysql": attempts(corpus::MYSQL),
        "pgsql": attempts(corpus::PGSQL),
    });
    let dir = sluice_tests::scratch_dir("mcp_corpus");
    let file = sluice_tests::write_file(&dir, "corpus.json", &payload.to_string());
    let lines = s.python(
        "query",
        QUERY_TOKEN,
        &format!(
            r#"
corpus = json.load(open({file:?}))
async def main():
    async with client(URL, TOKEN) as c:
        for proto, targets in [("mysql", ["my_reader", "my_writer"]), ("pgsql", ["pg_reader", "pg_writer"])]:
            for sql in corpus[proto]:
                for tid in targets:
                    for tool in ["run_sql_readonly", "explain_sql"]:
                        r = await call(c, tool, {{"target_id": tid, "sql": sql}})
                        emit(tool=tool, target=tid, sql=sql, error=r["error"], text=r["text"])
        # The pooled connections carry no state: every one of them is asked.
        for i in range(12):
            r = await call(c, "run_sql_readonly", {{"target_id": "my_writer",
                "sql": "SELECT @x, @y, @z, @@session.autocommit, @@session.sql_mode = @@global.sql_mode, @@session.tx_read_only"}})
            emit(kind="my_state", r=r)
            r = await call(c, "run_sql_readonly", {{"target_id": "pg_writer",
                "sql": "SELECT current_setting('default_transaction_read_only'), current_setting('search_path'), current_setting('statement_timeout'), current_setting('sluice.pwn', true)"}})
            emit(kind="pg_state", r=r)
asyncio.run(main())
"#,
            file = file.display().to_string()
        ),
    );
    let mut attempts_seen = 0;
    for l in lines.iter().filter(|l| l.get("tool").is_some()) {
        attempts_seen += 1;
        assert_eq!(
            l["error"], true,
            "{} on {} was not refused: {l}",
            l["tool"], l["target"]
        );
        let why = l["text"].as_str().unwrap_or("");
        assert!(why.len() > 10, "a refusal says why: {l}");
    }
    assert_eq!(
        attempts_seen,
        (corpus::MYSQL.len() + corpus::PGSQL.len()) * 4,
        "every attempt, on both targets, through both tools"
    );
    for l in lines.iter().filter(|l| l["kind"] == "my_state") {
        assert_eq!(l["r"]["error"], false, "{l}");
        assert_eq!(
            l["r"]["data"]["rows"][0],
            serde_json::json!([null, null, null, 1, 1, 0]),
            "a pooled MySQL connection carries no state: {l}"
        );
    }
    for l in lines.iter().filter(|l| l["kind"] == "pg_state") {
        assert_eq!(l["r"]["error"], false, "{l}");
        let row = &l["r"]["data"]["rows"][0];
        assert_eq!(row[0], "off", "{l}");
        assert_eq!(row[1], "\"$user\", public", "{l}");
        assert_eq!(
            row[2], "30s",
            "the call's own server-side timeout (mcp-timeout_ms): {l}"
        );
        assert_eq!(row[3], Value::Null, "no setting left over: {l}");
    }
    let after = [
        my_state(ports::MY_PRIMARY),
        my_state(ports::MY_REPLICA),
        pg_state(ports::PG_PRIMARY),
        pg_state(ports::PG_REPLICA),
    ];
    for (i, (b, a)) in before.iter().zip(&after).enumerate() {
        assert_eq!(
            b, a,
            "server {i} changed (checksums, tables, sequence, locks, transactions)"
        );
    }
    assert!(
        !std::path::Path::new("/tmp/sluice_pwn").exists(),
        "no file was written"
    );
    let refused = s.sluice.admin_ok(
        "SELECT SUM(count) FROM stats_mcp_query_tools_counters WHERE tool IN ('run_sql_readonly', 'explain_sql')",
    );
    assert_eq!(refused.trim(), (attempts_seen + 24).to_string());
}

fn place(port: u16, user: &str, database: &str) -> Place {
    Place {
        host: "127.0.0.1".into(),
        port,
        user: user.into(),
        password: user.into(),
        database: database.into(),
        schema: Some("mcp_canary".into()).filter(|_| database.is_empty()),
        connect_timeout: Duration::from_secs(5),
        tls: None,
    }
}

fn refused(r: Result<sluice_mcp::exec::ResultSet, sluice_mcp::Error>) -> String {
    match r {
        Ok(rs) => panic!("not refused: {:?}", rs.rows),
        Err(e) => e.to_string(),
    }
}

#[test]
fn each_server_side_layer_stops_alone_what_the_others_let_through() {
    if !backends_ready(Servers::Both) {
        return;
    }
    let _alone = servers_alone();
    create_canaries();
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    let conns = Conns::new(Default::default());
    let limits = Limits {
        max_rows: 100,
        max_bytes: 1 << 20,
        timeout: Duration::from_secs(10),
    };
    let cancel = tokio_util::sync::CancellationToken::new();
    let my_primary = place(ports::MY_PRIMARY, "mcp_agent", "");
    let my_replica = place(ports::MY_REPLICA, "mcp_agent", "");
    let pg_primary = place(ports::PG_PRIMARY, "app", "app");
    let pg_replica = place(ports::PG_REPLICA, "app", "app");
    let before = (my_state(ports::MY_PRIMARY), pg_state(ports::PG_PRIMARY));
    rt.block_on(async {
        // The lexer is not asked here: these statements reach the servers as an agent wrote them.
        // 1. The single-statement wire, on the primary (no replica), against DDL (which a READ
        //    ONLY transaction does not stop): the server refuses the second statement.
        let e = refused(
            run_mysql(
                &conns,
                &my_primary,
                &format!("SELECT 1; DROP TABLE {CANARY}"),
                limits,
                &cancel,
            )
            .await,
        );
        assert!(e.contains("SQL syntax"), "{e}");
        let e = refused(
            run_pgsql(
                &conns,
                &pg_primary,
                &format!("SELECT 1; DROP TABLE {CANARY}"),
                limits,
                &cancel,
            )
            .await,
        );
        assert!(e.contains("multiple commands"), "{e}");
        // 2. The READ ONLY transaction, on the primary, against a single plain write.
        let e = refused(
            run_mysql(
                &conns,
                &my_primary,
                &format!("INSERT INTO {CANARY} VALUES (99)"),
                limits,
                &cancel,
            )
            .await,
        );
        assert!(e.contains("READ ONLY transaction"), "{e}");
        let e = refused(
            run_pgsql(
                &conns,
                &pg_primary,
                &format!("INSERT INTO {CANARY} VALUES (99)"),
                limits,
                &cancel,
            )
            .await,
        );
        assert!(e.contains("read-only transaction"), "{e}");
        // 3. The replica, against what the transaction lets through: MySQL DDL, and a
        //    PostgreSQL transaction id.
        let e = refused(
            run_mysql(
                &conns,
                &my_replica,
                "CREATE TABLE mcp_canary.pwn (a INT)",
                limits,
                &cancel,
            )
            .await,
        );
        assert!(e.contains("read-only") || e.contains("read_only"), "{e}");
        let e = refused(
            run_pgsql(
                &conns,
                &pg_replica,
                "SELECT txid_current()",
                limits,
                &cancel,
            )
            .await,
        );
        assert!(e.contains("recovery"), "{e}");
        // ... which on the primary the transaction alone does not stop (why the lexer refuses
        // it and agents run on replicas):
        let on_primary = run_pgsql(
            &conns,
            &pg_primary,
            "SELECT txid_current()",
            limits,
            &cancel,
        )
        .await;
        assert!(on_primary.is_ok(), "{on_primary:?}");
        // 4. The connection is reset after every call: a lock taken is gone at the next call.
        let lock = run_mysql(
            &conns,
            &my_primary,
            "SELECT GET_LOCK('sluice_layer', 0)",
            limits,
            &cancel,
        )
        .await
        .expect("the lexer is not asked here");
        assert_eq!(lock.rows[0][0], 1);
        let free = run_mysql(
            &conns,
            &my_primary,
            "SELECT IS_FREE_LOCK('sluice_layer')",
            limits,
            &cancel,
        )
        .await
        .expect("read");
        assert_eq!(free.rows[0][0], 1, "COM_RESET_CONNECTION released it");
        let lock = run_pgsql(
            &conns,
            &pg_primary,
            "SELECT pg_advisory_lock(424242)",
            limits,
            &cancel,
        )
        .await;
        assert!(lock.is_ok(), "{lock:?}");
        let held = run_pgsql(
            &conns,
            &pg_primary,
            "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND objid = 424242",
            limits,
            &cancel,
        )
        .await
        .expect("read");
        assert_eq!(held.rows[0][0], 0, "DISCARD ALL released it");
    });
    assert_eq!(
        before,
        (my_state(ports::MY_PRIMARY), pg_state(ports::PG_PRIMARY)),
        "nothing changed on the primaries"
    );
    // The lexer alone (no server at all) refuses every attempt of the corpus: the unit test
    // `every_attempt_of_the_corpus_is_refused_by_the_lexer_alone` of sluice-mcp; and the
    // login's query rules alone refuse a plain read the operator forbids:
    // `mcp_rules_and_the_logins_query_rules_apply_to_agents` in tests/mcp.rs.
}

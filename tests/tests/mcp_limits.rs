//! The MCP endpoint's limits are enforced, not parsed: rows and bytes are cut while the result
//! streams (Sluice's memory stays flat under a 10-million-row SELECT), the timeout is the
//! server's own and leaves no statement running, and 50 agents at once are served.

use serde_json::Value;
use sluice_tests::mcp::{McpSluice, QUERY_TOKEN, create_schema};
use sluice_tests::{Servers, backends_ready, mariadb, ok_stdout, ports, psql_app};

/// Sluice's resident memory in KiB.
fn rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("proc status");
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("VmRSS")
}

#[test]
fn ten_million_rows_come_back_capped_while_sluices_memory_stays_flat() {
    if !backends_ready(Servers::Both) {
        return;
    }
    create_schema();
    let s = McpSluice::start("max_rows = \"1000\"\nmax_bytes = \"1048576\"", "");
    let warm = s.python(
        "query",
        QUERY_TOKEN,
        r#"
async def main():
    async with client(URL, TOKEN) as c:
        emit(r=await call(c, "run_sql_readonly", {"target_id": "mysql_hg1", "sql": "SELECT 1"}))
        emit(r=await call(c, "run_sql_readonly", {"target_id": "pgsql_hg1", "sql": "SELECT 1"}))
asyncio.run(main())
"#,
    );
    assert!(warm.iter().all(|l| l["r"]["error"] == false), "{warm:?}");
    let before = rss_kib(s.sluice.pid());
    let lines = s.python(
        "query",
        QUERY_TOKEN,
        r#"
async def main():
    async with client(URL, TOKEN) as c:
        for tid, sql in [
            ("mysql_hg1", "SELECT seq FROM seq_1_to_10000000"),
            ("pgsql_hg1", "SELECT g FROM generate_series(1, 10000000) g"),
            ("mysql_hg1", "SELECT seq, REPEAT('x', 100000) AS big FROM seq_1_to_10000000"),
            ("pgsql_hg1", "SELECT g, repeat('x', 100000) AS big FROM generate_series(1, 10000000) g"),
        ]:
            r = await call(c, "run_sql_readonly", {"target_id": tid, "sql": sql})
            d = r["data"] or {}
            emit(target=tid, sql=sql, error=r["error"], text=r["text"][:300],
                 row_count=d.get("row_count"), truncated=d.get("truncated"),
                 first=(d.get("rows") or [[None]])[0][0], last=(d.get("rows") or [[None]])[-1][0])
asyncio.run(main())
"#,
    );
    let after = rss_kib(s.sluice.pid());
    for l in &lines {
        assert_eq!(l["error"], false, "{l}");
        assert_eq!(l["truncated"], true, "{l}");
        assert_eq!(l["first"], 1, "{l}");
        let rows = l["row_count"].as_u64().unwrap_or(0);
        if l["sql"].as_str().is_some_and(|q| q.contains("100000)")) {
            // 1 MiB of 100 kB values: ten rows.
            assert_eq!(rows, 10, "the byte cap: {l}");
        } else {
            assert_eq!(rows, 1000, "the row cap: {l}");
            assert_eq!(l["last"], 1000, "{l}");
        }
    }
    assert!(
        after < before + 64 * 1024,
        "Sluice's RSS grew from {before} KiB to {after} KiB reading 10-million-row results"
    );
    // Nothing keeps running on the servers once the calls answered.
    sluice_tests::wait_for(
        "the replicas to have no statement of the calls left",
        || {
            let my = mariadb(
                ports::MY_REPLICA,
                "root",
                "root",
                &["--skip-ssl", "-N"],
                "SELECT COUNT(*) FROM information_schema.processlist WHERE info LIKE '%seq_1_to_10000000%' AND info NOT LIKE '%processlist%'",
            );
            let pg = psql_app(
                ports::PG_REPLICA,
                "SELECT count(*) FROM pg_stat_activity WHERE query LIKE '%generate_series(1, 10000000)%' AND state = 'active' AND pid <> pg_backend_pid()",
            );
            my.stdout.starts_with(b"0") && pg.stdout.starts_with(b"0")
        },
    );
}

#[test]
fn a_long_statement_ends_at_the_timeout_and_leaves_nothing_running() {
    if !backends_ready(Servers::Both) {
        return;
    }
    create_schema();
    let s = McpSluice::start("", "");
    let lines = s.python(
        "query",
        QUERY_TOKEN,
        r#"
import time
async def main():
    async with client(URL, TOKEN) as c:
        for tid, sql in [
            ("mysql_hg1", "SELECT COUNT(*) FROM seq_1_to_100000 a, seq_1_to_100000 b WHERE a.seq + b.seq = 3"),
            ("pgsql_hg1", "SELECT count(*) FROM generate_series(1, 100000) a, generate_series(1, 100000) b WHERE a + b = 3"),
            ("mysql_hg1", "SELECT SLEEP(30)"),
            ("pgsql_hg1", "SELECT pg_sleep(30)"),
        ]:
            t = time.monotonic()
            r = await call(c, "run_sql_readonly", {"target_id": tid, "sql": sql, "timeout_ms": 1500})
            emit(target=tid, sql=sql, error=r["error"], text=r["text"], seconds=time.monotonic() - t)
        # The connection the timed-out statement used serves the next call.
        for tid in ["mysql_hg1", "pgsql_hg1"]:
            emit(target=tid, after=await call(c, "run_sql_readonly", {"target_id": tid, "sql": "SELECT 7"}))
asyncio.run(main())
"#,
    );
    for l in lines.iter().filter(|l| l.get("sql").is_some()) {
        assert_eq!(l["error"], true, "{l}");
        let text = l["text"].as_str().unwrap_or("");
        assert!(
            text.contains("stopped at the call's 1500 ms timeout"),
            "the server stopped it (not refused up front): {l}"
        );
        let seconds = l["seconds"].as_f64().unwrap_or(0.0);
        assert!(
            seconds < 20.0,
            "ended at the timeout, not after the sleep: {l}"
        );
    }
    for l in lines.iter().filter(|l| l.get("after").is_some()) {
        assert_eq!(l["after"]["data"]["rows"], serde_json::json!([[7]]), "{l}");
    }
    let my = ok_stdout(&mariadb(
        ports::MY_REPLICA,
        "root",
        "root",
        &["--skip-ssl", "-N"],
        "SELECT COUNT(*) FROM information_schema.processlist WHERE info LIKE '%seq_1_to_100000 a%' AND info NOT LIKE '%processlist%'",
    ));
    assert_eq!(my.trim(), "0", "the server stopped the statement");
    let pg = ok_stdout(&psql_app(
        ports::PG_REPLICA,
        "SELECT count(*) FROM pg_stat_activity WHERE (query LIKE '%generate_series(1, 100000) a%' OR query LIKE '%pg_sleep(30)%') AND state = 'active' AND pid <> pg_backend_pid()",
    ));
    assert_eq!(pg.trim(), "0", "the server stopped the statement");
    let sleeping = ok_stdout(&mariadb(
        ports::MY_REPLICA,
        "root",
        "root",
        &["--skip-ssl", "-N"],
        "SELECT COUNT(*) FROM information_schema.processlist WHERE info LIKE 'SELECT SLEEP(30)%'",
    ));
    assert_eq!(sleeping.trim(), "0", "no SLEEP left on the server");
    let timeouts = s.sluice.admin_ok("SHOW PROMETHEUS METRICS");
    assert!(
        timeouts.contains(
            r#"sluice_mcp_requests_total{endpoint="query",tool="run_sql_readonly",outcome="timeout"} 4"#
        ),
        "{timeouts}"
    );
}

#[test]
fn fifty_agents_make_a_hundred_calls_each_without_an_error() {
    if !backends_ready(Servers::Both) {
        return;
    }
    create_schema();
    let s = McpSluice::start("", "");
    let before = rss_kib(s.sluice.pid());
    let lines = s.python(
        "query",
        QUERY_TOKEN,
        r#"
import time
async def agent(i):
    errors, rows = 0, 0
    async with client(URL, TOKEN) as c:
        for n in range(100):
            tid = "mysql_hg1" if (i + n) % 2 == 0 else "pgsql_hg1"
            r = await call(c, "run_sql_readonly", {"target_id": tid,
                "sql": "SELECT id, name FROM mcp_e2e.customers WHERE id <= 3 ORDER BY id"})
            if r["error"]:
                errors += 1
                emit(kind="error", text=r["text"])
            else:
                rows += r["data"]["row_count"]
    return errors, rows
async def main():
    t = time.monotonic()
    results = await asyncio.gather(*[agent(i) for i in range(50)])
    emit(kind="done", errors=sum(e for e, _ in results), rows=sum(r for _, r in results),
         seconds=time.monotonic() - t)
asyncio.run(main())
"#,
    );
    let done = lines
        .iter()
        .find(|l| l["kind"] == "done")
        .expect("done line");
    assert_eq!(done["errors"], 0, "{lines:?}");
    assert_eq!(done["rows"], Value::from(50 * 100 * 3), "{done}");
    let after = rss_kib(s.sluice.pid());
    assert!(
        after < before + 128 * 1024,
        "RSS grew from {before} KiB to {after} KiB under 50 agents"
    );
    let calls = s.sluice.admin_ok(
        "SELECT SUM(count_star) FROM stats_mcp_query_digest WHERE tool_name = 'run_sql_readonly'",
    );
    assert_eq!(calls.trim(), "5000");
}

#[test]
fn the_cost_guard_refuses_a_plan_over_its_estimate_and_the_audit_log_has_every_call() {
    if !backends_ready(Servers::Both) {
        return;
    }
    create_schema();
    let audit = sluice_tests::scratch_dir("mcp_audit").join("audit.jsonl");
    let s = McpSluice::start(
        &format!(
            "max_estimated_rows = \"100000\"\naudit_log = {:?}",
            audit.display().to_string()
        ),
        "",
    );
    let lines = s.python(
        "query",
        QUERY_TOKEN,
        r#"
async def main():
    async with client(URL, TOKEN) as c:
        for tid, big in [("mysql_hg1", "SELECT seq FROM seq_1_to_10000000"),
                         ("pgsql_hg1", "SELECT g FROM generate_series(1, 10000000) g")]:
            emit(target=tid, kind="big", r=await call(c, "run_sql_readonly", {"target_id": tid, "sql": big}))
            emit(target=tid, kind="small", r=await call(c, "run_sql_readonly", {"target_id": tid,
                 "sql": "SELECT id FROM mcp_e2e.customers WHERE id = 1"}))
asyncio.run(main())
"#,
    );
    for l in &lines {
        if l["kind"] == "big" {
            assert_eq!(l["r"]["error"], true, "{l}");
            let text = l["r"]["text"].as_str().unwrap_or("");
            assert!(
                text.contains("cost guard") && text.contains("10000000"),
                "{l}"
            );
        } else {
            assert_eq!(l["r"]["data"]["rows"], serde_json::json!([[1]]), "{l}");
        }
    }
    let entries: Vec<Value> = std::fs::read_to_string(&audit)
        .expect("the audit file")
        .lines()
        .map(|l| serde_json::from_str(l).expect("a JSON line"))
        .collect();
    assert_eq!(entries.len(), 4, "{entries:?}");
    assert_eq!(entries[0]["sql"], "SELECT seq FROM seq_1_to_10000000");
    assert_eq!(entries[0]["outcome"], "refused");
    assert_eq!(entries[1]["outcome"], "ok");
    assert_eq!(entries[1]["rows"], 1);
    assert_eq!(entries[3]["target"], "pgsql_hg1");
    assert!(
        entries[0]["digest"]
            .as_str()
            .is_some_and(|d| d.starts_with("0x"))
    );
    assert!(
        entries[0]["time"]
            .as_str()
            .is_some_and(|t| t.ends_with('Z'))
    );
    assert_eq!(entries[0]["mcp_user"], "query_endpoint_auth");
}

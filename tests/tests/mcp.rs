//! The MCP endpoint with the official MCP Python SDK as the agent: every `/mcp/query` tool on
//! MariaDB and PostgreSQL targets in both protocol eras, MCP users with their own tokens,
//! grants, caps and masks, the stats and config endpoints, and the rules.

use serde_json::{Value, json};
use sluice_tests::mcp::{McpSluice, QUERY_TOKEN, create_schema, run_python};
use sluice_tests::{Servers, backends_ready, mariadb};

fn data(v: &Value) -> &Value {
    &v["data"]
}

fn rows(v: &Value) -> Vec<Value> {
    data(v)["rows"].as_array().cloned().unwrap_or_default()
}

#[test]
fn sdk_clients_list_and_call_every_query_tool_on_both_protocols() {
    if !backends_ready(Servers::Both) {
        return;
    }
    create_schema();
    let s = McpSluice::start("", "");
    let lines = s.python(
        "query",
        QUERY_TOKEN,
        r#"
async def main():
    for mode in ["legacy", "2026-07-28"]:
        async with client(URL, TOKEN, mode) as c:
            tools = (await c.list_tools()).tools
            emit(kind="tools", mode=mode, protocol=c.protocol_version, tools=[
                {"name": t.name, "input": t.input_schema, "output": t.output_schema,
                 "read_only": t.annotations.read_only_hint if t.annotations else None}
                for t in tools])
            emit(kind="targets", mode=mode, r=await call(c, "list_targets", {}))
            for tid in ["mysql_hg1", "pgsql_hg1"]:
                async def one(tool, args):
                    emit(kind=tool, mode=mode, target=tid, r=await call(c, tool, dict(args, target_id=tid)))
                await one("list_schemas", {})
                await one("list_tables", {"schema": "mcp_e2e"})
                await one("describe_table", {"schema": "mcp_e2e", "table": "customers"})
                await one("describe_table", {"schema": "mcp_e2e", "table": "orders"})
                await one("sample_rows", {"schema": "mcp_e2e", "table": "customers", "limit": 2, "columns": ["id", "name"]})
                await one("sample_distinct", {"schema": "mcp_e2e", "table": "orders", "column": "customer_id"})
                await one("run_sql_readonly", {"sql": "SELECT id, name, balance, phone, created_at FROM mcp_e2e.customers ORDER BY id"})
                await one("explain_sql", {"sql": "SELECT * FROM mcp_e2e.orders WHERE customer_id = 1"})
    # A 2025-06-18 client is answered in 2025-06-18.
    import httpx2
    async with httpx2.AsyncClient() as h:
        r = await h.post(URL, headers={"Authorization": f"Bearer {TOKEN}", "Accept": "application/json, text/event-stream"},
                         json={"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
                             "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}})
        emit(kind="init-2025-06-18", status=r.status_code, body=r.json())
asyncio.run(main())
"#,
    );
    let find = |kind: &str, mode: &str, target: &str| -> Vec<&Value> {
        lines
            .iter()
            .filter(|l| {
                l["kind"] == kind
                    && l["mode"] == mode
                    && (target.is_empty() || l["target"] == target)
            })
            .collect()
    };
    for mode in ["legacy", "2026-07-28"] {
        let tools = find("tools", mode, "")[0];
        let expected = if mode == "legacy" {
            "2025-11-25"
        } else {
            "2026-07-28"
        };
        assert_eq!(tools["protocol"], expected, "{mode}");
        let names: Vec<&str> = tools["tools"]
            .as_array()
            .expect("tools")
            .iter()
            .map(|t| t["name"].as_str().unwrap_or(""))
            .collect();
        assert_eq!(
            names,
            [
                "list_targets",
                "list_schemas",
                "list_tables",
                "describe_table",
                "sample_rows",
                "sample_distinct",
                "run_sql_readonly",
                "explain_sql",
                "discovery.run_static",
                "catalog.search",
                "catalog.get_object",
                "catalog.list_objects",
                "catalog.get_relationships",
                "catalog.save_template",
                "catalog.search_templates"
            ]
        );
        for t in tools["tools"].as_array().expect("tools") {
            assert_eq!(t["input"]["type"], "object", "{t}");
            assert_eq!(t["output"]["type"], "object", "{t}");
            // Only save_template writes (to Sluice's catalog, never to a database).
            let writes = t["name"] == "catalog.save_template";
            assert_eq!(t["read_only"], !writes, "{t}");
        }
        let run_schema = &tools["tools"][6]["input"];
        assert_eq!(run_schema["required"], json!(["sql"]), "{run_schema}");
        let targets = &data(&find("targets", mode, "")[0]["r"])["targets"];
        let ids: Vec<&str> = targets
            .as_array()
            .expect("targets")
            .iter()
            .map(|t| t["target_id"].as_str().unwrap_or(""))
            .collect();
        assert_eq!(ids, ["mysql_hg1", "pgsql_hg1"], "{targets}");
        assert_eq!(targets[0]["role"], "reader");
        assert_eq!(targets[0]["login"], "app");
        for target in ["mysql_hg1", "pgsql_hg1"] {
            let one = |kind: &str, i: usize| -> Value {
                let r = &find(kind, mode, target)[i]["r"];
                assert_eq!(r["error"], false, "{kind} on {target}: {r}");
                r.clone()
            };
            let schemas = one("list_schemas", 0);
            assert!(
                data(&schemas)["schemas"]
                    .as_array()
                    .expect("schemas")
                    .contains(&json!("mcp_e2e")),
                "{schemas}"
            );
            let tables = one("list_tables", 0);
            let names: Vec<&str> = data(&tables)["tables"]
                .as_array()
                .expect("tables")
                .iter()
                .map(|t| t["name"].as_str().unwrap_or(""))
                .collect();
            assert_eq!(names, ["customers", "orders"], "{tables}");
            assert_eq!(data(&tables)["tables"][0]["type"], "BASE TABLE");
            assert_eq!(data(&tables)["tables"][0]["comment"], "who buys");
            let customers = one("describe_table", 0);
            let d = data(&customers);
            let columns: Vec<&str> = d["columns"]
                .as_array()
                .expect("columns")
                .iter()
                .map(|c| c["name"].as_str().unwrap_or(""))
                .collect();
            assert_eq!(
                columns,
                ["id", "name", "phone", "created_at", "balance"],
                "{d}"
            );
            assert_eq!(d["primary_key"], json!(["id"]), "{d}");
            assert_eq!(d["comment"], "who buys");
            assert_eq!(d["columns"][1]["nullable"], false, "{d}");
            assert_eq!(d["columns"][2]["nullable"], true, "{d}");
            let orders = one("describe_table", 1);
            let o = data(&orders);
            assert_eq!(
                o["foreign_keys"][0]["references_table"], "mcp_e2e.customers",
                "{o}"
            );
            assert_eq!(o["foreign_keys"][0]["columns"], json!(["customer_id"]));
            assert!(
                o["indexes"]
                    .as_array()
                    .expect("indexes")
                    .iter()
                    .any(|i| i["name"] == "by_customer" && i["columns"] == json!(["customer_id"])),
                "{o}"
            );
            let sample = one("sample_rows", 0);
            assert_eq!(data(&sample)["row_count"], 2, "{sample}");
            assert_eq!(data(&sample)["columns"][1]["name"], "name");
            let distinct = one("sample_distinct", 0);
            assert_eq!(rows(&distinct)[0], json!([1, 2]), "{distinct}");
            let run = one("run_sql_readonly", 0);
            let r = rows(&run);
            assert_eq!(r.len(), 3, "{run}");
            assert_eq!(r[0][0], 1, "numbers are numbers: {run}");
            assert_eq!(r[0][1], "Ann");
            assert_eq!(r[0][2].as_f64(), Some(10.5), "{run}");
            assert_eq!(r[1][3], Value::Null, "NULL is null: {run}");
            assert_eq!(data(&run)["truncated"], false);
            assert_eq!(data(&run)["target_id"], target);
            let plan = one("explain_sql", 0);
            let p = &data(&plan)["plan"];
            let shaped = if target == "mysql_hg1" {
                p.get("query_block").is_some()
            } else {
                p[0].get("Plan").is_some()
            };
            assert!(shaped, "a JSON plan: {plan}");
        }
    }
    let init = lines
        .iter()
        .find(|l| l["kind"] == "init-2025-06-18")
        .expect("init line");
    assert_eq!(init["status"], 200);
    assert_eq!(
        init["body"]["result"]["protocolVersion"], "2025-06-18",
        "{init}"
    );
    // Audit: the real SQL's digest, per tool, user and target; metrics; one log line per call.
    let digests = s.sluice.admin_ok(
        "SELECT tool_name, username, target_id, digest_text, count_star FROM stats_mcp_query_digest WHERE tool_name = 'run_sql_readonly' ORDER BY target_id",
    );
    assert!(
        digests.contains(
            "run_sql_readonly\tquery_endpoint_auth\tmysql_hg1\tSELECT id,name,balance,phone,created_at FROM mcp_e2e.customers ORDER BY id\t2"
        ),
        "{digests}"
    );
    assert!(digests.contains("pgsql_hg1"), "{digests}");
    let counters = s.sluice.admin_ok(
        "SELECT tool, count FROM stats_mcp_query_tools_counters WHERE endpoint = 'query' AND tool = 'describe_table'",
    );
    assert_eq!(counters.trim(), "describe_table\t8", "one count per call");
    let metrics = s.sluice.admin_ok("SHOW PROMETHEUS METRICS");
    assert!(
        metrics.contains(
            r#"sluice_mcp_requests_total{endpoint="query",tool="run_sql_readonly",outcome="ok"} 4"#
        ),
        "{metrics}"
    );
    assert!(metrics.contains("sluice_mcp_request_duration_seconds_count"));
    let log = s.sluice.log();
    assert!(
        log.lines().any(|l| l.contains("MCP call")
            && l.contains("tool=\"explain_sql\"")
            && l.contains("outcome=\"ok\"")),
        "{log}"
    );
    assert!(!log.contains(QUERY_TOKEN), "no token in the log");
}

#[test]
fn mcp_users_have_their_own_tokens_grants_caps_and_masks() {
    if !backends_ready(Servers::Both) {
        return;
    }
    create_schema();
    let s = McpSluice::start("", "");
    let analyst = sluice_mcp::auth::token_sha256("analyst-token");
    let ops = sluice_mcp::auth::token_sha256("ops-token");
    s.sluice.admin_ok(&format!(
        "INSERT INTO mcp_users (username, token_sha256, endpoints, targets, max_rows, masked_columns) VALUES \
         ('analyst', '{analyst}', 'query,stats', 'mysql_hg1,pgsql_hg1', 2, 'mcp_e2e.customers.phone'); \
         INSERT INTO mcp_users (username, token_sha256, endpoints) VALUES ('ops', '{ops}', 'config'); \
         LOAD MCP USERS TO RUNTIME; SAVE MCP USERS TO DISK;"
    ));
    let runtime = s
        .sluice
        .admin_ok("SELECT username, token_sha256 FROM runtime_mcp_users ORDER BY username");
    assert!(
        runtime.contains(&analyst) && !runtime.contains("analyst-token"),
        "{runtime}"
    );
    let lines = s.python(
        "query",
        "analyst-token",
        r#"
async def main():
    async with client(URL, TOKEN) as c:
        for tid, concat in [("mysql_hg1", "CONCAT(phone, 'x')"), ("pgsql_hg1", "phone || 'x'")]:
            emit(kind="masked", target=tid, r=await call(c, "run_sql_readonly", {"target_id": tid,
                 "sql": "SELECT id, phone AS remark, name FROM mcp_e2e.customers ORDER BY id"}))
            emit(kind="star", target=tid, r=await call(c, "run_sql_readonly", {"target_id": tid,
                 "sql": "SELECT * FROM mcp_e2e.customers WHERE id = 1"}))
            emit(kind="expr", target=tid, r=await call(c, "run_sql_readonly", {"target_id": tid,
                 "sql": f"SELECT {concat} AS p FROM mcp_e2e.customers"}))
            emit(kind="asked_more", target=tid, r=await call(c, "run_sql_readonly", {"target_id": tid,
                 "sql": "SELECT id FROM mcp_e2e.orders ORDER BY id", "max_rows": 50}))
    stats = URL.replace("/mcp/query", "/mcp/stats")
    async with client(stats, TOKEN) as c:
        emit(kind="digest", r=await call(c, "show_query_digest", {"protocol": "mysql"}))
        emit(kind="pool", r=await call(c, "show_connection_pool", {"protocol": "pgsql"}))
        emit(kind="servers", r=await call(c, "show_servers", {"protocol": "mysql"}))
    config = URL.replace("/mcp/query", "/mcp/config")
    try:
        async with client(config, TOKEN) as c:
            await c.list_tools()
        emit(kind="config-as-analyst", ok=True)
    except Exception as e:
        emit(kind="config-as-analyst", ok=False, why=repr(e))
    async with client(config, "ops-token") as c:
        emit(kind="get_config", r=await call(c, "get_config", {"filter": "mcp-"}))
        emit(kind="set", r=await call(c, "set_variable", {"name": "mcp-max_rows", "value": "150"}))
        emit(kind="set_secret", r=await call(c, "set_variable", {"name": "admin-admin_credentials", "value": "x:y"}))
        emit(kind="load", r=await call(c, "load_to_runtime", {"module": "mcp"}))
        emit(kind="after", r=await call(c, "get_config", {"filter": "mcp-max_rows"}))
asyncio.run(main())
"#,
    );
    let get = |kind: &str, target: &str| -> &Value {
        &lines
            .iter()
            .find(|l| l["kind"] == kind && (target.is_empty() || l["target"] == target))
            .unwrap_or_else(|| panic!("no {kind} line: {lines:?}"))["r"]
    };
    for target in ["mysql_hg1", "pgsql_hg1"] {
        let masked = get("masked", target);
        assert_eq!(masked["error"], false, "{masked}");
        let r = rows(masked);
        assert_eq!(r.len(), 2, "the user's max_rows: {masked}");
        assert_eq!(data(masked)["truncated"], true);
        assert_eq!(
            r[0],
            json!([1, "[masked]", "Ann"]),
            "an alias is masked: {masked}"
        );
        assert_eq!(r[1], json!([2, null, "Bo"]), "{masked}");
        let star = get("star", target);
        assert_eq!(rows(star)[0][2], "[masked]", "{star}");
        let expr = get("expr", target);
        assert_eq!(expr["error"], true, "{expr}");
        assert!(
            expr["text"].as_str().unwrap_or("").contains("masked"),
            "{expr}"
        );
        let more = get("asked_more", target);
        assert_eq!(
            rows(more).len(),
            2,
            "an argument never raises the cap: {more}"
        );
    }
    let digest = get("digest", "");
    assert_eq!(digest["error"], false, "{digest}");
    assert!(
        data(digest)["columns"]
            .as_array()
            .is_some_and(|c| c.contains(&json!("digest_text")))
    );
    assert_eq!(get("pool", "")["error"], false);
    let servers = get("servers", "");
    assert!(
        data(servers)["columns"]
            .as_array()
            .is_some_and(|c| c.contains(&json!("repl_lag"))),
        "{servers}"
    );
    let denied = lines
        .iter()
        .find(|l| l["kind"] == "config-as-analyst")
        .expect("line");
    assert_eq!(
        denied["ok"], false,
        "analyst is not granted /mcp/config: {denied}"
    );
    let config = get("get_config", "");
    let shown = data(config).to_string();
    assert!(
        shown.contains("mcp-query_endpoint_auth") && shown.contains("[secret]"),
        "{shown}"
    );
    assert!(!shown.contains(QUERY_TOKEN), "{shown}");
    assert_eq!(get("set", "")["error"], false, "{}", get("set", ""));
    assert_eq!(get("set_secret", "")["error"], true);
    assert_eq!(get("load", "")["error"], false);
    assert!(data(get("after", "")).to_string().contains("150"));
    let digests = s
        .sluice
        .admin_ok("SELECT DISTINCT username FROM stats_mcp_query_digest ORDER BY username");
    assert_eq!(digests.trim(), "analyst", "{digests}");
    let log = s.sluice.log();
    assert!(
        log.contains("MCP config change") && log.contains("mcp-max_rows"),
        "audited"
    );
    for secret in ["analyst-token", "ops-token", QUERY_TOKEN] {
        assert!(!log.contains(secret), "no token in the log");
    }
    // The users survive a restart from disk.
    let users = s.sluice.admin_ok("SELECT COUNT(*) FROM disk.mcp_users");
    assert_eq!(users.trim(), "2");
}

#[test]
fn mcp_rules_and_the_logins_query_rules_apply_to_agents() {
    if !backends_ready(Servers::Both) {
        return;
    }
    create_schema();
    let s = McpSluice::start(
        "",
        r#"
[[mcp_query_rules]]
rule_id = 10
active = 1
match_pattern = "secret_column"
error_msg = "no secrets for agents"

[[mcp_query_rules]]
rule_id = 20
active = 1
tool_name = "run_sql_readonly"
match_pattern = "^SELECT 42$"
replace_pattern = "SELECT 43"

[[mcp_query_rules]]
rule_id = 30
active = 1
match_pattern = "^SELECT 'ping'$"
OK_msg = "pong from a rule"

[[mysql_query_rules]]
rule_id = 1
active = 1
username = "app"
match_pattern = "FROM mcp_e2e\\.orders"
error_msg = "orders are off limits"
"#,
    );
    let lines = s.python(
        "query",
        QUERY_TOKEN,
        r#"
async def main():
    async with client(URL, TOKEN) as c:
        for sql in ["SELECT secret_column FROM t", "SELECT 42", "SELECT 'ping'", "SELECT id FROM mcp_e2e.orders"]:
            emit(sql=sql, r=await call(c, "run_sql_readonly", {"target_id": "mysql_hg1", "sql": sql}))
asyncio.run(main())
"#,
    );
    let by = |sql: &str| -> &Value { &lines.iter().find(|l| l["sql"] == sql).expect("line")["r"] };
    let blocked = by("SELECT secret_column FROM t");
    assert_eq!(blocked["error"], true);
    assert!(
        blocked["text"]
            .as_str()
            .unwrap_or("")
            .contains("no secrets for agents"),
        "{blocked}"
    );
    assert_eq!(rows(by("SELECT 42")), [json!([43])], "rewritten");
    assert_eq!(data(by("SELECT 'ping'"))["message"], "pong from a rule");
    let orders = by("SELECT id FROM mcp_e2e.orders");
    assert_eq!(orders["error"], true);
    assert!(
        orders["text"]
            .as_str()
            .unwrap_or("")
            .contains("orders are off limits"),
        "{orders}"
    );
    // The same rule stops an ordinary client of the login.
    let client = mariadb(
        s.sluice.port,
        "app",
        "app",
        &["--skip-ssl"],
        "SELECT id FROM mcp_e2e.orders",
    );
    assert!(String::from_utf8_lossy(&client.stderr).contains("orders are off limits"));
    let hits = s
        .sluice
        .admin_ok("SELECT rule_id, hits FROM stats_mcp_query_rules ORDER BY rule_id");
    assert_eq!(hits.trim(), "10\t1\n20\t1\n30\t1", "{hits}");
    // A rule added on the admin port applies at LOAD MCP QUERY RULES TO RUNTIME.
    s.sluice.admin_ok(
        "INSERT INTO mcp_query_rules (rule_id, active, match_pattern, error_msg) VALUES (40, 1, '^SELECT 99$', 'ninety-nine is out'); LOAD MCP QUERY RULES TO RUNTIME; SAVE MCP QUERY RULES TO DISK;",
    );
    let runtime = s
        .sluice
        .admin_ok("SELECT rule_id, error_msg FROM runtime_mcp_query_rules WHERE rule_id = 40");
    assert_eq!(runtime.trim(), "40\tninety-nine is out");
    // Another tool is not rewritten by a rule for run_sql_readonly.
    let other = run_python(
        &s.url("query"),
        QUERY_TOKEN,
        r#"
async def main():
    async with client(URL, TOKEN) as c:
        emit(r=await call(c, "explain_sql", {"target_id": "mysql_hg1", "sql": "SELECT 42"}))
        emit(r=await call(c, "run_sql_readonly", {"target_id": "mysql_hg1", "sql": "SELECT 99"}))
asyncio.run(main())
"#,
        &s.sluice.log(),
    );
    assert_eq!(other[0]["r"]["error"], false, "{other:?}");
    assert!(
        other[1]["r"]["text"]
            .as_str()
            .unwrap_or("")
            .contains("ninety-nine is out"),
        "{other:?}"
    );
}

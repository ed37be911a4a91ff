//! The discovery catalog through the MCP Python SDK: a harvest of both protocols' schemas with
//! declared and inferred relationships, full-text search, templates, and DDL sent through
//! Sluice's data ports reaching the catalog without another harvest.

use serde_json::{Value, json};
use sluice_tests::mcp::{McpSluice, QUERY_TOKEN};
use sluice_tests::rag::{builtin_embedding, source_row};
use sluice_tests::{Servers, backends_ready, mariadb, ok_stdout, ports, primary_root, psql_app};

fn create_catalog_schema() {
    primary_root(
        "DROP DATABASE IF EXISTS mcp_cat; CREATE DATABASE mcp_cat;
         CREATE TABLE mcp_cat.customers (id INT PRIMARY KEY, name VARCHAR(40), email VARCHAR(80) COMMENT 'contact address') COMMENT 'people who buy';
         CREATE TABLE mcp_cat.orders (id INT PRIMARY KEY, customer_id INT NOT NULL,
             CONSTRAINT orders_customer FOREIGN KEY (customer_id) REFERENCES mcp_cat.customers (id));
         CREATE TABLE mcp_cat.payments (id INT PRIMARY KEY, order_id INT NOT NULL, amount DECIMAL(10,2));",
    );
    ok_stdout(&psql_app(
        ports::PG_PRIMARY,
        "SELECT pg_advisory_xact_lock(7073);
         DROP SCHEMA IF EXISTS mcp_cat CASCADE; CREATE SCHEMA mcp_cat;
         CREATE TABLE mcp_cat.customers (id int PRIMARY KEY, name text, email text);
         COMMENT ON TABLE mcp_cat.customers IS 'people who buy';
         COMMENT ON COLUMN mcp_cat.customers.email IS 'contact address';
         CREATE TABLE mcp_cat.orders (id int PRIMARY KEY, customer_id int NOT NULL REFERENCES mcp_cat.customers (id));
         CREATE TABLE mcp_cat.payments (id int PRIMARY KEY, order_id int NOT NULL, amount numeric(10,2));",
    ));
    sluice_tests::wait_for("the replicas to have mcp_cat", || {
        let my = mariadb(
            ports::MY_REPLICA,
            "app",
            "app",
            &["--skip-ssl", "-N"],
            "SELECT COUNT(*) FROM information_schema.tables WHERE table_schema = 'mcp_cat'",
        );
        let pg = psql_app(
            ports::PG_REPLICA,
            "SELECT count(*) FROM information_schema.tables WHERE table_schema = 'mcp_cat'",
        );
        my.stdout.starts_with(b"3") && pg.stdout.starts_with(b"3")
    });
}

#[test]
fn the_catalog_harvests_searches_keeps_templates_and_follows_ddl_through_the_data_path() {
    if !backends_ready(Servers::Both) {
        return;
    }
    // The MCP user's default schema (mcp_e2e) must exist for its connections.
    sluice_tests::mcp::create_schema();
    create_catalog_schema();
    let s = McpSluice::start("", "");
    let harvest = s.python(
        "query",
        QUERY_TOKEN,
        r#"
async def main():
    async with client(URL, TOKEN) as c:
        for tid in ["mysql_hg1", "pgsql_hg1"]:
            async def one(kind, tool, args):
                emit(kind=kind, target=tid, r=await call(c, tool, dict(args, target_id=tid)))
            await one("run", "discovery.run_static", {"schema_filter": ["mcp_cat"]})
            await one("search", "catalog.search", {"query": "contact"})
            await one("search_op", "catalog.search", {"query": "email) OR NEAR(\""})
            await one("orders", "catalog.get_object", {"object_key": "mcp_cat.orders"})
            await one("relations", "catalog.get_relationships", {"object_key": "mcp_cat.orders"})
            await one("list", "catalog.list_objects", {"schema_name": "mcp_cat"})
            await one("save", "catalog.save_template", {"question": "total paid per customer",
                "sql": "SELECT o.customer_id, SUM(p.amount) FROM mcp_cat.payments p JOIN mcp_cat.orders o ON o.id = p.order_id GROUP BY o.customer_id"})
            await one("save_write", "catalog.save_template", {"question": "cleanup", "sql": "DELETE FROM mcp_cat.payments"})
            await one("templates", "catalog.search_templates", {"query": "paid customer"})
asyncio.run(main())
"#,
    );
    let get = |kind: &str, target: &str| -> &Value {
        &harvest
            .iter()
            .find(|l| l["kind"] == kind && l["target"] == target)
            .unwrap_or_else(|| panic!("no {kind} for {target}: {harvest:?}"))["r"]
    };
    for target in ["mysql_hg1", "pgsql_hg1"] {
        let ok = |kind: &str| -> &Value {
            let r = get(kind, target);
            assert_eq!(r["error"], false, "{kind} on {target}: {r}");
            &r["data"]
        };
        let run = ok("run");
        assert_eq!(run["objects"], 3, "{run}");
        assert_eq!(run["foreign_keys"], 1, "{run}");
        assert_eq!(run["inferred"], 1, "payments.order_id → orders: {run}");
        let hits = &ok("search")["hits"];
        assert_eq!(hits[0]["object_key"], "mcp_cat.customers", "{hits}");
        assert!(
            hits[0]["snippet"]
                .as_str()
                .unwrap_or("")
                .contains("[contact]"),
            "{hits}"
        );
        ok("search_op");
        let orders = ok("orders");
        assert_eq!(orders["stale"], false);
        assert_eq!(
            orders["definition"]["foreign_keys"][0]["references_table"], "mcp_cat.customers",
            "{orders}"
        );
        let rel = ok("relations");
        assert_eq!(rel["outgoing"][0]["kind"], "foreign_key", "{rel}");
        assert_eq!(rel["incoming"][0]["from"], "mcp_cat.payments", "{rel}");
        assert_eq!(
            rel["incoming"][0]["relationship"]["kind"], "inferred",
            "{rel}"
        );
        let keys: Vec<&str> = ok("list")["objects"]
            .as_array()
            .expect("objects")
            .iter()
            .map(|o| o["object_key"].as_str().unwrap_or(""))
            .collect();
        assert_eq!(
            keys,
            ["mcp_cat.customers", "mcp_cat.orders", "mcp_cat.payments"]
        );
        assert!(ok("save")["template_id"].as_i64().is_some());
        let write = get("save_write", target);
        assert_eq!(write["error"], true, "only reads are kept: {write}");
        let templates = &ok("templates")["templates"];
        assert_eq!(
            templates[0]["question"], "total paid per customer",
            "{templates}"
        );
        assert_eq!(templates[0]["created_by"], "query_endpoint_auth");
    }
    // DDL through Sluice's own ports: the catalog follows without another harvest.
    ok_stdout(&mariadb(
        s.sluice.port,
        "app",
        "app",
        &["--skip-ssl"],
        "ALTER TABLE mcp_cat.customers ADD COLUMN loyalty_tier VARCHAR(10); CREATE TABLE mcp_cat.refunds (id INT PRIMARY KEY); DROP TABLE mcp_cat.payments",
    ));
    ok_stdout(&psql_app(
        s.sluice.pg_port,
        "ALTER TABLE mcp_cat.customers ADD COLUMN loyalty_tier text",
    ));
    let followed = s.python(
        "query",
        QUERY_TOKEN,
        r#"
import time
async def main():
    async with client(URL, TOKEN) as c:
        deadline = time.monotonic() + 30
        while True:
            my = await call(c, "catalog.get_object", {"target_id": "mysql_hg1", "object_key": "mcp_cat.customers"})
            pg = await call(c, "catalog.get_object", {"target_id": "pgsql_hg1", "object_key": "mcp_cat.customers"})
            lst = await call(c, "catalog.list_objects", {"target_id": "mysql_hg1", "schema_name": "mcp_cat"})
            cols = lambda r: [x["name"] for x in ((r["data"] or {}).get("definition") or {}).get("columns", [])]
            keys = [o["object_key"] for o in (lst["data"] or {}).get("objects", [])]
            done = "loyalty_tier" in cols(my) and "loyalty_tier" in cols(pg) and "mcp_cat.refunds" in keys and "mcp_cat.payments" not in keys
            if done or time.monotonic() > deadline:
                emit(done=done, my=cols(my), pg=cols(pg), keys=keys, stale=[my["data"]["stale"], pg["data"]["stale"]])
                return
            await asyncio.sleep(0.2)
asyncio.run(main())
"#,
    );
    let f = &followed[0];
    assert_eq!(f["done"], true, "{f}\n{}", s.sluice.log());
    assert_eq!(f["stale"], json!([false, false]), "{f}");
    let log = s.sluice.log();
    assert!(
        log.contains("MCP catalog: mcp_cat.customers changed in the data path; harvested again"),
        "{log}"
    );
    let datadir_catalog = s.sluice.dir.join("data").join("mcp_catalog.db");
    assert!(datadir_catalog.exists(), "the catalog lives in the datadir");
}

/// `catalog.search` by meaning: with `mcp-catalog_embedding_source` naming a (disabled)
/// `rag_sources` row whose model is the in-process all-MiniLM-L6-v2, a question sharing no word
/// with a table's name, comment or columns finds it first (`semantic`), and `hybrid` keeps it
/// first while the text search alone finds nothing; the objects are embedded once, at the first
/// semantic search. Without the variable the modes are refused with what to set.
#[test]
fn the_catalog_is_searched_by_meaning_with_a_rag_source_s_model() {
    if !backends_ready(Servers::Both) {
        return;
    }
    sluice_tests::mcp::create_schema();
    primary_root(
        "DROP DATABASE IF EXISTS mcp_sem; CREATE DATABASE mcp_sem;
         CREATE TABLE mcp_sem.invoices (id INT PRIMARY KEY, amount_due DECIMAL(10,2), due_date DATE) COMMENT 'bills sent to clients';
         CREATE TABLE mcp_sem.shipments (id INT PRIMARY KEY, carrier VARCHAR(40), tracking_code VARCHAR(40)) COMMENT 'parcels on their way';
         CREATE TABLE mcp_sem.employees (id INT PRIMARY KEY, full_name VARCHAR(80), hired_on DATE) COMMENT 'staff';
         CREATE TABLE mcp_sem.weather (id INT PRIMARY KEY, city VARCHAR(40), temperature DECIMAL(4,1)) COMMENT 'daily readings';",
    );
    sluice_tests::wait_for("the replica to have mcp_sem", || {
        mariadb(
            ports::MY_REPLICA,
            "app",
            "app",
            &["--skip-ssl", "-N"],
            "SELECT COUNT(*) FROM information_schema.tables WHERE table_schema = 'mcp_sem'",
        )
        .stdout
        .starts_with(b"4")
    });
    let model_row = source_row(
        6,
        "catalog_model",
        "mysql",
        "mcp_sem",
        "invoices",
        "",
        &builtin_embedding("enabled = 0"),
    );
    let script = r#"
async def main():
    async with client(URL, TOKEN) as c:
        await call(c, "discovery.run_static", {"schema_filter": ["mcp_sem"], "target_id": "mysql_hg1"})
        for mode in ["semantic", "hybrid", "fts", "semantic"]:
            r = await call(c, "catalog.search", {"query": "money our customers still owe us", "mode": mode, "target_id": "mysql_hg1"})
            emit(mode=mode, error=r["error"], text=r["text"][:300],
                 keys=[h["object_key"] for h in r["data"]["hits"]] if not r["error"] else None)
        r = await call(c, "catalog.search_templates", {"query": "money", "mode": "semantic"})
        emit(mode="templates", error=r["error"], text=r["text"][:300], keys=None)
asyncio.run(main())
"#;
    let s = McpSluice::start("catalog_embedding_source = \"6\"", &model_row);
    let lines = s.python("query", QUERY_TOKEN, script);
    let by = |i: usize| &lines[i];
    assert_eq!(lines.len(), 5, "{lines:?}");
    assert_eq!(by(0)["keys"][0], "mcp_sem.invoices", "semantic: {}", by(0));
    assert_eq!(by(1)["keys"][0], "mcp_sem.invoices", "hybrid: {}", by(1));
    assert_eq!(by(2)["keys"], json!([]), "no word in common: {}", by(2));
    assert_eq!(by(3)["keys"], by(0)["keys"], "the same ranking again");
    assert_eq!(by(4)["error"], true, "{}", by(4));
    assert!(
        by(4)["text"]
            .as_str()
            .is_some_and(|t| t.contains("by words only"))
    );
    let embedded = s
        .sluice
        .log()
        .matches("MCP catalog: embedded the catalog objects")
        .count();
    assert_eq!(
        embedded,
        1,
        "the objects are embedded once:\n{}",
        s.sluice.log()
    );

    let off = McpSluice::start("", &model_row);
    let lines = off.python("query", QUERY_TOKEN, script);
    assert_eq!(lines[0]["error"], true, "{lines:?}");
    assert!(
        lines[0]["text"]
            .as_str()
            .is_some_and(|t| t.contains("mcp-catalog_embedding_source")),
        "{lines:?}"
    );
    assert_eq!(lines[2]["keys"], json!([]), "fts needs no model: {lines:?}");
}

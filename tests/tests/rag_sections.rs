//! RAG at the size of a real documentation set: every section of PostgreSQL's documentation
//! (about 3,400 rows of real text nobody here wrote) in a MariaDB table and in a PostgreSQL
//! table, each synced through its replica in bounded pages by the in-process model
//! (all-MiniLM-L6-v2), all rows sharing one timestamp so every page boundary cuts through a tie;
//! then edits, inserts and deletes, of which only the changed rows are embedded again; then
//! searches through the MCP Python SDK on `/mcp/rag`. The page reads are admitted under the
//! `ingest` workload class, one at a time.

use sluice_tests::mcp::McpSluice;
use sluice_tests::rag::{
    CorpusDoc, SourceStats, builtin_embedding, insert_sql, mariadb_replica_count, sections,
    source_row, stats, sync, wait_synced,
};
use sluice_tests::{
    Servers, backends_ready, ok_stdout, ports, primary_root, psql_app, psql_script,
};

const RAG_TOKEN: &str = "rag-token-for-sections";
/// The workload class the syncs read under (`rag_sources.workload_class` defaults to it): one
/// page read at a time.
const INGEST_CLASS: &str =
    "\n[[workload_classes]]\nname = \"ingest\"\npriority = \"background\"\nmax_concurrency = 1\n";
/// Rows per INSERT statement when loading the tables.
const INSERT_ROWS: usize = 500;

fn load_mariadb(docs: &[CorpusDoc]) {
    let mut sql = String::from(
        "DROP DATABASE IF EXISTS rag_sections; CREATE DATABASE rag_sections CHARACTER SET utf8mb4;
         CREATE TABLE rag_sections.docs (id INT PRIMARY KEY, title VARCHAR(200) NOT NULL, body TEXT NOT NULL,
             kind VARCHAR(10) NOT NULL, updated_at DATETIME(6) NOT NULL);",
    );
    for (i, part) in docs.chunks(INSERT_ROWS).enumerate() {
        let stamp = "'2026-01-01 00:00:00'";
        let first = 1 + i * INSERT_ROWS;
        sql.push_str(&insert_sql("rag_sections.docs", part, first, stamp, true));
    }
    primary_root(&sql);
    sluice_tests::wait_for("the MariaDB replica to have the sections", || {
        mariadb_replica_count("SELECT COUNT(*) FROM rag_sections.docs") == docs.len() as u64
    });
}

fn load_postgresql(docs: &[CorpusDoc]) {
    let mut sql = String::from(
        "DROP SCHEMA IF EXISTS rag_sections CASCADE; CREATE SCHEMA rag_sections;
         CREATE TABLE rag_sections.docs (id int PRIMARY KEY, title text NOT NULL, body text NOT NULL,
             kind text NOT NULL, updated_at timestamptz NOT NULL);",
    );
    for (i, part) in docs.chunks(INSERT_ROWS).enumerate() {
        let stamp = "'2026-01-01 00:00:00+00'";
        let first = 1 + i * INSERT_ROWS;
        sql.push_str(&insert_sql("rag_sections.docs", part, first, stamp, false));
    }
    ok_stdout(&psql_script(ports::PG_PRIMARY, &sql));
    let count = format!("{}", docs.len());
    sluice_tests::wait_for("the PostgreSQL replica to have the sections", || {
        psql_app(ports::PG_REPLICA, "SELECT count(*) FROM rag_sections.docs")
            .stdout
            .starts_with(count.as_bytes())
    });
}

/// The changes, the same on both tables: rows 1 to 7 edited, 5 added sharing one timestamp,
/// rows 11 to 13 deleted.
fn changes(mysql: bool) -> String {
    let (edit, now) = match mysql {
        true => ("CONCAT(body, ' Edited: zanzibar quokka.')", "NOW(6)"),
        false => ("body || ' Edited: zanzibar quokka.'", "now()"),
    };
    let added: Vec<CorpusDoc> = (1..=5)
        .map(|i| CorpusDoc {
            title: format!("Added section {i}"),
            purpose: String::new(),
            body: format!("Section {i} added after the first sync, about xylophone tuning."),
        })
        .collect();
    let stamp = match mysql {
        true => "'2026-06-01 00:00:00'",
        false => "'2026-06-01 00:00:00+00'",
    };
    format!(
        "UPDATE rag_sections.docs SET body = {edit}, updated_at = {now} WHERE id BETWEEN 1 AND 7;
         {}
         DELETE FROM rag_sections.docs WHERE id BETWEEN 11 AND 13;",
        insert_sql("rag_sections.docs", &added, 100_001, stamp, mysql)
    )
}

/// The first sync read and embedded every section once, none skipped or doubled at the ties.
fn check_first(id: u32, n: u64, first: &SourceStats, log: &str) {
    assert_eq!(first.last_error, "", "source {id}: {first:?}\n{log}");
    assert_eq!(
        (first.documents, first.rows_read, first.docs_changed),
        (n, n, n),
        "source {id}: every row once: {first:?}"
    );
    assert_eq!(
        first.chunks, n,
        "source {id}: one chunk per section: {first:?}"
    );
    assert_eq!(first.chunks_embedded, n, "source {id}: {first:?}");
}

/// The second sync embedded the 12 changed rows only and the sweep removed the 3 deleted.
fn check_second(id: u32, n: u64, first: &SourceStats, second: &SourceStats) {
    assert_eq!(second.last_error, "", "source {id}: {second:?}");
    assert_eq!(second.documents, n + 2, "source {id}: {second:?}");
    assert_eq!(second.docs_deleted, 3, "source {id}: {second:?}");
    assert_eq!(
        second.docs_changed - first.docs_changed,
        12,
        "source {id}: 7 edited + 5 new: {second:?}"
    );
    assert_eq!(
        second.chunks_embedded - first.chunks_embedded,
        12,
        "source {id}: only the changed chunks are embedded again: {second:?}"
    );
}

#[test]
fn thousands_of_documentation_sections_sync_from_mariadb_and_postgresql() {
    if !backends_ready(Servers::Both) {
        return;
    }
    let docs = sections(100);
    let n = docs.len() as u64;
    load_mariadb(&docs);
    load_postgresql(&docs);
    let builtin = builtin_embedding(
        "embedding_batch_size = 32\nbatch_size = 500\nchunk_size = 600\ntext_template = \"{body}\"",
    );
    let s = McpSluice::start(
        &format!("rag_endpoint_auth = \"{RAG_TOKEN}\""),
        &format!(
            "{INGEST_CLASS}{}{}",
            source_row(
                11,
                "sections_my",
                "mysql",
                "rag_sections",
                "docs",
                "",
                &builtin
            ),
            source_row(
                12,
                "sections_pg",
                "pgsql",
                "app",
                "rag_sections.docs",
                "",
                &builtin
            ),
        ),
    );
    // The MariaDB source's progress shows while it runs (page by page), then both sync.
    s.sluice.admin_ok("RAG SYNC SOURCE 11");
    let mut live = SourceStats::default();
    sluice_tests::within(std::time::Duration::from_secs(120), || {
        live = stats(&s, 11);
        live.state == "syncing" && live.chunks_embedded > 0
    });
    assert!(
        live.state == "syncing" && live.chunks_embedded > 0 && live.chunks_embedded < n,
        "stats_rag_sources while the first sync runs: {live:?}"
    );
    let first = vec![wait_synced(&s, 11, 0), sync(&s, 12)];
    for (id, f) in [11, 12].iter().zip(&first) {
        check_first(*id, n, f, &s.sluice.log());
    }
    // Every page read (7 pages of 500 rows and the sweep's key pages, per source) took a slot
    // of the ingest class, and none was refused.
    let class = s.sluice.admin_ok(
        "SELECT admitted, shed_queue_full + shed_queue_timeout + shed_rate FROM stats_workload_classes WHERE class = 'ingest'",
    );
    let f: Vec<u64> = class
        .split_whitespace()
        .filter_map(|v| v.parse().ok())
        .collect();
    assert!(
        f.len() == 2 && f[0] >= 14 && f[1] == 0,
        "ingest class: {class:?}"
    );

    primary_root(&changes(true));
    ok_stdout(&psql_app(ports::PG_PRIMARY, &changes(false)));
    sluice_tests::wait_for("the MariaDB replica to have the changes", || {
        mariadb_replica_count("SELECT COUNT(*) FROM rag_sections.docs") == n + 2
    });
    let count = format!("{}", n + 2);
    sluice_tests::wait_for("the PostgreSQL replica to have the changes", || {
        psql_app(ports::PG_REPLICA, "SELECT count(*) FROM rag_sections.docs")
            .stdout
            .starts_with(count.as_bytes())
    });
    for (id, f) in [11, 12].iter().zip(&first) {
        check_second(*id, n, f, &sync(&s, *id));
    }

    // Agents find an edited row's new words, an added row, and a section by its own text
    // (nearest first), in each source, and nothing of the other source.
    // A section whose text no other section has.
    let (at, probe) = docs
        .iter()
        .enumerate()
        .skip(2000)
        .find(|(_, d)| docs.iter().filter(|o| o.body == d.body).count() == 1)
        .expect("a section with its own text");
    let probe_id = at + 1;
    let lines = s.python(
        "rag",
        RAG_TOKEN,
        &format!(
            r#"
PROBE = json.loads({probe:?})
async def main():
    async with client(URL, TOKEN) as c:
        for src in ["sections_my", "sections_pg"]:
            edited = await call(c, "rag.search_fts", {{"query": "zanzibar quokka", "k": 20, "source_names": [src]}})
            added = await call(c, "rag.search_hybrid", {{"query": "xylophone tuning", "k": 5, "source_names": [src]}})
            near = await call(c, "rag.search_vector", {{"query_text": PROBE, "k": 3, "source_names": [src]}})
            emit(source=src,
                 edited=sorted(int(h["doc_id"].rsplit(":", 1)[-1]) for h in edited["data"]["results"]),
                 added=[h["title"] for h in added["data"]["results"]],
                 near=[int(h["doc_id"].rsplit(":", 1)[-1]) for h in near["data"]["results"]],
                 sources=sorted({{h["source_id"] for r in (edited, added, near) for h in r["data"]["results"]}}))
asyncio.run(main())
"#,
            probe = serde_json::to_string(&probe.body).expect("json")
        ),
    );
    assert_eq!(lines.len(), 2, "{lines:?}");
    for (l, id) in lines.iter().zip([11, 12]) {
        assert_eq!(l["edited"], serde_json::json!([1, 2, 3, 4, 5, 6, 7]), "{l}");
        assert!(
            l["added"][0]
                .as_str()
                .is_some_and(|t| t.starts_with("Added section")),
            "{l}"
        );
        assert_eq!(l["near"][0], probe_id, "{l}");
        assert_eq!(l["sources"], serde_json::json!([id]), "{l}");
    }
}

//! The tools of each endpoint: their definitions (an `inputSchema` and `outputSchema` generated
//! from the argument and result types, `readOnlyHint` annotations) and the dispatch of a call.

mod admin;
mod args;
mod catalog;
mod catalog_args;
mod harvest;
mod query;
mod rag;
mod rag_args;

pub(crate) use query::Cx;
mod sql_text;

use crate::auth::{Caller, Endpoint};
use crate::error::Error;
use crate::service::McpService;
use args::*;
use rmcp::model::{JsonObject, Tool, ToolAnnotations};
use schemars::JsonSchema;
use serde::de::DeserializeOwned;
use serde_json::Value;
use std::sync::Arc;
use tokio_util::sync::CancellationToken;

/// Why a call could not even start (a JSON-RPC error rather than a tool error).
#[derive(Debug)]
pub(crate) enum CallFailure {
    /// No such tool on this endpoint.
    UnknownTool(String),
    /// The arguments do not match the tool's `inputSchema`.
    BadArguments(String),
    /// The tool ran and failed (a tool result with `isError`).
    Tool(Error),
}

impl From<Error> for CallFailure {
    fn from(e: Error) -> Self {
        CallFailure::Tool(e)
    }
}

/// Drops schemars' integer and float `format`s (`uint64`, `double`, …): JSON Schema does not
/// define them and validators warn about each.
fn strip_formats(v: &mut Value) {
    match v {
        Value::Object(m) => {
            if m.get("format").and_then(Value::as_str).is_some_and(|f| {
                f.starts_with("int") || f.starts_with("uint") || f == "double" || f == "float"
            }) {
                m.remove("format");
            }
            m.values_mut().for_each(strip_formats);
        }
        Value::Array(a) => a.iter_mut().for_each(strip_formats),
        _ => {}
    }
}

fn schema<T: JsonSchema>() -> Arc<JsonObject> {
    let mut v = serde_json::to_value(schemars::schema_for!(T)).unwrap_or(Value::Null);
    strip_formats(&mut v);
    let mut obj = v.as_object().cloned().unwrap_or_default();
    obj.remove("$schema");
    obj.remove("title");
    obj.entry("type")
        .or_insert_with(|| Value::String("object".into()));
    Arc::new(obj)
}

fn tool<I: JsonSchema, O: JsonSchema>(
    name: &'static str,
    title: &str,
    description: &'static str,
) -> Tool {
    tool_with::<I, O>(name, title, description, true)
}

fn tool_with<I: JsonSchema, O: JsonSchema>(
    name: &'static str,
    title: &str,
    description: &'static str,
    read_only: bool,
) -> Tool {
    let mut t = Tool::new(name, description, schema::<I>());
    t.title = Some(title.to_string());
    t.output_schema = Some(schema::<O>());
    let mut a = ToolAnnotations::new();
    a.title = Some(title.to_string());
    a.read_only_hint = Some(read_only);
    a.destructive_hint = Some(false);
    a.idempotent_hint = Some(read_only);
    a.open_world_hint = Some(false);
    t.annotations = Some(a);
    t
}

/// The tools of `endpoint`, in a fixed order.
pub(crate) fn definitions(endpoint: Endpoint) -> Vec<Tool> {
    match endpoint {
        Endpoint::Query => query_tools().into_iter().chain(catalog_tools()).collect(),
        Endpoint::Stats => admin::STATS_TOOLS
            .iter()
            .map(|(name, description)| {
                tool::<admin::StatsArgs, admin::Table>(name, name, description)
            })
            .collect(),
        Endpoint::Config => config_tools(),
        Endpoint::Rag => rag_tools(),
    }
}

/// `/mcp/rag`'s search tools.
fn rag_tools() -> Vec<Tool> {
    use rag_args::*;
    vec![
        tool::<FtsArgs, RagHits>(
            "rag.search_fts",
            "Search text",
            "Chunks of the indexed tables that contain the query's words, best first (BM25; score is -bm25, higher is better). Filter by source_ids, source_names or metadata filters.",
        ),
        tool::<VectorArgs, RagHits>(
            "rag.search_vector",
            "Search by meaning",
            "Chunks nearest in meaning to query_text (embedded with each source's model) or to query_vector; score is the cosine similarity.",
        ),
        tool::<HybridArgs, RagHits>(
            "rag.search_hybrid",
            "Hybrid search",
            "Both searches combined: mode fuse (reciprocal rank fusion: weight/(rrf_k0 + rank) summed over the text and vector results) or fts_then_vec (text candidates reranked by cosine similarity). The best default for questions.",
        ),
        tool::<ChunkIds, RagHits>(
            "rag.get_chunks",
            "Get chunks",
            "Chunks by id, in the order asked.",
        ),
        tool::<DocIds, RagDocs>(
            "rag.get_docs",
            "Get documents",
            "Whole documents (every chunk's text joined) by id, in the order asked.",
        ),
        tool::<FetchArgs, SourceRow>(
            "rag.fetch_from_source",
            "Fetch the source row",
            "The document's row as the source table holds it now, read through the read-only path (null when the row is gone).",
        ),
        tool::<NoRagArgs, RagStatsAnswer>(
            "rag.admin.stats",
            "RAG sources",
            "Each source's sync state and counts (stats_rag_sources), the index's size and sqlite-vec's version.",
        ),
    ]
}

/// `/mcp/query`'s discovery, sampling and SQL tools.
fn query_tools() -> Vec<Tool> {
    vec![
        tool::<NoArgs, TargetList>(
            "list_targets",
            "List targets",
            "The databases this caller may query: each target's id, protocol (mysql/pgsql), hostgroup, role (reader/writer), login and default schema, and why a target cannot be used if it cannot.",
        ),
        tool::<TargetArgs, SchemaList>(
            "list_schemas",
            "List schemas",
            "The schemas (MySQL databases, PostgreSQL schemas) of a target.",
        ),
        tool::<ListTablesArgs, TableList>(
            "list_tables",
            "List tables",
            "Tables and views of a schema with their type, row estimate and comment, by name, one page at a time (page_size, page_token), optionally only names containing name_filter.",
        ),
        tool::<TableArgs, TableDescription>(
            "describe_table",
            "Describe a table",
            "A table's columns (type, nullable, default, comment), primary key, indexes, foreign keys, comment and row estimate.",
        ),
        tool::<SampleRowsArgs, Rows>(
            "sample_rows",
            "Sample rows",
            "A few rows of a table (limit up to 100), optionally some columns only and a WHERE condition.",
        ),
        tool::<SampleDistinctArgs, Rows>(
            "sample_distinct",
            "Sample distinct values",
            "A column's most frequent values with their counts (limit up to 100).",
        ),
        tool::<RunSqlArgs, Rows>(
            "run_sql_readonly",
            "Run read-only SQL",
            "Runs exactly one read-only statement (SELECT, WITH, SHOW, DESCRIBE, EXPLAIN, VALUES, TABLE) on a replica, in a READ ONLY transaction. Rows are capped (max_rows; truncated says when), values are typed, the statement stops at the timeout. Writes, locks, stacked statements and functions with side effects are refused with the reason.",
        ),
        tool::<ExplainArgs, Plan>(
            "explain_sql",
            "Explain SQL",
            "The server's JSON plan of a read-only statement (EXPLAIN FORMAT=JSON / EXPLAIN (FORMAT JSON)); the statement is never run.",
        ),
    ]
}

/// `/mcp/query`'s catalog tools.
fn catalog_tools() -> Vec<Tool> {
    vec![
        tool::<catalog_args::RunStaticArgs, catalog_args::RunSummary>(
            "discovery.run_static",
            "Harvest the catalog",
            "Reads a target's schemas (tables, views, columns, keys, indexes, foreign keys) into Sluice's discovery catalog and infers relationships from column names; DDL that passes through Sluice keeps it fresh afterwards.",
        ),
        tool::<catalog_args::SearchArgs, catalog_args::Hits>(
            "catalog.search",
            "Search the catalog",
            "Search the catalog's tables and views by their names, comments and columns, best first: by words (mode fts, the default), by meaning (semantic) or both (hybrid).",
        ),
        tool::<catalog_args::ObjectArgs, catalog_args::ObjectEntry>(
            "catalog.get_object",
            "Catalog entry",
            "One table's catalog entry (describe_table's shape) with its relationships, and whether DDL changed it since.",
        ),
        tool::<catalog_args::ListObjectsArgs, catalog_args::ObjectList>(
            "catalog.list_objects",
            "List catalog entries",
            "The catalog's tables and views, by schema and name, one page at a time.",
        ),
        tool::<catalog_args::ObjectArgs, catalog_args::Relationships>(
            "catalog.get_relationships",
            "Table relationships",
            "A table's declared and inferred relationships, both ways.",
        ),
        tool_with::<catalog_args::SaveTemplateArgs, catalog_args::Saved>(
            "catalog.save_template",
            "Save a query template",
            "Keeps working read-only SQL with the question it answers, for reuse (catalog.search_templates); only a single read is accepted. Writes to Sluice's catalog, never to a database.",
            false,
        ),
        tool::<catalog_args::SearchArgs, catalog_args::Templates>(
            "catalog.search_templates",
            "Find query templates",
            "Saved SQL whose question, SQL or notes match the words, best first.",
        ),
    ]
}

/// `/mcp/config`'s tools.
fn config_tools() -> Vec<Tool> {
    vec![
        tool::<admin::VariablesArgs, admin::Table>(
            "get_config",
            "Runtime variables",
            "The variables in effect (runtime_global_variables), optionally those whose name contains filter; credentials and tokens are hidden.",
        ),
        tool::<admin::VariablesArgs, admin::Table>(
            "list_variables",
            "Memory variables",
            "The variables as edited (global_variables, the memory layer), optionally filtered; credentials and tokens are hidden.",
        ),
        tool_with::<admin::SetVariableArgs, admin::Change>(
            "set_variable",
            "Set a variable",
            "Sets one variable in the memory layer (SET name = value); load_to_runtime applies it. Audited; undone with LOAD … VARIABLES FROM DISK. Credentials cannot be set here.",
            false,
        ),
        tool_with::<admin::LoadArgs, admin::Change>(
            "load_to_runtime",
            "Load variables to runtime",
            "LOAD <MODULE> VARIABLES TO RUNTIME for mysql, pgsql, admin or mcp. Audited.",
            false,
        ),
    ]
}

/// Harvests one table of `schema` on `t` into the catalog again (after DDL on it; gone
/// tables leave it).
pub(crate) async fn harvest_into_catalog(
    cx: Cx<'_>,
    t: &crate::targets::Target,
    schema: &str,
    table: &str,
    trace: &mut crate::service::CallTrace,
) -> Result<(), Error> {
    catalog::harvest(cx, t, &[schema.to_string()], Some(table), trace)
        .await
        .map(drop)
}

fn parse<T: DeserializeOwned>(args: Option<JsonObject>) -> Result<T, CallFailure> {
    serde_json::from_value(Value::Object(args.unwrap_or_default()))
        .map_err(|e| CallFailure::BadArguments(e.to_string()))
}

/// Runs tool `name` for `caller`.
pub(crate) async fn call(
    svc: &McpService,
    caller: &Caller,
    name: &str,
    args: Option<JsonObject>,
    cancel: &CancellationToken,
) -> Result<Value, CallFailure> {
    use query::*;
    let r = match (caller.endpoint, name) {
        (Endpoint::Query, "list_targets") => {
            parse::<NoArgs>(args)?;
            Ok(list_targets(svc, caller))
        }
        (Endpoint::Query, "list_schemas") => list_schemas(svc, caller, parse(args)?, cancel).await,
        (Endpoint::Query, "list_tables") => list_tables(svc, caller, parse(args)?, cancel).await,
        (Endpoint::Query, "describe_table") => {
            describe_table(svc, caller, parse(args)?, cancel).await
        }
        (Endpoint::Query, "sample_rows") => sample_rows(svc, caller, parse(args)?, cancel).await,
        (Endpoint::Query, "sample_distinct") => {
            sample_distinct(svc, caller, parse(args)?, cancel).await
        }
        (Endpoint::Query, "run_sql_readonly") => {
            run_sql_readonly(svc, caller, parse(args)?, cancel).await
        }
        (Endpoint::Query, "explain_sql") => explain_sql(svc, caller, parse(args)?, cancel).await,
        (Endpoint::Query, "discovery.run_static") => {
            catalog::run_static(svc, caller, parse(args)?, cancel).await
        }
        (Endpoint::Query, "catalog.search") => catalog::search(svc, caller, parse(args)?).await,
        (Endpoint::Query, "catalog.get_object") => {
            catalog::get_object(svc, caller, parse(args)?).await
        }
        (Endpoint::Query, "catalog.list_objects") => {
            catalog::list_objects(svc, caller, parse(args)?).await
        }
        (Endpoint::Query, "catalog.get_relationships") => {
            catalog::get_relationships(svc, caller, parse(args)?).await
        }
        (Endpoint::Query, "catalog.save_template") => {
            catalog::save_template(svc, caller, parse(args)?).await
        }
        (Endpoint::Query, "catalog.search_templates") => {
            catalog::search_templates(svc, caller, parse(args)?).await
        }
        (Endpoint::Stats, tool) => match admin::STATS_TOOLS.iter().find(|(n, _)| *n == tool) {
            Some((name, _)) => admin::stats(svc, caller, name, parse(args)?).await,
            None => return Err(CallFailure::UnknownTool(name.to_string())),
        },
        (Endpoint::Config, "get_config") => {
            admin::variables(svc, caller, "get_config", parse(args)?).await
        }
        (Endpoint::Config, "list_variables") => {
            admin::variables(svc, caller, "list_variables", parse(args)?).await
        }
        (Endpoint::Config, "set_variable") => admin::set_variable(svc, caller, parse(args)?).await,
        (Endpoint::Config, "load_to_runtime") => {
            admin::load_to_runtime(svc, caller, parse(args)?).await
        }
        (Endpoint::Rag, "rag.search_fts") => rag::search_fts(svc, caller, parse(args)?).await,
        (Endpoint::Rag, "rag.search_vector") => rag::search_vector(svc, caller, parse(args)?).await,
        (Endpoint::Rag, "rag.search_hybrid") => rag::search_hybrid(svc, caller, parse(args)?).await,
        (Endpoint::Rag, "rag.get_chunks") => rag::get_chunks(svc, caller, parse(args)?).await,
        (Endpoint::Rag, "rag.get_docs") => rag::get_docs(svc, caller, parse(args)?).await,
        (Endpoint::Rag, "rag.fetch_from_source") => {
            rag::fetch_from_source(svc, caller, parse(args)?).await
        }
        (Endpoint::Rag, "rag.admin.stats") => rag::admin_stats(svc, caller, parse(args)?).await,
        _ => return Err(CallFailure::UnknownTool(name.to_string())),
    };
    r.map_err(CallFailure::Tool)
}

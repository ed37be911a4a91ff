//! The tools' arguments and results: the types their `inputSchema` and `outputSchema` are
//! generated from, so what is advertised is what is parsed and returned. Unknown arguments are
//! refused.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// No arguments.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct NoArgs {}

/// A target only.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct TargetArgs {
    /// The target (`list_targets`); the first usable one when omitted.
    pub target_id: Option<String>,
}

/// `list_tables`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct ListTablesArgs {
    /// The target; the first usable one when omitted.
    pub target_id: Option<String>,
    /// The schema (MySQL database / PostgreSQL schema).
    pub schema: String,
    /// Only tables whose name contains this text.
    pub name_filter: Option<String>,
    /// Tables per page (default 100, at most 1000).
    pub page_size: Option<u32>,
    /// The `next_page_token` of the previous page.
    pub page_token: Option<String>,
}

/// A table.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct TableArgs {
    /// The target; the first usable one when omitted.
    pub target_id: Option<String>,
    /// The schema.
    pub schema: String,
    /// The table.
    pub table: String,
}

/// `sample_rows`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct SampleRowsArgs {
    /// The target; the first usable one when omitted.
    pub target_id: Option<String>,
    /// The schema.
    pub schema: String,
    /// The table.
    pub table: String,
    /// Columns to return (all when omitted).
    pub columns: Option<Vec<String>>,
    /// A SQL condition (it is checked with the whole statement).
    #[serde(rename = "where")]
    pub where_clause: Option<String>,
    /// Rows (default 10, at most 100).
    pub limit: Option<u32>,
}

/// `sample_distinct`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct SampleDistinctArgs {
    /// The target; the first usable one when omitted.
    pub target_id: Option<String>,
    /// The schema.
    pub schema: String,
    /// The table.
    pub table: String,
    /// The column whose values are counted.
    pub column: String,
    /// A SQL condition (it is checked with the whole statement).
    #[serde(rename = "where")]
    pub where_clause: Option<String>,
    /// Distinct values (default 20, at most 100).
    pub limit: Option<u32>,
}

/// `run_sql_readonly`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct RunSqlArgs {
    /// One read-only statement (SELECT, WITH, SHOW, DESCRIBE, EXPLAIN, VALUES, TABLE).
    pub sql: String,
    /// The target; the first usable one when omitted.
    pub target_id: Option<String>,
    /// The schema to run in (MySQL database; PostgreSQL search_path).
    pub schema: Option<String>,
    /// Rows to return at most (lowers the caller's cap, never raises it).
    pub max_rows: Option<u64>,
    /// Timeout in milliseconds (lowers the caller's, never raises it).
    pub timeout_ms: Option<u64>,
}

/// `explain_sql`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct ExplainArgs {
    /// The statement to plan (never run: no ANALYZE).
    pub sql: String,
    /// The target; the first usable one when omitted.
    pub target_id: Option<String>,
    /// The schema to plan in.
    pub schema: Option<String>,
}

/// A target as `list_targets` shows it.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct TargetInfo {
    /// The id to pass as `target_id`.
    pub target_id: String,
    /// `mysql` or `pgsql`.
    pub protocol: String,
    /// The hostgroup its SQL runs on.
    pub hostgroup_id: u32,
    /// `reader`, `writer` or `unknown`.
    pub role: String,
    /// The database login its SQL runs as.
    pub login: String,
    /// Schema (MySQL) or database (PostgreSQL) by default.
    pub default_schema: String,
    /// What it is.
    pub description: String,
    /// Whether it can be used now.
    pub usable: bool,
    /// Why it cannot, if it cannot.
    pub skip_reason: Option<String>,
    /// `explain_sql` is allowed.
    pub allow_explain: bool,
    /// From `mcp_targets` (false: derived from the replication hostgroups).
    pub configured: bool,
}

/// `list_targets`' result.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct TargetList {
    /// The targets the caller may use.
    pub targets: Vec<TargetInfo>,
}

/// `list_schemas`' result.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct SchemaList {
    /// The target that answered.
    pub target_id: String,
    /// Schema names.
    pub schemas: Vec<String>,
}

/// A table in `list_tables`.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct TableInfo {
    /// Its name.
    pub name: String,
    /// `BASE TABLE`, `VIEW`, …
    #[serde(rename = "type")]
    pub kind: String,
    /// The server's row estimate.
    pub rows_estimate: Option<i64>,
    /// Its comment.
    pub comment: Option<String>,
}

/// `list_tables`' result.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct TableList {
    /// The target that answered.
    pub target_id: String,
    /// The schema.
    pub schema: String,
    /// This page's tables, by name.
    pub tables: Vec<TableInfo>,
    /// Pass as `page_token` for the next page; absent on the last.
    pub next_page_token: Option<String>,
}

/// A column in `describe_table`.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub(crate) struct ColumnInfo {
    /// Its name.
    pub name: String,
    /// Its full type.
    #[serde(rename = "type")]
    pub type_name: String,
    /// NULL allowed.
    pub nullable: bool,
    /// Its default expression.
    pub default: Option<String>,
    /// Its comment.
    pub comment: Option<String>,
}

/// An index in `describe_table`.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub(crate) struct IndexInfo {
    /// Its name.
    pub name: String,
    /// Its columns, in order.
    pub columns: Vec<String>,
    /// UNIQUE.
    pub unique: bool,
    /// The primary key.
    pub primary: bool,
}

/// A foreign key in `describe_table`.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub(crate) struct ForeignKeyInfo {
    /// Its name.
    pub name: String,
    /// Its columns.
    pub columns: Vec<String>,
    /// The referenced `schema.table`.
    pub references_table: String,
    /// The referenced columns.
    pub references_columns: Vec<String>,
}

/// `describe_table`'s result.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub(crate) struct TableDescription {
    /// The target that answered.
    pub target_id: String,
    /// The schema.
    pub schema: String,
    /// The table.
    pub table: String,
    /// `BASE TABLE`, `VIEW`, …
    #[serde(rename = "type")]
    pub kind: String,
    /// Its comment.
    pub comment: Option<String>,
    /// The server's row estimate.
    pub rows_estimate: Option<i64>,
    /// Columns in order.
    pub columns: Vec<ColumnInfo>,
    /// The primary key's columns.
    pub primary_key: Vec<String>,
    /// Indexes (the primary key included).
    pub indexes: Vec<IndexInfo>,
    /// Foreign keys.
    pub foreign_keys: Vec<ForeignKeyInfo>,
}

/// A result column.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct ResultColumn {
    /// Its name.
    pub name: String,
    /// The server's type.
    #[serde(rename = "type")]
    pub type_name: String,
}

/// Rows from `run_sql_readonly`, `sample_rows` and `sample_distinct`.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct Rows {
    /// The target it ran on.
    pub target_id: String,
    /// The columns.
    pub columns: Vec<ResultColumn>,
    /// The rows, values typed (numbers as numbers, NULL as null).
    pub rows: Vec<Vec<serde_json::Value>>,
    /// Rows returned.
    pub row_count: u64,
    /// Rows or bytes were cut at the call's caps.
    pub truncated: bool,
    /// An MCP query rule's answer in place of rows (`OK_msg`).
    pub message: Option<String>,
}

/// `explain_sql`'s result.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct Plan {
    /// The target that planned it.
    pub target_id: String,
    /// The server's JSON plan.
    pub plan: serde_json::Value,
}

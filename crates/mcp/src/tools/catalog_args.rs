//! The catalog tools' arguments and results (their `inputSchema` and `outputSchema`).

use crate::catalog::{Hit, Relationship, Template};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// `discovery.run_static` arguments.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct RunStaticArgs {
    /// The target; the first usable one when omitted.
    pub target_id: Option<String>,
    /// Only these schemas (all but the system ones when omitted).
    pub schema_filter: Option<Vec<String>>,
}

/// `discovery.run_static` result.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct RunSummary {
    /// The run.
    pub run_id: i64,
    /// The target harvested.
    pub target_id: String,
    /// The schemas harvested.
    pub schemas: Vec<String>,
    /// Tables and views stored.
    pub objects: usize,
    /// Declared foreign keys found.
    pub foreign_keys: usize,
    /// Relationships inferred from column names.
    pub inferred: usize,
}

/// `catalog.search` / `catalog.search_templates` arguments.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct SearchArgs {
    /// Words to look for (names, comments, columns; questions and SQL for templates).
    pub query: String,
    /// Only this target's entries.
    pub target_id: Option<String>,
    /// Results at most (default 25, at most 100).
    pub limit: Option<u32>,
    /// `catalog.search` only: `fts` (words, the default), `semantic` (meaning: the objects'
    /// embeddings nearest the query's, with the model of `mcp-catalog_embedding_source`) or
    /// `hybrid` (both, fused by reciprocal rank).
    pub mode: Option<crate::catalog::SearchMode>,
}

/// `catalog.search` result.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct Hits {
    /// Best first.
    pub hits: Vec<Hit>,
}

/// An object by key.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct ObjectArgs {
    /// `schema.table`.
    pub object_key: String,
    /// The target; the first usable one when omitted.
    pub target_id: Option<String>,
    /// With relationships inferred from names (default true).
    pub include_inferred: Option<bool>,
}

/// `catalog.get_object` result.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct ObjectEntry {
    /// `schema.table`.
    pub object_key: String,
    /// DDL ran on it since the harvest; it is being harvested again.
    pub stale: bool,
    /// Its description (describe_table's shape).
    pub definition: Value,
    /// Its relationships to other tables.
    pub relationships: Vec<Relationship>,
}

/// `catalog.list_objects` arguments.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct ListObjectsArgs {
    /// The target; the first usable one when omitted.
    pub target_id: Option<String>,
    /// Only this schema.
    pub schema_name: Option<String>,
    /// Objects per page (default 100, at most 1000).
    pub page_size: Option<u32>,
    /// The `next_page_token` of the previous page.
    pub page_token: Option<String>,
}

/// A listed object.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct Listed {
    /// `schema.table`.
    pub object_key: String,
    /// `BASE TABLE`, `VIEW`, …
    #[serde(rename = "type")]
    pub kind: String,
    /// Changed since its harvest.
    pub stale: bool,
}

/// `catalog.list_objects` result.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct ObjectList {
    /// This page.
    pub objects: Vec<Listed>,
    /// Pass as `page_token` for the next page; absent on the last.
    pub next_page_token: Option<String>,
}

/// `catalog.get_relationships` result.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct Relationships {
    /// `schema.table`.
    pub object_key: String,
    /// Its own keys to other tables.
    pub outgoing: Vec<Relationship>,
    /// Other tables' keys to it: (`schema.table`, relationship).
    pub incoming: Vec<Incoming>,
}

/// A relationship from another table.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct Incoming {
    /// The referencing `schema.table`.
    pub from: String,
    /// The relationship.
    pub relationship: Relationship,
}

/// `catalog.save_template` arguments.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct SaveTemplateArgs {
    /// The question the SQL answers, in words.
    pub question: String,
    /// Working read-only SQL.
    pub sql: String,
    /// The target it runs on; the first usable one when omitted.
    pub target_id: Option<String>,
    /// Notes (parameters to change, caveats).
    pub notes: Option<String>,
}

/// `catalog.save_template` result.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct Saved {
    /// The template's id.
    pub template_id: i64,
}

/// `catalog.search_templates` result.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct Templates {
    /// Best first.
    pub templates: Vec<Template>,
}

//! The retrieval index's sources: `rag_sources` rows (ProxySQL 4.0's table name and, where it
//! has them, its columns), with the text template that turns a row into a document.

use super::RowError;
use super::values::Flag;
use serde::{Deserialize, Serialize};

/// One row of `rag_sources`: a table (or query) whose rows become searchable documents.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RagSource {
    /// The source's id (documents are `<source_id>:<primary key>`).
    pub source_id: u32,
    /// A name for logs, stats and search filters.
    pub name: String,
    /// Synced and searched when 1.
    #[serde(default = "yes")]
    pub enabled: Flag,
    /// `mysql` or `pgsql`.
    pub protocol: String,
    /// The hostgroup its rows are read from (through its servers, as `username`).
    pub hostgroup_id: u32,
    /// The `mysql_users`/`pgsql_users` login (with `backend=1`) it reads as.
    pub username: String,
    /// MySQL: the schema; PostgreSQL: the database.
    #[serde(default)]
    pub schemaname: String,
    /// The table (`name` or `schema.name`); or use `query`.
    #[serde(default)]
    pub table_name: String,
    /// A read whose rows are the source, instead of a table (one SELECT).
    #[serde(default)]
    pub query: String,
    /// A condition rows must meet (SQL, ProxySQL's `where_sql`).
    #[serde(default)]
    pub where_sql: String,
    /// The primary key column (one column).
    pub pk_column: String,
    /// A column that grows when a row changes (a timestamp or version); paging is on
    /// (change column, primary key).
    pub change_column: String,
    /// The column holding the document's title (optional).
    #[serde(default)]
    pub title_column: String,
    /// The document's text, with `{column}` for a column's value (`{{` and `}}` for braces).
    pub text_template: String,
    /// Columns kept as metadata, for filters (comma separated).
    #[serde(default)]
    pub metadata_columns: String,
    /// Characters per chunk.
    #[serde(default = "chunk_size")]
    pub chunk_size: u32,
    /// Characters a chunk repeats from the one before.
    #[serde(default = "chunk_overlap")]
    pub chunk_overlap: u32,
    /// A tail chunk shorter than this is merged into the one before.
    #[serde(default = "chunk_min")]
    pub chunk_min: u32,
    /// Rows read per batch (and per index transaction).
    #[serde(default = "batch_size")]
    pub batch_size: u32,
    /// Each run first re-reads rows whose change column is within this much of the cursor
    /// (seconds for a time column, units for a number), for rows that committed late.
    #[serde(default = "rescan_window")]
    pub rescan_window: u64,
    /// Sync every this many ms (0: only on `RAG SYNC SOURCE`).
    #[serde(default)]
    pub sync_interval_ms: u64,
    /// Look for deleted rows every this many ms (a full pass over the keys).
    #[serde(default = "sweep_interval_ms")]
    pub sweep_interval_ms: u64,
    /// The `workload_classes` row each page read is admitted under (a slot of its
    /// `max_concurrency`, its queue and rate cap), shared with the data path's statements of
    /// that class; a class that is not configured admits without limit.
    #[serde(default = "ingest")]
    pub workload_class: String,
    /// `openai` (an OpenAI-compatible `POST /embeddings` server) or `builtin` (a BERT
    /// sentence model run in the process, from the folder `embedding_model` names).
    #[serde(default = "openai")]
    pub embedding_provider: String,
    /// The API base, e.g. `http://127.0.0.1:8000/v1`.
    #[serde(default)]
    pub embedding_base_url: String,
    /// `openai`: the model name sent to the server; `builtin`: the folder with the model's
    /// `config.json`, `tokenizer.json` and `model.safetensors`.
    #[serde(default)]
    pub embedding_model: String,
    /// The vectors' size.
    #[serde(default = "dimension")]
    pub embedding_dimension: u32,
    /// An environment variable holding the API key.
    #[serde(default)]
    pub embedding_api_key_env: String,
    /// A file holding the API key.
    #[serde(default)]
    pub embedding_api_key_file: String,
    /// Texts per embedding request.
    #[serde(default = "embedding_batch")]
    pub embedding_batch_size: u32,
    /// One embedding request's time limit (ms).
    #[serde(default = "embedding_timeout")]
    pub embedding_timeout_ms: u64,
    /// Embedding requests per second at most (0: no cap).
    #[serde(default)]
    pub embedding_max_rps: u32,
    /// Put before each chunk (E5 models: `passage: `).
    #[serde(default)]
    pub embedding_passage_prefix: String,
    /// Put before each query (E5 models: `query: `).
    #[serde(default)]
    pub embedding_query_prefix: String,
    /// The operator's note.
    #[serde(default)]
    pub comment: String,
}

fn yes() -> Flag {
    Flag(true)
}
fn chunk_size() -> u32 {
    1000
}
fn chunk_overlap() -> u32 {
    150
}
fn chunk_min() -> u32 {
    200
}
fn batch_size() -> u32 {
    500
}
fn rescan_window() -> u64 {
    60
}
fn sweep_interval_ms() -> u64 {
    3_600_000
}
fn ingest() -> String {
    "ingest".into()
}
fn openai() -> String {
    "openai".into()
}
fn dimension() -> u32 {
    384
}
fn embedding_batch() -> u32 {
    32
}
fn embedding_timeout() -> u64 {
    20_000
}

/// A piece of a text template.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TemplatePart {
    /// Literal text.
    Text(String),
    /// A column's value.
    Column(String),
}

/// Why a text template cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum TemplateError {
    /// `{…}` holds something other than a column name.
    #[error("{{{0}}} is not a column name")]
    NotAColumn(String),
    /// A `}` that closes nothing.
    #[error("a lone }} (write }}}} for a brace)")]
    LoneBrace,
    /// The template names no column.
    #[error("it names no column (write {{column}} for a column's value)")]
    NoColumn,
}

/// Parses a text template: `{column}` names a column, `{{`/`}}` are braces.
pub fn parse_template(t: &str) -> Result<Vec<TemplatePart>, TemplateError> {
    let mut parts = Vec::new();
    let mut text = String::new();
    let mut chars = t.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '{' if chars.peek() == Some(&'{') => {
                chars.next();
                text.push('{');
            }
            '}' if chars.peek() == Some(&'}') => {
                chars.next();
                text.push('}');
            }
            '{' => {
                let name: String = chars.by_ref().take_while(|&c| c != '}').collect();
                let name = name.trim().to_string();
                if name.is_empty() || !is_identifier(&name) {
                    return Err(TemplateError::NotAColumn(name));
                }
                if !text.is_empty() {
                    parts.push(TemplatePart::Text(std::mem::take(&mut text)));
                }
                parts.push(TemplatePart::Column(name));
            }
            '}' => return Err(TemplateError::LoneBrace),
            c => text.push(c),
        }
    }
    if !text.is_empty() {
        parts.push(TemplatePart::Text(text));
    }
    if !parts.iter().any(|p| matches!(p, TemplatePart::Column(_))) {
        return Err(TemplateError::NoColumn);
    }
    Ok(parts)
}

/// A plain identifier (letters, digits, `_`, `$`), or two joined by a dot for `table_name`.
pub fn is_identifier(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 64
        && s.chars()
            .all(|c| c.is_alphanumeric() || c == '_' || c == '$')
        && !s.starts_with(|c: char| c.is_ascii_digit())
}

impl RagSource {
    /// The metadata column names.
    pub fn metadata(&self) -> Vec<String> {
        self.metadata_columns
            .split(',')
            .map(str::trim)
            .filter(|c| !c.is_empty())
            .map(str::to_string)
            .collect()
    }

    /// What is wrong with the row, naming the column; `Ok` for a usable one.
    pub fn check(&self) -> Result<(), RowError> {
        let col = |name: &'static str, v: &str| {
            if is_identifier(v) {
                Ok(())
            } else {
                Err(RowError::new(name, format!("{v:?} is not a column name")))
            }
        };
        if self.name.trim().is_empty() {
            return Err(RowError::new("name", "must not be empty"));
        }
        if self.protocol != "mysql" && self.protocol != "pgsql" {
            return Err(RowError::new(
                "protocol",
                format!("{:?} is not mysql or pgsql", self.protocol),
            ));
        }
        if self.username.trim().is_empty() {
            return Err(RowError::new(
                "username",
                "the login the source is read as must be set",
            ));
        }
        match (
            self.table_name.trim().is_empty(),
            self.query.trim().is_empty(),
        ) {
            (true, true) => return Err(RowError::new("table_name or query", "one must be set")),
            (false, false) => return Err(RowError::new("table_name and query", "set only one")),
            (false, true)
                if !self.table_name.split('.').all(is_identifier)
                    || self.table_name.split('.').count() > 2 =>
            {
                return Err(RowError::new(
                    "table_name",
                    format!("{:?} is not a table name", self.table_name),
                ));
            }
            _ => {}
        }
        if !self.query.trim().is_empty() {
            let q = self.query.trim().trim_end_matches(';').trim_end();
            let first = q
                .split_whitespace()
                .next()
                .unwrap_or("")
                .to_ascii_uppercase();
            if !(first == "SELECT" || first == "WITH") || q.contains(';') {
                return Err(RowError::new(
                    "query",
                    "must be one SELECT (or WITH ... SELECT)",
                ));
            }
        }
        col("pk_column", &self.pk_column)?;
        col("change_column", &self.change_column)?;
        if !self.title_column.is_empty() {
            col("title_column", &self.title_column)?;
        }
        for m in self.metadata() {
            col("metadata_columns", &m)?;
        }
        parse_template(&self.text_template)
            .map_err(|e| RowError::new("text_template", e.to_string()))?;
        if self.chunk_size == 0 {
            return Err(RowError::new("chunk_size", "must be at least 1"));
        }
        if self.chunk_overlap >= self.chunk_size {
            return Err(RowError::new("chunk_overlap", "must be below chunk_size"));
        }
        if self.batch_size == 0 || self.batch_size > 100_000 {
            return Err(RowError::new("batch_size", "must be between 1 and 100000"));
        }
        self.check_embedding_provider()?;
        if self.embedding_dimension == 0 || self.embedding_dimension > 8192 {
            return Err(RowError::new(
                "embedding_dimension",
                "must be between 1 and 8192",
            ));
        }
        if self.embedding_batch_size == 0 {
            return Err(RowError::new("embedding_batch_size", "must be at least 1"));
        }
        if self.sync_interval_ms != 0 && self.sync_interval_ms < 1000 {
            return Err(RowError::new(
                "sync_interval_ms",
                "0 (manual) or at least 1000",
            ));
        }
        Ok(())
    }

    /// The embedding provider's own columns: an http(s) URL for `openai`, the model's files
    /// for `builtin`.
    fn check_embedding_provider(&self) -> Result<(), RowError> {
        match self.embedding_provider.as_str() {
            "openai" => {
                if !(self.embedding_base_url.starts_with("http://")
                    || self.embedding_base_url.starts_with("https://"))
                {
                    return Err(RowError::new(
                        "embedding_base_url",
                        "an http:// or https:// URL is needed",
                    ));
                }
            }
            "builtin" => {
                let dir = std::path::Path::new(&self.embedding_model);
                if self.embedding_model.is_empty() {
                    return Err(RowError::new(
                        "embedding_model",
                        "the builtin provider needs the model's folder",
                    ));
                }
                for f in ["config.json", "tokenizer.json", "model.safetensors"] {
                    if !dir.join(f).is_file() {
                        return Err(RowError::new(
                            "embedding_model",
                            format!("{} is missing", dir.join(f).display()),
                        ));
                    }
                }
            }
            other => {
                return Err(RowError::new(
                    "embedding_provider",
                    format!("{other:?} is not openai or builtin"),
                ));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn templates_name_columns_and_escape_braces() {
        assert_eq!(
            parse_template("{title}\n\n{body} {{x}}"),
            Ok(vec![
                TemplatePart::Column("title".into()),
                TemplatePart::Text("\n\n".into()),
                TemplatePart::Column("body".into()),
                TemplatePart::Text(" {x}".into()),
            ])
        );
        assert!(parse_template("no columns").is_err());
        assert!(parse_template("{bad name}").is_err());
        assert!(parse_template("{a} }").is_err());
        assert!(parse_template("{a; DROP}").is_err());
    }
}

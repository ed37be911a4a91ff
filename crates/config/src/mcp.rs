//! The MCP endpoint's configuration: `mcp-*` variables and the `mcp_users`, `mcp_targets` and
//! `mcp_query_rules` rows (ProxySQL 4.0's names where it has them).

use super::SetOutcome;
use super::values::{Flag, VariableError, parse_var_bool, parse_var_int};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// ProxySQL 4.0 endpoints whose `mcp-<endpoint>_endpoint_auth` token Sluice accepts and has no
/// endpoint for yet (the token is kept, the path answers 404).
const UNSERVED_ENDPOINT_TOKENS: &[&str] = &[
    "admin_endpoint_auth",
    "cache_endpoint_auth",
    "ai_endpoint_auth",
];

/// ProxySQL 4.0 `mcp-` variables accepted for compatibility without effect.
const PROXYSQL_MCP_VARIABLES: &[&str] = &[
    "catalog_path",
    "fts_path",
    "mysql_hosts",
    "mysql_ports",
    "mysql_user",
    "mysql_password",
    "mysql_schema",
];

/// The `mcp-` variables.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct McpVariables {
    /// Serve the MCP endpoint (ProxySQL's default: off).
    pub enabled: bool,
    /// The MCP port (ProxySQL's 6071).
    pub port: u16,
    /// The address it listens on (Sluice addition; loopback by default).
    pub interface: String,
    /// HTTPS with the frontend certificates. Plaintext is refused unless the interface is
    /// loopback.
    pub use_ssl: bool,
    /// The default per-call statement timeout (ms).
    pub timeout_ms: u64,
    /// The default row cap of a call.
    pub max_rows: u64,
    /// The default byte cap of a call's result values.
    pub max_bytes: u64,
    /// Largest request body accepted (bytes); larger ones get 413.
    pub max_request_bytes: u64,
    /// Time a client has to send a whole request (ms); slower ones get 408.
    pub request_timeout_ms: u64,
    /// Default calls per minute for an MCP user without its own limit (0: unlimited).
    pub calls_per_minute: u64,
    /// Refuse a statement whose plan estimates more rows than this (0: no cost guard).
    pub max_estimated_rows: u64,
    /// Extra `Host` names (comma separated) accepted besides loopback and the interface.
    pub allowed_hosts: String,
    /// Browser origins (comma separated, with scheme) accepted; empty refuses every request
    /// that carries an `Origin`.
    pub allowed_origins: String,
    /// The shared bearer token of `/mcp/query` (ProxySQL's); empty refuses it.
    pub query_endpoint_auth: String,
    /// The shared bearer token of `/mcp/stats` (`observe_endpoint_auth` is its old name).
    pub stats_endpoint_auth: String,
    /// The shared bearer token of `/mcp/config`.
    pub config_endpoint_auth: String,
    /// The shared bearer token of `/mcp/rag`.
    pub rag_endpoint_auth: String,
    /// Most results a RAG search returns (ProxySQL's `genai-rag_k_max`).
    pub rag_k_max: u64,
    /// Most candidates a RAG search leg considers (`genai-rag_candidates_max`).
    pub rag_candidates_max: u64,
    /// Longest RAG query text in bytes (`genai-rag_query_max_bytes`).
    pub rag_query_max_bytes: u64,
    /// Largest RAG answer in bytes; longer ones are cut and say `truncated`
    /// (`genai-rag_response_max_bytes`).
    pub rag_response_max_bytes: u64,
    /// The `rag_sources` row whose embedding model (provider, model, server, dimension, key,
    /// prefixes) `catalog.search` uses in its `semantic` and `hybrid` modes; 0: those modes are
    /// off. The row need not be enabled.
    pub catalog_embedding_source: u64,
    /// JSON-lines audit file with every call's SQL (empty: off).
    pub audit_log: String,
    /// The audit file is rotated to `<file>.1` beyond this size (bytes).
    pub audit_log_max_bytes: u64,
    /// Tokens of ProxySQL endpoints Sluice does not serve, and accepted ProxySQL variables.
    pub accepted_unimplemented: BTreeMap<String, String>,
}

impl Default for McpVariables {
    fn default() -> Self {
        McpVariables {
            enabled: false,
            port: 6071,
            interface: "127.0.0.1".into(),
            use_ssl: true,
            timeout_ms: 30_000,
            max_rows: 200,
            max_bytes: 1 << 20,
            max_request_bytes: 1 << 20,
            request_timeout_ms: 10_000,
            calls_per_minute: 0,
            max_estimated_rows: 0,
            allowed_hosts: String::new(),
            allowed_origins: String::new(),
            query_endpoint_auth: String::new(),
            stats_endpoint_auth: String::new(),
            config_endpoint_auth: String::new(),
            rag_endpoint_auth: String::new(),
            rag_k_max: 50,
            rag_candidates_max: 500,
            rag_query_max_bytes: 8192,
            rag_response_max_bytes: 5_000_000,
            catalog_embedding_source: 0,
            audit_log: String::new(),
            audit_log_max_bytes: 100 << 20,
            accepted_unimplemented: BTreeMap::new(),
        }
    }
}

impl McpVariables {
    /// Sets one variable from text.
    pub fn set(&mut self, name: &str, value: &str) -> Result<SetOutcome, VariableError> {
        let int = |min, max| parse_var_int("mcp", name, value, min, max);
        match name {
            "enabled" => self.enabled = parse_var_bool("mcp", name, value)?,
            "port" => self.port = int(1, 65_535)? as u16,
            "interface" => {
                if value.trim().is_empty() || value.contains(';') {
                    return Err(VariableError::malformed(
                        "mcp",
                        name,
                        value,
                        "one host name or address",
                    ));
                }
                self.interface = value.trim().to_string();
            }
            "use_ssl" => self.use_ssl = parse_var_bool("mcp", name, value)?,
            "timeout_ms" => self.timeout_ms = int(100, 3_600_000)?,
            "max_rows" => self.max_rows = int(1, 10_000_000)?,
            "max_bytes" => self.max_bytes = int(1024, 1 << 30)?,
            "max_request_bytes" => self.max_request_bytes = int(1024, 64 << 20)?,
            "request_timeout_ms" => self.request_timeout_ms = int(100, 600_000)?,
            "calls_per_minute" => self.calls_per_minute = int(0, 1_000_000)?,
            "max_estimated_rows" => self.max_estimated_rows = int(0, u64::MAX >> 1)?,
            "allowed_hosts" => self.allowed_hosts = value.trim().to_string(),
            "allowed_origins" => self.allowed_origins = value.trim().to_string(),
            "query_endpoint_auth" => self.query_endpoint_auth = value.trim().to_string(),
            "stats_endpoint_auth" | "observe_endpoint_auth" => {
                self.stats_endpoint_auth = value.trim().to_string()
            }
            "config_endpoint_auth" => self.config_endpoint_auth = value.trim().to_string(),
            "rag_endpoint_auth" => self.rag_endpoint_auth = value.trim().to_string(),
            "rag_k_max" => self.rag_k_max = int(1, 10_000)?,
            "rag_candidates_max" => self.rag_candidates_max = int(1, 100_000)?,
            "rag_query_max_bytes" => self.rag_query_max_bytes = int(16, 1 << 20)?,
            "rag_response_max_bytes" => self.rag_response_max_bytes = int(1024, 1 << 30)?,
            "catalog_embedding_source" => {
                self.catalog_embedding_source = int(0, u64::from(u32::MAX))?
            }
            "audit_log" => self.audit_log = value.trim().to_string(),
            "audit_log_max_bytes" => self.audit_log_max_bytes = int(4096, u64::MAX >> 1)?,
            _ if UNSERVED_ENDPOINT_TOKENS.contains(&name)
                || PROXYSQL_MCP_VARIABLES.contains(&name) =>
            {
                self.accepted_unimplemented
                    .insert(name.to_string(), value.to_string());
                return Ok(SetOutcome::AcceptedWithoutEffect);
            }
            _ => return Err(VariableError::unknown("mcp", name)),
        }
        Ok(SetOutcome::Applied)
    }

    /// Every variable as (name without prefix, value), implemented ones first.
    pub fn pairs(&self) -> Vec<(String, String)> {
        let s = |k: &str, v: String| (k.to_string(), v);
        let mut v = vec![
            s("enabled", self.enabled.to_string()),
            s("port", self.port.to_string()),
            s("interface", self.interface.clone()),
            s("use_ssl", self.use_ssl.to_string()),
            s("timeout_ms", self.timeout_ms.to_string()),
            s("max_rows", self.max_rows.to_string()),
            s("max_bytes", self.max_bytes.to_string()),
            s("max_request_bytes", self.max_request_bytes.to_string()),
            s("request_timeout_ms", self.request_timeout_ms.to_string()),
            s("calls_per_minute", self.calls_per_minute.to_string()),
            s("max_estimated_rows", self.max_estimated_rows.to_string()),
            s("allowed_hosts", self.allowed_hosts.clone()),
            s("allowed_origins", self.allowed_origins.clone()),
            s("query_endpoint_auth", self.query_endpoint_auth.clone()),
            s("stats_endpoint_auth", self.stats_endpoint_auth.clone()),
            s("config_endpoint_auth", self.config_endpoint_auth.clone()),
            s("rag_endpoint_auth", self.rag_endpoint_auth.clone()),
            s("rag_k_max", self.rag_k_max.to_string()),
            s("rag_candidates_max", self.rag_candidates_max.to_string()),
            s("rag_query_max_bytes", self.rag_query_max_bytes.to_string()),
            s(
                "rag_response_max_bytes",
                self.rag_response_max_bytes.to_string(),
            ),
            s(
                "catalog_embedding_source",
                self.catalog_embedding_source.to_string(),
            ),
            s("audit_log", self.audit_log.clone()),
            s("audit_log_max_bytes", self.audit_log_max_bytes.to_string()),
        ];
        v.extend(
            self.accepted_unimplemented
                .iter()
                .map(|(k, v)| (k.clone(), v.clone())),
        );
        v
    }

    /// The names of variables whose values are secrets (never shown in logs).
    pub fn is_secret(name: &str) -> bool {
        name.ends_with("_endpoint_auth")
    }
}

/// One row of `mcp_users`: an agent with its own bearer token, login, grants and limits.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct McpUser {
    /// The caller's name (in logs, stats and rules).
    pub username: String,
    /// Hex SHA-256 of the bearer token (the token itself is never stored).
    pub token_sha256: String,
    /// Inactive users are refused.
    #[serde(default = "yes")]
    pub active: Flag,
    /// The `mysql_users`/`pgsql_users` login the agent's SQL runs as; empty: the target's.
    #[serde(default)]
    pub db_username: String,
    /// Endpoints it may call (comma separated: `query`, `stats`, `config`).
    #[serde(default = "query_endpoint")]
    pub endpoints: String,
    /// Targets it may use (comma separated target ids; `*` for all).
    #[serde(default = "all")]
    pub targets: String,
    /// Row cap per call (0: `mcp-max_rows`).
    #[serde(default)]
    pub max_rows: u64,
    /// Byte cap per call (0: `mcp-max_bytes`).
    #[serde(default)]
    pub max_bytes: u64,
    /// Statement timeout per call in ms (0: `mcp-timeout_ms`).
    #[serde(default)]
    pub timeout_ms: u64,
    /// Calls per minute (0: `mcp-calls_per_minute`).
    #[serde(default)]
    pub calls_per_minute: u64,
    /// Columns whose values come back masked (comma separated `schema.table.column`).
    #[serde(default)]
    pub masked_columns: String,
    /// The operator's note.
    #[serde(default)]
    pub comment: String,
}

impl McpUser {
    /// Whether the user may call `endpoint` (`query`, `stats`, `config`).
    pub fn may_use_endpoint(&self, endpoint: &str) -> bool {
        list_has(&self.endpoints, endpoint)
    }

    /// Whether the user may use target `id`.
    pub fn may_use_target(&self, id: &str) -> bool {
        list_has(&self.targets, id)
    }
}

fn list_has(list: &str, item: &str) -> bool {
    list.split(',')
        .map(str::trim)
        .any(|e| e == "*" || e.eq_ignore_ascii_case(item))
}

fn yes() -> Flag {
    Flag(true)
}

fn query_endpoint() -> String {
    "query".into()
}

fn all() -> String {
    "*".into()
}

/// One row of `mcp_targets` (ProxySQL's `mcp_target_profiles`, with the login inline).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct McpTarget {
    /// The opaque id agents pass as `target_id`.
    pub target_id: String,
    /// `mysql` or `pgsql`.
    pub protocol: String,
    /// The hostgroup the target's SQL runs on.
    pub hostgroup_id: u32,
    /// The `mysql_users`/`pgsql_users` login (with `backend=1`) used when the MCP user names none.
    #[serde(default)]
    pub username: String,
    /// Schema (MySQL) or database (PostgreSQL) selected by default.
    #[serde(default)]
    pub default_schema: String,
    /// What `list_targets` says of it.
    #[serde(default)]
    pub description: String,
    /// Row cap (0: the user's or `mcp-max_rows`).
    #[serde(default)]
    pub max_rows: u64,
    /// Statement timeout in ms (0: the user's or `mcp-timeout_ms`).
    #[serde(default)]
    pub timeout_ms: u64,
    /// `explain_sql` is allowed.
    #[serde(default = "yes")]
    pub allow_explain: Flag,
    /// Discovery and catalog tools are allowed.
    #[serde(default = "yes")]
    pub allow_discovery: Flag,
    /// The hostgroup may be a writer hostgroup (refused otherwise: agents run on readers).
    #[serde(default)]
    pub allow_writer: Flag,
    /// Inactive targets are not offered.
    #[serde(default = "yes")]
    pub active: Flag,
    /// The operator's note.
    #[serde(default)]
    pub comment: String,
}

/// One row of `mcp_query_rules` (ProxySQL 4.0's columns, plus `mcp_username`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct McpQueryRule {
    /// Evaluation order (ascending).
    pub rule_id: u32,
    /// Only active rules are evaluated (ProxySQL's default is 0).
    #[serde(default)]
    pub active: Flag,
    /// Match only this database login.
    #[serde(default)]
    pub username: Option<String>,
    /// Match only this MCP user (Sluice addition: ProxySQL has no caller identity).
    #[serde(default)]
    pub mcp_username: Option<String>,
    /// Match only this target.
    #[serde(default)]
    pub target_id: Option<String>,
    /// Match only this schema.
    #[serde(default)]
    pub schemaname: Option<String>,
    /// Match only this tool.
    #[serde(default)]
    pub tool_name: Option<String>,
    /// Regex on the SQL.
    #[serde(default)]
    pub match_pattern: Option<String>,
    /// Match when `match_pattern` does not match.
    #[serde(default)]
    pub negate_match_pattern: Flag,
    /// `CASELESS`, `GLOBAL` (comma separated).
    #[serde(default = "caseless")]
    pub re_modifiers: Option<String>,
    /// The flag a call must carry for this rule to be evaluated.
    #[serde(default, rename = "flagIN")]
    pub flag_in: u32,
    /// Flag the call carries on after this rule.
    #[serde(default, rename = "flagOUT")]
    pub flag_out: Option<u32>,
    /// Rewrite: replacement for `match_pattern`.
    #[serde(default)]
    pub replace_pattern: Option<String>,
    /// Statement timeout for the call (ms).
    #[serde(default)]
    pub timeout_ms: Option<u64>,
    /// Refuse the call with this message.
    #[serde(default)]
    pub error_msg: Option<String>,
    /// Answer the call with this message without running it.
    #[serde(default, rename = "OK_msg", alias = "ok_msg")]
    pub ok_msg: Option<String>,
    /// Log the matching call.
    #[serde(default)]
    pub log: Option<Flag>,
    /// Stop evaluating after this rule.
    #[serde(default = "yes_opt")]
    pub apply: Flag,
    /// The operator's note.
    #[serde(default)]
    pub comment: Option<String>,
}

fn caseless() -> Option<String> {
    Some("CASELESS".into())
}

fn yes_opt() -> Flag {
    Flag(true)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn variables_round_trip_and_old_names_are_accepted() {
        let mut v = McpVariables::default();
        assert_eq!(
            v.set("observe_endpoint_auth", " tok "),
            Ok(SetOutcome::Applied)
        );
        assert_eq!(v.stats_endpoint_auth, "tok");
        assert_eq!(
            v.set("ai_endpoint_auth", "x"),
            Ok(SetOutcome::AcceptedWithoutEffect)
        );
        assert!(v.set("port", "0").is_err());
        assert!(v.set("nope", "1").is_err());
        let mut w = McpVariables::default();
        for (k, val) in v.pairs() {
            w.set(&k, &val).expect("pairs set back");
        }
        assert_eq!(v, w);
    }

    #[test]
    fn grants_are_comma_lists_with_a_wildcard() {
        let u = McpUser {
            username: "a".into(),
            token_sha256: String::new(),
            active: Flag(true),
            db_username: String::new(),
            endpoints: "query, stats".into(),
            targets: "*".into(),
            max_rows: 0,
            max_bytes: 0,
            timeout_ms: 0,
            calls_per_minute: 0,
            masked_columns: String::new(),
            comment: String::new(),
        };
        assert!(u.may_use_endpoint("stats") && !u.may_use_endpoint("config"));
        assert!(u.may_use_target("anything"));
    }
}

//! The MCP endpoint's configuration: `mcp-*` variables and the `mcp_users`, `mcp_targets` and
//! `mcp_query_rules` rows (ProxySQL 4.0's names where it has them).

use super::SetOutcome;
use super::declared::{Bool, Int, OneHost, Trimmed, variables};
use super::values::{Flag, VariableError};
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

variables! {
    /// The `mcp-` variables.
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub struct McpVariables for _prefix {
        /// Serve the MCP endpoint (ProxySQL's default: off).
        enabled: bool = false => "enabled", Bool;
        /// The MCP port (ProxySQL's 6071).
        port: u16 = 6071 => "port", Int(1, 65_535);
        /// The address it listens on (Sluice addition; loopback by default).
        interface: String = "127.0.0.1".into() => "interface", OneHost;
        /// HTTPS with the frontend certificates. Plaintext is refused unless the interface is
        /// loopback.
        use_ssl: bool = true => "use_ssl", Bool;
        /// The default per-call statement timeout (ms).
        timeout_ms: u64 = 30_000 => "timeout_ms", Int(100, 3_600_000);
        /// The default row cap of a call.
        max_rows: u64 = 200 => "max_rows", Int(1, 10_000_000);
        /// The default byte cap of a call's result values.
        max_bytes: u64 = 1 << 20 => "max_bytes", Int(1024, 1 << 30);
        /// Largest request body accepted (bytes); larger ones get 413.
        max_request_bytes: u64 = 1 << 20 => "max_request_bytes", Int(1024, 64 << 20);
        /// Time a client has to send a whole request (ms); slower ones get 408.
        request_timeout_ms: u64 = 10_000 => "request_timeout_ms", Int(100, 600_000);
        /// Default calls per minute for an MCP user without its own limit (0: unlimited).
        calls_per_minute: u64 = 0 => "calls_per_minute", Int(0, 1_000_000);
        /// Refuse a statement whose plan estimates more rows than this (0: no cost guard).
        max_estimated_rows: u64 = 0 => "max_estimated_rows", Int(0, u64::MAX >> 1);
        /// Extra `Host` names (comma separated) accepted besides loopback and the interface.
        allowed_hosts: String = String::new() => "allowed_hosts", Trimmed;
        /// Browser origins (comma separated, with scheme) accepted; empty refuses every request
        /// that carries an `Origin`.
        allowed_origins: String = String::new() => "allowed_origins", Trimmed;
        /// The shared bearer token of `/mcp/query` (ProxySQL's); empty refuses it.
        query_endpoint_auth: String = String::new() => "query_endpoint_auth", Trimmed;
        /// The shared bearer token of `/mcp/stats` (`observe_endpoint_auth` is its old name).
        stats_endpoint_auth: String = String::new()
            => "stats_endpoint_auth" | "observe_endpoint_auth", Trimmed;
        /// The shared bearer token of `/mcp/config`.
        config_endpoint_auth: String = String::new() => "config_endpoint_auth", Trimmed;
        /// The shared bearer token of `/mcp/rag`.
        rag_endpoint_auth: String = String::new() => "rag_endpoint_auth", Trimmed;
        /// Most results a RAG search returns (ProxySQL's `genai-rag_k_max`).
        rag_k_max: u64 = 50 => "rag_k_max", Int(1, 10_000);
        /// Most candidates a RAG search leg considers (`genai-rag_candidates_max`).
        rag_candidates_max: u64 = 500 => "rag_candidates_max", Int(1, 100_000);
        /// Longest RAG query text in bytes (`genai-rag_query_max_bytes`).
        rag_query_max_bytes: u64 = 8192 => "rag_query_max_bytes", Int(16, 1 << 20);
        /// Largest RAG answer in bytes; longer ones are cut and say `truncated`
        /// (`genai-rag_response_max_bytes`).
        rag_response_max_bytes: u64 = 5_000_000 => "rag_response_max_bytes", Int(1024, 1 << 30);
        /// The `rag_sources` row whose embedding model (provider, model, server, dimension, key,
        /// prefixes) `catalog.search` uses in its `semantic` and `hybrid` modes; 0: those modes
        /// are off. The row need not be enabled.
        catalog_embedding_source: u64 = 0
            => "catalog_embedding_source", Int(0, u32::MAX as u64);
        /// JSON-lines audit file with every call's SQL (empty: off).
        audit_log: String = String::new() => "audit_log", Trimmed;
        /// The audit file is rotated to `<file>.1` beyond this size (bytes).
        audit_log_max_bytes: u64 = 100 << 20 => "audit_log_max_bytes", Int(4096, u64::MAX >> 1);
    }
    other {
        /// Tokens of ProxySQL endpoints Sluice does not serve, and accepted ProxySQL variables.
        accepted_unimplemented: BTreeMap<String, String> = BTreeMap::new();
    }
}

impl Default for McpVariables {
    fn default() -> Self {
        McpVariables::defaults_for("mcp")
    }
}

impl McpVariables {
    /// Sets one variable from text.
    pub fn set(&mut self, name: &str, value: &str) -> Result<SetOutcome, VariableError> {
        if let Some(r) = self.set_variable("mcp", name, value) {
            return r.map(|()| SetOutcome::Applied);
        }
        if UNSERVED_ENDPOINT_TOKENS.contains(&name) || PROXYSQL_MCP_VARIABLES.contains(&name) {
            self.accepted_unimplemented
                .insert(name.to_string(), value.to_string());
            return Ok(SetOutcome::AcceptedWithoutEffect);
        }
        Err(VariableError::unknown("mcp", name))
    }

    /// Every variable as (name without prefix, value), implemented ones first.
    pub fn pairs(&self) -> Vec<(String, String)> {
        let mut v = self.variable_pairs("mcp");
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

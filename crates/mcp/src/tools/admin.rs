//! The `/mcp/stats` tools (what the admin already knows, read with the stats account's rights)
//! and the `/mcp/config` tools (variables: read with secrets hidden; set and loaded to runtime
//! through the admin's own layers, so every change is audited and reversible with `LOAD …
//! FROM DISK`).

use crate::auth::Caller;
use crate::error::Error;
use crate::service::{CallOutcome, CallTrace, McpService, SqlCall};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use sluice_core::admin::{AdminExecutor, AdminReply, AdminRole, AdminRows};
use std::time::Instant;

/// Which protocol's side.
#[derive(Debug, Clone, Copy, Default, Deserialize, JsonSchema, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub(crate) enum Side {
    /// MySQL / MariaDB.
    #[default]
    Mysql,
    /// PostgreSQL.
    Pgsql,
}

impl Side {
    fn name(self) -> &'static str {
        match self {
            Side::Mysql => "mysql",
            Side::Pgsql => "pgsql",
        }
    }
}

/// A stats tool's arguments.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct StatsArgs {
    /// `mysql` (default) or `pgsql`.
    #[serde(default)]
    pub protocol: Side,
    /// Rows at most (default 100, at most 1000).
    pub limit: Option<u32>,
}

/// `get_config` / `list_variables` arguments.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct VariablesArgs {
    /// Only variables whose name contains this text (e.g. `mysql-`, `max_connections`).
    pub filter: Option<String>,
}

/// `set_variable` arguments.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct SetVariableArgs {
    /// The variable, with its prefix (`mysql-max_connections`).
    pub name: String,
    /// Its new value.
    pub value: String,
}

/// `load_to_runtime` arguments.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct LoadArgs {
    /// `mysql`, `pgsql`, `admin` or `mcp`: whose variables go to runtime.
    pub module: String,
}

/// An admin table.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct Table {
    /// Column names.
    pub columns: Vec<String>,
    /// Rows; NULL is null.
    pub rows: Vec<Vec<Option<String>>>,
}

/// What a config change did.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct Change {
    /// The admin statement run.
    pub statement: String,
    /// The admin's message, if any (e.g. a restart is needed).
    pub message: Option<String>,
    /// How to undo it.
    pub undo: String,
}

fn secret(name: &str) -> bool {
    name.contains("credentials") || name.contains("password") || name.ends_with("_endpoint_auth")
}

async fn query(svc: &McpService, role: AdminRole, sql: &str) -> Result<AdminRows, Error> {
    match svc.admin.execute(role, sql).await {
        Ok(AdminReply::Rows(r)) => Ok(r),
        Ok(AdminReply::Done { .. }) => Ok(AdminRows::default()),
        Err(e) => Err(Error::Server(e.message)),
    }
}

fn table(r: AdminRows) -> Value {
    serde_json::to_value(Table {
        columns: r.columns,
        rows: r.rows,
    })
    .unwrap_or(Value::Null)
}

/// The statement behind each stats tool.
fn stats_sql(tool: &str, p: &str, limit: u32) -> Option<String> {
    Some(match tool {
        "show_processlist" => format!("SELECT * FROM stats.stats_{p}_processlist LIMIT {limit}"),
        "show_query_digest" => format!(
            "SELECT * FROM stats.stats_{p}_query_digest ORDER BY sum_time DESC LIMIT {limit}"
        ),
        "show_connection_pool" => {
            format!("SELECT * FROM stats.stats_{p}_connection_pool LIMIT {limit}")
        }
        "show_servers" => format!(
            "SELECT s.hostgroup_id, s.hostname, s.port, s.status, s.weight, s.max_connections, s.max_replication_lag, \
             (SELECT l.repl_lag FROM monitor.{p}_server_replication_lag_log l WHERE l.hostname = s.hostname AND l.port = s.port ORDER BY l.time_start_us DESC LIMIT 1) AS repl_lag, \
             (SELECT r.read_only FROM monitor.{p}_server_read_only_log r WHERE r.hostname = s.hostname AND r.port = s.port ORDER BY r.time_start_us DESC LIMIT 1) AS read_only \
             FROM main.runtime_{p}_servers s ORDER BY s.hostgroup_id, s.hostname, s.port LIMIT {limit}"
        ),
        "show_errors" => {
            format!("SELECT * FROM stats.stats_{p}_errors ORDER BY last_seen DESC LIMIT {limit}")
        }
        "show_query_rules" => format!(
            "SELECT r.rule_id, r.active, r.username, r.match_digest, r.match_pattern, r.destination_hostgroup, r.error_msg, r.apply, \
             COALESCE(h.hits, 0) AS hits FROM main.runtime_{p}_query_rules r LEFT JOIN stats.stats_{p}_query_rules h ON h.rule_id = r.rule_id \
             ORDER BY r.rule_id LIMIT {limit}"
        ),
        _ => return None,
    })
}

/// The stats tools' names and descriptions.
pub(crate) const STATS_TOOLS: &[(&str, &str)] = &[
    (
        "show_processlist",
        "The client sessions now: user, schema, client, hostgroup, server, command, time, statement.",
    ),
    (
        "show_query_digest",
        "The statements seen, by digest, slowest total first: count, times, rows.",
    ),
    (
        "show_connection_pool",
        "Backend connections per hostgroup and server: used, free, errors, queries, bytes, latency.",
    ),
    (
        "show_servers",
        "The servers as the data path uses them: hostgroup, status, weight, and the monitor's last replication lag and read_only.",
    ),
    (
        "show_errors",
        "Errors servers returned, per server, user, schema and code.",
    ),
    (
        "show_query_rules",
        "The query rules in effect with their hits.",
    ),
];

/// Runs stats tool `tool`.
pub(crate) async fn stats(
    svc: &McpService,
    caller: &Caller,
    tool: &'static str,
    a: StatsArgs,
) -> Result<Value, Error> {
    let started = Instant::now();
    let limit = a.limit.unwrap_or(100).clamp(1, 1000);
    let r = async {
        svc.admit(&svc.config.load(), caller)?;
        let sql = stats_sql(tool, a.protocol.name(), limit)
            .ok_or_else(|| Error::Arguments(format!("no stats tool {tool}")))?;
        query(svc, AdminRole::Stats, &sql).await.map(table)
    }
    .await;
    record(svc, caller, tool, "", &r, started);
    r
}

fn record(
    svc: &McpService,
    caller: &Caller,
    tool: &'static str,
    statement: &str,
    r: &Result<Value, Error>,
    started: Instant,
) {
    let call = SqlCall {
        tool,
        target: None,
        schema: None,
        sql: statement.to_string(),
        max_rows: None,
        timeout_ms: None,
        explain: false,
        internal: true,
    };
    let done = match r {
        Ok(_) => CallOutcome::ok(),
        Err(e) => CallOutcome::failed(e),
    };
    svc.record(
        caller,
        &call,
        &CallTrace::default(),
        &done,
        started.elapsed(),
    );
}

/// `get_config` (runtime) and `list_variables` (memory): variables, secrets hidden.
pub(crate) async fn variables(
    svc: &McpService,
    caller: &Caller,
    tool: &'static str,
    a: VariablesArgs,
) -> Result<Value, Error> {
    let started = Instant::now();
    let table_name = if tool == "get_config" {
        "main.runtime_global_variables"
    } else {
        "main.global_variables"
    };
    let r = async {
        svc.admit(&svc.config.load(), caller)?;
        let mut rows = query(
            svc,
            AdminRole::Admin,
            &format!(
                "SELECT variable_name, variable_value FROM {table_name} ORDER BY variable_name"
            ),
        )
        .await?;
        rows.rows.retain(|r| {
            let name = r.first().cloned().flatten().unwrap_or_default();
            a.filter.as_deref().is_none_or(|f| name.contains(f))
        });
        for r in &mut rows.rows {
            if r.first().cloned().flatten().is_some_and(|n| secret(&n)) {
                r[1] = Some("[secret]".into());
            }
        }
        Ok(table(rows))
    }
    .await;
    record(svc, caller, tool, "", &r, started);
    r
}

/// `set_variable`: `SET <name> = '<value>'` in the admin's memory layer.
pub(crate) async fn set_variable(
    svc: &McpService,
    caller: &Caller,
    a: SetVariableArgs,
) -> Result<Value, Error> {
    let started = Instant::now();
    let statement = format!("SET {} = '{}'", a.name, a.value.replace('\'', "''"));
    let r = async {
        svc.admit(&svc.config.load(), caller)?;
        let prefix_ok = ["mysql-", "pgsql-", "admin-", "mcp-"]
            .iter()
            .any(|p| a.name.starts_with(p));
        let name_ok = a
            .name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
        if !prefix_ok || !name_ok {
            return Err(Error::Arguments(format!(
                "{:?} is not a variable name (mysql-…, pgsql-…, admin-…, mcp-…)",
                a.name
            )));
        }
        if secret(&a.name) {
            return Err(Error::NotAllowed(format!(
                "{} holds credentials: change it on the admin port",
                a.name
            )));
        }
        match svc.admin.execute(AdminRole::Admin, &statement).await {
            Ok(AdminReply::Done { message, .. }) => Ok(serde_json::to_value(Change {
                statement: statement.clone(),
                message,
                undo: "LOAD <MODULE> VARIABLES FROM DISK, then load_to_runtime".into(),
            })
            .unwrap_or(Value::Null)),
            Ok(AdminReply::Rows(_)) => Err(Error::Server("unexpected rows".into())),
            Err(e) => Err(Error::Server(e.message)),
        }
    }
    .await;
    tracing::warn!(mcp_user = %caller.name, statement = %statement, ok = r.is_ok(), "MCP config change");
    record(svc, caller, "set_variable", &statement, &r, started);
    r
}

/// `load_to_runtime`: `LOAD <MODULE> VARIABLES TO RUNTIME`.
pub(crate) async fn load_to_runtime(
    svc: &McpService,
    caller: &Caller,
    a: LoadArgs,
) -> Result<Value, Error> {
    let started = Instant::now();
    let module = a.module.to_ascii_uppercase();
    let statement = format!("LOAD {module} VARIABLES TO RUNTIME");
    let r = async {
        svc.admit(&svc.config.load(), caller)?;
        if !matches!(module.as_str(), "MYSQL" | "PGSQL" | "ADMIN" | "MCP") {
            return Err(Error::Arguments(format!(
                "module {:?} is not mysql, pgsql, admin or mcp",
                a.module
            )));
        }
        match svc.admin.execute(AdminRole::Admin, &statement).await {
            Ok(AdminReply::Done { message, .. }) => Ok(serde_json::to_value(Change {
                statement: statement.clone(),
                message,
                undo: format!(
                    "LOAD {module} VARIABLES FROM DISK; LOAD {module} VARIABLES TO RUNTIME"
                ),
            })
            .unwrap_or(Value::Null)),
            Ok(AdminReply::Rows(_)) => Err(Error::Server("unexpected rows".into())),
            Err(e) => Err(Error::Server(e.message)),
        }
    }
    .await;
    tracing::warn!(mcp_user = %caller.name, statement = %statement, ok = r.is_ok(), "MCP config change");
    record(svc, caller, "load_to_runtime", &statement, &r, started);
    r
}

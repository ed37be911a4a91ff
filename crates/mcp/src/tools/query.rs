//! The `/mcp/query` tools: inventory (`list_targets`, `list_schemas`, `list_tables`,
//! `describe_table`), sampling (`sample_rows`, `sample_distinct`) and SQL (`run_sql_readonly`,
//! `explain_sql`). Every statement, the ones Sluice writes itself included, goes through the
//! same layers as an agent's own SQL.

use super::args::*;
use super::sql_text::{ident, literal};
use crate::auth::Caller;
use crate::error::Error;
use crate::exec::ResultSet;
use crate::service::{CallOutcome, CallTrace, McpService, SqlAnswer, SqlCall};
use crate::targets::{self, Target};
use serde_json::Value;
use sluice_core::Protocol;
use sluice_core::query::Dialect;
use std::time::Instant;
use tokio_util::sync::CancellationToken;

fn dialect(t: &Target) -> Dialect {
    match t.protocol {
        Protocol::Mysql => Dialect::Mysql,
        Protocol::Pgsql => Dialect::Pgsql,
    }
}

fn to_value<T: serde::Serialize>(v: &T) -> Value {
    serde_json::to_value(v).unwrap_or(Value::Null)
}

fn text(v: &Value) -> Option<String> {
    match v {
        Value::Null => None,
        Value::String(s) => Some(s.clone()),
        other => Some(other.to_string()),
    }
}

fn int(v: &Value) -> Option<i64> {
    match v {
        Value::Number(n) => n.as_i64().or_else(|| n.as_f64().map(|f| f as i64)),
        Value::String(s) => s.parse().ok(),
        _ => None,
    }
}

/// `list_targets`: the targets the caller may use, with why any cannot be used.
pub(crate) fn list_targets(svc: &McpService, caller: &Caller) -> Value {
    let rt = svc.config.load();
    let targets = targets::all(&rt)
        .into_iter()
        .filter(|t| caller.user.as_ref().is_none_or(|u| u.may_use_target(&t.id)))
        .map(|t| TargetInfo {
            protocol: targets::protocol_name(t.protocol).to_string(),
            hostgroup_id: t.hostgroup,
            role: serde_json::to_value(t.role)
                .ok()
                .and_then(|v| v.as_str().map(str::to_string))
                .unwrap_or_default(),
            login: caller
                .user
                .as_ref()
                .map(|u| u.db_username.clone())
                .filter(|l| !l.is_empty())
                .unwrap_or(t.login),
            default_schema: t.default_schema,
            description: t.description,
            usable: t.skip_reason.is_none(),
            skip_reason: t.skip_reason,
            allow_explain: t.allow_explain,
            configured: t.configured,
            target_id: t.id,
        })
        .collect();
    to_value(&TargetList { targets })
}

/// Who runs a tool, with what.
#[derive(Clone, Copy)]
pub(crate) struct Cx<'a> {
    pub svc: &'a McpService,
    pub caller: &'a Caller,
    pub cancel: &'a CancellationToken,
}

/// Runs one statement Sluice wrote for a tool, quietly (the tool records itself).
pub(crate) async fn internal(
    cx: Cx<'_>,
    tool: &'static str,
    target: &Target,
    sql: String,
    max_rows: u64,
    trace: &mut CallTrace,
) -> Result<ResultSet, Error> {
    let Cx {
        svc,
        caller,
        cancel,
    } = cx;
    let call = SqlCall {
        tool,
        target: Some(&target.id),
        schema: None,
        sql,
        max_rows: Some(max_rows),
        timeout_ms: None,
        explain: false,
        internal: true,
    };
    match svc.run_sql_quiet(caller, &call, cancel, trace).await? {
        SqlAnswer::Rows { result, .. } => Ok(result),
        SqlAnswer::Message(m) => Err(Error::RuleBlocked {
            rule_id: 0,
            message: m,
        }),
    }
}

/// Runs `body` as one recorded call of `tool`.
pub(crate) async fn recorded<F, Fut>(
    svc: &McpService,
    caller: &Caller,
    tool: &'static str,
    schema: Option<&str>,
    body: F,
) -> Result<Value, Error>
where
    F: FnOnce(CallTrace) -> Fut,
    Fut: Future<Output = (Result<Value, Error>, CallTrace)>,
{
    let started = Instant::now();
    let (result, trace) = body(CallTrace::default()).await;
    let call = SqlCall {
        tool,
        target: Some(&trace.target),
        schema,
        sql: String::new(),
        max_rows: None,
        timeout_ms: None,
        explain: false,
        internal: true,
    };
    let done = match &result {
        Ok(_) => CallOutcome::ok(),
        Err(e) => CallOutcome::failed(e),
    };
    svc.record(caller, &call, &trace, &done, started.elapsed());
    result
}

/// The target of a discovery tool, if it allows discovery.
pub(crate) fn discovery_target(
    svc: &McpService,
    caller: &Caller,
    id: Option<&str>,
) -> Result<Target, Error> {
    let rt = svc.config.load();
    svc.admit(&rt, caller)?;
    let t = svc.target(&rt, caller, id)?;
    if !t.allow_discovery {
        return Err(Error::NotAllowed(format!(
            "target {} does not allow discovery (mcp_targets.allow_discovery = 0)",
            t.id
        )));
    }
    Ok(t)
}

/// `list_schemas`.
pub(crate) async fn list_schemas(
    svc: &McpService,
    caller: &Caller,
    a: TargetArgs,
    cancel: &CancellationToken,
) -> Result<Value, Error> {
    recorded(svc, caller, "list_schemas", None, |mut trace| async move {
        let r = async {
            let t = discovery_target(svc, caller, a.target_id.as_deref())?;
            trace.target = t.id.clone();
            let sql = match t.protocol {
                Protocol::Mysql => {
                    "SELECT schema_name FROM information_schema.schemata ORDER BY schema_name"
                }
                Protocol::Pgsql => {
                    "SELECT nspname FROM pg_catalog.pg_namespace WHERE left(nspname, 3) <> 'pg_' AND nspname <> 'information_schema' ORDER BY nspname"
                }
            };
            let rs = internal(Cx { svc, caller, cancel }, "list_schemas", &t, sql.into(), 10_000, &mut trace)
                .await?;
            let schemas = rs.rows.iter().filter_map(|r| r.first().and_then(text)).collect();
            Ok(to_value(&SchemaList {
                target_id: t.id,
                schemas,
            }))
        }
        .await;
        (r, trace)
    })
    .await
}

/// `list_tables`: one page, by name.
pub(crate) async fn list_tables(
    svc: &McpService,
    caller: &Caller,
    a: ListTablesArgs,
    cancel: &CancellationToken,
) -> Result<Value, Error> {
    let schema = a.schema.clone();
    recorded(svc, caller, "list_tables", Some(&schema), |mut trace| async move {
        let r = async {
            let t = discovery_target(svc, caller, a.target_id.as_deref())?;
            trace.target = t.id.clone();
            let d = dialect(&t);
            let size = u64::from(a.page_size.unwrap_or(100).clamp(1, 1000));
            let offset: u64 = match &a.page_token {
                None => 0,
                Some(p) => p.parse().map_err(|_| {
                    Error::Arguments("page_token is the next_page_token of a previous page".into())
                })?,
            };
            let s = literal(d, &a.schema)?;
            let filter = match (&a.name_filter, d) {
                (None, _) => String::new(),
                (Some(f), Dialect::Mysql) => format!(" AND INSTR(table_name, {}) > 0", literal(d, f)?),
                (Some(f), Dialect::Pgsql) => format!(" AND strpos(c.relname, {}) > 0", literal(d, f)?),
            };
            let sql = match d {
                Dialect::Mysql => format!(
                    "SELECT table_name, table_type, table_rows, table_comment FROM information_schema.tables WHERE table_schema = {s}{filter} ORDER BY table_name LIMIT {} OFFSET {offset}",
                    size + 1
                ),
                Dialect::Pgsql => format!(
                    "SELECT c.relname, CASE c.relkind WHEN 'r' THEN 'BASE TABLE' WHEN 'v' THEN 'VIEW' WHEN 'm' THEN 'MATERIALIZED VIEW' WHEN 'p' THEN 'PARTITIONED TABLE' ELSE 'FOREIGN TABLE' END, c.reltuples::bigint, obj_description(c.oid, 'pg_class') FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = {s} AND c.relkind IN ('r', 'v', 'm', 'p', 'f'){filter} ORDER BY c.relname LIMIT {} OFFSET {offset}",
                    size + 1
                ),
            };
            let rs = internal(Cx { svc, caller, cancel }, "list_tables", &t, sql, size + 1, &mut trace).await?;
            let more = rs.rows.len() as u64 > size;
            let tables = rs
                .rows
                .iter()
                .take(size as usize)
                .map(|r| TableInfo {
                    name: r.first().and_then(text).unwrap_or_default(),
                    kind: r.get(1).and_then(text).unwrap_or_default(),
                    rows_estimate: r.get(2).and_then(int).filter(|n| *n >= 0),
                    comment: r.get(3).and_then(text).filter(|c| !c.is_empty()),
                })
                .collect();
            Ok(to_value(&TableList {
                target_id: t.id,
                schema: a.schema,
                tables,
                next_page_token: more.then(|| (offset + size).to_string()),
            }))
        }
        .await;
        (r, trace)
    })
    .await
}

/// `describe_table`: columns, types, keys, indexes, foreign keys, comment, row estimate.
pub(crate) async fn describe_table(
    svc: &McpService,
    caller: &Caller,
    a: TableArgs,
    cancel: &CancellationToken,
) -> Result<Value, Error> {
    let schema = a.schema.clone();
    recorded(
        svc,
        caller,
        "describe_table",
        Some(&schema),
        |mut trace| async move {
            let r = async {
                let t = discovery_target(svc, caller, a.target_id.as_deref())?;
                trace.target = t.id.clone();
                let cx = Cx {
                    svc,
                    caller,
                    cancel,
                };
                let mut tables = super::harvest::read_tables(
                    cx,
                    "describe_table",
                    &t,
                    &a.schema,
                    Some(&a.table),
                    &mut trace,
                )
                .await?;
                if tables.is_empty() {
                    return Err(Error::Arguments(format!(
                        "no table {}.{} on target {}",
                        a.schema, a.table, t.id
                    )));
                }
                Ok(to_value(&tables.remove(0)))
            }
            .await;
            (r, trace)
        },
    )
    .await
}

/// Rows as the tools return them.
pub(crate) fn rows_value(target: String, r: ResultSet) -> Value {
    to_value(&Rows {
        target_id: target,
        row_count: r.rows.len() as u64,
        truncated: r.truncated,
        columns: r
            .columns
            .into_iter()
            .map(|c| ResultColumn {
                name: c.name,
                type_name: c.type_name,
            })
            .collect(),
        rows: r.rows,
        message: None,
    })
}

fn answer_value(a: SqlAnswer) -> Value {
    match a {
        SqlAnswer::Rows { target, result } => rows_value(target, result),
        SqlAnswer::Message(m) => to_value(&Rows {
            target_id: String::new(),
            columns: Vec::new(),
            rows: Vec::new(),
            row_count: 0,
            truncated: false,
            message: Some(m),
        }),
    }
}

/// `run_sql_readonly`.
pub(crate) async fn run_sql_readonly(
    svc: &McpService,
    caller: &Caller,
    a: RunSqlArgs,
    cancel: &CancellationToken,
) -> Result<Value, Error> {
    let call = SqlCall {
        tool: "run_sql_readonly",
        target: a.target_id.as_deref(),
        schema: a.schema.as_deref(),
        sql: a.sql,
        max_rows: a.max_rows,
        timeout_ms: a.timeout_ms,
        explain: false,
        internal: false,
    };
    svc.run_sql(caller, call, cancel).await.map(answer_value)
}

/// `explain_sql`: the JSON plan, never ANALYZE.
pub(crate) async fn explain_sql(
    svc: &McpService,
    caller: &Caller,
    a: ExplainArgs,
    cancel: &CancellationToken,
) -> Result<Value, Error> {
    let call = SqlCall {
        tool: "explain_sql",
        target: a.target_id.as_deref(),
        schema: a.schema.as_deref(),
        sql: a.sql,
        max_rows: Some(1000),
        timeout_ms: None,
        explain: true,
        internal: false,
    };
    match svc.run_sql(caller, call, cancel).await? {
        SqlAnswer::Rows { target, result } => {
            let plan = result
                .rows
                .first()
                .and_then(|r| r.first())
                .map(|v| match v {
                    Value::String(s) => serde_json::from_str(s).unwrap_or(Value::String(s.clone())),
                    other => other.clone(),
                })
                .unwrap_or(Value::Null);
            Ok(to_value(&Plan {
                target_id: target,
                plan,
            }))
        }
        SqlAnswer::Message(m) => Ok(to_value(&Plan {
            target_id: String::new(),
            plan: Value::String(m),
        })),
    }
}

/// What a sampling tool reads: a table, a condition and a row count.
struct Sample<'a> {
    tool: &'static str,
    target_id: Option<&'a str>,
    schema: &'a str,
    table: &'a str,
    where_clause: Option<&'a str>,
    limit: u32,
}

/// Runs a sampling statement: `sql(dialect, FROM …, WHERE …)` builds it from the quoted table
/// and the condition.
async fn sample(
    svc: &McpService,
    caller: &Caller,
    s: Sample<'_>,
    sql: impl FnOnce(Dialect, &str, &str) -> Result<String, Error>,
    cancel: &CancellationToken,
) -> Result<Value, Error> {
    let rt = svc.config.load();
    let t = svc.target(&rt, caller, s.target_id)?;
    let d = dialect(&t);
    let from = format!("{}.{}", ident(d, s.schema)?, ident(d, s.table)?);
    let filter = s
        .where_clause
        .map(|w| format!(" WHERE ({w})"))
        .unwrap_or_default();
    let call = SqlCall {
        tool: s.tool,
        target: Some(&t.id),
        schema: Some(s.schema),
        sql: sql(d, &from, &filter)?,
        max_rows: Some(u64::from(s.limit)),
        timeout_ms: None,
        explain: false,
        internal: false,
    };
    svc.run_sql(caller, call, cancel).await.map(answer_value)
}

/// `sample_rows`: a few rows of a table.
pub(crate) async fn sample_rows(
    svc: &McpService,
    caller: &Caller,
    a: SampleRowsArgs,
    cancel: &CancellationToken,
) -> Result<Value, Error> {
    let limit = a.limit.unwrap_or(10).clamp(1, 100);
    let s = Sample {
        tool: "sample_rows",
        target_id: a.target_id.as_deref(),
        schema: &a.schema,
        table: &a.table,
        where_clause: a.where_clause.as_deref(),
        limit,
    };
    let columns = a.columns.clone().unwrap_or_default();
    sample(
        svc,
        caller,
        s,
        |d, from, filter| {
            let list = if columns.is_empty() {
                "*".to_string()
            } else {
                columns
                    .iter()
                    .map(|c| ident(d, c))
                    .collect::<Result<Vec<_>, _>>()?
                    .join(", ")
            };
            Ok(format!("SELECT {list} FROM {from}{filter} LIMIT {limit}"))
        },
        cancel,
    )
    .await
}

/// `sample_distinct`: a column's most frequent values with their counts.
pub(crate) async fn sample_distinct(
    svc: &McpService,
    caller: &Caller,
    a: SampleDistinctArgs,
    cancel: &CancellationToken,
) -> Result<Value, Error> {
    let limit = a.limit.unwrap_or(20).clamp(1, 100);
    let s = Sample {
        tool: "sample_distinct",
        target_id: a.target_id.as_deref(),
        schema: &a.schema,
        table: &a.table,
        where_clause: a.where_clause.as_deref(),
        limit,
    };
    sample(
        svc,
        caller,
        s,
        |d, from, filter| {
            let col = ident(d, &a.column)?;
            Ok(format!(
                "SELECT {col} AS value, COUNT(*) AS count FROM {from}{filter} GROUP BY {col} ORDER BY COUNT(*) DESC, {col} LIMIT {limit}"
            ))
        },
        cancel,
    )
    .await
}

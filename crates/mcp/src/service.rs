//! One agent call that runs SQL, from its arguments to its answer: the target and the
//! caller's grants, the calls-per-minute limit, the MCP query rules, the read-only lexer, the
//! ordinary query rules as the target's login, the cost guard, the read-only path with the
//! caps, the masks, then stats, the log line and the audit file.

use crate::audit::AuditLog;
use crate::auth::Caller;
use crate::error::Error;
use crate::exec::{self, Conns, Limits, ResultSet};
use crate::readonly::{self, ReadKind};
use crate::rules::{CompiledRules, RuleInput};
use crate::stats::{CallRecord, McpStats};
use crate::targets::{self, Target};
use sluice_core::admin::Protocol;
use sluice_core::query::{Dialect, QueryContext, digest};
use sluice_core::{ConfigHandle, RuntimeConfig};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio_util::sync::CancellationToken;
use tracing::info;

/// What the MCP endpoint shares between calls.
pub struct McpService {
    pub(crate) config: ConfigHandle,
    pub(crate) conns: Conns,
    pub(crate) stats: Arc<McpStats>,
    rules: Mutex<Option<(usize, Arc<CompiledRules>)>>,
    rate: Mutex<HashMap<String, (Instant, u64)>>,
    pub(crate) audit: AuditLog,
    pub(crate) admin: Arc<sluice_admin::Admin>,
}

/// Callers whose calls-per-minute windows are remembered.
const MAX_RATE_ENTRIES: usize = 10_000;

/// A call that runs one statement.
#[derive(Debug, Clone)]
pub(crate) struct SqlCall<'a> {
    /// The tool.
    pub tool: &'a str,
    /// `target_id` argument.
    pub target: Option<&'a str>,
    /// `schema` argument.
    pub schema: Option<&'a str>,
    /// The SQL.
    pub sql: String,
    /// `max_rows` argument (lowers the caller's cap, never raises it).
    pub max_rows: Option<u64>,
    /// `timeout_ms` argument (lowers the caller's timeout, never raises it).
    pub timeout_ms: Option<u64>,
    /// Run it as the plan of the statement (`explain_sql`).
    pub explain: bool,
    /// Sluice built the SQL itself from checked arguments (discovery and sampling tools): the
    /// MCP rules see the tool, and the lexer still checks it.
    pub internal: bool,
}

/// What a call touched, for its record.
#[derive(Debug, Clone, Default)]
pub(crate) struct CallTrace {
    /// The target it ran on.
    pub target: String,
    /// Digest (hex) and digest text of its (first) statement.
    pub digest: Option<(String, String)>,
}

/// How a call ended, for its record.
#[derive(Debug, Clone)]
pub(crate) struct CallOutcome {
    /// Rows returned.
    pub rows: u64,
    /// Cut at a cap.
    pub truncated: bool,
    /// The outcome label.
    pub outcome: &'static str,
    /// The error the agent was given.
    pub error: Option<String>,
}

impl CallOutcome {
    /// A call that succeeded without rows to count.
    pub(crate) fn ok() -> CallOutcome {
        CallOutcome {
            rows: 0,
            truncated: false,
            outcome: "ok",
            error: None,
        }
    }

    /// A call that failed with `e`.
    pub(crate) fn failed(e: &Error) -> CallOutcome {
        CallOutcome {
            rows: 0,
            truncated: false,
            outcome: e.outcome(),
            error: Some(e.to_string()),
        }
    }
}

/// A call's answer.
#[derive(Debug, Clone)]
pub(crate) enum SqlAnswer {
    /// The statement ran.
    Rows {
        /// The target it ran on.
        target: String,
        /// The result.
        result: ResultSet,
    },
    /// An MCP query rule answered instead (`OK_msg`).
    Message(String),
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

fn smallest(values: &[u64]) -> Option<u64> {
    values.iter().copied().filter(|v| *v > 0).min()
}

impl McpService {
    /// The service over `config`, counting into `stats`, with the admin for the stats and config
    /// endpoints.
    pub fn new(
        config: ConfigHandle,
        stats: Arc<McpStats>,
        admin: Arc<sluice_admin::Admin>,
    ) -> Arc<McpService> {
        Arc::new(McpService {
            config,
            conns: Conns::new(stats.clone()),
            stats,
            rules: Mutex::new(None),
            rate: Mutex::new(HashMap::new()),
            audit: AuditLog::default(),
            admin,
        })
    }

    /// The compiled MCP rules of `rt` (compiled once per loaded snapshot).
    fn rules(&self, rt: &RuntimeConfig) -> Arc<CompiledRules> {
        let id = Arc::as_ptr(&rt.mcp) as usize;
        let mut cached = lock(&self.rules);
        if let Some((at, rules)) = cached.as_ref()
            && *at == id
        {
            return rules.clone();
        }
        let rules = CompiledRules::compile(&rt.mcp.rules);
        *cached = Some((id, rules.clone()));
        rules
    }

    /// Counts a call against the caller's calls-per-minute; `Err` when over it.
    pub(crate) fn admit(&self, rt: &RuntimeConfig, caller: &Caller) -> Result<(), Error> {
        let limit = caller
            .user
            .as_ref()
            .map(|u| u.calls_per_minute)
            .filter(|l| *l > 0)
            .unwrap_or(rt.mcp.variables.calls_per_minute);
        if limit == 0 {
            return Ok(());
        }
        let now = Instant::now();
        let mut rate = lock(&self.rate);
        if rate.len() >= MAX_RATE_ENTRIES && !rate.contains_key(&caller.name) {
            rate.retain(|_, (start, _)| now.duration_since(*start) < Duration::from_secs(60));
        }
        let entry = rate.entry(caller.name.clone()).or_insert((now, 0));
        if now.duration_since(entry.0) >= Duration::from_secs(60) {
            *entry = (now, 0);
        }
        if entry.1 >= limit {
            return Err(Error::RateLimited(format!(
                "{} made {limit} calls this minute, its calls_per_minute",
                caller.name
            )));
        }
        entry.1 += 1;
        Ok(())
    }

    /// The target a call names (or the caller's first usable one), if the caller may use it.
    pub(crate) fn target(
        &self,
        rt: &RuntimeConfig,
        caller: &Caller,
        id: Option<&str>,
    ) -> Result<Target, Error> {
        let all = targets::all(rt);
        let granted = |t: &Target| caller.user.as_ref().is_none_or(|u| u.may_use_target(&t.id));
        let t = match id {
            Some(id) => all
                .into_iter()
                .find(|t| t.id == id)
                .ok_or_else(|| Error::Target {
                    target: id.to_string(),
                    why: "no such target (list_targets shows them)".into(),
                })?,
            None => all
                .into_iter()
                .find(|t| t.skip_reason.is_none() && granted(t))
                .ok_or_else(|| Error::Target {
                    target: String::new(),
                    why: "no usable target: configure mcp_targets or mysql/pgsql_replication_hostgroups".into(),
                })?,
        };
        if !granted(&t) {
            return Err(Error::NotAllowed(format!(
                "MCP user {} is not granted target {}",
                caller.name, t.id
            )));
        }
        if let Some(why) = &t.skip_reason {
            return Err(Error::Target {
                target: t.id.clone(),
                why: why.clone(),
            });
        }
        Ok(t)
    }

    /// Runs a call through every layer and records it.
    pub(crate) async fn run_sql(
        &self,
        caller: &Caller,
        call: SqlCall<'_>,
        cancel: &CancellationToken,
    ) -> Result<SqlAnswer, Error> {
        let started = Instant::now();
        let mut trace = CallTrace::default();
        let result = self.run_sql_quiet(caller, &call, cancel, &mut trace).await;
        let outcome = match &result {
            Ok(SqlAnswer::Rows { result, .. }) => CallOutcome {
                rows: result.rows.len() as u64,
                truncated: result.truncated,
                outcome: "ok",
                error: None,
            },
            Ok(SqlAnswer::Message(_)) => CallOutcome::ok(),
            Err(e) => CallOutcome::failed(e),
        };
        self.record(caller, &call, &trace, &outcome, started.elapsed());
        result
    }

    /// Runs a call through every layer without recording it (a tool that runs several
    /// statements records itself once); `trace` gets the target and digest.
    pub(crate) async fn run_sql_quiet(
        &self,
        caller: &Caller,
        call: &SqlCall<'_>,
        cancel: &CancellationToken,
        trace: &mut CallTrace,
    ) -> Result<SqlAnswer, Error> {
        let rt = self.config.load();
        let mut digest_of = None;
        let mut target_id = call.target.unwrap_or("").to_string();
        let r = self
            .run_layers(&rt, caller, call, cancel, &mut digest_of, &mut target_id)
            .await;
        trace.target = target_id;
        if trace.digest.is_none() {
            trace.digest = digest_of;
        }
        r
    }

    /// Records a finished call: stats, the log line, the audit file.
    pub(crate) fn record(
        &self,
        caller: &Caller,
        call: &SqlCall<'_>,
        trace: &CallTrace,
        done: &CallOutcome,
        elapsed: Duration,
    ) {
        let rt = self.config.load();
        let (rows, truncated, outcome) = (done.rows, done.truncated, done.outcome);
        self.stats.record(&CallRecord {
            endpoint: caller.endpoint.name(),
            tool: call.tool,
            user: &caller.name,
            target: &trace.target,
            schema: call.schema.unwrap_or(""),
            digest: trace.digest.clone(),
            rows,
            outcome,
            elapsed,
        });
        let digest_hex = trace.digest.as_ref().map(|d| d.0.as_str()).unwrap_or("");
        let error = done.error.clone();
        info!(
            mcp_user = %caller.name,
            client = %caller.peer,
            tool = call.tool,
            target = %trace.target,
            digest = digest_hex,
            rows,
            truncated,
            outcome,
            ms = elapsed.as_millis() as u64,
            error = error.as_deref().unwrap_or(""),
            "MCP call"
        );
        let path = &rt.mcp.variables.audit_log;
        if !path.is_empty() {
            self.audit.append(
                path,
                rt.mcp.variables.audit_log_max_bytes,
                &serde_json::json!({
                    "time": crate::audit::now_rfc3339(),
                    "mcp_user": caller.name,
                    "client": caller.peer.to_string(),
                    "tool": call.tool,
                    "target": trace.target,
                    "schema": call.schema,
                    "digest": digest_hex,
                    "sql": call.sql,
                    "rows": rows,
                    "truncated": truncated,
                    "outcome": outcome,
                    "error": error,
                    "ms": elapsed.as_millis() as u64,
                }),
            );
        }
    }

    async fn run_layers(
        &self,
        rt: &RuntimeConfig,
        caller: &Caller,
        call: &SqlCall<'_>,
        cancel: &CancellationToken,
        digest_of: &mut Option<(String, String)>,
        target_id: &mut String,
    ) -> Result<SqlAnswer, Error> {
        self.admit(rt, caller)?;
        let target = self.target(rt, caller, call.target)?;
        *target_id = target.id.clone();
        if call.explain && !target.allow_explain {
            return Err(Error::NotAllowed(format!(
                "target {} does not allow explain_sql",
                target.id
            )));
        }
        let login = caller
            .user
            .as_ref()
            .map(|u| u.db_username.clone())
            .filter(|l| !l.is_empty())
            .unwrap_or_else(|| target.login.clone());
        let schema = call
            .schema
            .map(str::to_string)
            .or_else(|| (!target.default_schema.is_empty()).then(|| target.default_schema.clone()));
        let limits = self.limits(rt, caller, &target, call);
        let dialect = match target.protocol {
            Protocol::Mysql => Dialect::Mysql,
            Protocol::Pgsql => Dialect::Pgsql,
        };
        let input = RuleInput {
            mcp_user: &caller.name,
            db_user: &login,
            target: &target.id,
            schema: schema.as_deref().unwrap_or(""),
            tool: call.tool,
        };
        let decided = self.rules(rt).evaluate(input, &call.sql);
        self.stats.rule_hits(&decided.matched);
        if let Some((rule_id, message)) = decided.blocked {
            return Err(Error::RuleBlocked { rule_id, message });
        }
        if let Some(msg) = decided.ok_msg {
            return Ok(SqlAnswer::Message(msg));
        }
        let mut limits = limits;
        if let Some(ms) = decided.timeout_ms.filter(|ms| *ms > 0) {
            limits.timeout = limits.timeout.min(Duration::from_millis(ms));
        }
        let timeout_ms = limits.timeout.as_millis() as u64;
        // The digest first: a refused statement is audited by its shape too.
        let d = digest(&decided.sql, dialect, 2048);
        *digest_of = Some((d.hex(), d.text.clone()));
        let kind = readonly::check_read(&decided.sql, dialect, timeout_ms)?;
        let sql = self.query_rules(rt, &target, &login, schema.as_deref(), caller, &decided.sql)?;
        if sql != decided.sql {
            readonly::check_read(&sql, dialect, timeout_ms)?;
            let d = digest(&sql, dialect, 2048);
            *digest_of = Some((d.hex(), d.text.clone()));
        }
        let sql = if call.explain {
            if kind == ReadKind::Explain {
                sql
            } else {
                match dialect {
                    Dialect::Mysql => format!("EXPLAIN FORMAT=JSON {sql}"),
                    Dialect::Pgsql => format!("EXPLAIN (FORMAT JSON) {sql}"),
                }
            }
        } else {
            sql
        };
        let masks = caller
            .user
            .as_ref()
            .map(|u| crate::masks::parse(&u.masked_columns))
            .unwrap_or_default();
        let pg_origins = if !masks.is_empty() && target.protocol == Protocol::Pgsql {
            Some(
                self.pg_mask_origins(rt, &target, &login, &masks, limits, cancel)
                    .await?,
            )
        } else {
            None
        };
        let mut result = self
            .execute(rt, &target, &login, schema, &sql, limits, cancel)
            .await?;
        crate::masks::apply(
            &mut result,
            &masks,
            &readonly::identifiers(&sql, dialect),
            pg_origins.as_ref(),
        )?;
        Ok(SqlAnswer::Rows {
            target: target.id,
            result,
        })
    }

    /// The wire identities (table OID, attribute number) of masked columns on a PostgreSQL
    /// target, read from its catalog.
    async fn pg_mask_origins(
        &self,
        rt: &RuntimeConfig,
        target: &Target,
        login: &str,
        masks: &[crate::masks::MaskedColumn],
        limits: Limits,
        cancel: &CancellationToken,
    ) -> Result<crate::masks::PgOrigins, Error> {
        let lit = |s: &str| format!("E'{}'", s.replace('\\', "\\\\").replace('\'', "''"));
        let wanted: Vec<String> = masks
            .iter()
            .map(|m| {
                format!(
                    "({}, {}, {})",
                    lit(&m.schema),
                    lit(&m.table),
                    lit(&m.column)
                )
            })
            .collect();
        let sql = format!(
            "SELECT c.oid::int8, a.attnum::int8, n.nspname, c.relname, a.attname FROM pg_catalog.pg_attribute a JOIN pg_catalog.pg_class c ON c.oid = a.attrelid JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace WHERE a.attnum > 0 AND (lower(n.nspname), lower(c.relname), lower(a.attname)) IN ({})",
            wanted.join(", ")
        );
        let r = self
            .execute(rt, target, login, None, &sql, limits, cancel)
            .await?;
        Ok(r.rows
            .iter()
            .filter_map(|row| {
                let n = |i: usize| row.get(i).and_then(serde_json::Value::as_u64);
                let s = |i: usize| {
                    row.get(i)
                        .and_then(serde_json::Value::as_str)
                        .map(str::to_ascii_lowercase)
                };
                Some((
                    u32::try_from(n(0)?).ok()?,
                    u16::try_from(n(1)?).ok()?,
                    crate::masks::MaskedColumn {
                        schema: s(2)?,
                        table: s(3)?,
                        column: s(4)?,
                    },
                ))
            })
            .collect())
    }

    /// The call's caps: the smallest set of the argument, the user, the target and a rule;
    /// the variables when none is.
    fn limits(
        &self,
        rt: &RuntimeConfig,
        caller: &Caller,
        target: &Target,
        call: &SqlCall<'_>,
    ) -> Limits {
        let v = &rt.mcp.variables;
        let u = caller.user.as_deref();
        if call.internal {
            // Discovery statements Sluice writes itself: their row count is the page asked for.
            return Limits {
                max_rows: call.max_rows.unwrap_or(v.max_rows),
                max_bytes: v.max_bytes,
                timeout: Duration::from_millis(v.timeout_ms),
            };
        }
        let rows = smallest(&[
            u.map_or(0, |u| u.max_rows),
            target.max_rows,
            call.max_rows.unwrap_or(0),
        ])
        .unwrap_or(v.max_rows)
        .min(call.max_rows.filter(|r| *r > 0).unwrap_or(u64::MAX));
        let bytes = u
            .map(|u| u.max_bytes)
            .filter(|b| *b > 0)
            .unwrap_or(v.max_bytes);
        let timeout = smallest(&[
            u.map_or(0, |u| u.timeout_ms),
            target.timeout_ms,
            call.timeout_ms.unwrap_or(0),
        ])
        .unwrap_or(v.timeout_ms);
        Limits {
            max_rows: rows,
            max_bytes: bytes,
            timeout: Duration::from_millis(timeout),
        }
    }

    /// The ordinary `mysql_query_rules`/`pgsql_query_rules` as the target's login: their blocks
    /// refuse the call, their rewrites apply.
    fn query_rules(
        &self,
        rt: &RuntimeConfig,
        target: &Target,
        login: &str,
        schema: Option<&str>,
        caller: &Caller,
        sql: &str,
    ) -> Result<String, Error> {
        let (rules, dialect, table) = match target.protocol {
            Protocol::Mysql => (&rt.mysql.rules, Dialect::Mysql, "mysql_query_rules"),
            Protocol::Pgsql => (&rt.pgsql.rules, Dialect::Pgsql, "pgsql_query_rules"),
        };
        if rules.is_empty() {
            return Ok(sql.to_string());
        }
        let peer = caller.peer.to_string();
        let ctx = QueryContext {
            user: login,
            schema: schema.unwrap_or(""),
            client_addr: &peer,
            proxy_addr: "",
            proxy_port: rt.mcp.variables.port,
            flag_in: 0,
        };
        let d = digest(sql, dialect, 2048);
        let action = rules.evaluate(&ctx, sql, &d);
        if let Some(message) = action.error_msg {
            return Err(Error::QueryRuleBlocked { table, message });
        }
        Ok(action.rewritten.unwrap_or_else(|| sql.to_string()))
    }

    /// Runs checked SQL on a server of the target's hostgroup.
    #[allow(clippy::too_many_arguments)]
    pub(crate) async fn execute(
        &self,
        rt: &RuntimeConfig,
        target: &Target,
        login: &str,
        schema: Option<String>,
        sql: &str,
        limits: Limits,
        cancel: &CancellationToken,
    ) -> Result<ResultSet, Error> {
        let password =
            targets::password(rt, target.protocol, login).map_err(|why| Error::Target {
                target: target.id.clone(),
                why,
            })?;
        let servers = self
            .config
            .hostgroup_servers(target.protocol, target.hostgroup);
        let server = sluice_core::hostgroup::pick(
            &servers,
            |_| 0,
            |_| false,
            sluice_core::hostgroup::random_u64(),
            Instant::now(),
        )
        .map_err(|e| Error::Target {
            target: target.id.clone(),
            why: format!("hostgroup {}: {e:?}", target.hostgroup),
        })?;
        match target.protocol {
            Protocol::Mysql => {
                let place = exec::Place {
                    host: server.key.hostname.clone(),
                    port: server.key.port,
                    user: login.to_string(),
                    password,
                    database: String::new(),
                    schema,
                    connect_timeout: Duration::from_millis(
                        rt.mysql.variables.connect_timeout_server.max(1000),
                    ),
                };
                exec::run_mysql(&self.conns, &place, sql, limits, cancel).await
            }
            Protocol::Pgsql => {
                let place = exec::Place {
                    host: server.key.hostname.clone(),
                    port: server.key.port,
                    user: login.to_string(),
                    password,
                    database: if target.default_schema.is_empty() {
                        login.to_string()
                    } else {
                        target.default_schema.clone()
                    },
                    schema: schema.filter(|s| *s != target.default_schema),
                    connect_timeout: Duration::from_millis(
                        rt.pgsql.variables.connect_timeout_server.max(1000),
                    ),
                };
                exec::run_pgsql(&self.conns, &place, sql, limits, cancel).await
            }
        }
    }
}

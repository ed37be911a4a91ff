//! The layers one SQL call passes, in order (see [`McpService::run_sql`]): grants and rate,
//! the target, MCP rules, the lexer, the login's query rules, the cost guard, the read-only
//! path, the masks.

use super::{McpService, SqlAnswer, SqlCall};
use crate::auth::Caller;
use crate::error::Error;
use crate::exec::{self, Limits, ResultSet};
use crate::readonly::{self, ReadKind};
use crate::rules::RuleInput;
use crate::targets::{self, Target};
use sluice_core::Protocol;
use sluice_core::RuntimeConfig;
use sluice_core::query::{Dialect, QueryContext, digest};
use std::time::{Duration, Instant};
use tokio_util::sync::CancellationToken;

fn smallest(values: &[u64]) -> Option<u64> {
    values.iter().copied().filter(|v| *v > 0).min()
}

/// Where and how a checked statement runs.
struct Planned {
    target: Target,
    login: String,
    schema: Option<String>,
    limits: Limits,
    dialect: Dialect,
}

/// `sql` as `explain_sql` runs it: the JSON plan (an `EXPLAIN` the agent wrote stays as is).
fn explained(sql: String, kind: ReadKind, dialect: Dialect, explain: bool) -> String {
    if !explain || kind == ReadKind::Explain {
        return sql;
    }
    match dialect {
        Dialect::Mysql => format!("EXPLAIN FORMAT=JSON {sql}"),
        Dialect::Pgsql => format!("EXPLAIN (FORMAT JSON) {sql}"),
    }
}

impl McpService {
    pub(super) async fn run_layers(
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
        // A literal sleep is refused when it outlasts the caller's configured timeout (an
        // argument or a rule only shortens the call: the server stops it then).
        let timeout_ms = {
            let u = caller.user.as_deref();
            smallest(&[u.map_or(0, |u| u.timeout_ms), target.timeout_ms])
                .unwrap_or(rt.mcp.variables.timeout_ms)
        };
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
        let sql = explained(sql, kind, dialect, call.explain);
        let plan = Planned {
            target,
            login,
            schema,
            limits,
            dialect,
        };
        if kind == ReadKind::Query && !call.explain && !call.internal {
            self.cost_guard(rt, &plan, &sql, cancel).await?;
        }
        let result = self.run_masked(rt, caller, &plan, &sql, cancel).await?;
        Ok(SqlAnswer::Rows {
            target: plan.target.id,
            result,
        })
    }

    /// Refuses a statement whose plan estimates more rows than `mcp-max_estimated_rows`.
    async fn cost_guard(
        &self,
        rt: &RuntimeConfig,
        p: &Planned,
        sql: &str,
        cancel: &CancellationToken,
    ) -> Result<(), Error> {
        let guard = rt.mcp.variables.max_estimated_rows;
        if guard == 0 {
            return Ok(());
        }
        let estimated = self
            .estimate(
                rt,
                &p.target,
                &p.login,
                p.schema.clone(),
                sql,
                p.limits,
                cancel,
            )
            .await?;
        if estimated > guard {
            return Err(Error::TooCostly {
                estimated,
                limit: guard,
            });
        }
        Ok(())
    }

    /// Runs the statement and masks the caller's masked columns in its result.
    async fn run_masked(
        &self,
        rt: &RuntimeConfig,
        caller: &Caller,
        p: &Planned,
        sql: &str,
        cancel: &CancellationToken,
    ) -> Result<ResultSet, Error> {
        let masks = caller
            .user
            .as_ref()
            .map(|u| crate::masks::parse(&u.masked_columns))
            .unwrap_or_default();
        let pg_origins = if !masks.is_empty() && p.target.protocol == Protocol::Pgsql {
            Some(
                self.pg_mask_origins(rt, &p.target, &p.login, &masks, p.limits, cancel)
                    .await?,
            )
        } else {
            None
        };
        let mut result = self
            .execute(
                rt,
                &p.target,
                &p.login,
                p.schema.clone(),
                sql,
                &[],
                p.limits,
                cancel,
            )
            .await?;
        crate::masks::apply(
            &mut result,
            &masks,
            &readonly::identifiers(sql, p.dialect),
            pg_origins.as_ref(),
        )?;
        Ok(result)
    }

    /// The cost guard's estimate of the rows a statement reads: the plan's (MySQL: the product
    /// of EXPLAIN's `rows` over the joined tables; PostgreSQL: the largest `Plan Rows` of any
    /// node).
    #[allow(clippy::too_many_arguments)]
    async fn estimate(
        &self,
        rt: &RuntimeConfig,
        target: &Target,
        login: &str,
        schema: Option<String>,
        sql: &str,
        limits: Limits,
        cancel: &CancellationToken,
    ) -> Result<u64, Error> {
        let explain = match target.protocol {
            Protocol::Mysql => format!("EXPLAIN {sql}"),
            Protocol::Pgsql => format!("EXPLAIN (FORMAT JSON) {sql}"),
        };
        let plan = self
            .execute(rt, target, login, schema, &explain, &[], limits, cancel)
            .await?;
        Ok(match target.protocol {
            Protocol::Mysql => {
                let rows = plan.columns.iter().position(|c| c.name == "rows");
                plan.rows
                    .iter()
                    .filter_map(|r| {
                        // EXPLAIN's columns come back as text on MariaDB.
                        rows.and_then(|i| r.get(i)).and_then(|v| {
                            v.as_u64()
                                .or_else(|| v.as_str().and_then(|s| s.parse().ok()))
                        })
                    })
                    .fold(1u64, |acc, n| acc.saturating_mul(n.max(1)))
            }
            Protocol::Pgsql => {
                let doc = plan
                    .rows
                    .first()
                    .and_then(|r| r.first())
                    .cloned()
                    .unwrap_or_default();
                let doc = match doc {
                    serde_json::Value::String(s) => serde_json::from_str(&s).unwrap_or_default(),
                    other => other,
                };
                max_plan_rows(&doc)
            }
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
            .execute(rt, target, login, None, &sql, &[], limits, cancel)
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
        bound: &[serde_json::Value],
        limits: Limits,
        cancel: &CancellationToken,
    ) -> Result<ResultSet, Error> {
        let password =
            targets::password(rt, target.protocol, login).map_err(|why| Error::Target {
                target: target.id.clone(),
                why: why.to_string(),
            })?;
        let servers = self
            .config
            .hostgroup_servers(target.protocol, target.hostgroup);
        let server = sluice_core::hostgroup::pick(
            &servers,
            |_| 0,
            |_| false,
            sluice_core::hostgroup::balance_random,
            Instant::now,
        )
        .map_err(|e| Error::Target {
            target: target.id.clone(),
            why: format!("hostgroup {}: {e:?}", target.hostgroup),
        })?;
        let tls = self.tls_for(target.protocol, server, login)?;
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
                    tls,
                };
                exec::run_mysql_bound(&self.conns, &place, sql, bound, limits, cancel).await
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
                    tls,
                };
                exec::run_pgsql_bound(&self.conns, &place, sql, bound, limits, cancel).await
            }
        }
    }
}

/// The largest `"Plan Rows"` anywhere in a PostgreSQL JSON plan.
fn max_plan_rows(v: &serde_json::Value) -> u64 {
    match v {
        serde_json::Value::Object(m) => m
            .iter()
            .map(|(k, v)| {
                if k == "Plan Rows" {
                    v.as_f64().map_or(0, |f| f as u64)
                } else {
                    max_plan_rows(v)
                }
            })
            .max()
            .unwrap_or(0),
        serde_json::Value::Array(a) => a.iter().map(max_plan_rows).max().unwrap_or(0),
        _ => 0,
    }
}

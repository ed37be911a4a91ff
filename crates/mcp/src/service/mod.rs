//! One agent call that runs SQL, from its arguments to its answer: the target and the
//! caller's grants, the calls-per-minute limit, the MCP query rules, the read-only lexer, the
//! ordinary query rules as the target's login, the cost guard, the read-only path with the
//! caps, the masks, then stats, the log line and the audit file.

use crate::audit::AuditLog;
use crate::auth::Caller;
use crate::error::Error;
use crate::exec::{Conns, ResultSet};
use crate::rules::CompiledRules;
use crate::stats::{CallRecord, McpStats};
use crate::targets::{self, Target};
use sluice_core::{ConfigHandle, RuntimeConfig};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio_util::sync::CancellationToken;
use tracing::info;

mod layers;

/// What the MCP endpoint shares between calls.
pub struct McpService {
    pub(crate) config: ConfigHandle,
    pub(crate) conns: Conns,
    pub(crate) stats: Arc<McpStats>,
    rules: Mutex<Option<(usize, Arc<CompiledRules>)>>,
    rate: Mutex<HashMap<String, (Instant, u64)>>,
    pub(crate) audit: AuditLog,
    pub(crate) admin: Arc<sluice_admin::Admin>,
    catalog: tokio::sync::OnceCell<crate::catalog::Store>,
    /// The RAG index and the sources' embedders.
    pub(crate) rag: crate::rag::RagState,
    /// The datadir (`--datadir`): the catalog and the TLS material live there.
    pub(crate) datadir: Option<std::path::PathBuf>,
    /// The data path's backend TLS of each protocol (MySQL, PostgreSQL), for servers with
    /// `use_ssl=1`.
    backend_tls: std::sync::OnceLock<BackendTls>,
    /// The data path's workload-class gates (see [`McpService::set_admission`]).
    admission: std::sync::OnceLock<Arc<sluice_core::admission::Admission>>,
}

/// Both protocols' backend TLS sources.
type BackendTls = sluice_core::PerProtocol<Option<Arc<sluice_net::client_tls::TlsSource>>>;

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

impl McpService {
    /// The service over `config`, counting into `stats`, with the admin for the stats and config
    /// endpoints; the catalog and the HTTPS certificate are kept in `datadir`.
    pub fn new(
        config: ConfigHandle,
        stats: Arc<McpStats>,
        admin: Arc<sluice_admin::Admin>,
        datadir: Option<std::path::PathBuf>,
    ) -> Arc<McpService> {
        Arc::new(McpService {
            config,
            conns: Conns::new(stats.clone()),
            stats,
            rules: Mutex::new(None),
            rate: Mutex::new(HashMap::new()),
            audit: AuditLog::default(),
            admin,
            catalog: tokio::sync::OnceCell::new(),
            rag: crate::rag::RagState::default(),
            datadir,
            backend_tls: std::sync::OnceLock::new(),
            admission: std::sync::OnceLock::new(),
        })
    }

    /// The data path's workload-class gates: RAG syncs admit their page reads through them
    /// (`rag_sources.workload_class`). Set once, at start; without it syncs are not limited.
    pub fn set_admission(&self, admission: Arc<sluice_core::admission::Admission>) {
        let _ = self.admission.set(admission);
    }

    /// The workload-class gates, when set.
    pub(crate) fn admission(&self) -> Option<&Arc<sluice_core::admission::Admission>> {
        self.admission.get()
    }

    /// The data path's backend TLS sources (MySQL, PostgreSQL): the MCP endpoint's own
    /// connections to servers with `use_ssl=1` use the same configuration (CA, verification,
    /// `*_servers_ssl_params`). Set once, at start.
    pub fn set_backend_tls(
        &self,
        mysql: Option<Arc<sluice_net::client_tls::TlsSource>>,
        pgsql: Option<Arc<sluice_net::client_tls::TlsSource>>,
    ) {
        let _ = self
            .backend_tls
            .set(sluice_core::PerProtocol::new(mysql, pgsql));
    }

    /// The TLS configuration for a connection as `login` to `server`, if its row asks for TLS.
    pub(crate) fn tls_for(
        &self,
        protocol: sluice_core::Protocol,
        server: &sluice_core::runtime::HostgroupServer,
        login: &str,
    ) -> Result<Option<Arc<rustls::ClientConfig>>, Error> {
        let source = self.backend_tls.get().and_then(|t| t[protocol].as_deref());
        sluice_net::client_tls::TlsSource::for_server(source, server, login)
            .map_err(|e| Error::Backend(format!("TLS to {}: {e}", server.key)))
    }

    /// The discovery catalog, opened at first use: `mcp_catalog.db` in the datadir (in memory
    /// without one).
    pub(crate) async fn catalog(&self) -> Result<&crate::catalog::Store, Error> {
        self.catalog
            .get_or_try_init(|| async {
                let path = self.datadir.as_ref().map(|d| d.join("mcp_catalog.db"));
                crate::catalog::Store::open(path.as_deref()).await
            })
            .await
    }

    /// The catalog if a tool opened it.
    pub(crate) fn catalog_if_open(&self) -> Option<&crate::catalog::Store> {
        self.catalog.get()
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
}

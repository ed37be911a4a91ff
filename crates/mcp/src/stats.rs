//! What the MCP endpoint counts: per tool (`stats_mcp_query_tools_counters`), per (tool, MCP
//! user, target, digest of the real SQL) (`stats_mcp_query_digest`), rule hits
//! (`stats_mcp_query_rules`), and Prometheus `sluice_mcp_requests_total{endpoint,tool,outcome}`
//! with a latency histogram. Every map is bounded.

use sluice_core::admin::AdminRows;
use sluice_core::metrics::{Exposition, LatencyHistogram};
use std::collections::HashMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// Distinct digests kept; calls of new ones beyond it are counted in `digests_dropped`.
const MAX_DIGESTS: usize = 10_000;
/// Distinct (endpoint, tool, outcome) label sets kept.
const MAX_SERIES: usize = 1_000;

#[derive(Debug, Clone, Default)]
struct Timing {
    count: u64,
    first_seen: u64,
    last_seen: u64,
    sum_us: u64,
    min_us: u64,
    max_us: u64,
    rows: u64,
}

impl Timing {
    fn record(&mut self, now: u64, us: u64, rows: u64) {
        if self.count == 0 {
            self.first_seen = now;
            self.min_us = us;
        }
        self.count += 1;
        self.last_seen = now;
        self.sum_us += us;
        self.min_us = self.min_us.min(us);
        self.max_us = self.max_us.max(us);
        self.rows += rows;
    }
}

/// One finished call, as the stats see it.
#[derive(Debug, Clone)]
pub(crate) struct CallRecord<'a> {
    /// `query`, `stats`, `config`.
    pub endpoint: &'static str,
    /// The tool.
    pub tool: &'a str,
    /// The MCP user.
    pub user: &'a str,
    /// The target ("" for tools without one).
    pub target: &'a str,
    /// The schema ("" when none).
    pub schema: &'a str,
    /// Digest (hex) and digest text of the SQL it ran, if it ran SQL.
    pub digest: Option<(String, String)>,
    /// Rows returned.
    pub rows: u64,
    /// `ok`, `refused`, `blocked`, `timeout`, …
    pub outcome: &'static str,
    /// How long it took.
    pub elapsed: Duration,
}

/// (tool, MCP user, target, digest).
type DigestKey = (String, String, String, String);

/// The MCP endpoint's counters.
#[derive(Default)]
pub struct McpStats {
    tools: Mutex<HashMap<(String, String, String), Timing>>,
    digests: Mutex<HashMap<DigestKey, (String, Timing)>>,
    rules: Mutex<HashMap<u32, u64>>,
    series: Mutex<HashMap<(String, String, String), u64>>,
    latency: LatencyHistogram,
    digests_dropped: AtomicU64,
    /// HTTP requests refused before any tool ran (auth, headers, bodies).
    pub(crate) refused_requests: AtomicU64,
    /// Backend connections the endpoint opened.
    pub(crate) backend_opened: AtomicU64,
    /// Backend connections it dropped because a call left them in doubt.
    pub(crate) backend_discarded: AtomicU64,
    /// Backend connections idle now.
    pub(crate) backend_idle: AtomicU64,
    /// The RAG sources' syncs.
    pub(crate) rag: crate::rag::RagStats,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

fn unix_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

fn s(v: impl ToString) -> Option<String> {
    Some(v.to_string())
}

impl McpStats {
    /// Records a finished call.
    pub(crate) fn record(&self, c: &CallRecord<'_>) {
        let now = unix_now();
        let us = c.elapsed.as_micros() as u64;
        lock(&self.tools)
            .entry((c.endpoint.into(), c.tool.into(), c.schema.into()))
            .or_default()
            .record(now, us, c.rows);
        if let Some((digest, text)) = &c.digest {
            let mut d = lock(&self.digests);
            let key = (
                c.tool.into(),
                c.user.into(),
                c.target.into(),
                digest.clone(),
            );
            if d.len() < MAX_DIGESTS || d.contains_key(&key) {
                d.entry(key)
                    .or_insert_with(|| (text.clone(), Timing::default()))
                    .1
                    .record(now, us, c.rows);
            } else {
                self.digests_dropped.fetch_add(1, Ordering::Relaxed);
            }
        }
        let mut series = lock(&self.series);
        let key = (c.endpoint.into(), c.tool.into(), c.outcome.into());
        if series.len() < MAX_SERIES || series.contains_key(&key) {
            *series.entry(key).or_default() += 1;
        }
        drop(series);
        self.latency.observe_us(us);
    }

    /// Counts hits of MCP query rules.
    pub(crate) fn rule_hits(&self, ids: &[u32]) {
        let mut r = lock(&self.rules);
        for id in ids {
            *r.entry(*id).or_default() += 1;
        }
    }

    /// `stats_mcp_query_tools_counters` (ProxySQL 4.0's columns).
    pub fn tools_counters(&self) -> AdminRows {
        let mut rows: Vec<Vec<Option<String>>> = lock(&self.tools)
            .iter()
            .map(|((ep, tool, schema), t)| {
                vec![
                    s(ep),
                    s(tool),
                    s(schema),
                    s(t.count),
                    s(t.first_seen),
                    s(t.last_seen),
                    s(t.sum_us),
                    s(t.min_us),
                    s(t.max_us),
                ]
            })
            .collect();
        rows.sort();
        AdminRows {
            columns: TOOL_COLUMNS.iter().map(|c| c.to_string()).collect(),
            rows,
        }
    }

    /// `stats_mcp_query_digest`: per tool, MCP user, target and digest of the SQL.
    pub fn digests(&self) -> AdminRows {
        let mut rows: Vec<Vec<Option<String>>> = lock(&self.digests)
            .iter()
            .map(|((tool, user, target, digest), (text, t))| {
                vec![
                    s(tool),
                    s(user),
                    s(target),
                    s(digest),
                    s(text),
                    s(t.count),
                    s(t.first_seen),
                    s(t.last_seen),
                    s(t.sum_us),
                    s(t.min_us),
                    s(t.max_us),
                    s(t.rows),
                ]
            })
            .collect();
        rows.sort();
        AdminRows {
            columns: DIGEST_COLUMNS.iter().map(|c| c.to_string()).collect(),
            rows,
        }
    }

    /// `stats_mcp_query_rules`.
    pub fn rules(&self) -> AdminRows {
        let mut rows: Vec<Vec<Option<String>>> = lock(&self.rules)
            .iter()
            .map(|(id, hits)| vec![s(id), s(hits)])
            .collect();
        rows.sort_by_key(|r| r[0].as_deref().and_then(|v| v.parse::<u32>().ok()));
        AdminRows {
            columns: vec!["rule_id".into(), "hits".into()],
            rows,
        }
    }

    /// The three tables by name, for the admin.
    pub fn tables(&self) -> Vec<(&'static str, AdminRows)> {
        vec![
            ("stats_mcp_query_tools_counters", self.tools_counters()),
            ("stats_mcp_query_digest", self.digests()),
            ("stats_mcp_query_rules", self.rules()),
            ("stats_rag_sources", self.rag.table()),
        ]
    }

    /// Writes `sluice_mcp_*` families.
    pub fn write_metrics(&self, out: &mut Exposition) {
        self.rag.write_metrics(out);
        let mut series: Vec<_> = lock(&self.series)
            .iter()
            .map(|(k, v)| (k.clone(), *v))
            .collect();
        series.sort();
        for ((endpoint, tool, outcome), n) in series {
            out.counter(
                "sluice_mcp_requests_total",
                "MCP tool calls by endpoint, tool and outcome (ok, refused, blocked, denied, timeout, rate_limited, bad_arguments, server_error, backend_error)",
                &[("endpoint", &endpoint), ("tool", &tool), ("outcome", &outcome)],
                n,
            );
        }
        out.histogram(
            "sluice_mcp_request_duration_seconds",
            "Time of MCP tool calls, from the request to the answer",
            &[],
            &self.latency.snapshot(),
        );
        out.counter(
            "sluice_mcp_refused_http_requests_total",
            "HTTP requests to the MCP port refused before a tool ran (token, headers, body)",
            &[],
            self.refused_requests.load(Ordering::Relaxed),
        );
        out.counter(
            "sluice_mcp_backend_connections_opened_total",
            "Backend connections the MCP endpoint opened (its own: never a client's)",
            &[],
            self.backend_opened.load(Ordering::Relaxed),
        );
        out.counter(
            "sluice_mcp_backend_connections_discarded_total",
            "MCP backend connections closed because a call left them in doubt (a cut result, a timeout, an error mid-reply)",
            &[],
            self.backend_discarded.load(Ordering::Relaxed),
        );
        out.gauge(
            "sluice_mcp_backend_connections_idle",
            "MCP backend connections idle now",
            &[],
            self.backend_idle.load(Ordering::Relaxed) as f64,
        );
        out.counter(
            "sluice_mcp_digests_dropped_total",
            "MCP calls whose digest was not kept: stats_mcp_query_digest is full",
            &[],
            self.digests_dropped.load(Ordering::Relaxed),
        );
    }
}

/// `stats_mcp_query_tools_counters`' columns.
pub const TOOL_COLUMNS: [&str; 9] = [
    "endpoint",
    "tool",
    "schema",
    "count",
    "first_seen",
    "last_seen",
    "sum_time",
    "min_time",
    "max_time",
];

/// `stats_mcp_query_digest`'s columns.
pub const DIGEST_COLUMNS: [&str; 12] = [
    "tool_name",
    "username",
    "target_id",
    "digest",
    "digest_text",
    "count_star",
    "first_seen",
    "last_seen",
    "sum_time",
    "min_time",
    "max_time",
    "sum_rows_sent",
];

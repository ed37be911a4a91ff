//! What one protocol side writes to the metrics endpoint: ProxySQL's metric names and labels
//! (with `protocol="mysql"|"pgsql"`, as ProxySQL 3.x labels its PostgreSQL metrics), plus
//! Sluice's own `sluice_*` families (latency histograms, pool wait, pins, rule hits).

use super::{Exposition, FrontendStats, PoolStats};
use crate::live::PoolRow;
use crate::query::commands::CommandCounters;
use crate::query::{QueryCache, QueryProcessorStats};
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

/// Everything one protocol side reports, borrowed from the frontend, the pools and the monitor.
#[derive(Debug)]
pub struct ProtocolMetrics<'a> {
    /// `mysql` or `pgsql`: the `protocol` label.
    pub protocol: &'static str,
    /// Clients, statements, transactions, latency, pins.
    pub frontend: &'a FrontendStats,
    /// Clients connected now.
    pub clients_connected: u64,
    /// Connections opened and refused, checkouts and their waits.
    pub pool: &'a PoolStats,
    /// One row per (hostgroup, server): connections, statements, bytes, status, latency.
    pub servers: &'a [PoolRow],
    /// Rule hits, blocked and rewritten statements.
    pub query: &'a QueryProcessorStats,
    /// The query cache.
    pub cache: &'a QueryCache,
    /// Errors servers returned, per server and code.
    pub errors: &'a CommandCounters,
    /// The monitor's checks: (kind, successes, failures).
    pub monitor_checks: Vec<(&'static str, u64, u64)>,
}

/// The numeric status ProxySQL's `proxysql_connpool_conns_status` reports.
fn status_code(status: &str) -> f64 {
    match status {
        "ONLINE" => 1.0,
        "SHUNNED" | "SHUNNED_REPLICATION_LAG" => 2.0,
        "OFFLINE_SOFT" => 3.0,
        "OFFLINE_HARD" => 4.0,
        _ => -1.0,
    }
}

fn load(a: &AtomicU64) -> u64 {
    a.load(Relaxed)
}

/// Writes every family of one protocol side.
pub fn write_protocol(out: &mut Exposition, m: &ProtocolMetrics<'_>) {
    write_clients(out, m);
    write_statements(out, m);
    write_pool(out, m);
    write_servers(out, m);
    write_query_processor(out, m);
    write_errors_and_monitor(out, m);
}

fn write_clients(out: &mut Exposition, m: &ProtocolMetrics<'_>) {
    let p = [("protocol", m.protocol)];
    let f = m.frontend;
    out.gauge(
        "proxysql_client_connections_connected",
        "Client connections open now.",
        &p,
        m.clients_connected as f64,
    );
    for (status, n) in [
        ("created", load(&f.client_connections_created)),
        ("aborted", load(&f.client_connections_aborted)),
    ] {
        out.counter(
            "proxysql_client_connections_total",
            "Client connections that logged in (created) or ended before or during the login (aborted).",
            &[("protocol", m.protocol), ("status", status)],
            n,
        );
    }
    for (name, help, n) in [
        (
            "proxysql_access_denied_wrong_password_total",
            "Logins refused for a wrong password or an unknown user.",
            load(&f.access_denied_wrong_password),
        ),
        (
            "proxysql_access_denied_max_connections_total",
            "Logins refused by the global max_connections.",
            load(&f.access_denied_max_connections),
        ),
        (
            "proxysql_access_denied_max_user_connections_total",
            "Logins refused by the user's max_connections.",
            load(&f.access_denied_max_user_connections),
        ),
    ] {
        out.counter(name, help, &p, n);
    }
}

fn write_statements(out: &mut Exposition, m: &ProtocolMetrics<'_>) {
    let p = [("protocol", m.protocol)];
    let f = m.frontend;
    out.counter(
        "proxysql_questions_total",
        "Statements clients sent.",
        &p,
        f.questions.get(),
    );
    out.counter(
        "proxysql_slow_queries_total",
        "Statements that took longer than long_query_time.",
        &p,
        f.slow_queries.get(),
    );
    out.gauge(
        "proxysql_active_transactions",
        "Client sessions inside a transaction now.",
        &p,
        f.active_transactions.get() as f64,
    );
    out.counter_f64(
        "proxysql_backend_query_time_seconds_total",
        "Time from statements' arrival to the end of their replies.",
        &p,
        f.statement_time_us.get() as f64 / 1e6,
    );
    out.counter_f64(
        "proxysql_query_processor_time_seconds_total",
        "Time spent in the query processor (digest, rules, hints).",
        &p,
        f.processor_time_ns.get() as f64 / 1e9,
    );
    for (hostgroup, h) in f.latency.snapshot() {
        let hg = hostgroup.to_string();
        out.histogram(
            "sluice_query_duration_seconds",
            "Statement latency per hostgroup (-1: answered by Sluice), arrival to the end of the reply.",
            &[("protocol", m.protocol), ("hostgroup", &hg)],
            &h,
        );
    }
    for (outcome, n) in f.causal.stats.outcomes() {
        out.counter(
            "sluice_causal_reads_total",
            "Reads gated for read-your-writes: served by a replica already past the token (ready), after waiting on it (waited), by the writer after the timeout (fallback), or refused (error).",
            &[("protocol", m.protocol), ("outcome", outcome.as_str())],
            n,
        );
    }
    out.histogram(
        "sluice_causal_read_wait_seconds",
        "Time gated reads waited on a replica for the token (fallbacks and errors included).",
        &[("protocol", m.protocol)],
        &f.causal.stats.wait.snapshot(),
    );
    if m.protocol == "pgsql" {
        write_notify(out, &f.notify);
    }
    for (reason, n) in f.pins() {
        out.counter(
            "sluice_session_pins_total",
            "Times a session got pinned to its server connection, per reason.",
            &[("protocol", m.protocol), ("reason", reason)],
            n,
        );
    }
}

fn write_pool(out: &mut Exposition, m: &ProtocolMetrics<'_>) {
    let p = [("protocol", m.protocol)];
    let s = m.pool;
    let connected: u64 = m
        .servers
        .iter()
        .map(|r| u64::from(r.conn_used + r.conn_free))
        .sum();
    out.gauge(
        "proxysql_server_connections_connected",
        "Server connections open now.",
        &p,
        connected as f64,
    );
    for (status, n) in [
        ("created", load(&s.connections_created)),
        ("aborted", load(&s.connections_aborted)),
    ] {
        out.counter(
            "proxysql_server_connections_total",
            "Server connections opened (created) or that failed to open (aborted).",
            &[("protocol", m.protocol), ("status", status)],
            n,
        );
    }
    for (name, help, n) in [
        (
            "proxysql_connpool_get_conn_success_total",
            "Checkouts that got a server connection.",
            s.get_conn_success.get(),
        ),
        (
            "proxysql_connpool_get_conn_failure_total",
            "Checkouts that gave up (timeout or a fatal error).",
            load(&s.get_conn_failure),
        ),
        (
            "proxysql_connpool_get_conn_immediate_total",
            "Checkouts served by an idle pooled connection at once.",
            s.get_conn_immediate.get(),
        ),
    ] {
        out.counter(name, help, &p, n);
    }
    out.counter_f64(
        "sluice_pool_wait_seconds_total",
        "Time sessions spent getting a server connection (reuse, queue and connect).",
        &p,
        load(&s.wait_us) as f64 / 1e6,
    );
    out.gauge(
        "sluice_pool_waiting_sessions",
        "Sessions waiting now for a server connection because every server of their hostgroup is at max_connections.",
        &p,
        load(&s.waiting) as f64,
    );
}

fn write_servers(out: &mut Exposition, m: &ProtocolMetrics<'_>) {
    for r in m.servers {
        let hg = r.hostgroup.to_string();
        let endpoint = format!("{}:{}", r.srv_host, r.srv_port);
        let labels = [
            ("protocol", m.protocol),
            ("hostgroup", hg.as_str()),
            ("endpoint", endpoint.as_str()),
        ];
        let with = |k: &'static str, v: &'static str| [labels[0], labels[1], labels[2], (k, v)];
        let help_conns = "Server connections in use by sessions (used) or idle in the pool (free).";
        out.gauge(
            "proxysql_connpool_conns",
            help_conns,
            &with("status", "used"),
            f64::from(r.conn_used),
        );
        out.gauge(
            "proxysql_connpool_conns",
            help_conns,
            &with("status", "free"),
            f64::from(r.conn_free),
        );
        out.gauge(
            "proxysql_connpool_conns_status",
            "Server status: 1 ONLINE, 2 SHUNNED, 3 OFFLINE_SOFT, 4 OFFLINE_HARD.",
            &labels,
            status_code(&r.status),
        );
        out.gauge(
            "proxysql_connpool_conns_latency_us",
            "The monitor's last ping time to the server, in microseconds (ProxySQL's name).",
            &labels,
            r.latency_us as f64,
        );
        out.gauge(
            "sluice_connpool_latency_seconds",
            "The monitor's last ping time to the server.",
            &labels,
            r.latency_us as f64 / 1e6,
        );
        if let Some(lag) = r.replication_lag_s {
            out.gauge(
                "sluice_server_replication_lag_seconds",
                "The replication lag the monitor last read (or assumed, monitor_slave_lag_when_null).",
                &labels,
                lag as f64,
            );
        }
        let help_total =
            "Connections opened to the server (ok) and connect attempts that failed (err).";
        out.counter(
            "proxysql_connpool_conns_total",
            help_total,
            &with("status", "ok"),
            r.connects_ok,
        );
        out.counter(
            "proxysql_connpool_conns_total",
            help_total,
            &with("status", "err"),
            r.connects_err,
        );
        out.counter(
            "proxysql_connpool_conns_queries_total",
            "Statements sent to the server.",
            &labels,
            r.queries,
        );
        let help_bytes = "Bytes sent to (sent) and received from (recv) the server.";
        out.counter(
            "proxysql_connpool_data_bytes_total",
            help_bytes,
            &with("traffic_flow", "sent"),
            r.bytes_sent,
        );
        out.counter(
            "proxysql_connpool_data_bytes_total",
            help_bytes,
            &with("traffic_flow", "recv"),
            r.bytes_recv,
        );
    }
}

fn write_query_processor(out: &mut Exposition, m: &ProtocolMetrics<'_>) {
    let p = [("protocol", m.protocol)];
    let q = m.query;
    for (name, help, n) in [
        (
            "sluice_queries_blocked_total",
            "Statements refused by a rule's error_msg.",
            load(&q.blocked),
        ),
        (
            "sluice_queries_rewritten_total",
            "Statements rewritten by a rule's replace_pattern.",
            load(&q.rewritten),
        ),
        (
            "sluice_queries_killed_by_timeout_total",
            "Statements cancelled on the server by a timeout.",
            load(&q.killed_by_timeout),
        ),
    ] {
        out.counter(name, help, &p, n);
    }
    for (rule, hits) in q.rule_hits() {
        let id = rule.to_string();
        out.counter(
            "sluice_query_rule_hits_total",
            "Statements a query rule matched.",
            &[("protocol", m.protocol), ("rule_id", &id)],
            hits,
        );
    }
    let c = &m.cache.counters;
    for (name, help, n) in [
        (
            "proxysql_query_cache_count_get_total",
            "Query cache lookups.",
            load(&c.get),
        ),
        (
            "proxysql_query_cache_count_get_ok_total",
            "Query cache lookups that hit.",
            load(&c.get_ok),
        ),
        (
            "proxysql_query_cache_count_set_total",
            "Results stored in the query cache.",
            load(&c.set),
        ),
        (
            "proxysql_query_cache_purged_total",
            "Query cache entries evicted or expired.",
            load(&c.purged),
        ),
    ] {
        out.counter(name, help, &p, n);
    }
    out.gauge(
        "proxysql_query_cache_entries",
        "Results held in the query cache.",
        &p,
        m.cache.len() as f64,
    );
    out.gauge(
        "proxysql_query_cache_memory_bytes",
        "Memory the query cache holds.",
        &p,
        m.cache.memory_bytes() as f64,
    );
}

fn write_errors_and_monitor(out: &mut Exposition, m: &ProtocolMetrics<'_>) {
    let errors_family = if m.protocol == "mysql" {
        "proxysql_mysql_error_total"
    } else {
        "proxysql_pgsql_error_total"
    };
    for e in m.errors.errors() {
        let (hg, port) = (e.hostgroup.to_string(), e.port.to_string());
        out.counter(
            errors_family,
            "Errors servers returned to clients, per server and code.",
            &[
                ("hostgroup", hg.as_str()),
                ("address", e.hostname.as_str()),
                ("port", port.as_str()),
                ("code", e.errno.as_str()),
            ],
            e.count_star,
        );
    }
    let family = if m.protocol == "mysql" {
        "proxysql_mysql_monitor"
    } else {
        "proxysql_pgsql_monitor"
    };
    for (kind, ok, err) in &m.monitor_checks {
        let name = format!("{family}_{kind}_check_total");
        let help = format!("The monitor's {kind} checks that succeeded (ok) or failed (err).");
        out.counter(&name, &help, &[("status", "ok")], *ok);
        out.counter(&name, &help, &[("status", "err")], *err);
    }
}

/// `stats_mysql_global` / `stats_pgsql_global` rows with ProxySQL's variable names, from the
/// same counters the metrics read.
pub fn global_rows(m: &ProtocolMetrics<'_>) -> Vec<(String, String)> {
    let (f, s) = (m.frontend, m.pool);
    let used: u64 = m.servers.iter().map(|r| u64::from(r.conn_used)).sum();
    let free: u64 = m.servers.iter().map(|r| u64::from(r.conn_free)).sum();
    let sent: u64 = m.servers.iter().map(|r| r.bytes_sent).sum();
    let recv: u64 = m.servers.iter().map(|r| r.bytes_recv).sum();
    let rows: [(&str, u64); 21] = [
        ("Active_Transactions", f.active_transactions.get()),
        (
            "Access_Denied_Max_Connections",
            load(&f.access_denied_max_connections),
        ),
        (
            "Access_Denied_Max_User_Connections",
            load(&f.access_denied_max_user_connections),
        ),
        (
            "Access_Denied_Wrong_Password",
            load(&f.access_denied_wrong_password),
        ),
        (
            "Backend_query_time_nsec",
            f.statement_time_us.get().saturating_mul(1000),
        ),
        (
            "Client_Connections_aborted",
            load(&f.client_connections_aborted),
        ),
        ("Client_Connections_connected", m.clients_connected),
        (
            "Client_Connections_created",
            load(&f.client_connections_created),
        ),
        ("Client_Connections_non_idle", used),
        ("ConnPool_get_conn_failure", load(&s.get_conn_failure)),
        ("ConnPool_get_conn_immediate", s.get_conn_immediate.get()),
        ("ConnPool_get_conn_success", s.get_conn_success.get()),
        ("ConnPool_waiting_sessions", load(&s.waiting)),
        ("Query_Processor_time_nsec", f.processor_time_ns.get()),
        ("Queries_backends_bytes_recv", recv),
        ("Queries_backends_bytes_sent", sent),
        ("Questions", f.questions.get()),
        ("Server_Connections_aborted", load(&s.connections_aborted)),
        ("Server_Connections_connected", used + free),
        ("Server_Connections_created", load(&s.connections_created)),
        ("Slow_queries", f.slow_queries.get()),
    ];
    let mut out: Vec<(String, String)> = rows
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    // Read-your-writes: ProxySQL's GTID names on MySQL, their LSN twins on PostgreSQL.
    let c = &f.causal.stats;
    let [ready, waited, fallback, error] = c.outcomes().map(|(_, n)| n);
    let (consistent, collected, synced) = if m.protocol == "mysql" {
        (
            "GTID_consistent_queries",
            "GTID_session_collected",
            "Queries_GTID_sync",
        )
    } else {
        (
            "LSN_consistent_queries",
            "LSN_session_collected",
            "Queries_LSN_sync",
        )
    };
    for (k, v) in [
        (consistent, ready + waited + fallback + error),
        (collected, load(&c.collected)),
        (synced, ready + waited),
    ] {
        out.push((k.to_string(), v.to_string()));
    }
    out
}

/// Process-wide families: uptime, version, memory, file descriptors.
pub fn write_process(out: &mut Exposition, uptime_s: u64, version: &str) {
    out.counter(
        "proxysql_uptime_seconds_total",
        "Seconds since Sluice started.",
        &[],
        uptime_s,
    );
    out.gauge(
        "proxysql_version_info",
        "Sluice's version (always 1).",
        &[("version", version)],
        1.0,
    );
    if let Some(rss) = crate::util::rss_bytes() {
        out.gauge(
            "process_resident_memory_bytes",
            "Resident memory of the process.",
            &[],
            rss as f64,
        );
    }
    if let Some(fds) = crate::util::open_fds() {
        out.gauge(
            "proxysql_fds_in_use",
            "File descriptors open in the process.",
            &[],
            fds as f64,
        );
    }
}

/// The LISTEN/NOTIFY fan-out's series (PostgreSQL only).
fn write_notify(out: &mut Exposition, n: &super::NotifyStats) {
    for (name, help, v) in [
        (
            "sluice_pg_notifications_received_total",
            "Notifications the listener connections received from PostgreSQL.",
            n.received.get(),
        ),
        (
            "sluice_pg_notifications_delivered_total",
            "Notifications written to listening clients.",
            n.delivered.get(),
        ),
        (
            "sluice_pg_notifications_dropped_total",
            "Notifications lost with a client session ended for not reading them in time.",
            n.dropped.get(),
        ),
        (
            "sluice_pg_listen_reconnects_total",
            "Listener connections opened again after a loss or a writer change.",
            n.reconnects.get(),
        ),
    ] {
        out.counter(name, help, &[], v);
    }
    out.gauge(
        "sluice_pg_listen_channels",
        "Channels the listener connections listen to now.",
        &[],
        n.channels() as f64,
    );
    out.histogram(
        "sluice_pg_notification_delay_seconds",
        "Time from a notification's arrival at Sluice to its write to a client.",
        &[],
        &n.delay.snapshot(),
    );
}

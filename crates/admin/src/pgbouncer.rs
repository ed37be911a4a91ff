//! PgBouncer's admin console commands, so tools written for PgBouncer (`pgbouncer_exporter`,
//! dashboards, runbooks) work against Sluice's PostgreSQL side: `SHOW POOLS`, `SHOW STATS`,
//! `SHOW STATS_TOTALS`, `SHOW STATS_AVERAGES`, `SHOW SERVERS`, `SHOW CLIENTS`,
//! `SHOW DATABASES`, `SHOW LISTS`, `SHOW CONFIG`, `SHOW VERSION`, and `PAUSE`, `RESUME`,
//! `RELOAD`, `SHUTDOWN`.
//!
//! How Sluice maps onto PgBouncer's model: a PgBouncer "database" is a Sluice hostgroup, shown as
//! `hostgroup_<n>`; Sluice pools per hostgroup and server, not per user, so `SHOW POOLS` has
//! one row per hostgroup with `user` = `*`; the pool mode is always `transaction`. PgBouncer's
//! `avg_*` columns are over its last stats period; Sluice's are since start.

use sluice_core::Protocol;
use sluice_core::admin::{AdminError, AdminReply, AdminRows};
use sluice_core::config::PgsqlVariables;
use sluice_core::live::{HostgroupTraffic, LiveStats};
use sluice_core::runtime::RuntimeConfig;

/// A PgBouncer console command.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PgBouncerCommand {
    /// `SHOW POOLS`.
    Pools,
    /// `SHOW STATS`.
    Stats,
    /// `SHOW STATS_TOTALS`.
    StatsTotals,
    /// `SHOW STATS_AVERAGES`.
    StatsAverages,
    /// `SHOW SERVERS`.
    Servers,
    /// `SHOW CLIENTS`.
    Clients,
    /// `SHOW DATABASES`.
    Databases,
    /// `SHOW LISTS`.
    Lists,
    /// `SHOW CONFIG`.
    Config,
    /// `SHOW VERSION`.
    Version,
}

impl PgBouncerCommand {
    /// The command after `SHOW`, upper-cased.
    pub fn parse(word: &str) -> Option<PgBouncerCommand> {
        Some(match word {
            "POOLS" => PgBouncerCommand::Pools,
            "STATS" => PgBouncerCommand::Stats,
            "STATS_TOTALS" => PgBouncerCommand::StatsTotals,
            "STATS_AVERAGES" => PgBouncerCommand::StatsAverages,
            "SERVERS" => PgBouncerCommand::Servers,
            "CLIENTS" => PgBouncerCommand::Clients,
            "DATABASES" => PgBouncerCommand::Databases,
            "LISTS" => PgBouncerCommand::Lists,
            "CONFIG" => PgBouncerCommand::Config,
            "VERSION" => PgBouncerCommand::Version,
            _ => return None,
        })
    }
}

fn table(columns: &[&str], rows: Vec<Vec<String>>) -> AdminReply {
    AdminReply::Rows(AdminRows {
        columns: columns.iter().map(|c| c.to_string()).collect(),
        rows: rows
            .into_iter()
            .map(|r| r.into_iter().map(Some).collect())
            .collect(),
    })
}

fn database(hostgroup: u32) -> String {
    format!("hostgroup_{hostgroup}")
}

/// Answers `c` from the live data path and the runtime configuration.
pub(crate) fn answer(
    c: PgBouncerCommand,
    live: &dyn LiveStats,
    rt: &RuntimeConfig,
) -> Result<AdminReply, AdminError> {
    Ok(match c {
        PgBouncerCommand::Pools => pools(live, rt),
        PgBouncerCommand::Stats => stats(live),
        PgBouncerCommand::StatsTotals => stats_totals(live),
        PgBouncerCommand::StatsAverages => stats_averages(live),
        PgBouncerCommand::Servers => servers(live),
        PgBouncerCommand::Clients => clients(live),
        PgBouncerCommand::Databases => databases(live, rt),
        PgBouncerCommand::Lists => lists(live, rt),
        PgBouncerCommand::Config => config(rt),
        PgBouncerCommand::Version => table(
            &["version"],
            vec![vec![format!(
                "Sluice {} (PgBouncer-compatible admin)",
                env!("CARGO_PKG_VERSION")
            )]],
        ),
    })
}

fn pools(live: &dyn LiveStats, rt: &RuntimeConfig) -> AdminReply {
    let servers = live.connection_pool(Protocol::Pgsql);
    let clients = live.processlist(Protocol::Pgsql);
    let rows = rt
        .pgsql
        .hostgroups
        .keys()
        .map(|hg| {
            let mine = servers.iter().filter(|s| s.hostgroup == *hg);
            let (used, free) =
                mine.fold((0u32, 0u32), |(u, f), s| (u + s.conn_used, f + s.conn_free));
            let here = clients.iter().filter(|c| c.hostgroup == *hg);
            let active = here.clone().filter(|c| c.pin_reason.is_some()).count();
            let idle = here.count() - active;
            let n = |v: u64| v.to_string();
            vec![
                database(*hg),
                "*".into(),
                n(active as u64),
                "0".into(),
                "0".into(),
                "0".into(),
                n(u64::from(used)),
                "0".into(),
                "0".into(),
                n(u64::from(free)),
                "0".into(),
                "0".into(),
                "0".into(),
                "0".into(),
                "0".into(),
                "transaction".into(),
                n(idle as u64),
            ]
        })
        .collect();
    table(
        &[
            "database",
            "user",
            "cl_active",
            "cl_waiting",
            "cl_active_cancel_req",
            "cl_waiting_cancel_req",
            "sv_active",
            "sv_active_cancel",
            "sv_being_canceled",
            "sv_idle",
            "sv_used",
            "sv_tested",
            "sv_login",
            "maxwait",
            "maxwait_us",
            "pool_mode",
            "cl_idle",
        ],
        rows,
    )
}

/// One row per hostgroup: its database name, then `values(traffic, uptime_s)`.
fn stat_rows(
    live: &dyn LiveStats,
    values: impl Fn(&HostgroupTraffic, u64) -> Vec<u64>,
) -> Vec<Vec<String>> {
    let up = live.uptime_seconds().max(1);
    live.pgsql_hostgroup_traffic()
        .iter()
        .map(|t| {
            let mut r = vec![database(t.hostgroup)];
            r.extend(values(t, up).iter().map(u64::to_string));
            r
        })
        .collect()
}

fn stats(live: &dyn LiveStats) -> AdminReply {
    let rows = stat_rows(live, |t, up| {
        let mut v = totals(t).to_vec();
        v.extend(averages(t, up));
        // PgBouncer before 1.8 named the query count `total_requests` (older exporters).
        v.push(t.queries);
        v
    });
    table(
        &[
            "database",
            "total_xact_count",
            "total_query_count",
            "total_received",
            "total_sent",
            "total_xact_time",
            "total_query_time",
            "total_wait_time",
            "avg_xact_count",
            "avg_query_count",
            "avg_recv",
            "avg_sent",
            "avg_xact_time",
            "avg_query_time",
            "avg_wait_time",
            "total_requests",
        ],
        rows,
    )
}

/// xact_count, query_count, bytes received from clients, bytes sent to clients, xact_time,
/// query_time, wait_time.
fn totals(t: &HostgroupTraffic) -> [u64; 7] {
    [
        t.transactions,
        t.queries,
        t.bytes_to_servers,
        t.bytes_from_servers,
        t.query_time_us,
        t.query_time_us,
        t.wait_us,
    ]
}

/// Per second for counts and bytes, per transaction / query for times (µs), since start.
fn averages(t: &HostgroupTraffic, uptime_s: u64) -> [u64; 7] {
    let per = |n: u64, d: u64| n.checked_div(d).unwrap_or(0);
    [
        per(t.transactions, uptime_s),
        per(t.queries, uptime_s),
        per(t.bytes_to_servers, uptime_s),
        per(t.bytes_from_servers, uptime_s),
        per(t.query_time_us, t.transactions),
        per(t.query_time_us, t.queries),
        per(t.wait_us, t.transactions),
    ]
}

const PERIOD_COLUMNS: [&str; 8] = [
    "database",
    "xact_count",
    "query_count",
    "bytes_received",
    "bytes_sent",
    "xact_time",
    "query_time",
    "wait_time",
];

fn stats_totals(live: &dyn LiveStats) -> AdminReply {
    table(&PERIOD_COLUMNS, stat_rows(live, |t, _| totals(t).to_vec()))
}

fn stats_averages(live: &dyn LiveStats) -> AdminReply {
    table(
        &PERIOD_COLUMNS,
        stat_rows(live, |t, up| averages(t, up).to_vec()),
    )
}

const CONNECTION_COLUMNS: [&str; 12] = [
    "type",
    "user",
    "database",
    "state",
    "addr",
    "port",
    "local_addr",
    "local_port",
    "connect_time",
    "request_time",
    "wait",
    "wait_us",
];

/// Server connections: the idle ones one by one; those in use per server, as PgBouncer would
/// list them (Sluice does not enumerate connections checked out by sessions).
fn servers(live: &dyn LiveStats) -> AdminReply {
    let mut rows = Vec::new();
    for c in live.free_connections(Protocol::Pgsql) {
        rows.push(connection_row(
            "S",
            &c.user,
            &database(c.hostgroup),
            "idle",
            &c.server.hostname,
            &c.server.port.to_string(),
        ));
    }
    for s in live.connection_pool(Protocol::Pgsql) {
        for _ in 0..s.conn_used {
            let port = s.srv_port.to_string();
            rows.push(connection_row(
                "S",
                "*",
                &database(s.hostgroup),
                "active",
                &s.srv_host,
                &port,
            ));
        }
    }
    table(&CONNECTION_COLUMNS, rows)
}

fn clients(live: &dyn LiveStats) -> AdminReply {
    let rows = live
        .processlist(Protocol::Pgsql)
        .iter()
        .map(|c| {
            let (addr, port) = c
                .client
                .rsplit_once(':')
                .unwrap_or((c.client.as_str(), "0"));
            let state = if c.pin_reason.is_some() {
                "active"
            } else {
                "idle"
            };
            connection_row("C", &c.user, &c.db, state, addr, port)
        })
        .collect();
    table(&CONNECTION_COLUMNS, rows)
}

fn connection_row(
    kind: &str,
    user: &str,
    db: &str,
    state: &str,
    addr: &str,
    port: &str,
) -> Vec<String> {
    let mut r: Vec<String> = [kind, user, db, state, addr, port]
        .iter()
        .map(|s| s.to_string())
        .collect();
    r.extend(["", "0", "", "", "0", "0"].iter().map(|s| s.to_string()));
    r
}

fn databases(live: &dyn LiveStats, rt: &RuntimeConfig) -> AdminReply {
    let pool = live.connection_pool(Protocol::Pgsql);
    let paused = if live.paused() { "1" } else { "0" };
    let rows = rt
        .pgsql
        .hostgroups
        .iter()
        .map(|(hg, servers)| {
            let first = servers.first();
            let size: u32 = servers.iter().map(|s| s.max_connections).sum();
            let current: u32 = pool
                .iter()
                .filter(|p| p.hostgroup == *hg)
                .map(|p| p.conn_used + p.conn_free)
                .sum();
            vec![
                database(*hg),
                first.map_or(String::new(), |s| s.key.hostname.clone()),
                first.map_or("0".into(), |s| s.key.port.to_string()),
                database(*hg),
                String::new(),
                size.to_string(),
                "0".into(),
                "0".into(),
                "transaction".into(),
                size.to_string(),
                current.to_string(),
                paused.into(),
                "0".into(),
            ]
        })
        .collect();
    table(
        &[
            "name",
            "host",
            "port",
            "database",
            "force_user",
            "pool_size",
            "min_pool_size",
            "reserve_pool",
            "pool_mode",
            "max_connections",
            "current_connections",
            "paused",
            "disabled",
        ],
        rows,
    )
}

fn lists(live: &dyn LiveStats, rt: &RuntimeConfig) -> AdminReply {
    let pool = live.connection_pool(Protocol::Pgsql);
    let clients = live.processlist(Protocol::Pgsql);
    let used_clients = clients.iter().filter(|c| c.pin_reason.is_some()).count();
    let used: u32 = pool.iter().map(|p| p.conn_used).sum();
    let free: u32 = pool.iter().map(|p| p.conn_free).sum();
    let items: [(&str, u64); 12] = [
        ("databases", rt.pgsql.hostgroups.len() as u64),
        ("users", rt.pgsql.frontend_users.len() as u64),
        ("pools", rt.pgsql.hostgroups.len() as u64),
        ("free_clients", (clients.len() - used_clients) as u64),
        ("used_clients", used_clients as u64),
        ("login_clients", 0),
        ("free_servers", u64::from(free)),
        ("used_servers", u64::from(used)),
        ("dns_names", 0),
        ("dns_zones", 0),
        ("dns_queries", 0),
        ("dns_pending", 0),
    ];
    table(
        &["list", "items"],
        items
            .iter()
            .map(|(k, v)| vec![k.to_string(), v.to_string()])
            .collect(),
    )
}

fn config(rt: &RuntimeConfig) -> AdminReply {
    let defaults: std::collections::BTreeMap<String, String> =
        PgsqlVariables::default().pairs().into_iter().collect();
    let rows = rt
        .pgsql
        .variables
        .pairs()
        .into_iter()
        .map(|(k, v)| {
            let d = defaults.get(&k).cloned().unwrap_or_default();
            // A console any stats account can read shows no secret.
            let v = if k.contains("password") {
                "********".into()
            } else {
                v
            };
            vec![format!("pgsql-{k}"), v, d, "yes".into()]
        })
        .collect();
    table(&["key", "value", "default", "changeable"], rows)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn averages_divide_by_uptime_and_counts_without_dividing_by_zero() {
        let t = HostgroupTraffic {
            hostgroup: 0,
            transactions: 10,
            queries: 20,
            bytes_to_servers: 1000,
            bytes_from_servers: 4000,
            query_time_us: 2000,
            wait_us: 50,
        };
        assert_eq!(averages(&t, 10), [1, 2, 100, 400, 200, 100, 5]);
        assert_eq!(totals(&t), [10, 20, 1000, 4000, 2000, 2000, 50]);
        let idle = HostgroupTraffic::default();
        assert_eq!(averages(&idle, 1), [0; 7]);
        assert_eq!(
            PgBouncerCommand::parse("STATS_TOTALS"),
            Some(PgBouncerCommand::StatsTotals)
        );
        assert_eq!(PgBouncerCommand::parse("FDS"), None);
    }
}

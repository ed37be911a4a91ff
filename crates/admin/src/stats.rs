//! Materialising the stats tables from the data path's live state when they are queried.

use crate::layers::replace_rows_sql;
use crate::store::Store;
use sluice_core::Protocol;
use sluice_core::admin::{AdminError, AdminRows, LiveStats};
use sluice_core::config::Config;
use sluice_core::query::DigestRow;
use std::collections::HashMap;

mod monitor_tables;
pub(crate) use monitor_tables::refresh_monitor_tables;

fn rows(columns: &[&str], rows: Vec<Vec<Option<String>>>) -> AdminRows {
    AdminRows {
        columns: columns.iter().map(|c| c.to_string()).collect(),
        rows,
    }
}

fn s(v: impl ToString) -> Option<String> {
    Some(v.to_string())
}

const DIGEST_COLUMNS: [&str; 14] = [
    "hostgroup",
    "schemaname",
    "username",
    "client_address",
    "digest",
    "digest_text",
    "count_star",
    "first_seen",
    "last_seen",
    "sum_time",
    "min_time",
    "max_time",
    "sum_rows_affected",
    "sum_rows_sent",
];

fn digest_rows(p: Protocol, list: Vec<DigestRow>) -> AdminRows {
    let mut cols = DIGEST_COLUMNS;
    if p == Protocol::Pgsql {
        cols[1] = "database";
    }
    rows(
        &cols,
        list.into_iter()
            .map(|d| {
                vec![
                    s(d.hostgroup),
                    Some(d.schema),
                    Some(d.user),
                    Some(d.client),
                    s(format!("0x{:016X}", d.digest)),
                    Some(d.text),
                    s(d.count),
                    s(d.first_seen),
                    s(d.last_seen),
                    s(d.sum_time),
                    s(d.min_time),
                    s(d.max_time),
                    s(d.rows_affected),
                    s(d.rows_sent),
                ]
            })
            .collect(),
    )
}

/// Refreshes the query-processor tables a statement reads: digests (reading a `_reset` table
/// empties the map, as in ProxySQL) and rule hits. Only when named, since the digest map can
/// hold many rows.
pub(crate) async fn refresh_query_tables(
    store: &Store,
    live: &dyn LiveStats,
    sql_lower: &str,
) -> Result<(), AdminError> {
    let mut sql = Vec::new();
    for (p, proto) in [(Protocol::Mysql, "mysql"), (Protocol::Pgsql, "pgsql")] {
        let table = format!("stats_{proto}_query_digest");
        if sql_lower.contains(&format!("{table}_reset")) {
            let r = digest_rows(p, live.query_digests(p, true));
            sql.extend(replace_rows_sql("stats", &format!("{table}_reset"), &r));
            sql.extend(replace_rows_sql("stats", &table, &AdminRows::default()));
        } else if sql_lower.contains(&table) {
            let r = digest_rows(p, live.query_digests(p, false));
            sql.extend(replace_rows_sql("stats", &table, &r));
        }
        let rules_table = format!("stats_{proto}_query_rules");
        if sql_lower.contains(&rules_table) {
            let r = rows(
                &["rule_id", "hits"],
                live.query_rule_hits(p)
                    .into_iter()
                    .map(|(id, n)| vec![s(id), s(n)])
                    .collect(),
            );
            sql.extend(replace_rows_sql("stats", &rules_table, &r));
        }
    }
    if sql.is_empty() {
        return Ok(());
    }
    store.exec_all(&sql).await
}

/// `stats_*_users` rows: each frontend user's connected clients and cap.
fn user_table<'a>(
    procs: &[sluice_core::admin::ProcessRow],
    users: impl Iterator<Item = (&'a str, u32)>,
) -> AdminRows {
    let mut per_user: HashMap<&str, u32> = HashMap::new();
    for p in procs {
        *per_user.entry(p.user.as_str()).or_insert(0) += 1;
    }
    rows(
        &[
            "username",
            "frontend_connections",
            "frontend_max_connections",
        ],
        users
            .map(|(name, max)| vec![s(name), s(per_user.get(name).copied().unwrap_or(0)), s(max)])
            .collect(),
    )
}

/// `stats_*_processlist` rows.
fn process_table(procs: &[sluice_core::admin::ProcessRow]) -> AdminRows {
    rows(
        &[
            "ThreadID",
            "SessionID",
            "user",
            "db",
            "cli_host",
            "cli_port",
            "hostgroup",
            "command",
            "time_ms",
            "info",
            "multiplexed",
            "pin_reason",
            "pinned_seconds",
        ],
        procs
            .iter()
            .map(|p| {
                let (host, port) = p.client.rsplit_once(':').unwrap_or((&p.client, "0"));
                vec![
                    s(p.thread.unwrap_or(0)),
                    s(p.session_id),
                    s(&p.user),
                    s(&p.db),
                    s(host),
                    s(port),
                    s(p.hostgroup),
                    s(if p.queued.is_some() {
                        "Queued"
                    } else {
                        "Sleep"
                    }),
                    p.queued.as_ref().map(|(_, ms)| ms.to_string()),
                    p.queued
                        .as_ref()
                        .map(|(class, _)| format!("waiting for a slot of workload class '{class}'"))
                        .or_else(|| {
                            (!p.listening.is_empty())
                                .then(|| format!("listening: {}", p.listening.join(",")))
                        }),
                    s(u8::from(p.pin_reason.is_none())),
                    p.pin_reason.clone(),
                    p.pinned_seconds.map(|v| v.to_string()),
                ]
            })
            .collect(),
    )
}

/// `stats_*_connection_pool` rows.
fn pool_table(pool: &[sluice_core::admin::PoolRow]) -> AdminRows {
    rows(
        &[
            "hostgroup",
            "srv_host",
            "srv_port",
            "status",
            "ConnUsed",
            "ConnFree",
            "ConnOK",
            "ConnERR",
            "MaxConnUsed",
            "Queries",
            "Queries_GTID_sync",
            "Bytes_data_sent",
            "Bytes_data_recv",
            "Latency_us",
        ],
        pool.iter()
            .map(|p| {
                vec![
                    s(p.hostgroup),
                    s(&p.srv_host),
                    s(p.srv_port),
                    s(&p.status),
                    s(p.conn_used),
                    s(p.conn_free),
                    s(p.connects_ok),
                    s(p.connects_err),
                    s(p.conn_used + p.conn_free),
                    s(p.queries),
                    s(0),
                    s(p.bytes_sent),
                    s(p.bytes_recv),
                    s(p.latency_us),
                ]
            })
            .collect(),
    )
}

/// Refreshes every stats table (cheap: a few hundred rows at most).
pub(crate) async fn refresh(
    store: &Store,
    live: &dyn LiveStats,
    cfg: &Config,
) -> Result<(), AdminError> {
    let mut sql = replace_rows_sql(
        "stats",
        "stats_memory_metrics",
        &globals_table(live.memory_metrics()),
    );
    for (table, r) in mysql_tables(live, cfg)
        .iter()
        .chain(&pgsql_tables(live, cfg))
    {
        sql.extend(replace_rows_sql("stats", table, r));
    }
    for (table, r) in live.mcp_tables() {
        sql.extend(replace_rows_sql("stats", table, &r));
    }
    if let Some(r) = live.workload_classes() {
        sql.extend(replace_rows_sql(
            "stats",
            crate::schema::WORKLOAD_STATS_TABLE.0,
            &r,
        ));
    }
    if let Some(r) = live.workload_guards() {
        sql.extend(replace_rows_sql(
            "stats",
            crate::schema::GUARD_STATS_TABLE.0,
            &r,
        ));
    }
    store.exec_all(&sql).await
}

/// `stats_*_commands_counters`' columns.
const COMMAND_COLUMNS: [&str; 15] = [
    "Command",
    "Total_Time_us",
    "Total_cnt",
    "cnt_100us",
    "cnt_500us",
    "cnt_1ms",
    "cnt_5ms",
    "cnt_10ms",
    "cnt_50ms",
    "cnt_100ms",
    "cnt_500ms",
    "cnt_1s",
    "cnt_5s",
    "cnt_10s",
    "cnt_INFs",
];

/// `stats_*_errors`' columns; `db` and `code` differ per protocol.
fn error_columns(db: &'static str, code: &'static str) -> [&'static str; 11] {
    [
        "hostgroup",
        "hostname",
        "port",
        "username",
        "client_address",
        db,
        code,
        "count_star",
        "first_seen",
        "last_seen",
        "last_error",
    ]
}

/// `stats_*_free_connections`' columns; `db` and `info` differ per protocol.
fn free_columns(db: &'static str, info: &'static str) -> [&'static str; 13] {
    [
        "fd",
        "hostgroup",
        "srv_host",
        "srv_port",
        "user",
        db,
        "init_connect",
        "time_zone",
        "sql_mode",
        "autocommit",
        "idle_ms",
        "statistics",
        info,
    ]
}

/// A `stats_*_global` table from (name, value) pairs.
fn globals_table(pairs: Vec<(String, String)>) -> AdminRows {
    rows(
        &["Variable_Name", "Variable_Value"],
        pairs
            .into_iter()
            .map(|(k, v)| vec![Some(k), Some(v)])
            .collect(),
    )
}

/// `stats_*_client_host_cache`: addresses with failed logins.
fn client_host_table(hosts: Vec<sluice_core::login_throttle::ClientHostRow>) -> AdminRows {
    rows(
        &["client_address", "error_count", "last_updated"],
        hosts
            .into_iter()
            .map(|h| {
                vec![
                    Some(h.client_address),
                    Some(h.error_count.to_string()),
                    Some(h.last_updated.to_string()),
                ]
            })
            .collect(),
    )
}

/// The MySQL side's stats tables.
fn mysql_tables(live: &dyn LiveStats, cfg: &Config) -> Vec<(&'static str, AdminRows)> {
    let pool = pool_table(&live.mysql_connection_pool());
    let procs = live.mysql_processlist();
    let mut globals = live.mysql_global();
    globals.extend(live.query_globals(Protocol::Mysql));
    let users = cfg
        .mysql_users
        .iter()
        .filter(|u| u.frontend.0)
        .map(|u| (u.username.as_str(), u.max_connections.0));
    let errors = rows(&error_columns("schemaname", "errno"), live.mysql_errors());
    vec![
        ("stats_mysql_connection_pool_reset", pool.clone()),
        ("stats_mysql_connection_pool", pool),
        ("stats_mysql_processlist", process_table(&procs)),
        ("stats_mysql_global", globals_table(globals)),
        ("stats_mysql_users", user_table(&procs, users)),
        (
            "stats_mysql_commands_counters",
            rows(&COMMAND_COLUMNS, live.mysql_commands_counters()),
        ),
        ("stats_mysql_errors_reset", errors.clone()),
        ("stats_mysql_errors", errors),
        (
            "stats_mysql_client_host_cache",
            client_host_table(live.client_hosts(Protocol::Mysql)),
        ),
        (
            "stats_mysql_free_connections",
            rows(
                &free_columns("schema", "mysql_info"),
                live.mysql_free_connections(),
            ),
        ),
    ]
}

/// The PostgreSQL side's stats tables.
fn pgsql_tables(live: &dyn LiveStats, cfg: &Config) -> Vec<(&'static str, AdminRows)> {
    let pool = pool_table(&live.pgsql_connection_pool());
    let procs = live.pgsql_processlist();
    let users = cfg
        .pgsql_users
        .iter()
        .filter(|u| u.frontend.0)
        .map(|u| (u.username.as_str(), u.max_connections.0));
    let errors = rows(&error_columns("database", "sqlstate"), live.pgsql_errors());
    vec![
        (
            "stats_pgsql_global",
            globals_table(
                live.pgsql_global()
                    .into_iter()
                    .chain(live.query_globals(Protocol::Pgsql))
                    .collect(),
            ),
        ),
        ("stats_pgsql_connection_pool_reset", pool.clone()),
        ("stats_pgsql_connection_pool", pool),
        ("stats_pgsql_processlist", process_table(&procs)),
        ("stats_pgsql_users", user_table(&procs, users)),
        (
            "stats_pgsql_commands_counters",
            rows(&COMMAND_COLUMNS, live.pgsql_commands_counters()),
        ),
        ("stats_pgsql_errors_reset", errors.clone()),
        ("stats_pgsql_errors", errors),
        (
            "stats_pgsql_client_host_cache",
            client_host_table(live.client_hosts(Protocol::Pgsql)),
        ),
        (
            "stats_pgsql_free_connections",
            rows(
                &free_columns("database", "pgsql_info"),
                live.pgsql_free_connections(),
            ),
        ),
        (
            "stats_pgsql_listen_channels",
            rows(
                &[
                    "database",
                    "channel",
                    "listeners",
                    "received",
                    "delivered",
                    "dropped",
                ],
                live.pgsql_listen_channels(),
            ),
        ),
        (
            "stats_pgsql_listeners",
            rows(
                &[
                    "hostgroup",
                    "srv_host",
                    "srv_port",
                    "database",
                    "backend_pid",
                    "channels",
                    "reconnects",
                    "last_error",
                ],
                live.pgsql_listeners(),
            ),
        ),
    ]
}

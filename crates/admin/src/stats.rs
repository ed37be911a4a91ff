//! Materialising the stats tables from the data path's live state when they are queried.

use crate::layers::replace_rows_sql;
use crate::store::Store;
use sluice_core::Protocol;
use sluice_core::admin::{AdminError, AdminRows};
use sluice_core::config::Config;
use sluice_core::live::LiveStats;
use sluice_core::query::DigestRow;
use std::collections::HashMap;

mod monitor_tables;
mod protocol_tables;
pub(crate) use monitor_tables::refresh_monitor_tables;
use protocol_tables::protocol_tables;

pub(super) fn rows(columns: &[&str], rows: Vec<Vec<Option<String>>>) -> AdminRows {
    AdminRows {
        columns: columns.iter().map(|c| c.to_string()).collect(),
        rows,
    }
}

pub(super) fn s(v: impl ToString) -> Option<String> {
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
pub(super) fn user_table<'a>(
    procs: &[sluice_core::live::ProcessRow],
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
pub(super) fn process_table(procs: &[sluice_core::live::ProcessRow]) -> AdminRows {
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
pub(super) fn pool_table(pool: &[sluice_core::live::PoolRow]) -> AdminRows {
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
    for p in [Protocol::Mysql, Protocol::Pgsql] {
        for (table, r) in protocol_tables(live, p, cfg) {
            sql.extend(replace_rows_sql("stats", &table, &r));
        }
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

/// A `stats_*_global` table from (name, value) pairs.
pub(super) fn globals_table(pairs: Vec<(String, String)>) -> AdminRows {
    rows(
        &["Variable_Name", "Variable_Value"],
        pairs
            .into_iter()
            .map(|(k, v)| vec![Some(k), Some(v)])
            .collect(),
    )
}

/// `stats_*_client_host_cache`: addresses with failed logins.
pub(super) fn client_host_table(
    hosts: Vec<sluice_core::login_throttle::ClientHostRow>,
) -> AdminRows {
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

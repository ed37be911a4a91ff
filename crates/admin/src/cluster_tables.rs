//! `stats_proxysql_servers_status`, `_checksums` and `_metrics`: the cluster board as ProxySQL's
//! tables (same names and columns).

use crate::cluster::ClusterBoard;
use crate::layers::replace_rows_sql;
use sluice_core::admin::AdminRows;

/// The stats tables the board fills: name and columns (ProxySQL's).
pub(crate) const CLUSTER_STATS_TABLES: &[(&str, &str)] = &[
    (
        "stats_proxysql_servers_checksums",
        "hostname VARCHAR NOT NULL, port INT NOT NULL DEFAULT 6032, name VARCHAR NOT NULL, version INT NOT NULL, \
         epoch INT NOT NULL, checksum VARCHAR NOT NULL, changed_at INT NOT NULL, updated_at INT NOT NULL, \
         diff_check INT NOT NULL, PRIMARY KEY (hostname, port, name)",
    ),
    (
        "stats_proxysql_servers_metrics",
        "hostname VARCHAR NOT NULL, port INT NOT NULL DEFAULT 6032, weight INT CHECK (weight >= 0) NOT NULL DEFAULT 0, \
         comment VARCHAR NOT NULL DEFAULT '', response_time_ms INT NOT NULL, Uptime_s INT NOT NULL, last_check_ms INT NOT NULL, \
         Queries INT NOT NULL, Client_Connections_connected INT NOT NULL, Client_Connections_created INT NOT NULL, \
         PRIMARY KEY (hostname, port)",
    ),
    (
        "stats_proxysql_servers_status",
        "hostname VARCHAR NOT NULL, port INT NOT NULL DEFAULT 6032, weight INT CHECK (weight >= 0) NOT NULL DEFAULT 0, \
         master VARCHAR NOT NULL, global_version INT NOT NULL, check_age_us INT NOT NULL, ping_time_us INT NOT NULL, \
         checks_OK INT NOT NULL, checks_ERR INT NOT NULL, PRIMARY KEY (hostname, port)",
    ),
    (
        "stats_config_store",
        "url VARCHAR NOT NULL, state VARCHAR NOT NULL, revision INT NOT NULL, applied_at INT NOT NULL, \
         last_error VARCHAR NOT NULL",
    ),
];

/// Statements that replace `stats_config_store` with this node's store connection (no row
/// without a store).
pub(crate) fn store_sql(status: Option<crate::config_store::StoreStatus>) -> Vec<String> {
    let rows = status
        .into_iter()
        .map(|s| {
            vec![
                n(s.url),
                n(s.state),
                n(s.revision),
                n(s.applied_at),
                n(s.last_error),
            ]
        })
        .collect();
    replace_rows_sql(
        "stats",
        "stats_config_store",
        &AdminRows {
            columns: cols(&["url", "state", "revision", "applied_at", "last_error"]),
            rows,
        },
    )
}

fn cols(names: &[&str]) -> Vec<String> {
    names.iter().map(|s| s.to_string()).collect()
}

fn n(v: impl ToString) -> Option<String> {
    Some(v.to_string())
}

/// Statements that replace the three tables with the board's content.
pub(crate) fn board_sql(board: &ClusterBoard) -> Vec<String> {
    let now_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0);
    let mut checksums = AdminRows {
        columns: cols(&[
            "hostname",
            "port",
            "name",
            "version",
            "epoch",
            "checksum",
            "changed_at",
            "updated_at",
            "diff_check",
        ]),
        rows: Vec::new(),
    };
    let mut metrics = AdminRows {
        columns: cols(&[
            "hostname",
            "port",
            "weight",
            "comment",
            "response_time_ms",
            "Uptime_s",
            "last_check_ms",
            "Queries",
            "Client_Connections_connected",
            "Client_Connections_created",
        ]),
        rows: Vec::new(),
    };
    let mut status = AdminRows {
        columns: cols(&[
            "hostname",
            "port",
            "weight",
            "master",
            "global_version",
            "check_age_us",
            "ping_time_us",
            "checks_OK",
            "checks_ERR",
        ]),
        rows: Vec::new(),
    };
    for ((host, port), p) in board.snapshot() {
        for (name, c) in &p.checksums {
            checksums.rows.push(vec![
                n(&host),
                n(port),
                n(name),
                n(c.version),
                n(c.epoch),
                n(&c.checksum),
                n(c.changed_at),
                n(c.updated_at),
                n(c.diff_check),
            ]);
        }
        let m = &p.metrics;
        metrics.rows.push(vec![
            n(&host),
            n(port),
            n(p.weight),
            n(&p.comment),
            n(m.response_time_ms),
            n(m.uptime_s),
            n(p.last_check_ms),
            n(m.queries),
            n(m.client_connections_connected),
            n(m.client_connections_created),
        ]);
        status.rows.push(vec![
            n(&host),
            n(port),
            n(p.weight),
            n(""),
            n(p.global_version),
            n(now_ms.saturating_sub(p.last_check_ms) * 1000),
            n(p.ping_time_us),
            n(p.checks_ok),
            n(p.checks_err),
        ]);
    }
    let mut sql = replace_rows_sql("stats", "stats_proxysql_servers_checksums", &checksums);
    sql.extend(replace_rows_sql(
        "stats",
        "stats_proxysql_servers_metrics",
        &metrics,
    ));
    sql.extend(replace_rows_sql(
        "stats",
        "stats_proxysql_servers_status",
        &status,
    ));
    sql
}

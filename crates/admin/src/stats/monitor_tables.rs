//! The monitor's log tables (`monitor.*_log`) and the live view of `runtime_*_servers`,
//! materialised when a statement reads them.

use super::{rows, s};
use crate::layers::replace_rows_sql;
use crate::store::Store;
use sluice_core::Protocol;
use sluice_core::admin::{AdminError, AdminRows};
use sluice_core::config::Config;
use sluice_core::live::LiveStats;

/// Refreshes the monitor's log tables and the live view of `runtime_*_servers` when a statement
/// reads them.
pub(crate) async fn refresh_monitor_tables(
    store: &Store,
    live: &dyn LiveStats,
    cfg: &Config,
    sql_lower: &str,
) -> Result<(), AdminError> {
    use sluice_core::topology::CheckKind;
    let mut sql = Vec::new();
    for (p, proto) in [(Protocol::Mysql, "mysql"), (Protocol::Pgsql, "pgsql")] {
        for kind in CheckKind::ALL {
            let table = format!("{proto}_server_{}_log", kind.name());
            if !sql_lower.contains(&table) {
                continue;
            }
            let r = match kind {
                CheckKind::Galera => galera_log_rows(live, p),
                CheckKind::GroupReplication => group_replication_log_rows(live, p),
                _ => check_log_rows(live, p, kind),
            };
            sql.extend(replace_rows_sql("monitor", &table, &r));
        }
        let runtime = format!("runtime_{proto}_servers");
        if sql_lower.contains(&runtime)
            && let Some(hostgroups) = live.live_hostgroups(p)
        {
            let r = crate::layers::live_server_rows(cfg, p, &hostgroups);
            sql.extend(replace_rows_sql("main", &runtime, &r));
        }
    }
    if sql.is_empty() {
        return Ok(());
    }
    store.exec_all(&sql).await
}

/// `YES` / `NO`, as ProxySQL's monitor tables spell booleans.
fn yes_no(b: bool) -> Option<String> {
    s(if b { "YES" } else { "NO" })
}

/// `mysql_server_galera_log`.
fn galera_log_rows(live: &dyn LiveStats, p: Protocol) -> AdminRows {
    use sluice_core::topology::CheckKind;
    rows(
        &[
            "hostname",
            "port",
            "time_start_us",
            "success_time_us",
            "primary_partition",
            "read_only",
            "wsrep_local_recv_queue",
            "wsrep_local_state",
            "wsrep_desync",
            "wsrep_reject_queries",
            "wsrep_sst_donor_rejects_queries",
            "pxc_maint_mode",
            "error",
        ],
        live.monitor_log(p, CheckKind::Galera)
            .into_iter()
            .map(|c| match &c.galera {
                Some(g) => vec![
                    Some(c.server.hostname.clone()),
                    s(c.server.port),
                    s(c.time_start_us),
                    s(c.success_time_us),
                    yes_no(g.primary_partition),
                    yes_no(g.read_only),
                    s(g.recv_queue),
                    s(g.local_state),
                    yes_no(g.desync),
                    yes_no(g.reject_queries),
                    yes_no(g.donor_rejects_queries),
                    s("NO"),
                    None,
                ],
                None => vec![
                    Some(c.server.hostname.clone()),
                    s(c.server.port),
                    s(c.time_start_us),
                    s(0),
                    s("NO"),
                    s("YES"),
                    s(0),
                    s(0),
                    s("NO"),
                    s("NO"),
                    s("NO"),
                    s("NO"),
                    c.error,
                ],
            })
            .collect(),
    )
}

/// `mysql_server_group_replication_log`.
fn group_replication_log_rows(live: &dyn LiveStats, p: Protocol) -> AdminRows {
    use sluice_core::topology::CheckKind;
    rows(
        &[
            "hostname",
            "port",
            "time_start_us",
            "success_time_us",
            "viable_candidate",
            "read_only",
            "transactions_behind",
            "error",
        ],
        live.monitor_log(p, CheckKind::GroupReplication)
            .into_iter()
            .map(|c| {
                let (state, role) = c.member.clone().unwrap_or_default();
                vec![
                    Some(c.server.hostname.clone()),
                    s(c.server.port),
                    s(c.time_start_us),
                    s(c.success_time_us),
                    yes_no(state.eq_ignore_ascii_case("ONLINE")),
                    yes_no(!role.eq_ignore_ascii_case("PRIMARY")),
                    c.value.map(|v| v.to_string()),
                    c.error,
                ]
            })
            .collect(),
    )
}

/// The connect, ping, read_only and replication-lag log tables.
fn check_log_rows(
    live: &dyn LiveStats,
    p: Protocol,
    kind: sluice_core::topology::CheckKind,
) -> AdminRows {
    use sluice_core::topology::CheckKind;
    let (ok_col, err_col) = match kind {
        CheckKind::Connect => ("connect_success_time_us", "connect_error"),
        CheckKind::Ping => ("ping_success_time_us", "ping_error"),
        CheckKind::ReadOnly
        | CheckKind::ReplicationLag
        | CheckKind::GroupReplication
        | CheckKind::Galera => ("success_time_us", "error"),
    };
    let with_value = matches!(kind, CheckKind::ReadOnly | CheckKind::ReplicationLag);
    let mut cols = vec!["hostname", "port", "time_start_us", ok_col];
    match kind {
        CheckKind::ReadOnly => cols.push("read_only"),
        CheckKind::ReplicationLag => cols.push("repl_lag"),
        _ => {}
    }
    cols.push(err_col);
    rows(
        &cols,
        live.monitor_log(p, kind)
            .into_iter()
            .map(|c| {
                let mut v = vec![
                    Some(c.server.hostname.clone()),
                    s(c.server.port),
                    s(c.time_start_us),
                    s(c.success_time_us),
                ];
                if with_value {
                    v.push(c.value.map(|x| x.to_string()));
                }
                v.push(c.error);
                v
            })
            .collect(),
    )
}

//! What the status page shows, read through the admin's own tables (the same rows an operator
//! sees with SQL), each a fixed SELECT of Sluice's.

use sluice_admin::Admin;
use sluice_core::PerProtocol;
use sluice_core::admin::{AdminExecutor, AdminReply, AdminRole, AdminRows};

/// One titled table of the page.
pub(crate) struct Section {
    pub(crate) title: String,
    pub(crate) rows: AdminRows,
}

/// Everything the page renders.
pub(crate) struct Tables {
    pub(crate) uptime_s: u64,
    /// Questions so far.
    pub(crate) questions: PerProtocol<u64>,
    /// Clients connected now.
    pub(crate) clients: PerProtocol<u64>,
    pub(crate) sections: Vec<Section>,
}

/// The page's tables, `{p}` standing for `mysql` or `pgsql`; one that is empty (no classes,
/// no guards) is left out.
const TWINS: &[(&str, &str)] = &[
    (
        "servers",
        "SELECT s.hostgroup_id, s.hostname, s.port, s.status, s.weight, s.max_connections, \
         p.Latency_us AS latency_us, \
         (SELECT l.repl_lag FROM monitor.{p}_server_replication_lag_log l WHERE l.hostname = s.hostname AND l.port = s.port ORDER BY l.time_start_us DESC LIMIT 1) AS lag_s, \
         s.comment FROM runtime_{p}_servers s LEFT JOIN stats_{p}_connection_pool p \
         ON p.hostgroup = s.hostgroup_id AND p.srv_host = s.hostname AND p.srv_port = s.port \
         ORDER BY s.hostgroup_id, s.hostname, s.port",
    ),
    (
        "pools",
        "SELECT hostgroup, srv_host, srv_port, status, ConnUsed, ConnFree, ConnOK, ConnERR, Queries FROM stats_{p}_connection_pool ORDER BY hostgroup, srv_host, srv_port",
    ),
    (
        "clients",
        "SELECT user, db, hostgroup, command, COUNT(*) AS sessions FROM stats_{p}_processlist GROUP BY user, db, hostgroup, command ORDER BY sessions DESC",
    ),
    (
        "top digests",
        "SELECT hostgroup, username, digest_text, count_star, sum_time, max_time FROM stats_{p}_query_digest ORDER BY sum_time DESC LIMIT 10",
    ),
];

/// Tables shown only when they have rows.
const OPTIONAL: &[(&str, &str)] = &[
    ("Workload classes", "SELECT * FROM stats_workload_classes"),
    ("Workload guards", "SELECT * FROM stats_workload_guards"),
];

async fn rows(admin: &Admin, sql: &str) -> AdminRows {
    match admin.execute(AdminRole::Admin, sql).await {
        Ok(AdminReply::Rows(r)) => r,
        Ok(AdminReply::Done { .. }) => AdminRows::default(),
        Err(e) => AdminRows {
            columns: vec!["error".into()],
            rows: vec![vec![Some(e.message)]],
        },
    }
}

async fn number(admin: &Admin, sql: &str) -> u64 {
    rows(admin, sql)
        .await
        .rows
        .first()
        .and_then(|r| r.first().cloned().flatten())
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

/// Reads the page's tables now.
pub(crate) async fn gather(admin: &Admin) -> Tables {
    let mut sections = Vec::new();
    for (what, sql) in TWINS {
        for (p, name) in [("mysql", "MySQL"), ("pgsql", "PostgreSQL")] {
            sections.push(Section {
                title: format!("{name} {what}"),
                rows: rows(admin, &sql.replace("{p}", p)).await,
            });
        }
    }
    for (title, sql) in OPTIONAL {
        let r = rows(admin, sql).await;
        if !r.rows.is_empty() {
            sections.push(Section {
                title: title.to_string(),
                rows: r,
            });
        }
    }
    let (uptime_s, questions) = counters(admin).await;
    Tables {
        uptime_s,
        questions,
        clients: PerProtocol::new(
            number(admin, &global("mysql", "Client_Connections_connected")).await,
            number(admin, &global("pgsql", "Client_Connections_connected")).await,
        ),
        sections,
    }
}

fn global(p: &str, v: &str) -> String {
    format!("SELECT Variable_Value FROM stats_{p}_global WHERE Variable_Name = '{v}'")
}

/// What the charts poll: the uptime and the questions of MySQL and PostgreSQL so far.
pub(crate) async fn counters(admin: &Admin) -> (u64, PerProtocol<u64>) {
    (
        number(admin, &global("mysql", "ProxySQL_Uptime")).await,
        PerProtocol::new(
            number(admin, &global("mysql", "Questions")).await,
            number(admin, &global("pgsql", "Questions")).await,
        ),
    )
}

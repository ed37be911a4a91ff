//! Creating the admin tables: each configuration table in `main` and `disk`, its `runtime_`
//! twin in `main`, and the stats tables.

use crate::schema_defs::CONFIG_TABLES;

/// Stats tables (schema `stats`): name and columns.
pub(crate) const STATS_TABLES: &[(&str, &str)] = &[
    (
        "stats_mysql_connection_pool",
        "hostgroup INT, srv_host VARCHAR, srv_port INT, status VARCHAR, ConnUsed INT, ConnFree INT, ConnOK INT, \
         ConnERR INT, MaxConnUsed INT, Queries INT, Queries_GTID_sync INT, Bytes_data_sent INT, Bytes_data_recv INT, Latency_us INT",
    ),
    (
        "stats_mysql_processlist",
        "ThreadID INT, SessionID INTEGER PRIMARY KEY, user VARCHAR, db VARCHAR, cli_host VARCHAR, cli_port INT, hostgroup INT, \
         l_srv_host VARCHAR, l_srv_port INT, srv_host VARCHAR, srv_port INT, command VARCHAR, time_ms INT, info VARCHAR, \
         status_flags INT, extended_info VARCHAR, multiplexed INT, pin_reason VARCHAR, pinned_seconds INT",
    ),
    (
        "stats_mysql_global",
        "Variable_Name VARCHAR NOT NULL PRIMARY KEY, Variable_Value VARCHAR NOT NULL",
    ),
    (
        "stats_memory_metrics",
        "Variable_Name VARCHAR NOT NULL PRIMARY KEY, Variable_Value VARCHAR NOT NULL",
    ),
    (
        "stats_mysql_users",
        "username VARCHAR PRIMARY KEY, frontend_connections INT NOT NULL, frontend_max_connections INT NOT NULL",
    ),
    (
        "stats_mysql_errors",
        "hostgroup INT NOT NULL, hostname VARCHAR NOT NULL, port INT NOT NULL, username VARCHAR NOT NULL, client_address VARCHAR NOT NULL, \
         schemaname VARCHAR NOT NULL, errno INT NOT NULL, count_star INTEGER NOT NULL, first_seen INTEGER NOT NULL, last_seen INTEGER NOT NULL, \
         last_error VARCHAR NOT NULL DEFAULT '', PRIMARY KEY (hostgroup, hostname, port, username, schemaname, errno)",
    ),
    (
        "stats_mysql_commands_counters",
        "Command VARCHAR NOT NULL PRIMARY KEY, Total_Time_us INTEGER NOT NULL, Total_cnt INTEGER NOT NULL, cnt_100us INTEGER NOT NULL, \
         cnt_500us INTEGER NOT NULL, cnt_1ms INTEGER NOT NULL, cnt_5ms INTEGER NOT NULL, cnt_10ms INTEGER NOT NULL, cnt_50ms INTEGER NOT NULL, \
         cnt_100ms INTEGER NOT NULL, cnt_500ms INTEGER NOT NULL, cnt_1s INTEGER NOT NULL, cnt_5s INTEGER NOT NULL, cnt_10s INTEGER NOT NULL, cnt_INFs INTEGER NOT NULL",
    ),
    (
        "stats_mysql_free_connections",
        "fd INT NOT NULL, hostgroup INT NOT NULL, srv_host VARCHAR NOT NULL, srv_port INT NOT NULL, user VARCHAR NOT NULL, schema VARCHAR, \
         init_connect VARCHAR, time_zone VARCHAR, sql_mode VARCHAR, autocommit VARCHAR, idle_ms INT, statistics VARCHAR, mysql_info VARCHAR",
    ),
    (
        "stats_mysql_query_digest",
        "hostgroup INT, schemaname VARCHAR NOT NULL, username VARCHAR NOT NULL, client_address VARCHAR NOT NULL, digest VARCHAR NOT NULL, \
         digest_text VARCHAR NOT NULL, count_star INTEGER NOT NULL, first_seen INTEGER NOT NULL, last_seen INTEGER NOT NULL, sum_time INTEGER NOT NULL, \
         min_time INTEGER NOT NULL, max_time INTEGER NOT NULL, sum_rows_affected INTEGER NOT NULL, sum_rows_sent INTEGER NOT NULL, \
         PRIMARY KEY(hostgroup, schemaname, username, client_address, digest)",
    ),
    (
        "stats_mysql_client_host_cache",
        "client_address VARCHAR NOT NULL, error_count INT NOT NULL, last_updated BIGINT NOT NULL",
    ),
    (
        "stats_mysql_query_rules",
        "rule_id INTEGER PRIMARY KEY, hits INT NOT NULL",
    ),
    (
        "stats_mysql_prepared_statements_info",
        "global_stmt_id INT NOT NULL, schemaname VARCHAR NOT NULL, username VARCHAR NOT NULL, digest VARCHAR NOT NULL, \
         ref_count_client INT NOT NULL, ref_count_server INT NOT NULL, num_columns INT NOT NULL, num_params INT NOT NULL, query VARCHAR NOT NULL",
    ),
];

/// The MCP endpoint's stats tables (ProxySQL 4.0's names; the digest is keyed by tool, MCP
/// user, target and the digest of the SQL).
pub(crate) const MCP_STATS_TABLES: &[(&str, &str)] = &[
    (
        "stats_mcp_query_tools_counters",
        "endpoint VARCHAR NOT NULL, tool VARCHAR NOT NULL, schema VARCHAR NOT NULL, count INTEGER NOT NULL, \
         first_seen INTEGER NOT NULL, last_seen INTEGER NOT NULL, sum_time INTEGER NOT NULL, min_time INTEGER NOT NULL, \
         max_time INTEGER NOT NULL, PRIMARY KEY (endpoint, tool, schema)",
    ),
    (
        "stats_mcp_query_digest",
        "tool_name VARCHAR NOT NULL, username VARCHAR NOT NULL, target_id VARCHAR NOT NULL, digest VARCHAR NOT NULL, \
         digest_text VARCHAR NOT NULL, count_star INTEGER NOT NULL, first_seen INTEGER NOT NULL, last_seen INTEGER NOT NULL, \
         sum_time INTEGER NOT NULL, min_time INTEGER NOT NULL, max_time INTEGER NOT NULL, sum_rows_sent INTEGER NOT NULL, \
         PRIMARY KEY (tool_name, username, target_id, digest)",
    ),
    (
        "stats_mcp_query_rules",
        "rule_id INTEGER PRIMARY KEY, hits INT NOT NULL",
    ),
    (
        "stats_rag_sources",
        "source_id INTEGER PRIMARY KEY, name VARCHAR NOT NULL, state VARCHAR NOT NULL, runs INTEGER NOT NULL, \
         failed_runs INTEGER NOT NULL, documents INTEGER NOT NULL, chunks INTEGER NOT NULL, rows_read INTEGER NOT NULL, \
         docs_changed INTEGER NOT NULL, docs_unchanged INTEGER NOT NULL, chunks_embedded INTEGER NOT NULL, \
         chunks_unchanged INTEGER NOT NULL, docs_deleted INTEGER NOT NULL, last_run_start INTEGER NOT NULL, \
         last_run_ms INTEGER NOT NULL, last_ok INTEGER NOT NULL, lag_seconds INTEGER, last_sweep INTEGER NOT NULL, \
         last_error VARCHAR NOT NULL",
    ),
];

/// The PostgreSQL side's LISTEN/NOTIFY fan-out (no MySQL twin).
pub(crate) const LISTEN_STATS_TABLES: &[(&str, &str)] = &[
    (
        "stats_pgsql_listen_channels",
        "database VARCHAR NOT NULL, channel VARCHAR NOT NULL, listeners INT NOT NULL, received INTEGER NOT NULL, \
         delivered INTEGER NOT NULL, dropped INTEGER NOT NULL, PRIMARY KEY (database, channel)",
    ),
    (
        "stats_pgsql_listeners",
        "hostgroup INT NOT NULL, srv_host VARCHAR, srv_port INT, database VARCHAR NOT NULL, backend_pid INT, \
         channels INT NOT NULL, reconnects INTEGER NOT NULL, last_error VARCHAR, PRIMARY KEY (hostgroup, database)",
    ),
];

/// Monitor log tables of both protocols (filled by the monitor).
const MONITOR_LOGS: &[(&str, &str)] = &[
    (
        "connect",
        "hostname VARCHAR NOT NULL, port INT NOT NULL DEFAULT 3306, time_start_us INT NOT NULL DEFAULT 0, connect_success_time_us INT DEFAULT 0, connect_error VARCHAR, PRIMARY KEY (hostname, port, time_start_us)",
    ),
    (
        "ping",
        "hostname VARCHAR NOT NULL, port INT NOT NULL DEFAULT 3306, time_start_us INT NOT NULL DEFAULT 0, ping_success_time_us INT DEFAULT 0, ping_error VARCHAR, PRIMARY KEY (hostname, port, time_start_us)",
    ),
    (
        "read_only",
        "hostname VARCHAR NOT NULL, port INT NOT NULL DEFAULT 3306, time_start_us INT NOT NULL DEFAULT 0, success_time_us INT DEFAULT 0, read_only INT DEFAULT 1, error VARCHAR, PRIMARY KEY (hostname, port, time_start_us)",
    ),
    (
        "replication_lag",
        "hostname VARCHAR NOT NULL, port INT NOT NULL DEFAULT 3306, time_start_us INT NOT NULL DEFAULT 0, success_time_us INT DEFAULT 0, repl_lag INT DEFAULT 0, error VARCHAR, PRIMARY KEY (hostname, port, time_start_us)",
    ),
];

/// MySQL-only monitor logs.
const MYSQL_ONLY_MONITOR_LOGS: &[(&str, &str)] = &[
    (
        "group_replication",
        "hostname VARCHAR NOT NULL, port INT NOT NULL DEFAULT 3306, time_start_us INT NOT NULL DEFAULT 0, success_time_us INT DEFAULT 0, viable_candidate VARCHAR NOT NULL DEFAULT 'NO', read_only VARCHAR NOT NULL DEFAULT 'YES', transactions_behind INT DEFAULT 0, error VARCHAR, PRIMARY KEY (hostname, port, time_start_us)",
    ),
    (
        "galera",
        "hostname VARCHAR NOT NULL, port INT NOT NULL DEFAULT 3306, time_start_us INT NOT NULL DEFAULT 0, success_time_us INT DEFAULT 0, primary_partition VARCHAR NOT NULL DEFAULT 'NO', read_only VARCHAR NOT NULL DEFAULT 'YES', wsrep_local_recv_queue INT DEFAULT 0, wsrep_local_state INT DEFAULT 0, wsrep_desync VARCHAR NOT NULL DEFAULT 'NO', wsrep_reject_queries VARCHAR NOT NULL DEFAULT 'NO', wsrep_sst_donor_rejects_queries VARCHAR NOT NULL DEFAULT 'NO', pxc_maint_mode VARCHAR NOT NULL DEFAULT 'NO', error VARCHAR, PRIMARY KEY (hostname, port, time_start_us)",
    ),
];

/// `stats_workload_classes` (admission control, both protocols).
pub(crate) const WORKLOAD_STATS_TABLE: (&str, &str) = (
    "stats_workload_classes",
    "class VARCHAR NOT NULL PRIMARY KEY, priority VARCHAR NOT NULL, active INT NOT NULL, max_concurrency INT NOT NULL, \
     max_queue INT NOT NULL, in_flight INT NOT NULL, queued INT NOT NULL, admitted INTEGER NOT NULL, waited INTEGER NOT NULL, \
     shed_queue_full INTEGER NOT NULL, shed_queue_timeout INTEGER NOT NULL, shed_rate INTEGER NOT NULL, \
     shed_guard INTEGER NOT NULL, guard_delayed INTEGER NOT NULL, guard_level REAL NOT NULL, cap INT NOT NULL, \
     queue_wait_p99_ms REAL, p50_ms REAL, p99_ms REAL, statements INTEGER NOT NULL",
);

/// `stats_workload_guards`.
pub(crate) const GUARD_STATS_TABLE: (&str, &str) = (
    "stats_workload_guards",
    "guard_id INTEGER NOT NULL PRIMARY KEY, signal VARCHAR NOT NULL, classes VARCHAR NOT NULL, value REAL, \
     level REAL NOT NULL, state VARCHAR NOT NULL, since INTEGER, changes INTEGER NOT NULL, last_cause VARCHAR NOT NULL, \
     apps VARCHAR NOT NULL",
);

/// The columns a configuration table's definition has that the `disk` copy made by an older
/// Sluice lacks, as `ALTER TABLE disk.… ADD COLUMN …` statements (the store's one migration:
/// new columns are nullable or have a default).
pub(crate) fn disk_migrations(table: &str, cols: &str, on_disk: &[String]) -> Vec<String> {
    if on_disk.is_empty() {
        return Vec::new();
    }
    cols.split(",\n")
        .map(str::trim)
        .filter(|def| {
            let name = def.split_whitespace().next().unwrap_or("");
            name != "PRIMARY"
                && name != "UNIQUE"
                && !on_disk.iter().any(|c| c.eq_ignore_ascii_case(name))
        })
        .map(|def| format!("ALTER TABLE disk.{table} ADD COLUMN {def}"))
        .collect()
}

/// Tables that `_reset` variants exist for.
pub(crate) const RESET_TABLES: &[&str] = &[
    "stats_mysql_connection_pool",
    "stats_mysql_errors",
    "stats_mysql_query_digest",
];

/// ProxySQL's pgsql stats tables say `database` where the MySQL ones say `schemaname`.
fn pg_columns(cols: &str) -> String {
    cols.replace("schemaname", "database")
        .replace("errno INT", "sqlstate VARCHAR")
        .replace(", errno)", ", sqlstate)")
        .replace(
            "user VARCHAR NOT NULL, schema VARCHAR",
            "user VARCHAR NOT NULL, database VARCHAR",
        )
        .replace("mysql_info", "pgsql_info")
}

/// The DDL of every admin table.
pub(crate) fn ddl() -> Vec<String> {
    let mut out = Vec::new();
    for (name, cols) in CONFIG_TABLES {
        out.push(format!("CREATE TABLE IF NOT EXISTS main.{name} ({cols})"));
        out.push(format!(
            "CREATE TABLE IF NOT EXISTS main.runtime_{name} ({cols})"
        ));
        out.push(format!("CREATE TABLE IF NOT EXISTS disk.{name} ({cols})"));
    }
    for (name, cols) in STATS_TABLES {
        out.push(format!("CREATE TABLE IF NOT EXISTS stats.{name} ({cols})"));
        // pgsql twins of the protocol-neutral stats tables.
        if let Some(rest) = name.strip_prefix("stats_mysql_") {
            out.push(format!(
                "CREATE TABLE IF NOT EXISTS stats.stats_pgsql_{rest} ({})",
                pg_columns(cols)
            ));
        }
    }
    for (name, cols) in [WORKLOAD_STATS_TABLE, GUARD_STATS_TABLE] {
        out.push(format!("CREATE TABLE IF NOT EXISTS stats.{name} ({cols})"));
    }
    for (name, cols) in MCP_STATS_TABLES.iter().chain(LISTEN_STATS_TABLES) {
        out.push(format!("CREATE TABLE IF NOT EXISTS stats.{name} ({cols})"));
    }
    for (name, cols) in crate::cluster_tables::CLUSTER_STATS_TABLES {
        out.push(format!("CREATE TABLE IF NOT EXISTS stats.{name} ({cols})"));
    }
    out.push(
        "CREATE TABLE IF NOT EXISTS main.runtime_checksums_values (name VARCHAR NOT NULL, version INT NOT NULL, \
         epoch INT NOT NULL, checksum VARCHAR NOT NULL, PRIMARY KEY (name))"
            .to_string(),
    );
    for name in RESET_TABLES {
        let cols = STATS_TABLES
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, c)| *c)
            .unwrap_or("x INT");
        out.push(format!(
            "CREATE TABLE IF NOT EXISTS stats.{name}_reset ({cols})"
        ));
        if let Some(rest) = name.strip_prefix("stats_mysql_") {
            out.push(format!(
                "CREATE TABLE IF NOT EXISTS stats.stats_pgsql_{rest}_reset ({})",
                pg_columns(cols)
            ));
        }
    }
    for proto in ["mysql", "pgsql"] {
        for (log, cols) in MONITOR_LOGS {
            out.push(format!(
                "CREATE TABLE IF NOT EXISTS monitor.{proto}_server_{log}_log ({cols})"
            ));
        }
    }
    for (log, cols) in MYSQL_ONLY_MONITOR_LOGS {
        out.push(format!(
            "CREATE TABLE IF NOT EXISTS monitor.mysql_server_{log}_log ({cols})"
        ));
    }
    out
}

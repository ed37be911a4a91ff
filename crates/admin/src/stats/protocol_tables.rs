//! One protocol side's stats tables (`stats_mysql_*`, `stats_pgsql_*`) from the live state's
//! typed rows. The two sides share the tables' shapes; a few columns carry each side's own name
//! (`schemaname`/`database`, `errno`/`sqlstate`, `mysql_info`/`pgsql_info`).

use super::{client_host_table, globals_table, pool_table, process_table, rows, s, user_table};
use sluice_core::Protocol;
use sluice_core::admin::AdminRows;
use sluice_core::config::Config;
use sluice_core::live::{FreeConnection, ListenChannelRow, ListenerRow, LiveStats};
use sluice_core::query::commands::{CommandCount, ErrorCount};

/// The columns that differ between the sides.
struct SideColumns {
    /// The schema / database column of `stats_*_errors`.
    errors_db: &'static str,
    /// The error code column of `stats_*_errors`.
    errors_code: &'static str,
    /// The schema / database column of `stats_*_free_connections`.
    free_db: &'static str,
    /// The last column of `stats_*_free_connections`.
    free_info: &'static str,
}

impl SideColumns {
    fn of(p: Protocol) -> SideColumns {
        match p {
            Protocol::Mysql => SideColumns {
                errors_db: "schemaname",
                errors_code: "errno",
                free_db: "schema",
                free_info: "mysql_info",
            },
            Protocol::Pgsql => SideColumns {
                errors_db: "database",
                errors_code: "sqlstate",
                free_db: "database",
                free_info: "pgsql_info",
            },
        }
    }
}

/// Every `stats_<side>_*` table the live state fills, by name.
pub(super) fn protocol_tables(
    live: &dyn LiveStats,
    p: Protocol,
    cfg: &Config,
) -> Vec<(String, AdminRows)> {
    let side = p.prefix();
    let columns = SideColumns::of(p);
    let pool = pool_table(&live.connection_pool(p));
    let procs = live.processlist(p);
    let users: Vec<(&str, u32)> = match p {
        Protocol::Mysql => cfg
            .mysql_users
            .iter()
            .filter(|u| u.frontend.0)
            .map(|u| (u.username.as_str(), u.max_connections.0))
            .collect(),
        Protocol::Pgsql => cfg
            .pgsql_users
            .iter()
            .filter(|u| u.frontend.0)
            .map(|u| (u.username.as_str(), u.max_connections.0))
            .collect(),
    };
    let errors = error_table(&columns, live.errors(p));
    let mut tables = vec![
        ("global", globals_table(live.globals(p))),
        ("connection_pool_reset", pool.clone()),
        ("connection_pool", pool),
        ("processlist", process_table(&procs)),
        ("users", user_table(&procs, users.into_iter())),
        (
            "commands_counters",
            command_table(live.commands_counters(p)),
        ),
        ("errors_reset", errors.clone()),
        ("errors", errors),
        ("client_host_cache", client_host_table(live.client_hosts(p))),
        (
            "free_connections",
            free_table(&columns, live.free_connections(p)),
        ),
    ];
    if p == Protocol::Pgsql {
        tables.push((
            "listen_channels",
            listen_channel_table(live.listen_channels()),
        ));
        tables.push(("listeners", listener_table(live.listeners())));
    }
    tables
        .into_iter()
        .map(|(name, r)| (format!("stats_{side}_{name}"), r))
        .collect()
}

/// `stats_*_commands_counters`: per command, total time, count and the latency buckets.
fn command_table(commands: Vec<CommandCount>) -> AdminRows {
    const COLUMNS: [&str; 15] = [
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
    let table = commands
        .into_iter()
        .map(|c| {
            let mut row = vec![s(c.command), s(c.total_time_us), s(c.total_cnt)];
            row.extend(c.buckets.iter().map(s));
            row
        })
        .collect();
    rows(&COLUMNS, table)
}

/// `stats_*_errors`: per (hostgroup, server, user, client, schema, code), counts and times.
fn error_table(columns: &SideColumns, errors: Vec<ErrorCount>) -> AdminRows {
    let names = [
        "hostgroup",
        "hostname",
        "port",
        "username",
        "client_address",
        columns.errors_db,
        columns.errors_code,
        "count_star",
        "first_seen",
        "last_seen",
        "last_error",
    ];
    let table = errors
        .into_iter()
        .map(|e| {
            vec![
                s(e.hostgroup),
                Some(e.hostname),
                s(e.port),
                Some(e.username),
                Some(e.client_address),
                Some(e.schemaname),
                Some(e.errno),
                s(e.count_star),
                s(e.first_seen),
                s(e.last_seen),
                Some(e.last_error),
            ]
        })
        .collect();
    rows(&names, table)
}

/// `stats_*_free_connections`: the idle server connections (ProxySQL's `fd` column shows the
/// server's id for the connection; `init_connect`, `statistics` and the info column stay NULL).
fn free_table(columns: &SideColumns, free: Vec<FreeConnection>) -> AdminRows {
    let names = [
        "fd",
        "hostgroup",
        "srv_host",
        "srv_port",
        "user",
        columns.free_db,
        "init_connect",
        "time_zone",
        "sql_mode",
        "autocommit",
        "idle_ms",
        "statistics",
        columns.free_info,
    ];
    let table = free
        .into_iter()
        .map(|f| {
            vec![
                s(f.backend_id),
                s(f.hostgroup),
                Some(f.server.hostname),
                s(f.server.port),
                Some(f.user),
                f.database,
                None,
                f.time_zone,
                f.sql_mode,
                f.autocommit,
                s(f.idle_ms),
                None,
                None,
            ]
        })
        .collect();
    rows(&names, table)
}

/// `stats_pgsql_listen_channels`.
fn listen_channel_table(channels: Vec<ListenChannelRow>) -> AdminRows {
    let names = [
        "database",
        "channel",
        "listeners",
        "received",
        "delivered",
        "dropped",
    ];
    let table = channels
        .into_iter()
        .map(|c| {
            vec![
                Some(c.database),
                Some(c.channel),
                s(c.listeners),
                s(c.received),
                s(c.delivered),
                s(c.dropped),
            ]
        })
        .collect();
    rows(&names, table)
}

/// `stats_pgsql_listeners`: the listener connection's server split into host and port.
fn listener_table(listeners: Vec<ListenerRow>) -> AdminRows {
    let names = [
        "hostgroup",
        "srv_host",
        "srv_port",
        "database",
        "backend_pid",
        "channels",
        "reconnects",
        "last_error",
    ];
    let table = listeners
        .into_iter()
        .map(|l| {
            let (host, port) = match &l.server {
                Some(server) => match server.rsplit_once(':') {
                    Some((h, p)) => (Some(h.to_string()), Some(p.to_string())),
                    None => (Some(server.clone()), None),
                },
                None => (None, None),
            };
            vec![
                s(l.hostgroup),
                host,
                port,
                Some(l.database),
                l.backend_pid.map(|p| p.to_string()),
                s(l.channels),
                s(l.reconnects),
                l.last_error,
            ]
        })
        .collect();
    rows(&names, table)
}

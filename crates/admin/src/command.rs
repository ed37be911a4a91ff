//! The admin statement grammar Sluice handles itself (everything else is SQL for SQLite):
//! `LOAD`/`SAVE` with all of ProxySQL's aliases, `SET <prefix>-<var> = <value>`, `SHOW ...`,
//! `PROXYSQL ...`, `KILL CONNECTION n`, `SAVE CONFIG TO FILE`.

use sluice_core::query::lexer::{self, Syntax};

/// A configuration module moved by LOAD/SAVE.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Module {
    /// `MYSQL USERS`.
    MysqlUsers,
    /// `MYSQL SERVERS` (all MySQL topology tables).
    MysqlServers,
    /// `MYSQL QUERY RULES`.
    MysqlQueryRules,
    /// `MYSQL VARIABLES`.
    MysqlVariables,
    /// `PGSQL USERS`.
    PgsqlUsers,
    /// `PGSQL SERVERS` (all PostgreSQL topology tables).
    PgsqlServers,
    /// `PGSQL QUERY RULES`.
    PgsqlQueryRules,
    /// `PGSQL VARIABLES`.
    PgsqlVariables,
    /// `ADMIN VARIABLES`.
    AdminVariables,
    /// `SCHEDULER`.
    Scheduler,
    /// `PROXYSQL SERVERS`.
    ProxysqlServers,
    /// `MCP VARIABLES`.
    McpVariables,
    /// `MCP PROFILES` (ProxySQL 4.0's name; `MCP USERS` and `MCP TARGETS` move the same two
    /// tables): `mcp_users` and `mcp_targets`.
    McpProfiles,
    /// `MCP QUERY RULES`.
    McpQueryRules,
    /// `RAG SOURCES`: `rag_sources`.
    RagSources,
    /// `WORKLOAD CLASSES`: `workload_classes` and `workload_guards` (admission control, both
    /// protocols).
    WorkloadClasses,
}

impl Module {
    /// The tables the module moves.
    pub fn tables(self) -> &'static [&'static str] {
        match self {
            Module::MysqlUsers => &["mysql_users"],
            Module::MysqlServers => &[
                "mysql_servers",
                "mysql_replication_hostgroups",
                "mysql_galera_hostgroups",
                "mysql_group_replication_hostgroups",
                "mysql_hostgroup_attributes",
                "mysql_servers_ssl_params",
            ],
            Module::MysqlQueryRules => &["mysql_query_rules", "mysql_query_rules_fast_routing"],
            Module::PgsqlUsers => &["pgsql_users"],
            Module::PgsqlServers => &[
                "pgsql_servers",
                "pgsql_replication_hostgroups",
                "pgsql_hostgroup_attributes",
                "pgsql_servers_ssl_params",
            ],
            Module::PgsqlQueryRules => &["pgsql_query_rules", "pgsql_query_rules_fast_routing"],
            Module::Scheduler => &["scheduler"],
            Module::ProxysqlServers => &["proxysql_servers"],
            Module::McpProfiles => &["mcp_users", "mcp_targets"],
            Module::McpQueryRules => &["mcp_query_rules"],
            Module::RagSources => &["rag_sources"],
            Module::WorkloadClasses => &["workload_classes", "workload_guards"],
            Module::MysqlVariables
            | Module::PgsqlVariables
            | Module::AdminVariables
            | Module::McpVariables => &["global_variables"],
        }
    }

    /// For variable modules: the `global_variables` name prefix.
    pub fn variable_prefix(self) -> Option<&'static str> {
        match self {
            Module::MysqlVariables => Some("mysql-"),
            Module::PgsqlVariables => Some("pgsql-"),
            Module::AdminVariables => Some("admin-"),
            Module::McpVariables => Some("mcp-"),
            _ => None,
        }
    }
}

/// Where LOAD/SAVE moves a module.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Direction {
    /// memory → runtime.
    MemoryToRuntime,
    /// runtime → memory.
    RuntimeToMemory,
    /// disk → memory.
    DiskToMemory,
    /// memory → disk.
    MemoryToDisk,
    /// config file → memory.
    ConfigToMemory,
    /// `SAVE … TO CLUSTER`: the module's runtime → the shared configuration store (etcd).
    RuntimeToCluster,
    /// `LOAD … FROM CLUSTER`: the store's copy → memory → runtime (and disk, as a sync does).
    ClusterToRuntime,
}

/// A statement the admin handles itself.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Command {
    /// LOAD/SAVE.
    Move(Module, Direction),
    /// `SET <prefix>-<name> = <value>` (name with its prefix).
    SetVariable(String, String),
    /// `SHOW MYSQL|PGSQL|ADMIN VARIABLES`.
    ShowVariables(&'static str),
    /// `SHOW [GLOBAL|SESSION] VARIABLES [LIKE 'pattern']`: every `admin-`, `mysql-` and
    /// `pgsql-` variable (ProxySQL's answer; tools such as PMM and dolphie read it).
    ShowAllVariables(Option<String>),
    /// `SHOW TABLES [FROM db]`.
    ShowTables(Option<String>),
    /// `SHOW DATABASES` / `SHOW SCHEMAS`.
    ShowDatabases,
    /// `SHOW CREATE TABLE t`.
    ShowCreateTable(String),
    /// `SHOW [FULL] PROCESSLIST`.
    ShowProcesslist,
    /// `SHOW PROMETHEUS METRICS`: what `/metrics` serves, as one row.
    ShowPrometheusMetrics,
    /// `SHOW MYSQL STATUS` / `SHOW PGSQL STATUS`: `stats_*_global` as (Variable_name, Value).
    ShowStatus(&'static str),
    /// One of PgBouncer's `SHOW` commands (`SHOW POOLS`, `SHOW STATS`, ...).
    PgBouncer(crate::pgbouncer::PgBouncerCommand),
    /// PgBouncer's `RELOAD`: the PostgreSQL modules' memory configuration goes to runtime.
    PgBouncerReload,
    /// A PgBouncer console command with no Sluice equivalent: refused with this message.
    Unsupported(String),
    /// `PROXYSQL PAUSE|RESUME|SHUTDOWN|FLUSH LOGS|...`.
    Proxysql(String),
    /// `PROXY_SELECT * FROM runtime_<table>`: a cluster peer pulling a module table's runtime
    /// rows as configured (table name lower-cased).
    ProxySelect(String),
    /// `KILL [CONNECTION] n`.
    Kill(u32),
    /// `RAG SYNC SOURCE n`.
    RagSync(u32),
    /// `SAVE CONFIG TO FILE <path>`.
    SaveConfigToFile(String),
    /// `SELECT @@version` and similar connector probes.
    SelectVersion,
    /// `SELECT @@a, @@b, ...` sent by client libraries on connect: canned values.
    SelectSysvars(Vec<String>),
    /// A session `SET` a client library sends on connect (`SET NAMES`, `SET autocommit`, ...):
    /// accepted, no effect on the admin.
    SessionSet,
    /// `SHOW WARNINGS` / `SHOW VARIABLES ...`: an empty answer with the right columns.
    EmptyShow(&'static [&'static str]),
}

impl Command {
    /// True for what the stats user may run: commands that only read.
    pub fn is_read_only(&self) -> bool {
        matches!(
            self,
            Command::ShowVariables(_)
                | Command::ShowAllVariables(_)
                | Command::ShowTables(_)
                | Command::ShowDatabases
                | Command::ShowCreateTable(_)
                | Command::ShowProcesslist
                | Command::ShowPrometheusMetrics
                | Command::ShowStatus(_)
                | Command::PgBouncer(_)
                | Command::SelectVersion
                | Command::SelectSysvars(_)
                | Command::SessionSet
                | Command::EmptyShow(_)
        )
    }
}

/// The pattern of a trailing `LIKE 'pattern'` (quotes removed, case kept).
fn like_pattern(sql: &str) -> Option<String> {
    let body = sql.trim().trim_end_matches(';').trim_end();
    let upper = body.to_ascii_uppercase();
    let at = upper.rfind(" LIKE ")?;
    let p = body.get(at + 6..)?.trim();
    Some(unquote(p))
}

/// The command's words, upper-cased: what is written together, comments skipped
/// (`sluice-query`'s lexer in SQLite's syntax, the admin's language), trailing `;` dropped.
fn words(sql: &str) -> Vec<String> {
    lexer::words(sql.trim().trim_end_matches(';'), Syntax::Sqlite, &[])
        .into_iter()
        .map(|w| w.to_ascii_uppercase())
        .collect()
}

fn module(w: &[String]) -> Option<(Module, usize)> {
    let s = |i: usize| w.get(i).map(String::as_str).unwrap_or("");
    let m = match (s(0), s(1), s(2)) {
        ("MYSQL", "USERS" | "USER", _) => (Module::MysqlUsers, 2),
        ("MYSQL", "SERVERS", _) => (Module::MysqlServers, 2),
        ("MYSQL", "QUERY", "RULES") => (Module::MysqlQueryRules, 3),
        ("MYSQL", "VARIABLES", _) => (Module::MysqlVariables, 2),
        ("PGSQL", "USERS" | "USER", _) => (Module::PgsqlUsers, 2),
        ("PGSQL", "SERVERS", _) => (Module::PgsqlServers, 2),
        ("PGSQL", "QUERY", "RULES") => (Module::PgsqlQueryRules, 3),
        ("PGSQL", "VARIABLES", _) => (Module::PgsqlVariables, 2),
        ("ADMIN", "VARIABLES", _) => (Module::AdminVariables, 2),
        ("SCHEDULER", _, _) => (Module::Scheduler, 1),
        ("PROXYSQL", "SERVERS", _) => (Module::ProxysqlServers, 2),
        ("MCP", "VARIABLES", _) => (Module::McpVariables, 2),
        ("MCP", "PROFILES" | "USERS" | "TARGETS", _) => (Module::McpProfiles, 2),
        ("MCP", "QUERY", "RULES") => (Module::McpQueryRules, 3),
        ("RAG", "SOURCES" | "SOURCE", _) => (Module::RagSources, 2),
        ("WORKLOAD", "CLASSES" | "CLASS", _) => (Module::WorkloadClasses, 2),
        _ => return None,
    };
    Some(m)
}

fn direction(verb: &str, rest: &[String]) -> Option<Direction> {
    let r: Vec<&str> = rest.iter().map(String::as_str).collect();
    use Direction::*;
    match (verb, r.as_slice()) {
        ("LOAD", ["TO", "RUNTIME" | "RUN"] | ["FROM", "MEMORY" | "MEM"]) => Some(MemoryToRuntime),
        ("SAVE", ["TO", "MEMORY" | "MEM"] | ["FROM", "RUNTIME" | "RUN"]) => Some(RuntimeToMemory),
        ("LOAD", ["FROM", "DISK"] | ["TO", "MEMORY" | "MEM"]) => Some(DiskToMemory),
        ("SAVE", ["TO", "CLUSTER"]) => Some(RuntimeToCluster),
        ("LOAD", ["FROM", "CLUSTER"]) => Some(ClusterToRuntime),
        ("SAVE", ["TO", "DISK"] | ["FROM", "MEMORY" | "MEM"]) => Some(MemoryToDisk),
        ("LOAD", ["FROM", "CONFIG"]) => Some(ConfigToMemory),
        _ => None,
    }
}

fn unquote(v: &str) -> String {
    let t = v.trim();
    if t.len() >= 2
        && ((t.starts_with('\'') && t.ends_with('\'')) || (t.starts_with('"') && t.ends_with('"')))
    {
        t[1..t.len() - 1].replace("''", "'")
    } else {
        t.to_string()
    }
}

/// Recognises an admin command; `None` means "plain SQL".
pub fn parse_command(sql: &str) -> Option<Command> {
    let w = words(sql);
    let first = w.first()?.as_str();
    match first {
        "LOAD" | "SAVE" => {
            if w.get(1).map(String::as_str) == Some("CONFIG")
                && w.get(2).map(String::as_str) == Some("TO")
                && w.get(3).map(String::as_str) == Some("FILE")
            {
                let path = sql.trim().trim_end_matches(';').split_whitespace().nth(4)?;
                return Some(Command::SaveConfigToFile(unquote(path)));
            }
            let (m, used) = module(&w[1..])?;
            let d = direction(first, &w[1 + used..])?;
            Some(Command::Move(m, d))
        }
        "SET" => parse_set(sql),
        "SHOW" => parse_show(sql, &w),
        "PROXYSQL" => Some(Command::Proxysql(w[1..].join(" "))),
        "PROXY_SELECT" => match w.get(1..).unwrap_or_default() {
            [star, from, table] if star == "*" && from == "FROM" => {
                Some(Command::ProxySelect(table.to_ascii_lowercase()))
            }
            _ => Some(Command::Unsupported(
                "PROXY_SELECT takes the form PROXY_SELECT * FROM runtime_<table>".into(),
            )),
        },
        // PgBouncer's console verbs, where they map onto Sluice.
        "PAUSE" | "RESUME" | "SHUTDOWN" if w.len() == 1 => {
            Some(Command::Proxysql(first.to_string()))
        }
        "RELOAD" if w.len() == 1 => Some(Command::PgBouncerReload),
        "PAUSE" | "RESUME" | "SUSPEND" | "DISABLE" | "ENABLE" | "RECONNECT" | "WAIT_CLOSE" => {
            Some(Command::Unsupported(format!(
                "{first} {}is not supported: Sluice has no per-database pools (PAUSE and RESUME without a database apply to all new connections; KILL takes a session id)",
                w.get(1).map_or(String::new(), |d| format!("{d} "))
            )))
        }
        "KILL" => parse_kill(&w),
        "RAG" => match w.get(1..).unwrap_or_default() {
            [sync, source, n] if sync == "SYNC" && source == "SOURCE" => match n.parse() {
                Ok(id) => Some(Command::RagSync(id)),
                Err(_) => Some(Command::Unsupported(format!(
                    "RAG SYNC SOURCE takes a source_id, not {n}"
                ))),
            },
            _ => Some(Command::Unsupported(
                "RAG takes the form RAG SYNC SOURCE <source_id> (or LOAD/SAVE RAG SOURCES …)"
                    .into(),
            )),
        },
        "SELECT" => parse_select(sql, &w),
        _ => None,
    }
}

/// `SET <prefix>-<name> = value` of a Sluice variable, or a client's session housekeeping.
fn parse_set(sql: &str) -> Option<Command> {
    let body = sql.trim().trim_end_matches(';');
    let body = body.get(3..)?.trim();
    let Some((name, value)) = body.split_once('=') else {
        // SET NAMES utf8mb4, SET CHARACTER SET ...: connector housekeeping.
        return Some(Command::SessionSet);
    };
    let name = name.trim().trim_matches('`').to_ascii_lowercase();
    if ["mysql-", "pgsql-", "admin-", "mcp-"]
        .iter()
        .any(|p| name.starts_with(p))
    {
        Some(Command::SetVariable(name, unquote(value)))
    } else {
        Some(Command::SessionSet)
    }
}

/// The `SHOW …` statements the admin answers itself.
fn parse_show(sql: &str, w: &[String]) -> Option<Command> {
    let r: Vec<&str> = w[1..].iter().map(String::as_str).collect();
    match r.as_slice() {
        ["MYSQL", "VARIABLES"] => Some(Command::ShowVariables("mysql-")),
        ["PGSQL", "VARIABLES"] => Some(Command::ShowVariables("pgsql-")),
        ["ADMIN", "VARIABLES"] => Some(Command::ShowVariables("admin-")),
        ["MCP", "VARIABLES"] => Some(Command::ShowVariables("mcp-")),
        ["TABLES"] => Some(Command::ShowTables(None)),
        ["TABLES", "FROM" | "IN", db] => Some(Command::ShowTables(Some(db.to_ascii_lowercase()))),
        ["DATABASES"] | ["SCHEMAS"] => Some(Command::ShowDatabases),
        ["CREATE", "TABLE", _] => {
            let t = sql.trim().trim_end_matches(';').split_whitespace().nth(3)?;
            Some(Command::ShowCreateTable(t.trim_matches('`').to_string()))
        }
        ["PROCESSLIST"] | ["FULL", "PROCESSLIST"] => Some(Command::ShowProcesslist),
        ["PROMETHEUS", "METRICS"] => Some(Command::ShowPrometheusMetrics),
        ["PGBOUNCER", what] => {
            crate::pgbouncer::PgBouncerCommand::parse(what).map(Command::PgBouncer)
        }
        [what] if crate::pgbouncer::PgBouncerCommand::parse(what).is_some() => {
            crate::pgbouncer::PgBouncerCommand::parse(what).map(Command::PgBouncer)
        }
        ["MYSQL", "STATUS"] => Some(Command::ShowStatus("mysql")),
        ["PGSQL", "STATUS"] => Some(Command::ShowStatus("pgsql")),
        ["WARNINGS", ..] | ["ERRORS", ..] => {
            Some(Command::EmptyShow(&["Level", "Code", "Message"]))
        }
        ["VARIABLES", ..] | ["SESSION", "VARIABLES", ..] | ["GLOBAL", "VARIABLES", ..] => {
            Some(Command::ShowAllVariables(like_pattern(sql)))
        }
        _ => None,
    }
}

/// `KILL [CONNECTION] <session id>`; PgBouncer's `KILL <db>` is refused with the reason.
fn parse_kill(w: &[String]) -> Option<Command> {
    let n = if w.get(1).map(String::as_str) == Some("CONNECTION") {
        w.get(2)
    } else {
        w.get(1)
    };
    match n?.parse() {
        Ok(id) => Some(Command::Kill(id)),
        Err(_) => Some(Command::Unsupported(format!(
            "KILL {} is not supported: Sluice has no per-database pools; KILL takes a session id (SHOW PROCESSLIST, stats_pgsql_processlist)",
            n?.to_ascii_lowercase()
        ))),
    }
}

/// `SELECT @@version` and other `@@` system variables, answered without SQLite.
fn parse_select(sql: &str, w: &[String]) -> Option<Command> {
    let rest: Vec<&str> = w[1..].iter().map(String::as_str).collect();
    match rest.as_slice() {
        ["@@VERSION"]
        | ["VERSION()"]
        | ["@@VERSION_COMMENT"]
        | ["@@VERSION_COMMENT", "LIMIT", "1"] => Some(Command::SelectVersion),
        _ if !rest.is_empty() && rest.iter().all(|w| w.starts_with("@@")) => {
            // Keep the client's spelling for the column names.
            let original = sql.trim().trim_end_matches(';');
            let list = original.get(6..)?;
            let names = list
                .split(',')
                .map(|n| n.trim().to_string())
                .filter(|n| n.starts_with("@@"))
                .collect();
            Some(Command::SelectSysvars(names))
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_alias_of_the_layer_grammar() {
        use Direction::*;
        let cases = [
            (
                "LOAD MYSQL SERVERS TO RUNTIME",
                Module::MysqlServers,
                MemoryToRuntime,
            ),
            (
                "load mysql users to run;",
                Module::MysqlUsers,
                MemoryToRuntime,
            ),
            (
                "LOAD MYSQL USER FROM MEMORY",
                Module::MysqlUsers,
                MemoryToRuntime,
            ),
            (
                "LOAD MYSQL QUERY RULES FROM MEM",
                Module::MysqlQueryRules,
                MemoryToRuntime,
            ),
            (
                "SAVE MYSQL VARIABLES TO MEMORY",
                Module::MysqlVariables,
                RuntimeToMemory,
            ),
            (
                "SAVE MYSQL VARIABLES TO MEM",
                Module::MysqlVariables,
                RuntimeToMemory,
            ),
            (
                "SAVE ADMIN VARIABLES FROM RUNTIME",
                Module::AdminVariables,
                RuntimeToMemory,
            ),
            (
                "SAVE PGSQL SERVERS FROM RUN",
                Module::PgsqlServers,
                RuntimeToMemory,
            ),
            (
                "LOAD PGSQL USERS FROM DISK",
                Module::PgsqlUsers,
                DiskToMemory,
            ),
            ("LOAD SCHEDULER TO MEMORY", Module::Scheduler, DiskToMemory),
            (
                "LOAD PROXYSQL SERVERS TO MEM",
                Module::ProxysqlServers,
                DiskToMemory,
            ),
            (
                "SAVE PGSQL QUERY RULES TO DISK",
                Module::PgsqlQueryRules,
                MemoryToDisk,
            ),
            (
                "SAVE PGSQL VARIABLES FROM MEMORY",
                Module::PgsqlVariables,
                MemoryToDisk,
            ),
            (
                "SAVE MYSQL SERVERS FROM MEM",
                Module::MysqlServers,
                MemoryToDisk,
            ),
            (
                "LOAD MYSQL USERS FROM CONFIG",
                Module::MysqlUsers,
                ConfigToMemory,
            ),
        ];
        for (sql, m, d) in cases {
            assert_eq!(parse_command(sql), Some(Command::Move(m, d)), "{sql}");
        }
        assert_eq!(parse_command("LOAD MYSQL SERVERS TO NOWHERE"), None);
    }

    #[test]
    fn other_commands() {
        assert_eq!(
            parse_command("set mysql-default_query_delay = 1"),
            Some(Command::SetVariable(
                "mysql-default_query_delay".into(),
                "1".into()
            ))
        );
        assert_eq!(
            parse_command("SET admin-admin_credentials='admin:x;ops:y';"),
            Some(Command::SetVariable(
                "admin-admin_credentials".into(),
                "admin:x;ops:y".into()
            ))
        );
        assert_eq!(parse_command("SET autocommit=1"), Some(Command::SessionSet));
        assert_eq!(
            parse_command("SET NAMES utf8mb4"),
            Some(Command::SessionSet)
        );
        assert_eq!(
            parse_command("SELECT @@max_allowed_packet, @@session.tx_isolation"),
            Some(Command::SelectSysvars(vec![
                "@@max_allowed_packet".into(),
                "@@session.tx_isolation".into()
            ]))
        );
        assert_eq!(
            parse_command("SHOW MYSQL VARIABLES"),
            Some(Command::ShowVariables("mysql-"))
        );
        assert_eq!(
            parse_command("show global variables"),
            Some(Command::ShowAllVariables(None))
        );
        assert_eq!(
            parse_command("SHOW VARIABLES LIKE 'mysql-max_%';"),
            Some(Command::ShowAllVariables(Some("mysql-max_%".into())))
        );
        assert_eq!(
            parse_command("show full processlist"),
            Some(Command::ShowProcesslist)
        );
        assert_eq!(parse_command("KILL CONNECTION 12"), Some(Command::Kill(12)));
        assert_eq!(
            parse_command("PROXYSQL PAUSE"),
            Some(Command::Proxysql("PAUSE".into()))
        );
        assert_eq!(
            parse_command("SAVE CONFIG TO FILE /tmp/x.toml"),
            Some(Command::SaveConfigToFile("/tmp/x.toml".into()))
        );
        assert_eq!(
            parse_command("SHOW CREATE TABLE mysql_servers"),
            Some(Command::ShowCreateTable("mysql_servers".into()))
        );
        assert_eq!(parse_command("SELECT * FROM mysql_servers"), None);
        assert_eq!(parse_command(""), None);
    }
}

//! Moving configuration between the layers: config file → memory, memory ⇄ disk, memory ⇄
//! runtime. Memory rows become a [`Config`] by way of the config-file format, so the admin and
//! the config file share one validation, and a bad row is reported with its table, row and column.

use crate::command::Module;
use crate::schema_defs::CONFIG_TABLES;
use crate::store::Store;
use sluice_core::admin::{AdminError, AdminRows};
use sluice_core::config::Config;
use std::collections::HashMap;
use std::fmt::Write;

/// The integer columns of a configuration table (from its definition).
fn number_columns(table: &str) -> Vec<String> {
    let Some((_, cols)) = CONFIG_TABLES.iter().find(|(n, _)| *n == table) else {
        return Vec::new();
    };
    cols.split(",\n")
        .filter_map(|c| {
            let mut it = c.split_whitespace();
            let name = it.next()?;
            let ty = it.next()?;
            let ty = ty.to_ascii_uppercase();
            ((ty.contains("INT") || ty.contains("REAL")) && name != "PRIMARY" && name != "UNIQUE")
                .then(|| name.to_string())
        })
        .collect()
}

/// Where each row of the generated TOML starts, to map a parse error back to a row.
struct RowLines(Vec<(usize, String)>);

impl RowLines {
    fn describe(&self, line: usize) -> Option<&str> {
        self.0
            .iter()
            .rev()
            .find(|(l, _)| *l <= line)
            .map(|(_, d)| d.as_str())
    }
}

fn toml_value(v: &str, number: bool) -> String {
    let t = v.trim();
    if number && (t.parse::<i64>().is_ok() || t.parse::<f64>().is_ok_and(f64::is_finite)) {
        t.to_string()
    } else {
        toml::Value::String(v.to_string()).to_string()
    }
}

/// Appends `rows` of `table` as `[[table]]` entries, recording where each row starts.
fn append_rows(out: &mut String, lines: &mut RowLines, table: &str, rows: &AdminRows) {
    let numbers = number_columns(table);
    for (i, row) in rows.rows.iter().enumerate() {
        let start = out.matches('\n').count() + 1;
        let key_desc: Vec<String> = rows
            .columns
            .iter()
            .zip(row)
            .take(3)
            .map(|(c, v)| format!("{c}={}", v.as_deref().unwrap_or("NULL")))
            .collect();
        lines.0.push((
            start,
            format!("{table} row {} ({})", i + 1, key_desc.join(", ")),
        ));
        let _ = writeln!(out, "[[{table}]]");
        for (col, v) in rows.columns.iter().zip(row) {
            let Some(v) = v else { continue };
            let _ = writeln!(out, "{col} = {}", toml_value(v, numbers.contains(col)));
        }
    }
}

fn line_in(message: &str) -> Option<usize> {
    let i = message.find("line ")?;
    message[i + 5..]
        .split(|c: char| !c.is_ascii_digit())
        .next()?
        .parse()
        .ok()
}

/// Reads the memory tables of the modules Sluice's runtime uses and builds a validated
/// [`Config`], keeping `base`'s parts for the modules not named in `replace`.
pub(crate) async fn memory_to_config(
    store: &Store,
    base: &Config,
    replace: &[Module],
) -> Result<Config, AdminError> {
    let mut text = String::new();
    let mut lines = RowLines(Vec::new());
    if let Some(d) = &base.datadir {
        let _ = writeln!(text, "datadir = {}", toml::Value::String(d.clone()));
    }
    if let Some(url) = &base.config_store {
        let _ = writeln!(
            text,
            "[cluster]\nconfig_store = {}",
            toml::Value::String(url.clone())
        );
    }
    append_variables(store, base, replace, &mut text, &mut lines).await?;
    let memory_rows = memory_tables(store, replace).await?;
    for t in RUNTIME_TABLES {
        match memory_rows.get(t) {
            Some(rows) => append_rows(&mut text, &mut lines, t, rows),
            None => {
                let base_rows = config_rows(base, t);
                append_rows(&mut text, &mut lines, t, &base_rows);
            }
        }
    }
    Config::parse(&text).map_err(|e| config_error(&e.to_string(), &lines))
}

/// The four variable sections, each from `global_variables` when its module is in `replace`,
/// else from `base`; every line noted with the variable it came from.
async fn append_variables(
    store: &Store,
    base: &Config,
    replace: &[Module],
    text: &mut String,
    lines: &mut RowLines,
) -> Result<(), AdminError> {
    for (section, prefix, module, current) in [
        (
            "admin_variables",
            "admin-",
            Module::AdminVariables,
            base.admin_variables.pairs(),
        ),
        (
            "mysql_variables",
            "mysql-",
            Module::MysqlVariables,
            base.mysql_variables.pairs(),
        ),
        (
            "pgsql_variables",
            "pgsql-",
            Module::PgsqlVariables,
            base.pgsql_variables.pairs(),
        ),
        (
            "mcp_variables",
            "mcp-",
            Module::McpVariables,
            base.mcp_variables.pairs(),
        ),
    ] {
        let _ = writeln!(text, "[{section}]");
        let pairs: Vec<(String, String)> = if replace.contains(&module) {
            let rows = store
                .query(&format!(
                    "SELECT variable_name, variable_value FROM main.global_variables WHERE variable_name LIKE '{prefix}%' ORDER BY variable_name"
                ))
                .await?;
            rows.rows
                .into_iter()
                .filter_map(|r| {
                    Some((
                        r.first()?.clone()?.trim_start_matches(prefix).to_string(),
                        r.get(1)?.clone().unwrap_or_default(),
                    ))
                })
                .collect()
        } else {
            current
        };
        for (k, v) in pairs {
            let start = text.matches('\n').count() + 1;
            lines
                .0
                .push((start, format!("global_variables {prefix}{k}")));
            let _ = writeln!(
                text,
                "{} = {}",
                toml::Value::String(k),
                toml::Value::String(v)
            );
        }
    }
    Ok(())
}

/// The module a runtime table belongs to.
fn module_of_table(t: &str) -> Module {
    match t {
        "mysql_users" => Module::MysqlUsers,
        "pgsql_users" => Module::PgsqlUsers,
        "pgsql_servers" | "pgsql_replication_hostgroups" | "pgsql_servers_ssl_params" => {
            Module::PgsqlServers
        }
        "mysql_query_rules" | "mysql_query_rules_fast_routing" => Module::MysqlQueryRules,
        "proxysql_servers" => Module::ProxysqlServers,
        "pgsql_query_rules" | "pgsql_query_rules_fast_routing" => Module::PgsqlQueryRules,
        "mcp_users" | "mcp_targets" => Module::McpProfiles,
        "mcp_query_rules" => Module::McpQueryRules,
        "rag_sources" => Module::RagSources,
        "workload_classes" | "workload_guards" => Module::WorkloadClasses,
        _ => Module::MysqlServers,
    }
}

/// The memory rows of every runtime table whose module is in `replace`.
async fn memory_tables(
    store: &Store,
    replace: &[Module],
) -> Result<HashMap<&'static str, AdminRows>, AdminError> {
    let mut memory_rows = HashMap::new();
    for t in RUNTIME_TABLES {
        if replace.contains(&module_of_table(t)) {
            let cols = table_columns(t).join(", ");
            memory_rows.insert(
                t,
                store.query(&format!("SELECT {cols} FROM main.{t}")).await?,
            );
        }
    }
    Ok(memory_rows)
}

/// A config that does not validate, said of the row (or variable) its error's line came from.
fn config_error(msg: &str, lines: &RowLines) -> AdminError {
    let row = line_in(msg)
        .and_then(|l| lines.describe(l))
        .unwrap_or("configuration");
    let detail = msg
        .lines()
        .rfind(|l| !l.trim_start().starts_with('|') && !l.trim().is_empty())
        .unwrap_or(msg);
    AdminError::new(format!(
        "{row}: {}",
        detail.trim().trim_start_matches("invalid config: ")
    ))
}

/// The tables the runtime is built from.
pub(crate) const RUNTIME_TABLES: [&str; 22] = [
    "mysql_servers",
    "mysql_galera_hostgroups",
    "mysql_group_replication_hostgroups",
    "mysql_replication_hostgroups",
    "pgsql_replication_hostgroups",
    "mysql_hostgroup_attributes",
    "mysql_users",
    "pgsql_servers",
    "pgsql_users",
    "mysql_query_rules",
    "mysql_query_rules_fast_routing",
    "pgsql_query_rules",
    "pgsql_query_rules_fast_routing",
    "mysql_servers_ssl_params",
    "pgsql_servers_ssl_params",
    "proxysql_servers",
    "mcp_users",
    "mcp_targets",
    "mcp_query_rules",
    "rag_sources",
    "workload_classes",
    "workload_guards",
];

/// A configuration table's column names (from its definition).
pub(crate) fn table_columns(table: &str) -> Vec<String> {
    CONFIG_TABLES
        .iter()
        .find(|(n, _)| *n == table)
        .map(|(_, cols)| {
            cols.split(",\n")
                .filter_map(|c| c.split_whitespace().next())
                .filter(|n| *n != "PRIMARY" && *n != "UNIQUE")
                .map(str::to_string)
                .collect()
        })
        .unwrap_or_default()
}

/// The rows a [`Config`] holds for `table`, with the table's column names.
pub(crate) fn config_rows(cfg: &Config, table: &str) -> AdminRows {
    let columns = table_columns(table);
    // A table the runtime does not hold (pgsql_hostgroup_attributes) has its columns and no rows.
    let no_rows = || AdminRows {
        columns: columns.clone(),
        rows: Vec::new(),
    };
    let Ok(toml::Value::Table(doc)) = toml::Value::try_from(ExportView(cfg)) else {
        return no_rows();
    };
    let Some(toml::Value::Array(items)) = doc.get(table) else {
        return no_rows();
    };
    let rows = items
        .iter()
        .filter_map(|i| i.as_table())
        .map(|t| {
            columns
                .iter()
                // pgsql tables say `database` where the shared row type says `schemaname`.
                .map(|c| {
                    match t
                        .get(c)
                        .or_else(|| (c == "database").then(|| t.get("schemaname")).flatten())
                    {
                        Some(toml::Value::String(s)) => Some(s.clone()),
                        Some(toml::Value::Integer(n)) => Some(n.to_string()),
                        Some(toml::Value::Boolean(b)) => Some(u8::from(*b).to_string()),
                        Some(other) => Some(other.to_string()),
                        None => None,
                    }
                })
                .collect()
        })
        .collect();
    AdminRows { columns, rows }
}

/// `runtime_*_servers` rows as the data path sees them: each server's configured row, in the
/// hostgroup and with the status the monitor gave it.
pub(crate) fn live_server_rows(
    cfg: &Config,
    p: sluice_core::Protocol,
    hostgroups: &std::collections::BTreeMap<u32, Vec<sluice_core::runtime::HostgroupServer>>,
) -> AdminRows {
    let mut view = cfg.clone();
    match p {
        sluice_core::Protocol::Mysql => {
            view.mysql_servers = placed(&cfg.mysql_servers, hostgroups, |r| {
                (&mut r.hostgroup_id.0, &r.hostname, r.port.0, &mut r.status)
            });
            config_rows(&view, "mysql_servers")
        }
        sluice_core::Protocol::Pgsql => {
            view.pgsql_servers = placed(&cfg.pgsql_servers, hostgroups, |r| {
                (&mut r.hostgroup_id.0, &r.hostname, r.port.0, &mut r.status)
            });
            config_rows(&view, "pgsql_servers")
        }
    }
}

/// The configured server rows moved to where `hostgroups` has them, with their live status.
/// `fields` exposes a row's (hostgroup, hostname, port, status).
fn placed<R: Clone>(
    rows: &[R],
    hostgroups: &std::collections::BTreeMap<u32, Vec<sluice_core::runtime::HostgroupServer>>,
    fields: impl Fn(
        &mut R,
    ) -> (
        &mut u32,
        &String,
        u16,
        &mut sluice_core::config::ServerStatus,
    ),
) -> Vec<R> {
    let mut out = Vec::new();
    for (hg, servers) in hostgroups {
        for s in servers {
            let matches = |r: &R, same_hg: bool| {
                let mut r = r.clone();
                let (h, name, port, _) = fields(&mut r);
                *name == s.key.hostname && port == s.key.port && (!same_hg || *h == *hg)
            };
            let Some(row) = rows
                .iter()
                .find(|r| matches(r, true))
                .or_else(|| rows.iter().find(|r| matches(r, false)))
            else {
                continue;
            };
            let mut r = row.clone();
            let (h, _, _, status) = fields(&mut r);
            *h = *hg;
            // The runtime tables keep ProxySQL's four states (their CHECK constraint): a server
            // shunned for lag is SHUNNED here and SHUNNED_REPLICATION_LAG in the pool stats.
            *status = match s.status {
                sluice_core::config::ServerStatus::ShunnedReplicationLag => {
                    sluice_core::config::ServerStatus::Shunned
                }
                other => other,
            };
            out.push(r);
        }
    }
    out
}

/// Serialises the table parts of a config like the export does.
struct ExportView<'a>(&'a Config);

impl serde::Serialize for ExportView<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let mut m = s.serialize_map(Some(19))?;
        m.serialize_entry("proxysql_servers", &self.0.proxysql_servers)?;
        m.serialize_entry("mysql_servers", &self.0.mysql_servers)?;
        m.serialize_entry("mysql_users", &self.0.mysql_users)?;
        m.serialize_entry(
            "mysql_hostgroup_attributes",
            &self.0.mysql_hostgroup_attributes,
        )?;
        m.serialize_entry("pgsql_servers", &self.0.pgsql_servers)?;
        m.serialize_entry("pgsql_users", &self.0.pgsql_users)?;
        m.serialize_entry("mysql_query_rules", &self.0.mysql_query_rules)?;
        m.serialize_entry(
            "mysql_query_rules_fast_routing",
            &self.0.mysql_query_rules_fast_routing,
        )?;
        m.serialize_entry("pgsql_query_rules", &self.0.pgsql_query_rules)?;
        m.serialize_entry(
            "mysql_replication_hostgroups",
            &self.0.mysql_replication_hostgroups,
        )?;
        m.serialize_entry(
            "pgsql_replication_hostgroups",
            &self.0.pgsql_replication_hostgroups,
        )?;
        m.serialize_entry(
            "mysql_group_replication_hostgroups",
            &self.0.mysql_group_replication_hostgroups,
        )?;
        m.serialize_entry("mysql_galera_hostgroups", &self.0.mysql_galera_hostgroups)?;
        m.serialize_entry(
            "pgsql_query_rules_fast_routing",
            &self.0.pgsql_query_rules_fast_routing,
        )?;
        m.serialize_entry("mysql_servers_ssl_params", &self.0.mysql_servers_ssl_params)?;
        m.serialize_entry("pgsql_servers_ssl_params", &self.0.pgsql_servers_ssl_params)?;
        m.serialize_entry("mcp_users", &self.0.mcp_users)?;
        m.serialize_entry("mcp_targets", &self.0.mcp_targets)?;
        m.serialize_entry("mcp_query_rules", &self.0.mcp_query_rules)?;
        m.serialize_entry("rag_sources", &self.0.rag_sources)?;
        m.serialize_entry("workload_classes", &self.0.workload_classes)?;
        m.serialize_entry("workload_guards", &self.0.workload_guards)?;
        m.end()
    }
}

fn sql_literal(v: &Option<String>) -> String {
    match v {
        None => "NULL".into(),
        Some(s) => format!("'{}'", s.replace('\'', "''")),
    }
}

/// Statements that replace `schema.table` with `rows`.
pub(crate) fn replace_rows_sql(schema: &str, table: &str, rows: &AdminRows) -> Vec<String> {
    let mut out = vec![format!("DELETE FROM {schema}.{table}")];
    for r in &rows.rows {
        let cols: Vec<&str> = rows.columns.iter().map(String::as_str).collect();
        let vals: Vec<String> = r.iter().map(sql_literal).collect();
        out.push(format!(
            "INSERT INTO {schema}.{table} ({}) VALUES ({})",
            cols.join(", "),
            vals.join(", ")
        ));
    }
    out
}

/// Statements that write the variables of `cfg` with `prefix` into `schema.global_variables`.
pub(crate) fn variables_sql(schema: &str, prefix: &str, pairs: &[(String, String)]) -> Vec<String> {
    let mut out = vec![format!(
        "DELETE FROM {schema}.global_variables WHERE variable_name LIKE '{prefix}%'"
    )];
    for (k, v) in pairs {
        out.push(format!(
            "INSERT INTO {schema}.global_variables (variable_name, variable_value) VALUES ({}, {})",
            sql_literal(&Some(format!("{prefix}{k}"))),
            sql_literal(&Some(v.clone()))
        ));
    }
    out
}

/// Statements that copy the module's tables from one schema/prefix to another.
pub(crate) fn copy_module_sql(module: Module, from: (&str, &str), to: (&str, &str)) -> Vec<String> {
    let mut out = Vec::new();
    if let Some(prefix) = module.variable_prefix() {
        out.push(format!(
            "DELETE FROM {}.{}global_variables WHERE variable_name LIKE '{prefix}%'",
            to.0, to.1
        ));
        out.push(format!(
            "INSERT INTO {}.{}global_variables SELECT * FROM {}.{}global_variables WHERE variable_name LIKE '{prefix}%'",
            to.0, to.1, from.0, from.1
        ));
        return out;
    }
    for t in module.tables() {
        out.push(format!("DELETE FROM {}.{}{t}", to.0, to.1));
        // Columns by name: a disk table an older Sluice made has its added columns last.
        let cols = table_columns(t).join(", ");
        out.push(format!(
            "INSERT INTO {}.{}{t} ({cols}) SELECT {cols} FROM {}.{}{t}",
            to.0, to.1, from.0, from.1
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn number_columns_come_from_the_definitions() {
        let numbers = number_columns("mysql_servers");
        assert!(
            numbers.contains(&"port".to_string()) && numbers.contains(&"hostgroup_id".to_string())
        );
        assert!(!numbers.contains(&"hostname".to_string()));
        let guards = number_columns("workload_guards");
        assert!(
            guards.contains(&"low".to_string()) && guards.contains(&"reject_above".to_string())
        );
        assert_eq!(toml_value("2.5", true), "2.5");
        assert_eq!(toml_value("inf", true), "\"inf\"");
    }

    #[test]
    fn config_rows_use_the_table_columns() {
        let cfg = Config::parse(
            "[[mysql_servers]]\nhostname=\"h\"\nport=1\n[[mysql_users]]\nusername=\"u\"\npassword=\"p\"\n",
        )
        .expect("config");
        let rows = config_rows(&cfg, "mysql_servers");
        assert_eq!(rows.columns[1], "hostname");
        assert_eq!(rows.rows[0][1].as_deref(), Some("h"));
        assert_eq!(rows.rows[0][4].as_deref(), Some("ONLINE"));
        let users = config_rows(&cfg, "mysql_users");
        assert_eq!(users.rows[0][2].as_deref(), Some("1"), "active as 0/1");
    }
}

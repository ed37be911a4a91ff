//! `proxysql.cnf` → Sluice's TOML. Sluice's file carries ProxySQL's table and variable names, so
//! most of the work is checking each setting against what Sluice implements: variables through
//! the variable setters, table columns through the row types' declared columns.

use crate::emit::TomlDoc;
use crate::libconfig::{self, Setting, Value};
use crate::{ImportError, Translation};
use sluice_core::config::{
    AdminVariables, McpVariables, MysqlVariables, PgsqlVariables, SetOutcome, VariableError,
    table_columns,
};

/// Sections ProxySQL reads that Sluice has no counterpart for, and what to do instead.
const NO_COUNTERPART: &[(&str, &str)] = &[
    (
        "errorlog",
        "Sluice logs to stderr (the journal under systemd)",
    ),
    (
        "pidfile",
        "Sluice writes no pid file; the service manager tracks the process",
    ),
    (
        "restart_on_missing_heartbeats",
        "Sluice has no watchdog restart; run it under systemd with Restart=on-failure",
    ),
    (
        "execute_on_exit_failure",
        "no counterpart; use the service manager's OnFailure=",
    ),
    (
        "scheduler",
        "no scheduler table; use systemd timers or cron",
    ),
    (
        "mysql_aws_aurora_hostgroups",
        "Aurora auto-discovery is not implemented; list the instances in mysql_servers with mysql_replication_hostgroups",
    ),
    (
        "mysql_firewall_whitelist_rules",
        "no firewall whitelist; use mysql_query_rules with error_msg",
    ),
    (
        "mysql_firewall_whitelist_sqli_fingerprints",
        "no firewall whitelist",
    ),
    ("mysql_firewall_whitelist_users", "no firewall whitelist"),
    (
        "mysql_collations",
        "Sluice forwards the client's character set",
    ),
    (
        "restapi",
        "no REST API routes; Sluice's HTTP port serves /metrics, /healthz and /mcp",
    ),
    ("sqliteserver_variables", "no SQLite server"),
    ("clickhouse_variables", "no ClickHouse frontend"),
    ("clickhouse_users", "no ClickHouse frontend"),
    ("ldap_variables", "no LDAP authentication"),
    ("mysql_ldap_mapping", "no LDAP authentication"),
    ("debug_levels", "log levels come from RUST_LOG"),
    ("debug_filters", "log levels come from RUST_LOG"),
];

/// Translates the text of a `proxysql.cnf`.
pub fn from_proxysql(text: &str) -> Result<Translation, ImportError> {
    let settings = libconfig::parse(text)?;
    let mut doc = TomlDoc::new("Translated from a proxysql.cnf by `sluice import`.");
    for s in &settings {
        translate(&mut doc, s)?;
    }
    doc.finish()
}

fn translate(doc: &mut TomlDoc, s: &Setting) -> Result<(), ImportError> {
    let name = s.name.as_str();
    if let Some((_, why)) = NO_COUNTERPART.iter().find(|(n, _)| *n == name) {
        doc.note(s.line, name, *why);
        return Ok(());
    }
    match (name, &s.value) {
        ("datadir", Value::Str(d)) => {
            doc.top_key("datadir", &toml::Value::String(d.clone()));
            Ok(())
        }
        (
            "admin_variables" | "mysql_variables" | "pgsql_variables" | "mcp_variables",
            Value::Group(vars),
        ) => variables(doc, name, vars),
        (_, Value::List(rows)) if table_columns(name).is_some() => {
            for (line, row) in rows {
                let Value::Group(cols) = row else {
                    return Err(value_error(*line, name, "each row is a group { … }"));
                };
                table_row(doc, name, *line, cols)?;
            }
            Ok(())
        }
        _ => {
            doc.note(s.line, name, "not a setting Sluice knows");
            Ok(())
        }
    }
}

fn variables(doc: &mut TomlDoc, section: &str, vars: &[Setting]) -> Result<(), ImportError> {
    let prefix = section.trim_end_matches("_variables");
    doc.table(section, vars.first().map(|v| v.line).unwrap_or(0));
    for v in vars {
        let setting = format!("{section}.{}", v.name);
        let mut value = scalar(&v.value)
            .ok_or_else(|| value_error(v.line, &setting, "expected a string, number or boolean"))?;
        let bare = v
            .name
            .strip_prefix(&format!("{prefix}-"))
            .unwrap_or(&v.name);
        if bare == "interfaces" || bare.ends_with("_ifaces") {
            value = tcp_listeners(doc, v.line, &setting, &value);
        }
        let text = scalar_text(&value);
        let outcome = match prefix {
            "admin" => AdminVariables::default().set(bare, &text),
            "mysql" => MysqlVariables::default().set(bare, &text),
            "pgsql" => PgsqlVariables::default().set(bare, &text),
            _ => McpVariables::default().set(bare, &text),
        };
        match outcome {
            Ok(SetOutcome::Applied) => doc.key(bare, &value, v.line),
            Ok(SetOutcome::AcceptedWithoutEffect) => doc.note(
                v.line,
                &setting,
                format!("= {text}: ProxySQL's variable, accepted by Sluice but without effect in this version"),
            ),
            Err(VariableError::Unknown(_)) => doc.note(v.line, &setting, "not a variable Sluice knows"),
            Err(e) => return Err(value_error(v.line, &setting, e.to_string())),
        }
    }
    Ok(())
}

/// A listener list without its Unix socket paths, each noted: Sluice listens on TCP only.
fn tcp_listeners(
    doc: &mut TomlDoc,
    line: usize,
    setting: &str,
    value: &toml::Value,
) -> toml::Value {
    let toml::Value::String(list) = value else {
        return value.clone();
    };
    let (sockets, tcp): (Vec<&str>, Vec<&str>) = list
        .split(';')
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .partition(|l| l.starts_with('/'));
    for s in sockets {
        doc.note(
            line,
            setting,
            format!("the Unix socket {s} is not carried over: Sluice listens on TCP only"),
        );
    }
    toml::Value::String(tcp.join(";"))
}

fn table_row(
    doc: &mut TomlDoc,
    table: &str,
    line: usize,
    cols: &[Setting],
) -> Result<(), ImportError> {
    let known = table_columns(table).unwrap_or(&[]);
    doc.row(table, line);
    for c in cols {
        let column = column_name(table, &c.name);
        let setting = format!("{table}.{}", c.name);
        if !known.contains(&column) {
            doc.note(
                c.line,
                &setting,
                format!("{table} has no column {column} in Sluice"),
            );
            continue;
        }
        let value = scalar(&c.value)
            .ok_or_else(|| value_error(c.line, &setting, "expected a string, number or boolean"))?;
        doc.key(column, &value, c.line);
    }
    Ok(())
}

/// ProxySQL's loader also takes `address` for `hostname` and `hostgroup` for `hostgroup_id`.
fn column_name<'a>(table: &str, name: &'a str) -> &'a str {
    let servers = table.ends_with("_servers");
    match name {
        "address" if servers => "hostname",
        "hostgroup" if servers => "hostgroup_id",
        other => other,
    }
}

fn scalar(v: &Value) -> Option<toml::Value> {
    Some(match v {
        Value::Bool(b) => toml::Value::Boolean(*b),
        Value::Int(i) => toml::Value::Integer(*i),
        Value::Float(f) => toml::Value::Float(*f),
        Value::Str(s) => toml::Value::String(s.clone()),
        Value::List(_) | Value::Group(_) => return None,
    })
}

fn scalar_text(v: &toml::Value) -> String {
    match v {
        toml::Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

fn value_error(line: usize, setting: &str, message: impl Into<String>) -> ImportError {
    ImportError::Value {
        line,
        setting: setting.to_string(),
        message: message.into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tables_variables_and_what_does_not_carry_over() {
        let cnf = r#"
datadir="/var/lib/proxysql"
errorlog="/var/lib/proxysql/proxysql.log"
admin_variables=
{
    admin_credentials="admin:admin"
    mysql_ifaces="0.0.0.0:6032"
}
mysql_variables=
{
    threads=4
    max_connections=2048
    eventslog_filename="queries.log"
    monitor_username="monitor"
    nonsense_variable=1
}
mysql_servers =
(
    { address="127.0.0.1" , port=3306 , hostgroup=0, max_connections=200 , gtid_port=0 },
)
mysql_users:
(
    { username = "root", password = "", default_hostgroup = 0, max_connections=1000, default_schema="test", active = 1 }
)
mysql_query_rules:
(
    { rule_id=1 active=1 match_pattern="^SELECT .* FOR UPDATE$" destination_hostgroup=0 apply=1 },
    { rule_id=2 active=1 match_pattern="^SELECT" destination_hostgroup=1 apply=1 }
)
scheduler=
(
    { id=1 active=0 interval_ms=10000 filename="/var/lib/proxysql/proxysql_galera_checker.sh" }
)
mysql_replication_hostgroups=
(
    { writer_hostgroup=30, reader_hostgroup=40, comment="test repl 1" }
)
"#;
        let t = from_proxysql(cnf).unwrap();
        let cfg = sluice_core::config::Config::parse(&t.toml).unwrap();
        assert_eq!(cfg.datadir.as_deref(), Some("/var/lib/proxysql"));
        assert_eq!(cfg.mysql_servers[0].hostname, "127.0.0.1");
        assert_eq!(cfg.mysql_servers[0].max_connections.0, 200);
        assert_eq!(cfg.mysql_users[0].default_schema.as_deref(), Some("test"));
        assert_eq!(cfg.mysql_variables.max_connections, 2048);
        assert_eq!(cfg.mysql_query_rules.len(), 2);
        assert_eq!(cfg.mysql_replication_hostgroups[0].reader_hostgroup, 40);
        let noted: Vec<(usize, &str)> = t
            .notes
            .iter()
            .map(|n| (n.line, n.setting.as_str()))
            .collect();
        assert_eq!(
            noted,
            [
                (3, "errorlog"),
                (13, "mysql_variables.eventslog_filename"),
                (15, "mysql_variables.nonsense_variable"),
                (30, "scheduler"),
            ],
            "{:#?}",
            t.notes
        );
        assert!(
            t.toml
                .contains("# not carried over (line 15): mysql_variables.nonsense_variable")
        );
    }

    #[test]
    fn a_value_with_a_newline_stays_inside_its_comment_and_its_string() {
        let cnf = "mysql_variables = {\n eventslog_filename = \"a\\n[[mysql_servers]]\\nhostname = \\\"x\\\"\"\n server_version = \"8.0\\n1\"\n}\n";
        let t = from_proxysql(cnf).unwrap();
        let cfg = sluice_core::config::Config::parse(&t.toml).unwrap();
        assert!(cfg.mysql_servers.is_empty(), "{}", t.toml);
        assert_eq!(cfg.mysql_variables.server_version, "8.0\n1");
        assert_eq!(t.notes[0].line, 2, "{:?}", t.notes);
    }

    #[test]
    fn untranslatable_values_name_their_line() {
        let err =
            from_proxysql("mysql_variables = {\n threads = 4\n max_connections = \"many\"\n}")
                .unwrap_err();
        assert!(matches!(err, ImportError::Value { line: 3, .. }), "{err}");
        let err = from_proxysql("mysql_servers = (\n { address = \"a\", port = 3306 },\n { address = \"a\", port = 3306 }\n)").unwrap_err();
        assert!(matches!(err, ImportError::Refused { line: 3, .. }), "{err}");
        let err =
            from_proxysql("mysql_servers = (\n { address = \"a\", port = (1) }\n)").unwrap_err();
        assert!(matches!(err, ImportError::Value { line: 2, .. }), "{err}");
    }
}

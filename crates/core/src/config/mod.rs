//! The config model: ProxySQL's tables and variables, read from a TOML file whose sections carry
//! the admin tables' names (`[mysql_variables]`, `[[mysql_servers]]`, `[[mysql_users]]`).

mod admin_variables;
mod monitor_variables;
mod mysql_tables;
mod mysql_variables;
mod pgsql;
mod proxysql_names;
mod query_rules;
mod query_variables;
mod topology_tables;
mod values;

pub use admin_variables::AdminVariables;
pub use monitor_variables::MonitorVariables;
pub use mysql_tables::{MysqlHostgroupAttributes, MysqlServer, MysqlUser};
pub use mysql_variables::{MysqlVariables, SetOutcome};
pub use pgsql::{PgsqlServer, PgsqlUser, PgsqlVariables};
pub use proxysql_names::PROXYSQL_MYSQL_VARIABLES;
pub use query_rules::{FastRoute, QueryRule};
pub use query_variables::QueryVariables;
pub use topology_tables::{GroupReplicationHostgroup, ReplicationHostgroup};
pub use values::*;

use crate::Error;
use serde::Deserialize;
use std::collections::{BTreeMap, HashSet};
use std::path::Path;
use toml::Spanned;

/// A validated configuration: what the config file (and later the admin tables) describe.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Config {
    /// Data folder (generated TLS material, the admin database).
    pub datadir: Option<String>,
    /// `admin-*` variables.
    pub admin_variables: AdminVariables,
    /// `mysql-*` variables.
    pub mysql_variables: MysqlVariables,
    /// `mysql_servers` rows.
    pub mysql_servers: Vec<MysqlServer>,
    /// `mysql_users` rows.
    pub mysql_users: Vec<MysqlUser>,
    /// `mysql_hostgroup_attributes` rows.
    pub mysql_hostgroup_attributes: Vec<MysqlHostgroupAttributes>,
    /// `mysql_query_rules` rows.
    pub mysql_query_rules: Vec<QueryRule>,
    /// `mysql_query_rules_fast_routing` rows.
    pub mysql_query_rules_fast_routing: Vec<FastRoute>,
    /// `pgsql_query_rules` rows.
    pub pgsql_query_rules: Vec<QueryRule>,
    /// `pgsql_query_rules_fast_routing` rows.
    pub pgsql_query_rules_fast_routing: Vec<FastRoute>,
    /// `mysql_replication_hostgroups` rows.
    pub mysql_replication_hostgroups: Vec<ReplicationHostgroup>,
    /// `pgsql_replication_hostgroups` rows.
    pub pgsql_replication_hostgroups: Vec<ReplicationHostgroup>,
    /// `mysql_group_replication_hostgroups` rows.
    pub mysql_group_replication_hostgroups: Vec<GroupReplicationHostgroup>,
    /// `mysql_galera_hostgroups` rows (the same columns).
    pub mysql_galera_hostgroups: Vec<GroupReplicationHostgroup>,
    /// `pgsql-*` variables.
    pub pgsql_variables: PgsqlVariables,
    /// `pgsql_servers` rows.
    pub pgsql_servers: Vec<PgsqlServer>,
    /// `pgsql_users` rows.
    pub pgsql_users: Vec<PgsqlUser>,
    /// Warnings worth logging at start (e.g. variables accepted without effect).
    pub warnings: Vec<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawFile {
    datadir: Option<String>,
    #[serde(default)]
    admin_variables: BTreeMap<String, Spanned<toml::Value>>,
    #[serde(default)]
    mysql_variables: BTreeMap<String, Spanned<toml::Value>>,
    #[serde(default)]
    mysql_servers: Vec<Spanned<MysqlServer>>,
    #[serde(default)]
    mysql_users: Vec<Spanned<MysqlUser>>,
    #[serde(default)]
    mysql_hostgroup_attributes: Vec<Spanned<MysqlHostgroupAttributes>>,
    #[serde(default)]
    pgsql_variables: BTreeMap<String, Spanned<toml::Value>>,
    #[serde(default)]
    pgsql_servers: Vec<Spanned<PgsqlServer>>,
    #[serde(default)]
    pgsql_users: Vec<Spanned<PgsqlUser>>,
    #[serde(default)]
    mysql_query_rules: Vec<Spanned<QueryRule>>,
    #[serde(default)]
    mysql_query_rules_fast_routing: Vec<FastRoute>,
    #[serde(default)]
    pgsql_query_rules: Vec<Spanned<QueryRule>>,
    #[serde(default)]
    pgsql_query_rules_fast_routing: Vec<FastRoute>,
    #[serde(default)]
    mysql_replication_hostgroups: Vec<Spanned<ReplicationHostgroup>>,
    #[serde(default)]
    pgsql_replication_hostgroups: Vec<Spanned<ReplicationHostgroup>>,
    #[serde(default)]
    mysql_group_replication_hostgroups: Vec<Spanned<GroupReplicationHostgroup>>,
    #[serde(default)]
    mysql_galera_hostgroups: Vec<Spanned<GroupReplicationHostgroup>>,
}

fn line_of(text: &str, offset: usize) -> usize {
    text.get(..offset)
        .map(|t| t.matches('\n').count() + 1)
        .unwrap_or(0)
}

fn value_text(v: &toml::Value) -> Option<String> {
    match v {
        toml::Value::String(s) => Some(s.clone()),
        toml::Value::Integer(i) => Some(i.to_string()),
        toml::Value::Boolean(b) => Some(b.to_string()),
        toml::Value::Float(f) => Some(f.to_string()),
        _ => None,
    }
}

impl Config {
    /// Reads and validates a config file.
    pub fn from_file(path: &Path) -> Result<Config, Error> {
        let text = std::fs::read_to_string(path).map_err(|source| Error::ConfigRead {
            path: path.display().to_string(),
            source,
        })?;
        Config::parse(&text).map_err(|e| match e {
            Error::ConfigInvalid(msg) => Error::ConfigInvalid(format!("{}: {msg}", path.display())),
            other => other,
        })
    }

    /// Parses and validates config text. Errors name the key and the line.
    pub fn parse(text: &str) -> Result<Config, Error> {
        let raw: RawFile = toml::from_str(text).map_err(|e| Error::ConfigInvalid(e.to_string()))?;
        let invalid = |offset: usize, msg: String| {
            Error::ConfigInvalid(format!("line {}: {msg}", line_of(text, offset)))
        };
        let mut cfg = Config {
            datadir: raw.datadir,
            ..Config::default()
        };
        let mut warnings = Vec::new();
        let mut mysql_vars = MysqlVariables::default();
        apply_variables(
            text,
            "mysql",
            &raw.mysql_variables,
            &mut warnings,
            |n, v| mysql_vars.set(n, v),
        )?;
        let mut admin_vars = AdminVariables::default();
        apply_variables(
            text,
            "admin",
            &raw.admin_variables,
            &mut warnings,
            |n, v| admin_vars.set(n, v),
        )?;
        let mut pgsql_vars = PgsqlVariables::default();
        apply_variables(
            text,
            "pgsql",
            &raw.pgsql_variables,
            &mut warnings,
            |n, v| pgsql_vars.set(n, v),
        )?;
        cfg.pgsql_variables = pgsql_vars;
        cfg.mysql_variables = mysql_vars;
        cfg.admin_variables = admin_vars;
        cfg.warnings = warnings;
        let mut seen_servers = HashSet::new();
        for row in raw.mysql_servers {
            let offset = row.span().start;
            let s = row.into_inner();
            if s.hostname.trim().is_empty() {
                return Err(invalid(
                    offset,
                    "mysql_servers.hostname: must not be empty".into(),
                ));
            }
            if s.port.0 == 0 {
                return Err(invalid(
                    offset,
                    "mysql_servers.port: must be between 1 and 65535".into(),
                ));
            }
            if !seen_servers.insert((s.hostgroup_id.0, s.hostname.clone(), s.port.0)) {
                return Err(invalid(
                    offset,
                    format!(
                        "mysql_servers: duplicate (hostgroup_id, hostname, port) = ({}, {}, {})",
                        s.hostgroup_id.0, s.hostname, s.port.0
                    ),
                ));
            }
            cfg.mysql_servers.push(s);
        }
        let mut seen_users = HashSet::new();
        for row in raw.mysql_users {
            let offset = row.span().start;
            let u = row.into_inner();
            if u.username.is_empty() {
                return Err(invalid(
                    offset,
                    "mysql_users.username: must not be empty".into(),
                ));
            }
            if u.frontend.0 && !seen_users.insert(u.username.clone()) {
                return Err(invalid(
                    offset,
                    format!("mysql_users: duplicate frontend user {:?}", u.username),
                ));
            }
            if u.password.starts_with('*') && !is_native_hash(&u.password) {
                return Err(invalid(
                    offset,
                    format!(
                        "mysql_users.password for {:?}: starts with '*' but is not a mysql_native_password hash ('*' + 40 hex digits)",
                        u.username
                    ),
                ));
            }
            if !u.attributes.is_empty()
                && serde_json::from_str::<serde_json::Value>(&u.attributes).is_err()
            {
                return Err(invalid(
                    offset,
                    format!(
                        "mysql_users.attributes for {:?}: not valid JSON",
                        u.username
                    ),
                ));
            }
            cfg.mysql_users.push(u);
        }
        let mut seen_hg = HashSet::new();
        for row in raw.mysql_hostgroup_attributes {
            let offset = row.span().start;
            let a = row.into_inner();
            if !seen_hg.insert(a.hostgroup_id.0) {
                return Err(invalid(
                    offset,
                    format!(
                        "mysql_hostgroup_attributes: duplicate hostgroup_id {}",
                        a.hostgroup_id.0
                    ),
                ));
            }
            cfg.mysql_hostgroup_attributes.push(a);
        }
        let mut seen_pg = HashSet::new();
        for row in raw.pgsql_servers {
            let offset = row.span().start;
            let s = row.into_inner();
            if s.hostname.trim().is_empty() || s.port.0 == 0 {
                return Err(invalid(
                    offset,
                    "pgsql_servers: hostname and a port 1..65535 are required".into(),
                ));
            }
            if !seen_pg.insert((s.hostgroup_id.0, s.hostname.clone(), s.port.0)) {
                return Err(invalid(
                    offset,
                    format!(
                        "pgsql_servers: duplicate ({}, {}, {})",
                        s.hostgroup_id.0, s.hostname, s.port.0
                    ),
                ));
            }
            cfg.pgsql_servers.push(s);
        }
        let mut seen_pg_users = HashSet::new();
        // Checked once the replication hostgroups are read: a pair's hostgroup is valid even
        // when the monitor, not the config, puts servers in it.
        let mut pg_user_hostgroups: Vec<(usize, String, u32)> = Vec::new();
        for row in raw.pgsql_users {
            let offset = row.span().start;
            let u = row.into_inner();
            if u.username.is_empty() {
                return Err(invalid(
                    offset,
                    "pgsql_users.username: must not be empty".into(),
                ));
            }
            if u.frontend.0 && !seen_pg_users.insert(u.username.clone()) {
                return Err(invalid(
                    offset,
                    format!("pgsql_users: duplicate frontend user {:?}", u.username),
                ));
            }
            if u.frontend.0 {
                pg_user_hostgroups.push((offset, u.username.clone(), u.default_hostgroup.0));
            }
            cfg.pgsql_users.push(u);
        }
        for (table, rows, fast, out_rules, out_fast) in [
            (
                "mysql_query_rules",
                raw.mysql_query_rules,
                raw.mysql_query_rules_fast_routing,
                &mut cfg.mysql_query_rules,
                &mut cfg.mysql_query_rules_fast_routing,
            ),
            (
                "pgsql_query_rules",
                raw.pgsql_query_rules,
                raw.pgsql_query_rules_fast_routing,
                &mut cfg.pgsql_query_rules,
                &mut cfg.pgsql_query_rules_fast_routing,
            ),
        ] {
            let mut ids = HashSet::new();
            for row in rows {
                let offset = row.span().start;
                let r = row.into_inner();
                if !ids.insert(r.rule_id) {
                    return Err(invalid(
                        offset,
                        format!("{table}: duplicate rule_id {}", r.rule_id),
                    ));
                }
                // Inactive rules are validated too: activating one later must not fail a LOAD.
                let probe = QueryRule {
                    active: Flag(true),
                    ..r.clone()
                };
                if let Err(e) = crate::query::RuleSet::compile(&[probe], &[]) {
                    return Err(invalid(offset, format!("{table} {e}")));
                }
                out_rules.push(r);
            }
            *out_fast = fast;
        }
        for (table, rows, out) in [
            (
                "mysql_replication_hostgroups",
                raw.mysql_replication_hostgroups,
                &mut cfg.mysql_replication_hostgroups,
            ),
            (
                "pgsql_replication_hostgroups",
                raw.pgsql_replication_hostgroups,
                &mut cfg.pgsql_replication_hostgroups,
            ),
        ] {
            let mut used = HashSet::new();
            for row in rows {
                let offset = row.span().start;
                let r = row.into_inner();
                if r.writer_hostgroup == r.reader_hostgroup
                    || !used.insert(r.writer_hostgroup)
                    || !used.insert(r.reader_hostgroup)
                {
                    return Err(invalid(
                        offset,
                        format!(
                            "{table}: ({}, {}): each hostgroup may appear in one pair only, and writer and reader must differ",
                            r.writer_hostgroup, r.reader_hostgroup
                        ),
                    ));
                }
                const CHECKS: [&str; 5] = [
                    "read_only",
                    "innodb_read_only",
                    "super_read_only",
                    "read_only|innodb_read_only",
                    "read_only&innodb_read_only",
                ];
                if !CHECKS.contains(&r.check_type.to_ascii_lowercase().as_str()) {
                    return Err(invalid(
                        offset,
                        format!(
                            "{table}: check_type {:?} is not one of {CHECKS:?}",
                            r.check_type
                        ),
                    ));
                }
                out.push(r);
            }
        }
        let mut seen_gr = HashSet::new();
        let galera_rows: Vec<(bool, Spanned<GroupReplicationHostgroup>)> = raw
            .mysql_group_replication_hostgroups
            .into_iter()
            .map(|r| (false, r))
            .chain(raw.mysql_galera_hostgroups.into_iter().map(|r| (true, r)))
            .collect();
        for (galera, row) in galera_rows {
            let offset = row.span().start;
            let g = row.into_inner();
            let hgs = g.hostgroups();
            let distinct: HashSet<u32> = hgs.iter().copied().collect();
            if distinct.len() != 4
                || hgs.iter().any(|h| !seen_gr.insert(*h))
                || g.writer_is_also_reader > 2
            {
                let table = if galera {
                    "mysql_galera_hostgroups"
                } else {
                    "mysql_group_replication_hostgroups"
                };
                return Err(invalid(
                    offset,
                    format!(
                        "{table} {hgs:?}: the four hostgroups must differ and appear in one row only; writer_is_also_reader is 0, 1 or 2"
                    ),
                ));
            }
            if galera {
                cfg.mysql_galera_hostgroups.push(g);
            } else {
                cfg.mysql_group_replication_hostgroups.push(g);
            }
        }
        let gr_hostgroups: HashSet<u32> = cfg
            .mysql_group_replication_hostgroups
            .iter()
            .chain(&cfg.mysql_galera_hostgroups)
            .flat_map(|g| g.hostgroups())
            .collect();
        let in_pair = |pairs: &[ReplicationHostgroup], hg: u32| {
            pairs
                .iter()
                .any(|p| p.writer_hostgroup == hg || p.reader_hostgroup == hg)
        };
        for (offset, name, hg) in pg_user_hostgroups {
            if !cfg.pgsql_servers.iter().any(|s| s.hostgroup_id.0 == hg)
                && !in_pair(&cfg.pgsql_replication_hostgroups, hg)
            {
                return Err(invalid(
                    offset,
                    format!(
                        "pgsql_users {name:?}: default_hostgroup {hg} is not a hostgroup of any pgsql_servers row"
                    ),
                ));
            }
        }
        for u in cfg.mysql_users.iter().filter(|u| u.frontend.0) {
            let hg = u.default_hostgroup.0;
            if !cfg.mysql_servers.iter().any(|s| s.hostgroup_id.0 == hg)
                && !in_pair(&cfg.mysql_replication_hostgroups, hg)
                && !gr_hostgroups.contains(&hg)
            {
                return Err(Error::ConfigInvalid(format!(
                    "mysql_users {:?}: default_hostgroup {hg} is not a hostgroup of any mysql_servers row",
                    u.username
                )));
            }
        }
        Ok(cfg)
    }
}

/// Applies one `[<prefix>_variables]` section through `set`, collecting warnings for ProxySQL
/// variables accepted without effect; errors name the variable and the line.
fn apply_variables(
    text: &str,
    prefix: &str,
    section: &BTreeMap<String, Spanned<toml::Value>>,
    warnings: &mut Vec<String>,
    mut set: impl FnMut(&str, &str) -> Result<SetOutcome, VariableError>,
) -> Result<(), Error> {
    for (name, value) in section {
        let line = line_of(text, value.span().start);
        let name = name.strip_prefix(&format!("{prefix}-")).unwrap_or(name);
        let at = |msg: String| {
            Error::ConfigInvalid(format!("line {line}: {prefix}_variables.{name}: {msg}"))
        };
        let v = value_text(value.get_ref())
            .ok_or_else(|| at("expected a string, number or boolean".into()))?;
        match set(name, &v) {
            Ok(SetOutcome::Applied) => {}
            Ok(SetOutcome::AcceptedWithoutEffect) => warnings.push(format!(
                "{prefix}_variables.{name} (line {line}) is a ProxySQL variable this version of Sluice accepts but does not implement yet"
            )),
            Err(e) => return Err(at(e.to_string())),
        }
    }
    Ok(())
}

/// True for a `mysql_native_password` hash as stored by MySQL: `*` followed by 40 hex digits.
pub fn is_native_hash(s: &str) -> bool {
    s.len() == 41 && s.starts_with('*') && s[1..].bytes().all(|b| b.is_ascii_hexdigit())
}

#[cfg(test)]
mod tests;

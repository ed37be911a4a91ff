//! Reading a config file: the TOML is deserialized into raw tables (with their positions), then
//! each table is checked and moved into a [`Config`]. Errors name the table, the key and the
//! line.

use super::*;
use crate::Error;
use serde::Deserialize;
use std::collections::{BTreeMap, HashSet};
use toml::Spanned;

mod mcp_rows;
mod rag_rows;
mod topology_rows;
mod workload_rows;

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
    #[serde(default)]
    mysql_servers_ssl_params: Vec<Spanned<ServerSslParams>>,
    #[serde(default)]
    pgsql_servers_ssl_params: Vec<Spanned<ServerSslParams>>,
    #[serde(default)]
    proxysql_servers: Vec<Spanned<ProxysqlServer>>,
    #[serde(default)]
    mcp_variables: BTreeMap<String, Spanned<toml::Value>>,
    #[serde(default)]
    mcp_users: Vec<Spanned<McpUser>>,
    #[serde(default)]
    mcp_targets: Vec<Spanned<McpTarget>>,
    #[serde(default)]
    mcp_query_rules: Vec<Spanned<McpQueryRule>>,
    #[serde(default)]
    rag_sources: Vec<Spanned<RagSource>>,
    #[serde(default)]
    workload_classes: Vec<Spanned<WorkloadClass>>,
    #[serde(default)]
    workload_guards: Vec<Spanned<WorkloadGuard>>,
    cluster: Option<RawCluster>,
}

/// `[cluster]`: where the fleet's configuration lives.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawCluster {
    config_store: Option<String>,
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

/// Parses and validates config text (see [`Config::parse`]).
pub(super) fn parse(text: &str) -> Result<Config, Error> {
    let raw: RawFile = toml::from_str(text).map_err(|e| Error::ConfigInvalid(e.to_string()))?;
    let mut r = Reader {
        text,
        cfg: Config {
            datadir: raw.datadir,
            config_store: raw
                .cluster
                .and_then(|c| c.config_store)
                .filter(|s| !s.trim().is_empty()),
            ..Config::default()
        },
    };
    r.variables(
        &raw.mysql_variables,
        &raw.admin_variables,
        &raw.pgsql_variables,
    )?;
    r.mysql_servers(raw.mysql_servers)?;
    r.mysql_users(raw.mysql_users)?;
    r.hostgroup_attributes(raw.mysql_hostgroup_attributes)?;
    r.pgsql_servers(raw.pgsql_servers)?;
    let pg_user_hostgroups = r.pgsql_users(raw.pgsql_users)?;
    r.workload_classes(raw.workload_classes)?;
    r.workload_guards(raw.workload_guards)?;
    r.query_rules(
        "mysql_query_rules",
        raw.mysql_query_rules,
        raw.mysql_query_rules_fast_routing,
    )?;
    r.query_rules(
        "pgsql_query_rules",
        raw.pgsql_query_rules,
        raw.pgsql_query_rules_fast_routing,
    )?;
    r.replication_hostgroups(
        "mysql_replication_hostgroups",
        raw.mysql_replication_hostgroups,
    )?;
    r.replication_hostgroups(
        "pgsql_replication_hostgroups",
        raw.pgsql_replication_hostgroups,
    )?;
    r.cluster_hostgroups(
        raw.mysql_group_replication_hostgroups,
        raw.mysql_galera_hostgroups,
    )?;
    r.default_hostgroups(pg_user_hostgroups)?;
    r.cfg.mysql_servers_ssl_params =
        r.ssl_params("mysql_servers_ssl_params", raw.mysql_servers_ssl_params)?;
    r.cfg.pgsql_servers_ssl_params =
        r.ssl_params("pgsql_servers_ssl_params", raw.pgsql_servers_ssl_params)?;
    r.proxysql_servers(raw.proxysql_servers)?;
    let mcp = &mut r.cfg.mcp_variables;
    apply_variables(
        text,
        "mcp",
        &raw.mcp_variables,
        &mut r.cfg.warnings,
        |n, v| mcp.set(n, v),
    )?;
    r.mcp_users(raw.mcp_users)?;
    r.mcp_targets(raw.mcp_targets)?;
    r.mcp_query_rules(raw.mcp_query_rules)?;
    r.rag_sources(raw.rag_sources)?;
    Ok(r.cfg)
}

/// A config being read: the text (for line numbers) and what has been checked so far.
struct Reader<'a> {
    text: &'a str,
    cfg: Config,
}

/// Where a frontend `pgsql_users` row sends its clients: (offset, user, default hostgroup).
type UserHostgroup = (usize, String, u32);

impl Reader<'_> {
    /// A config error at byte `offset` of the text.
    fn invalid(&self, offset: usize, msg: String) -> Error {
        Error::ConfigInvalid(format!("line {}: {msg}", line_of(self.text, offset)))
    }

    fn variables(
        &mut self,
        mysql: &BTreeMap<String, Spanned<toml::Value>>,
        admin: &BTreeMap<String, Spanned<toml::Value>>,
        pgsql: &BTreeMap<String, Spanned<toml::Value>>,
    ) -> Result<(), Error> {
        let (text, cfg) = (self.text, &mut self.cfg);
        let warnings = &mut cfg.warnings;
        let my = &mut cfg.mysql_variables;
        apply_variables(text, "mysql", mysql, warnings, |n, v| my.set(n, v))?;
        let ad = &mut cfg.admin_variables;
        apply_variables(text, "admin", admin, warnings, |n, v| ad.set(n, v))?;
        let pg = &mut cfg.pgsql_variables;
        apply_variables(text, "pgsql", pgsql, warnings, |n, v| pg.set(n, v))
    }

    fn mysql_servers(&mut self, rows: Vec<Spanned<MysqlServer>>) -> Result<(), Error> {
        let mut seen = HashSet::new();
        for row in rows {
            let offset = row.span().start;
            let s = row.into_inner();
            if s.hostname.trim().is_empty() {
                return Err(
                    self.invalid(offset, "mysql_servers.hostname: must not be empty".into())
                );
            }
            if s.port.0 == 0 {
                return Err(self.invalid(
                    offset,
                    "mysql_servers.port: must be between 1 and 65535".into(),
                ));
            }
            if !seen.insert((s.hostgroup_id.0, s.hostname.clone(), s.port.0)) {
                return Err(self.invalid(
                    offset,
                    format!(
                        "mysql_servers: duplicate (hostgroup_id, hostname, port) = ({}, {}, {})",
                        s.hostgroup_id.0, s.hostname, s.port.0
                    ),
                ));
            }
            self.cfg.mysql_servers.push(s);
        }
        Ok(())
    }

    fn mysql_users(&mut self, rows: Vec<Spanned<MysqlUser>>) -> Result<(), Error> {
        let mut seen = HashSet::new();
        for row in rows {
            let offset = row.span().start;
            let u = row.into_inner();
            if u.username.is_empty() {
                return Err(self.invalid(offset, "mysql_users.username: must not be empty".into()));
            }
            if u.frontend.0 && !seen.insert(u.username.clone()) {
                return Err(self.invalid(
                    offset,
                    format!("mysql_users: duplicate frontend user {:?}", u.username),
                ));
            }
            if u.password.starts_with('*') && !is_native_hash(&u.password) {
                return Err(self.invalid(
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
                return Err(self.invalid(
                    offset,
                    format!(
                        "mysql_users.attributes for {:?}: not valid JSON",
                        u.username
                    ),
                ));
            }
            self.cfg.mysql_users.push(u);
        }
        Ok(())
    }

    /// `table` rows: one per (hostname, port, username), a valid `ssl_verify`; columns this
    /// version does not use are a warning.
    fn ssl_params(
        &mut self,
        table: &str,
        rows: Vec<Spanned<ServerSslParams>>,
    ) -> Result<Vec<ServerSslParams>, Error> {
        let mut seen = HashSet::new();
        let mut out = Vec::new();
        for row in rows {
            let offset = row.span().start;
            let p = row.into_inner();
            let key = (p.hostname.clone(), p.port, p.username.clone());
            if !seen.insert(key) {
                return Err(self.invalid(
                    offset,
                    format!(
                        "{table}: duplicate row for {}:{} user '{}'",
                        p.hostname, p.port, p.username
                    ),
                ));
            }
            if let Err(e) = BackendVerify::parse(&table[..5], "ssl_verify", &p.ssl_verify) {
                return Err(self.invalid(offset, format!("{table}: {e}")));
            }
            let unused = p.unused_columns();
            if !unused.is_empty() {
                self.cfg.warnings.push(format!(
                    "{table} {}:{}: {} accepted but not used in this version",
                    p.hostname,
                    p.port,
                    unused.join(", ")
                ));
            }
            out.push(p);
        }
        Ok(out)
    }

    fn proxysql_servers(&mut self, rows: Vec<Spanned<ProxysqlServer>>) -> Result<(), Error> {
        let mut seen = HashSet::new();
        for row in rows {
            let offset = row.span().start;
            let p = row.into_inner();
            if p.hostname.trim().is_empty() || p.port == 0 {
                return Err(self.invalid(
                    offset,
                    "proxysql_servers: a peer needs a hostname and a port".into(),
                ));
            }
            if !seen.insert((p.hostname.clone(), p.port)) {
                return Err(self.invalid(
                    offset,
                    format!("proxysql_servers: duplicate peer {}:{}", p.hostname, p.port),
                ));
            }
            self.cfg.proxysql_servers.push(p);
        }
        Ok(())
    }

    fn hostgroup_attributes(
        &mut self,
        rows: Vec<Spanned<MysqlHostgroupAttributes>>,
    ) -> Result<(), Error> {
        let mut seen = HashSet::new();
        for row in rows {
            let offset = row.span().start;
            let a = row.into_inner();
            if !seen.insert(a.hostgroup_id.0) {
                return Err(self.invalid(
                    offset,
                    format!(
                        "mysql_hostgroup_attributes: duplicate hostgroup_id {}",
                        a.hostgroup_id.0
                    ),
                ));
            }
            self.cfg.mysql_hostgroup_attributes.push(a);
        }
        Ok(())
    }

    fn pgsql_servers(&mut self, rows: Vec<Spanned<PgsqlServer>>) -> Result<(), Error> {
        let mut seen = HashSet::new();
        for row in rows {
            let offset = row.span().start;
            let s = row.into_inner();
            if s.hostname.trim().is_empty() || s.port.0 == 0 {
                return Err(self.invalid(
                    offset,
                    "pgsql_servers: hostname and a port 1..65535 are required".into(),
                ));
            }
            if !seen.insert((s.hostgroup_id.0, s.hostname.clone(), s.port.0)) {
                return Err(self.invalid(
                    offset,
                    format!(
                        "pgsql_servers: duplicate ({}, {}, {})",
                        s.hostgroup_id.0, s.hostname, s.port.0
                    ),
                ));
            }
            self.cfg.pgsql_servers.push(s);
        }
        Ok(())
    }

    /// Reads `pgsql_users`; returns the frontend users' default hostgroups, checked once the
    /// replication hostgroups are read (a pair's hostgroup is valid even when the monitor, not
    /// the config, puts servers in it).
    fn pgsql_users(&mut self, rows: Vec<Spanned<PgsqlUser>>) -> Result<Vec<UserHostgroup>, Error> {
        let mut seen = HashSet::new();
        let mut hostgroups = Vec::new();
        for row in rows {
            let offset = row.span().start;
            let u = row.into_inner();
            if u.username.is_empty() {
                return Err(self.invalid(offset, "pgsql_users.username: must not be empty".into()));
            }
            if u.frontend.0 && !seen.insert(u.username.clone()) {
                return Err(self.invalid(
                    offset,
                    format!("pgsql_users: duplicate frontend user {:?}", u.username),
                ));
            }
            if u.frontend.0 {
                hostgroups.push((offset, u.username.clone(), u.default_hostgroup.0));
            }
            self.cfg.pgsql_users.push(u);
        }
        Ok(hostgroups)
    }

    /// `table` is `mysql_query_rules` or `pgsql_query_rules`.
    fn query_rules(
        &mut self,
        table: &str,
        rows: Vec<Spanned<QueryRule>>,
        fast: Vec<FastRoute>,
    ) -> Result<(), Error> {
        let mut ids = HashSet::new();
        let mut rules = Vec::with_capacity(rows.len());
        for row in rows {
            let offset = row.span().start;
            let r = row.into_inner();
            if !ids.insert(r.rule_id) {
                return Err(
                    self.invalid(offset, format!("{table}: duplicate rule_id {}", r.rule_id))
                );
            }
            // Inactive rules are validated too: activating one later must not fail a LOAD.
            if let Err(e) = r.compile_parts() {
                return Err(self.invalid(offset, format!("{table} {e}")));
            }
            if let Some(class) = crate::rule_class(r.workload_class.as_deref(), &r.attributes)
                && !self.knows_class(&class)
            {
                return Err(self.invalid(
                    offset,
                    format!(
                        "{table}.workload_class: rule {} names class {class:?}, which is not in workload_classes",
                        r.rule_id
                    ),
                ));
            }
            rules.push(r);
        }
        let (out_rules, out_fast) = if table.starts_with("mysql") {
            (
                &mut self.cfg.mysql_query_rules,
                &mut self.cfg.mysql_query_rules_fast_routing,
            )
        } else {
            (
                &mut self.cfg.pgsql_query_rules,
                &mut self.cfg.pgsql_query_rules_fast_routing,
            )
        };
        *out_rules = rules;
        *out_fast = fast;
        Ok(())
    }

    /// Every frontend user's default hostgroup has servers, or is managed (a replication pair,
    /// a Group Replication / Galera cluster) so the monitor puts servers in it.
    fn default_hostgroups(&self, pg_users: Vec<UserHostgroup>) -> Result<(), Error> {
        let cfg = &self.cfg;
        let cluster: HashSet<u32> = cfg
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
        for (offset, name, hg) in pg_users {
            if !cfg.pgsql_servers.iter().any(|s| s.hostgroup_id.0 == hg)
                && !in_pair(&cfg.pgsql_replication_hostgroups, hg)
            {
                return Err(self.invalid(
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
                && !cluster.contains(&hg)
            {
                return Err(Error::ConfigInvalid(format!(
                    "mysql_users {:?}: default_hostgroup {hg} is not a hostgroup of any mysql_servers row",
                    u.username
                )));
            }
        }
        Ok(())
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

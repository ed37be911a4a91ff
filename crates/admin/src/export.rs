//! Writing a [`Config`] back as a TOML config file that loads to the same configuration.

use sluice_core::config::Config;
use toml::{Table, Value};

fn rows<T: serde::Serialize>(items: &[T]) -> Result<Value, crate::Error> {
    let mut arr = Vec::with_capacity(items.len());
    for i in items {
        arr.push(Value::try_from(i)?);
    }
    Ok(Value::Array(arr))
}

fn vars(pairs: Vec<(String, String)>) -> Value {
    Value::Table(
        pairs
            .into_iter()
            .map(|(k, v)| (k, Value::String(v)))
            .collect::<Table>(),
    )
}

/// Serializes `cfg` in the config-file format ([`Config::parse`] reads it back).
pub fn config_to_toml(cfg: &Config) -> Result<String, crate::Error> {
    let mut t = Table::new();
    if let Some(d) = &cfg.datadir {
        t.insert("datadir".into(), Value::String(d.clone()));
    }
    if let Some(url) = &cfg.config_store {
        let mut c = Table::new();
        c.insert("config_store".into(), Value::String(url.clone()));
        t.insert("cluster".into(), Value::Table(c));
    }
    t.insert("admin_variables".into(), vars(cfg.admin_variables.pairs()));
    t.insert("mysql_variables".into(), vars(cfg.mysql_variables.pairs()));
    t.insert("mysql_servers".into(), rows(&cfg.mysql_servers)?);
    t.insert("mysql_users".into(), rows(&cfg.mysql_users)?);
    t.insert(
        "mysql_hostgroup_attributes".into(),
        rows(&cfg.mysql_hostgroup_attributes)?,
    );
    t.insert("pgsql_variables".into(), vars(cfg.pgsql_variables.pairs()));
    t.insert("pgsql_servers".into(), rows(&cfg.pgsql_servers)?);
    t.insert("pgsql_users".into(), rows(&cfg.pgsql_users)?);
    t.insert("mcp_variables".into(), vars(cfg.mcp_variables.pairs()));
    t.insert("mcp_users".into(), rows(&cfg.mcp_users)?);
    t.insert("mcp_targets".into(), rows(&cfg.mcp_targets)?);
    t.insert("mcp_query_rules".into(), rows(&cfg.mcp_query_rules)?);
    t.insert("rag_sources".into(), rows(&cfg.rag_sources)?);
    t.insert("workload_classes".into(), rows(&cfg.workload_classes)?);
    t.insert("workload_guards".into(), rows(&cfg.workload_guards)?);
    t.insert(
        "mysql_servers_ssl_params".into(),
        rows(&cfg.mysql_servers_ssl_params)?,
    );
    t.insert(
        "pgsql_servers_ssl_params".into(),
        rows(&cfg.pgsql_servers_ssl_params)?,
    );
    t.insert(
        "mysql_replication_hostgroups".into(),
        rows(&cfg.mysql_replication_hostgroups)?,
    );
    t.insert(
        "pgsql_replication_hostgroups".into(),
        rows(&cfg.pgsql_replication_hostgroups)?,
    );
    t.insert(
        "mysql_group_replication_hostgroups".into(),
        rows(&cfg.mysql_group_replication_hostgroups)?,
    );
    t.insert(
        "mysql_galera_hostgroups".into(),
        rows(&cfg.mysql_galera_hostgroups)?,
    );
    t.insert("mysql_query_rules".into(), rows(&cfg.mysql_query_rules)?);
    t.insert(
        "mysql_query_rules_fast_routing".into(),
        rows(&cfg.mysql_query_rules_fast_routing)?,
    );
    t.insert("pgsql_query_rules".into(), rows(&cfg.pgsql_query_rules)?);
    t.insert(
        "pgsql_query_rules_fast_routing".into(),
        rows(&cfg.pgsql_query_rules_fast_routing)?,
    );
    t.insert("proxysql_servers".into(), rows(&cfg.proxysql_servers)?);
    let body = toml::to_string(&t)?;
    Ok(format!(
        "# Sluice configuration exported by SAVE CONFIG TO FILE.\n{body}"
    ))
}

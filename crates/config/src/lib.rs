//! sluice-config: the config model, pure data and its validation. ProxySQL's tables and
//! variables, read from a TOML file whose sections carry the admin tables' names
//! (`[mysql_variables]`, `[[mysql_servers]]`, `[[mysql_users]]`). No sockets, no runtime state:
//! `sluice-core` builds its runtime snapshot from a [`Config`] and re-exports this crate as
//! `sluice_core::config`.

mod admin_variables;
mod causal_variables;
mod client_host_variables;
mod cluster;
mod columns;
mod declared;
mod error;
mod listen_variables;
mod mcp;
mod monitor_variables;
mod mysql_tables;
mod mysql_variables;
mod pgsql;
mod proxysql_names;
mod query_rules;
mod query_variables;
mod rag;
mod reader;
mod reference;
mod row_error;
mod rows;
mod server_ssl_params;
mod tls_settings;
mod topology_tables;
mod values;
mod workload;

pub use admin_variables::AdminVariables;
pub use causal_variables::{CausalFallback, CausalMode, CausalReadVariables};
pub use client_host_variables::ClientHostVariables;
pub use cluster::{
    CLUSTER_MODULES, ClusterVariables, ModuleSync, NODE_LOCAL_VARIABLES, ProxysqlServer,
};
pub use columns::table_columns;
pub use declared::VariableRow;
pub use error::{Error, RuleError};
pub use listen_variables::{ListenMode, ListenVariables};
pub use mcp::{McpQueryRule, McpTarget, McpUser, McpVariables};
pub use monitor_variables::MonitorVariables;
pub use mysql_tables::{MysqlHostgroupAttributes, MysqlServer, MysqlUser};
pub use mysql_variables::{MysqlVariables, SetOutcome};
pub use pgsql::{PgsqlServer, PgsqlUser, PgsqlVariables};
pub use proxysql_names::PROXYSQL_MYSQL_VARIABLES;
pub use query_rules::{FastRoute, QueryRule, RuleParts};
pub use query_variables::QueryVariables;
pub use rag::{RagSource, TemplateError, TemplatePart, is_identifier, parse_template};
pub use reference::{variables_markdown, variables_reference};
pub use row_error::RowError;
pub use server_ssl_params::ServerSslParams;
pub use tls_settings::{BackendTls, BackendVerify, FrontendTls, TlsVersions};
pub use topology_tables::{GroupReplicationHostgroup, ReplicationHostgroup};
pub use values::*;
pub use workload::{DEFAULT_CLASS, Priority, WorkloadClass, WorkloadGuard, rule_class};

use std::path::Path;

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
    /// `mysql_servers_ssl_params` rows: backend TLS per server (and user).
    pub mysql_servers_ssl_params: Vec<ServerSslParams>,
    /// `pgsql_servers_ssl_params` rows.
    pub pgsql_servers_ssl_params: Vec<ServerSslParams>,
    /// `proxysql_servers` rows: the cluster peers this node polls.
    pub proxysql_servers: Vec<ProxysqlServer>,
    /// `mcp-*` variables.
    pub mcp_variables: McpVariables,
    /// `mcp_users` rows: the agents allowed on the MCP endpoint.
    pub mcp_users: Vec<McpUser>,
    /// `mcp_targets` rows: where agents' SQL may run.
    pub mcp_targets: Vec<McpTarget>,
    /// `mcp_query_rules` rows.
    pub mcp_query_rules: Vec<McpQueryRule>,
    /// `rag_sources` rows: tables whose rows the retrieval index holds.
    pub rag_sources: Vec<RagSource>,
    /// `workload_classes` rows: admission control's classes, by name.
    pub workload_classes: Vec<WorkloadClass>,
    /// `workload_guards` rows: signals that slow down or shed classes, by guard_id.
    pub workload_guards: Vec<WorkloadGuard>,
    /// `[cluster] config_store`: the shared configuration store (`etcd://host:port,…/prefix`);
    /// `None`: none (peers sync with `proxysql_servers`, if set).
    pub config_store: Option<String>,
    /// Warnings worth logging at start (e.g. variables accepted without effect).
    pub warnings: Vec<String>,
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
        reader::parse(text)
    }
}

/// True for a `mysql_native_password` hash as stored by MySQL: `*` followed by 40 hex digits.
pub fn is_native_hash(s: &str) -> bool {
    s.len() == 41 && s.starts_with('*') && s[1..].bytes().all(|b| b.is_ascii_hexdigit())
}

/// How many session threads a `*-threads` setting asks for: the setting, or when it is 0 one per
/// CPU but one (`cpus - 1`, at least 1, at most 255). The core left over serves the kernel's
/// network work (about half of a proxy's CPU is in `sendto`/`recvfrom` and the wake-ups), the
/// other protocol's loops and the box's other processes: on two cores one loop per protocol beat
/// two in every throughput run (docs/benchmarks.md, "Session threads by default"). A host that
/// gives the proxy all its cores sets the number.
fn session_threads(setting: u32, cpus: usize) -> usize {
    match setting {
        0 => cpus.saturating_sub(1).clamp(1, 255),
        n => n as usize,
    }
}

#[cfg(test)]
mod tests;

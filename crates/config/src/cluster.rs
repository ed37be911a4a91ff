//! ProxySQL Cluster's configuration: the `proxysql_servers` table (the peers a node polls) and the
//! `admin-cluster_*` variables (credentials, polling rhythm, and per module how many differing
//! checks in a row trigger a pull and whether a pulled module is saved to disk).

use super::declared::{Int, Text, VariableRow, variables};
use super::values::{VariableError, parse_var_bool, parse_var_int};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// The configuration modules a cluster keeps in step, by ProxySQL's names (the `name` column of
/// `runtime_checksums_values`; the `<module>` of `cluster_<module>_diffs_before_sync`).
pub const CLUSTER_MODULES: [&str; 10] = [
    "admin_variables",
    "mysql_query_rules",
    "mysql_servers",
    "mysql_users",
    "mysql_variables",
    "pgsql_query_rules",
    "pgsql_servers",
    "pgsql_users",
    "pgsql_variables",
    "proxysql_servers",
];

/// Variables that describe one node rather than the fleet: never part of a module's checksum,
/// never copied from a peer (listeners, threads, the cluster's own credentials, local files).
pub const NODE_LOCAL_VARIABLES: [&str; 11] = [
    "admin-mysql_ifaces",
    "admin-pgsql_ifaces",
    "admin-restapi_interface",
    "admin-restapi_port",
    "admin-ssl_keylog_file",
    "admin-cluster_username",
    "admin-cluster_password",
    "mysql-interfaces",
    "mysql-threads",
    "pgsql-interfaces",
    "pgsql-threads",
];

/// One `proxysql_servers` row: a peer node's admin endpoint.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProxysqlServer {
    /// The peer's host name or address.
    pub hostname: String,
    /// Its MySQL-protocol admin port (ProxySQL's default 6032).
    #[serde(default = "default_admin_port")]
    pub port: u16,
    /// Accepted for compatibility (ProxySQL does not use it for sync either).
    #[serde(default)]
    pub weight: u32,
    /// Free text.
    #[serde(default)]
    pub comment: String,
}

fn default_admin_port() -> u16 {
    6032
}

/// How one module is synchronised.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ModuleSync {
    /// Pull after this many checks in a row saw a peer's newer, different checksum; 0 never
    /// pulls this module.
    pub diffs_before_sync: u32,
    /// Save a pulled module to the disk layer as well.
    pub save_to_disk: bool,
}

impl Default for ModuleSync {
    fn default() -> Self {
        ModuleSync {
            diffs_before_sync: 3,
            save_to_disk: true,
        }
    }
}

variables! {
    /// The `admin-cluster_*` variables.
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub struct ClusterVariables for _prefix {
        /// The account a node logs in to its peers' admin with; empty: no clustering.
        username: String = String::new() => "cluster_username", Text;
        /// Its password (the peers must list the account in `admin-admin_credentials`).
        password: String = String::new() => "cluster_password", Text;
        /// How often each peer is polled (ms).
        check_interval_ms: u32 = 1000 => "cluster_check_interval_ms", Int(10, 300_000);
        /// Every this many checks, the peer's traffic counters are read too.
        check_status_frequency: u32 = 10 => "cluster_check_status_frequency", Int(0, 10_000);
    }
    other {
        /// Per module (by [`CLUSTER_MODULES`] name): `cluster_<module>_diffs_before_sync` and
        /// `cluster_<module>_save_to_disk`.
        modules: BTreeMap<&'static str, ModuleSync> = CLUSTER_MODULES
            .iter()
            .map(|m| (*m, ModuleSync::default()))
            .collect();
    }
}

impl Default for ClusterVariables {
    fn default() -> Self {
        ClusterVariables::defaults_for("admin")
    }
}

impl ClusterVariables {
    /// Sets `cluster_<rest>` from text; `Ok(false)` when `rest` is not a cluster variable Sluice
    /// implements.
    pub fn set(&mut self, rest: &str, value: &str) -> Result<bool, VariableError> {
        let name = format!("cluster_{rest}");
        if let Some(r) = self.set_variable("admin", &name, value) {
            return r.map(|()| true);
        }
        let Some((module, setting)) = rest
            .strip_suffix("_diffs_before_sync")
            .map(|m| (m, true))
            .or_else(|| rest.strip_suffix("_save_to_disk").map(|m| (m, false)))
        else {
            return Ok(false);
        };
        let Some(entry) = CLUSTER_MODULES
            .iter()
            .find(|m| **m == module)
            .and_then(|m| self.modules.get_mut(m))
        else {
            return Ok(false);
        };
        if setting {
            entry.diffs_before_sync = parse_var_int("admin", &name, value, 0, 1000)? as u32;
        } else {
            entry.save_to_disk = parse_var_bool("admin", &name, value)?;
        }
        Ok(true)
    }

    /// Every cluster variable as (name without the `admin-` prefix, value).
    pub fn pairs(&self) -> Vec<(String, String)> {
        let mut v = self.variable_pairs("admin");
        for (m, s) in &self.modules {
            v.push((
                format!("cluster_{m}_diffs_before_sync"),
                s.diffs_before_sync.to_string(),
            ));
            v.push((
                format!("cluster_{m}_save_to_disk"),
                s.save_to_disk.to_string(),
            ));
        }
        v
    }

    /// The reference table's rows: the declared variables, then the two per-module ones.
    pub(crate) fn describe(out: &mut Vec<VariableRow>) {
        ClusterVariables::describe_variables("admin", out);
        let defaults = ModuleSync::default();
        let modules: Vec<String> = CLUSTER_MODULES.iter().map(|m| format!("`{m}`")).collect();
        out.push(VariableRow {
            name: "admin-cluster_<module>_diffs_before_sync".into(),
            default: defaults.diffs_before_sync.to_string(),
            takes: "0 – 1000".into(),
            restart: false,
            doc: format!(
                "Pull a module after this many checks in a row saw a peer's newer, different \
                 checksum; 0 never pulls it. `<module>` is one of {}.",
                modules.join(", ")
            ),
        });
        out.push(VariableRow {
            name: "admin-cluster_<module>_save_to_disk".into(),
            default: defaults.save_to_disk.to_string(),
            takes: "true or false".into(),
            restart: false,
            doc: "Save a module pulled from a peer to the disk layer as well.".into(),
        });
    }

    /// The settings of `module` (defaults for a name that is not a cluster module).
    pub fn module(&self, module: &str) -> ModuleSync {
        self.modules.get(module).copied().unwrap_or_default()
    }

    /// True when the node takes part in a ProxySQL-style cluster.
    pub fn enabled(&self) -> bool {
        !self.username.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn module_settings_are_set_by_their_proxysql_names() {
        let mut c = ClusterVariables::default();
        assert!(c.set("mysql_servers_diffs_before_sync", "5").unwrap());
        assert!(c.set("pgsql_users_save_to_disk", "false").unwrap());
        assert_eq!(c.module("mysql_servers").diffs_before_sync, 5);
        assert!(!c.module("pgsql_users").save_to_disk);
        assert!(c.module("mysql_users").save_to_disk);
        assert!(!c.set("ldap_variables_diffs_before_sync", "3").unwrap());
        assert!(c.set("mysql_servers_diffs_before_sync", "x").is_err());
        assert!(c.set("check_interval_ms", "1").is_err(), "below the bound");
        let names: Vec<String> = c.pairs().into_iter().map(|(n, _)| n).collect();
        assert!(names.contains(&"cluster_pgsql_variables_diffs_before_sync".to_string()));
        assert_eq!(names.len(), 4 + 2 * CLUSTER_MODULES.len());
    }
}

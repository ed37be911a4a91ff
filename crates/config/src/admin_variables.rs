//! `admin-*` global variables.

use super::SetOutcome;
use super::cluster::ClusterVariables;
use super::proxysql_names::PROXYSQL_ADMIN_VARIABLES;
use super::values::{VariableError, check_host_ports, parse_var_bool, parse_var_int};
use std::collections::BTreeMap;

/// The `admin-` variables Sluice implements.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AdminVariables {
    /// `user:password[;user:password...]` with full admin rights.
    pub admin_credentials: String,
    /// `user:password[;...]` with read-only access to the stats schema.
    pub stats_credentials: String,
    /// Where the MySQL-protocol admin listens (Sluice default: loopback only).
    pub mysql_ifaces: String,
    /// Where the PostgreSQL-protocol admin listens (Sluice default: loopback only).
    pub pgsql_ifaces: String,
    /// Serve `/metrics`, `/healthz` and `/readyz` over HTTP (ProxySQL's REST API switch; off by
    /// default, as in ProxySQL).
    pub restapi_enabled: bool,
    /// The HTTP port (ProxySQL's default 6070).
    pub restapi_port: u16,
    /// The address the HTTP port listens on (Sluice addition; loopback by default, so metrics
    /// and probes are not exposed unless asked for).
    pub restapi_interface: String,
    /// ProxySQL's web UI switch: also serve the HTTP port's routes (the status page at
    /// `/status`, `/metrics`, probes) on `web_port` (read at start).
    pub web_enabled: bool,
    /// ProxySQL's web UI port (default 6080), on `restapi_interface`.
    pub web_port: u16,
    /// Where the secrets of every TLS session Sluice terminates or originates are appended, in
    /// the NSS key log format Wireshark reads (empty: off; read at start).
    pub ssl_keylog_file: String,
    /// `LOAD MYSQL USERS TO RUNTIME` stores cleartext `mysql_users` passwords in the runtime as
    /// `mysql_native_password` hashes (`*` + 40 hex), which `SAVE MYSQL USERS FROM RUNTIME`
    /// brings into memory and `SAVE … TO DISK` onto disk, as ProxySQL does. Off by default
    /// (ProxySQL: on): with only a hash, a `caching_sha2_password` login needs TLS.
    pub hash_passwords: bool,
    /// `cluster_*`: ProxySQL Cluster's credentials, rhythm and per-module sync settings.
    pub cluster: ClusterVariables,
    /// ProxySQL variables accepted for compatibility that have no effect in this version.
    pub accepted_unimplemented: BTreeMap<String, String>,
}

impl Default for AdminVariables {
    fn default() -> Self {
        AdminVariables {
            admin_credentials: "admin:admin".into(),
            stats_credentials: "stats:stats".into(),
            mysql_ifaces: "127.0.0.1:6032".into(),
            pgsql_ifaces: "127.0.0.1:6132".into(),
            restapi_enabled: false,
            restapi_port: 6070,
            restapi_interface: "127.0.0.1".into(),
            web_enabled: false,
            web_port: 6080,
            ssl_keylog_file: String::new(),
            hash_passwords: false,
            cluster: ClusterVariables::default(),
            accepted_unimplemented: BTreeMap::new(),
        }
    }
}

fn check_creds(name: &str, v: &str) -> Result<(), VariableError> {
    if v.split(';')
        .filter(|c| !c.is_empty())
        .all(|c| c.split_once(':').is_some_and(|(u, _)| !u.is_empty()))
    {
        Ok(())
    } else {
        Err(VariableError::malformed(
            "admin",
            name,
            v,
            "a ';'-separated user:password list",
        ))
    }
}

impl AdminVariables {
    /// Sets one variable from text.
    pub fn set(&mut self, name: &str, value: &str) -> Result<SetOutcome, VariableError> {
        match name {
            "admin_credentials" => {
                check_creds(name, value)?;
                self.admin_credentials = value.to_string();
            }
            "stats_credentials" => {
                check_creds(name, value)?;
                self.stats_credentials = value.to_string();
            }
            "mysql_ifaces" => {
                check_host_ports("admin", name, value)?;
                self.mysql_ifaces = value.to_string();
            }
            "pgsql_ifaces" => {
                check_host_ports("admin", name, value)?;
                self.pgsql_ifaces = value.to_string();
            }
            "restapi_enabled" => self.restapi_enabled = parse_var_bool("admin", name, value)?,
            "restapi_port" => {
                self.restapi_port = parse_var_int("admin", name, value, 1, 65_535)? as u16
            }
            "restapi_interface" => {
                if value.trim().is_empty() || value.contains(';') {
                    return Err(VariableError::malformed(
                        "admin",
                        name,
                        value,
                        "one host name or address",
                    ));
                }
                self.restapi_interface = value.trim().to_string();
            }
            "web_enabled" => self.web_enabled = parse_var_bool("admin", name, value)?,
            "web_port" => self.web_port = parse_var_int("admin", name, value, 1, 65_535)? as u16,
            "ssl_keylog_file" => self.ssl_keylog_file = value.trim().to_string(),
            "hash_passwords" => self.hash_passwords = parse_var_bool("admin", name, value)?,
            _ if name
                .strip_prefix("cluster_")
                .map(|rest| self.cluster.set(rest, value))
                .transpose()?
                .unwrap_or(false) => {}
            _ if PROXYSQL_ADMIN_VARIABLES.contains(&name) => {
                self.accepted_unimplemented
                    .insert(name.to_string(), value.to_string());
                return Ok(SetOutcome::AcceptedWithoutEffect);
            }
            _ => return Err(VariableError::unknown("admin", name)),
        }
        Ok(SetOutcome::Applied)
    }

    /// Every variable as (name without prefix, value), implemented ones first.
    pub fn pairs(&self) -> Vec<(String, String)> {
        let mut v = vec![
            (
                "admin_credentials".to_string(),
                self.admin_credentials.clone(),
            ),
            (
                "stats_credentials".to_string(),
                self.stats_credentials.clone(),
            ),
            ("mysql_ifaces".to_string(), self.mysql_ifaces.clone()),
            ("pgsql_ifaces".to_string(), self.pgsql_ifaces.clone()),
            (
                "restapi_enabled".to_string(),
                self.restapi_enabled.to_string(),
            ),
            ("restapi_port".to_string(), self.restapi_port.to_string()),
            (
                "restapi_interface".to_string(),
                self.restapi_interface.clone(),
            ),
            ("web_enabled".to_string(), self.web_enabled.to_string()),
            ("web_port".to_string(), self.web_port.to_string()),
            ("ssl_keylog_file".to_string(), self.ssl_keylog_file.clone()),
            (
                "hash_passwords".to_string(),
                self.hash_passwords.to_string(),
            ),
        ];
        v.extend(self.cluster.pairs());
        v.extend(
            self.accepted_unimplemented
                .iter()
                .map(|(k, v)| (k.clone(), v.clone())),
        );
        v
    }

    /// The admin listeners reachable from other hosts while the default `admin:admin` login is
    /// configured (Sluice accepts it from loopback only; this is worth a loud warning).
    pub fn default_credentials_exposed(&self) -> Vec<String> {
        let default = Self::parse_credentials(&self.admin_credentials)
            .iter()
            .any(|(u, p)| u == "admin" && p == "admin");
        if !default {
            return Vec::new();
        }
        let loopback = |addr: &str| {
            let host = addr.rsplit_once(':').map_or(addr, |(h, _)| h);
            let host = host.trim_start_matches('[').trim_end_matches(']');
            host == "localhost"
                || host
                    .parse::<std::net::IpAddr>()
                    .is_ok_and(|ip| ip.is_loopback())
        };
        [&self.mysql_ifaces, &self.pgsql_ifaces]
            .iter()
            .flat_map(|list| list.split(';'))
            .map(str::trim)
            .filter(|a| !a.is_empty() && !loopback(a))
            .map(str::to_string)
            .collect()
    }

    /// Parses a credentials list into (user, password) pairs.
    pub fn parse_credentials(list: &str) -> Vec<(String, String)> {
        list.split(';')
            .filter_map(|c| c.split_once(':'))
            .map(|(u, p)| (u.to_string(), p.to_string()))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_credentials_on_a_non_loopback_listener_are_reported() {
        let mut v = AdminVariables::default();
        assert!(
            v.default_credentials_exposed().is_empty(),
            "loopback by default"
        );
        v.mysql_ifaces = "0.0.0.0:6032;127.0.0.1:7032".into();
        v.pgsql_ifaces = "[::1]:6132;10.1.2.3:6132".into();
        assert_eq!(
            v.default_credentials_exposed(),
            ["0.0.0.0:6032", "10.1.2.3:6132"]
        );
        v.admin_credentials = "ops:s3cret".into();
        assert!(v.default_credentials_exposed().is_empty());
    }
}

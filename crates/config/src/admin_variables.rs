//! `admin-*` global variables.

use super::SetOutcome;
use super::cluster::ClusterVariables;
use super::declared::{
    Bool, HOST_PORT_LIST, Int, OneHost, Shaped, Trimmed, VariableRow, variables,
};
use super::proxysql_names::PROXYSQL_ADMIN_VARIABLES;
use super::values::VariableError;
use std::collections::BTreeMap;

variables! {
    /// The `admin-` variables Sluice implements.
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub struct AdminVariables for _prefix {
        /// `user:password[;user:password...]` with full admin rights.
        admin_credentials: String = "admin:admin".into() => "admin_credentials",
            Shaped { check: check_creds, takes: CREDENTIALS };
        /// `user:password[;...]` with read-only access to the stats schema.
        stats_credentials: String = "stats:stats".into() => "stats_credentials",
            Shaped { check: check_creds, takes: CREDENTIALS };
        /// Where the MySQL-protocol admin listens (Sluice default: loopback only).
        mysql_ifaces: String = "127.0.0.1:6032".into() => "mysql_ifaces",
            HOST_PORT_LIST, restart;
        /// Where the PostgreSQL-protocol admin listens (Sluice default: loopback only).
        pgsql_ifaces: String = "127.0.0.1:6132".into() => "pgsql_ifaces",
            HOST_PORT_LIST, restart;
        /// Serve `/metrics`, `/healthz` and `/readyz` over HTTP (ProxySQL's REST API switch; off
        /// by default, as in ProxySQL).
        restapi_enabled: bool = false => "restapi_enabled", Bool, restart;
        /// The HTTP port (ProxySQL's default 6070).
        restapi_port: u16 = 6070 => "restapi_port", Int(1, 65_535), restart;
        /// The address the HTTP port listens on (Sluice addition; loopback by default, so
        /// metrics and probes are not exposed unless asked for).
        restapi_interface: String = "127.0.0.1".into() => "restapi_interface", OneHost, restart;
        /// ProxySQL's web UI switch: also serve the HTTP port's routes (the status page at
        /// `/status`, `/metrics`, probes) on `web_port` (read at start).
        web_enabled: bool = false => "web_enabled", Bool, restart;
        /// ProxySQL's web UI port (default 6080), on `restapi_interface`.
        web_port: u16 = 6080 => "web_port", Int(1, 65_535), restart;
        /// Where the secrets of every TLS session Sluice terminates or originates are appended,
        /// in the NSS key log format Wireshark reads (empty: off; read at start).
        ssl_keylog_file: String = String::new() => "ssl_keylog_file", Trimmed, restart;
        /// `LOAD MYSQL USERS TO RUNTIME` stores cleartext `mysql_users` passwords in the runtime
        /// as `mysql_native_password` hashes (`*` + 40 hex), which `SAVE MYSQL USERS FROM
        /// RUNTIME` brings into memory and `SAVE … TO DISK` onto disk, as ProxySQL does. Off by
        /// default (ProxySQL: on): with only a hash, a `caching_sha2_password` login needs TLS.
        hash_passwords: bool = false => "hash_passwords", Bool;
    }
    other {
        /// `cluster_*`: ProxySQL Cluster's credentials, rhythm and per-module sync settings.
        cluster: ClusterVariables = ClusterVariables::default();
        /// ProxySQL variables accepted for compatibility that have no effect in this version.
        accepted_unimplemented: BTreeMap<String, String> = BTreeMap::new();
    }
}

impl Default for AdminVariables {
    fn default() -> Self {
        AdminVariables::defaults_for("admin")
    }
}

const CREDENTIALS: &str = "a ';'-separated user:password list";

fn check_creds(prefix: &str, name: &str, v: &str) -> Result<(), VariableError> {
    if v.split(';')
        .filter(|c| !c.is_empty())
        .all(|c| c.split_once(':').is_some_and(|(u, _)| !u.is_empty()))
    {
        Ok(())
    } else {
        Err(VariableError::malformed(prefix, name, v, CREDENTIALS))
    }
}

impl AdminVariables {
    /// Sets one variable from text.
    pub fn set(&mut self, name: &str, value: &str) -> Result<SetOutcome, VariableError> {
        if let Some(r) = self.set_variable("admin", name, value) {
            return r.map(|()| SetOutcome::Applied);
        }
        if let Some(rest) = name.strip_prefix("cluster_")
            && self.cluster.set(rest, value)?
        {
            return Ok(SetOutcome::Applied);
        }
        if PROXYSQL_ADMIN_VARIABLES.contains(&name) {
            self.accepted_unimplemented
                .insert(name.to_string(), value.to_string());
            return Ok(SetOutcome::AcceptedWithoutEffect);
        }
        Err(VariableError::unknown("admin", name))
    }

    /// Every variable as (name without prefix, value), implemented ones first.
    pub fn pairs(&self) -> Vec<(String, String)> {
        let mut v = self.variable_pairs("admin");
        v.extend(self.cluster.pairs());
        v.extend(
            self.accepted_unimplemented
                .iter()
                .map(|(k, v)| (k.clone(), v.clone())),
        );
        v
    }

    /// Whether `name` (without prefix) takes effect only after a restart.
    pub fn restart_required(name: &str) -> bool {
        AdminVariables::needs_restart(name)
    }

    /// The reference table's rows: these variables, then the cluster's.
    pub(crate) fn describe(out: &mut Vec<VariableRow>) {
        AdminVariables::describe_variables("admin", out);
        ClusterVariables::describe(out);
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

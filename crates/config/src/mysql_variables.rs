//! `mysql-*` global variables: typed values with ProxySQL's names, defaults and ranges.
//!
//! Values are set from text (`set`), the way ProxySQL's `global_variables` table stores them, so
//! the config file and (later) the admin `SET` share one parser.

use super::declared::{Bool, HOST_PORT_LIST, Int, Level, Shaped, Text, variables};
use super::proxysql_names::PROXYSQL_MYSQL_VARIABLES;
use super::values::VariableError;
use std::collections::BTreeMap;

variables! {
    /// The `mysql-` variables Sluice implements.
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub struct MysqlVariables for _prefix {
        /// `;`-separated `host:port` list the MySQL frontend listens on.
        interfaces: String = "0.0.0.0:6033".into()
            => "interfaces", HOST_PORT_LIST, restart;
        /// Version string advertised to clients in the handshake.
        server_version: String = "8.0.11".into() => "server_version", Text;
        /// Global cap on client connections.
        max_connections: u32 = 10_000 => "max_connections", Int(1, 1_000_000);
        /// Time a client has to complete the handshake (ms).
        connect_timeout_client: u64 = 10_000 => "connect_timeout_client", Int(500, 3_600_000);
        /// Per-attempt backend connect timeout (ms).
        connect_timeout_server: u64 = 1_000 => "connect_timeout_server", Int(10, 120_000);
        /// Total budget to obtain a backend connection for a hostgroup (ms).
        connect_timeout_server_max: u64 = 10_000
            => "connect_timeout_server_max", Int(10, 3_600_000);
        /// Pause between backend connect attempts (ms).
        connect_retries_delay: u64 = 1 => "connect_retries_delay", Int(0, 10_000);
        /// Largest client command accepted (bytes).
        max_allowed_packet: u32 = 64 * 1024 * 1024
            => "max_allowed_packet", Int(8192, 1024 * 1024 * 1024);
        /// Schema used when neither the client nor its user names one.
        default_schema: String = "information_schema".into() => "default_schema", Text;
        /// Auth plugin announced in the handshake: `mysql_native_password` or
        /// `caching_sha2_password`.
        default_authentication_plugin: String = "mysql_native_password".into()
            => "default_authentication_plugin",
            Shaped { check: auth_plugin, takes: "mysql_native_password or caching_sha2_password" };
        /// Offer TLS to clients.
        have_ssl: bool = true => "have_ssl", Bool, restart;
        /// Frontend TLS certificate (PEM path). Sluice addition; empty = generated in the datadir.
        ssl_cert: String = String::new() => "ssl_cert", Text, restart;
        /// Frontend TLS key (PEM path). Sluice addition; empty = generated in the datadir.
        ssl_key: String = String::new() => "ssl_key", Text, restart;
        /// TLS versions offered to clients (`TLSv1.2,TLSv1.3`, as MySQL's `tls_version`).
        tls_version: String = "TLSv1.2,TLSv1.3".into() => "tls_version",
            Shaped { check: tls_list, takes: "TLSv1.2 and/or TLSv1.3, comma-separated" };
        /// Cipher suites offered to clients (`:`-separated; empty = all), as MySQL's `ssl_cipher`.
        ssl_cipher: String = String::new() => "ssl_cipher", Text;
        /// Event-loop threads serving MySQL sessions (ProxySQL's worker threads), each with its
        /// own poll; 0 = one per CPU but one, at least 1. ProxySQL's default is a fixed 4:
        /// threads beyond the cores only add context switches.
        threads: u32 = 0 => "threads", Int(0, 255), restart;
        /// Return backend connections to the pool between statements when nothing pins them.
        multiplexing: bool = true => "multiplexing", Bool;
        /// Prepared statements kept per backend connection (least recently used closed beyond).
        max_stmts_per_connection: u32 = 20 => "max_stmts_per_connection", Int(1, 1024);
        /// Registered prepared statements kept without any client handle (global cache bound).
        max_stmts_cache: u32 = 10_000 => "max_stmts_cache", Int(128, 1_000_000);
        /// Statements a session keeps its backend after one that generated an auto-increment id.
        auto_increment_delay_multiplex: u32 = 5
            => "auto_increment_delay_multiplex", Int(0, 1_000_000);
        /// Longest time (ms) that auto-increment hold lasts.
        auto_increment_delay_multiplex_timeout_ms: u64 = 10_000
            => "auto_increment_delay_multiplex_timeout_ms", Int(0, 3_600_000);
        /// Client idle timeout (ms); a client's `SET wait_timeout` may lower it for its session.
        wait_timeout: u64 = 28_800_000 => "wait_timeout", Int(0, 31_536_000_000);
        /// Offer clients `LOAD DATA LOCAL INFILE` (their files are streamed to the server); off
        /// by default, as in ProxySQL.
        enable_load_data_local_infile: bool = false => "enable_load_data_local_infile", Bool;
        /// Forward `SELECT @@version` / `VERSION()` to the backend instead of answering them.
        select_version_forwarding: bool = false => "select_version_forwarding", Level(3);
    }
    groups {
        /// Query processor: digests, cache, hints, delay, timeout.
        query: super::QueryVariables = super::QueryVariables::default();
        /// Failed-login throttling per client address (`client_host_*`).
        client_hosts: super::ClientHostVariables = super::ClientHostVariables::default();
        /// Read-your-writes through the read/write split (`causal_reads*`).
        causal: super::CausalReadVariables = super::CausalReadVariables::default();
        /// Backend TLS: CA bundle/folder, client certificate, verification (`ssl_p2s_*`).
        backend_tls: super::BackendTls = super::BackendTls::default();
        /// The monitor: account, intervals, thresholds.
        monitor: super::MonitorVariables = super::MonitorVariables::defaults("mysql");
    }
    other {
        /// ProxySQL variables accepted for compatibility that have no effect in this version.
        accepted_unimplemented: BTreeMap<String, String> = BTreeMap::new();
    }
}

impl Default for MysqlVariables {
    fn default() -> Self {
        MysqlVariables::defaults_for("mysql")
    }
}

fn auth_plugin(prefix: &str, name: &str, v: &str) -> Result<(), VariableError> {
    match v {
        "mysql_native_password" | "caching_sha2_password" => Ok(()),
        _ => Err(VariableError::malformed(
            prefix,
            name,
            v,
            "mysql_native_password or caching_sha2_password",
        )),
    }
}

fn tls_list(prefix: &str, name: &str, v: &str) -> Result<(), VariableError> {
    super::TlsVersions::parse_list(prefix, name, v).map(drop)
}

/// What `set` did with a variable.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SetOutcome {
    /// The value is in effect.
    Applied,
    /// A ProxySQL variable Sluice accepts but does not implement yet.
    AcceptedWithoutEffect,
}

impl MysqlVariables {
    /// How many session threads to run: `threads`, or when it is 0 one per CPU but one (at
    /// least 1, at most 255).
    pub fn session_threads(&self, cpus: usize) -> usize {
        super::session_threads(self.threads, cpus)
    }

    /// Sets one variable from text. Unknown names and bad values are errors naming the variable.
    pub fn set(&mut self, name: &str, value: &str) -> Result<SetOutcome, VariableError> {
        if let Some(r) = self.set_variable("mysql", name, value) {
            return r.map(|()| SetOutcome::Applied);
        }
        if PROXYSQL_MYSQL_VARIABLES.contains(&name) {
            self.accepted_unimplemented
                .insert(name.to_string(), value.to_string());
            return Ok(SetOutcome::AcceptedWithoutEffect);
        }
        Err(VariableError::unknown("mysql", name))
    }

    /// Every variable as (name without prefix, value as text), the way `global_variables` and
    /// `SHOW MYSQL VARIABLES` list them; round-trips through [`MysqlVariables::set`].
    pub fn pairs(&self) -> Vec<(String, String)> {
        let mut v = self.variable_pairs("mysql");
        v.extend(
            self.accepted_unimplemented
                .iter()
                .map(|(k, v)| (k.clone(), v.clone())),
        );
        v
    }

    /// Whether `name` (without prefix) takes effect only after a restart.
    pub fn restart_required(name: &str) -> bool {
        MysqlVariables::needs_restart(name)
    }

    /// The frontend TLS settings (certificate, versions, ciphers).
    pub fn frontend_tls(&self) -> super::FrontendTls {
        super::FrontendTls {
            cert: self.ssl_cert.clone(),
            key: self.ssl_key.clone(),
            versions: super::TlsVersions::parse_list("mysql", "tls_version", &self.tls_version)
                .unwrap_or_default(),
            ciphers: self.ssl_cipher.clone(),
        }
    }

    /// The listen addresses, split from `interfaces`.
    pub fn interface_list(&self) -> Vec<String> {
        self.interfaces
            .split(';')
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(str::to_string)
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The rule itself (0 = one per CPU but one, at least one, at most 255) is tested once,
    /// with `pgsql-threads`; here the MySQL default and range.
    #[test]
    fn threads_default_to_one_per_cpu_but_one_unless_set() {
        let mut v = MysqlVariables::default();
        assert_eq!((v.threads, v.session_threads(3)), (0, 2));
        assert_eq!(v.set("threads", "4"), Ok(SetOutcome::Applied));
        assert_eq!(v.session_threads(3), 4);
        assert!(v.set("threads", "256").is_err());
        assert!(MysqlVariables::restart_required("threads"));
        assert!(!MysqlVariables::restart_required("multiplexing"));
        assert!(!MysqlVariables::restart_required("monitor_ping_interval"));
    }

    #[test]
    fn set_checks_ranges_and_names() {
        let mut v = MysqlVariables::default();
        assert_eq!(v.set("max_connections", "50"), Ok(SetOutcome::Applied));
        assert_eq!(v.max_connections, 50);
        assert_eq!(
            v.set("max_connections", "0"),
            Err(VariableError::OutOfRange {
                name: "mysql-max_connections".into(),
                value: 0,
                min: 1,
                max: 1_000_000
            })
        );
        let not_a_number = v.set("connect_timeout_server", "abc").unwrap_err();
        assert_eq!(
            not_a_number.to_string(),
            "mysql-connect_timeout_server: \"abc\" is not a whole number"
        );
        assert_eq!(
            v.set("no_such_thing", "1"),
            Err(VariableError::Unknown("mysql-no_such_thing".into()))
        );
        assert_eq!(
            v.set("monitor_query_interval", "1000"),
            Ok(SetOutcome::AcceptedWithoutEffect)
        );
        assert!(v.set("interfaces", "127.0.0.1").is_err());
        assert_eq!(
            v.set("interfaces", "127.0.0.1:1;0.0.0.0:2"),
            Ok(SetOutcome::Applied)
        );
        assert_eq!(v.interface_list(), vec!["127.0.0.1:1", "0.0.0.0:2"]);
        assert!(v.set("have_ssl", "maybe").is_err());
        assert_eq!(v.set("have_ssl", "false"), Ok(SetOutcome::Applied));
        assert!(!v.have_ssl);
        let mut copy = MysqlVariables::default();
        for (k, val) in v.pairs() {
            copy.set(&k, &val).expect("pairs round-trip");
        }
        assert_eq!(copy, v);
    }
}

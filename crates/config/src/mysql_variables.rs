//! `mysql-*` global variables: typed values with ProxySQL's names, defaults and ranges.
//!
//! Values are set from text (`set`), the way ProxySQL's `global_variables` table stores them, so
//! the config file and (later) the admin `SET` share one parser.

use super::proxysql_names::PROXYSQL_MYSQL_VARIABLES;
use super::values::{VariableError, check_host_ports, parse_var_bool, parse_var_int};
use std::collections::BTreeMap;

/// The `mysql-` variables Sluice implements.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MysqlVariables {
    /// `;`-separated `host:port` list the MySQL frontend listens on.
    pub interfaces: String,
    /// Version string advertised to clients in the handshake.
    pub server_version: String,
    /// Global cap on client connections.
    pub max_connections: u32,
    /// Time a client has to complete the handshake (ms).
    pub connect_timeout_client: u64,
    /// Per-attempt backend connect timeout (ms).
    pub connect_timeout_server: u64,
    /// Total budget to obtain a backend connection for a hostgroup (ms).
    pub connect_timeout_server_max: u64,
    /// Pause between backend connect attempts (ms).
    pub connect_retries_delay: u64,
    /// Largest client command accepted (bytes).
    pub max_allowed_packet: u32,
    /// Schema used when neither the client nor its user names one.
    pub default_schema: String,
    /// Auth plugin announced in the handshake: `mysql_native_password` or `caching_sha2_password`.
    pub default_authentication_plugin: String,
    /// Offer TLS to clients.
    pub have_ssl: bool,
    /// Frontend TLS certificate (PEM path). Sluice addition; empty = generated in the datadir.
    pub ssl_cert: String,
    /// Frontend TLS key (PEM path). Sluice addition; empty = generated in the datadir.
    pub ssl_key: String,
    /// TLS versions offered to clients (`TLSv1.2,TLSv1.3`, as MySQL's `tls_version`).
    pub tls_version: String,
    /// Cipher suites offered to clients (`:`-separated; empty = all), as MySQL's `ssl_cipher`.
    pub ssl_cipher: String,
    /// Backend TLS: CA bundle/folder, client certificate, verification (`ssl_p2s_*`).
    pub backend_tls: super::BackendTls,
    /// Event-loop threads serving MySQL sessions (ProxySQL's worker threads), each with its own
    /// poll; 0 = one per CPU but one, at least 1 (restart required).
    pub threads: u32,
    /// Return backend connections to the pool between statements when nothing pins them.
    pub multiplexing: bool,
    /// Prepared statements kept per backend connection (least recently used closed beyond).
    pub max_stmts_per_connection: u32,
    /// Registered prepared statements kept without any client handle (global cache bound).
    pub max_stmts_cache: u32,
    /// Statements a session keeps its backend after one that generated an auto-increment id.
    pub auto_increment_delay_multiplex: u32,
    /// Longest time (ms) that auto-increment hold lasts.
    pub auto_increment_delay_multiplex_timeout_ms: u64,
    /// Client idle timeout (ms); a client's `SET wait_timeout` may lower it for its session.
    pub wait_timeout: u64,
    /// Forward `SELECT @@version` / `VERSION()` to the backend instead of answering them.
    pub select_version_forwarding: bool,
    /// Offer clients `LOAD DATA LOCAL INFILE` (their files are streamed to the server); off by
    /// default, as in ProxySQL.
    pub enable_load_data_local_infile: bool,
    /// The monitor: account, intervals, thresholds.
    pub monitor: super::MonitorVariables,
    /// Query processor: digests, cache, hints, delay, timeout.
    pub query: super::QueryVariables,
    /// Failed-login throttling per client address (`client_host_*`).
    pub client_hosts: super::ClientHostVariables,
    /// Read-your-writes through the read/write split (`causal_reads*`).
    pub causal: super::CausalReadVariables,
    /// ProxySQL variables accepted for compatibility that have no effect in this version.
    pub accepted_unimplemented: BTreeMap<String, String>,
}

impl Default for MysqlVariables {
    fn default() -> Self {
        MysqlVariables {
            interfaces: "0.0.0.0:6033".into(),
            server_version: "8.0.11".into(),
            max_connections: 10_000,
            connect_timeout_client: 10_000,
            connect_timeout_server: 1_000,
            connect_timeout_server_max: 10_000,
            connect_retries_delay: 1,
            max_allowed_packet: 64 * 1024 * 1024,
            default_schema: "information_schema".into(),
            default_authentication_plugin: "mysql_native_password".into(),
            have_ssl: true,
            ssl_cert: String::new(),
            ssl_key: String::new(),
            tls_version: "TLSv1.2,TLSv1.3".into(),
            ssl_cipher: String::new(),
            backend_tls: super::BackendTls::default(),
            // One per CPU, as `pgsql-threads`: threads beyond the cores only add context
            // switches. ProxySQL's default is a fixed 4.
            threads: 0,
            multiplexing: true,
            max_stmts_per_connection: 20,
            max_stmts_cache: 10_000,
            auto_increment_delay_multiplex: 5,
            auto_increment_delay_multiplex_timeout_ms: 10_000,
            wait_timeout: 28_800_000,
            select_version_forwarding: false,
            enable_load_data_local_infile: false,
            monitor: super::MonitorVariables::defaults("mysql"),
            query: super::QueryVariables::default(),
            client_hosts: super::ClientHostVariables::default(),
            causal: super::CausalReadVariables::default(),
            accepted_unimplemented: BTreeMap::new(),
        }
    }
}

/// What `set` did with a variable.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SetOutcome {
    /// The value is in effect.
    Applied,
    /// A ProxySQL variable Sluice accepts but does not implement yet.
    AcceptedWithoutEffect,
}

fn int(name: &str, v: &str, min: u64, max: u64) -> Result<u64, VariableError> {
    parse_var_int("mysql", name, v, min, max)
}

fn boolean(name: &str, v: &str) -> Result<bool, VariableError> {
    parse_var_bool("mysql", name, v)
}

impl MysqlVariables {
    /// How many session threads to run: `threads`, or when it is 0 one per CPU but one (at
    /// least 1, at most 255).
    pub fn session_threads(&self, cpus: usize) -> usize {
        super::session_threads(self.threads, cpus)
    }

    /// Sets one variable from text. Unknown names and bad values are errors naming the variable.
    pub fn set(&mut self, name: &str, value: &str) -> Result<SetOutcome, VariableError> {
        let v = value;
        if let Some(r) = self.backend_tls.set("mysql", name, v) {
            return r.map(|()| SetOutcome::Applied);
        }
        if let Some(r) = self.client_hosts.set("mysql", name, v) {
            return r.map(|()| SetOutcome::Applied);
        }
        if let Some(r) = self.causal.set("mysql", name, v) {
            return r.map(|()| SetOutcome::Applied);
        }
        if let Some(r) = self.query.set("mysql", name, v) {
            return r.map(|()| SetOutcome::Applied);
        }
        if let Some(r) = self.monitor.set("mysql", name, v) {
            return r.map(|()| SetOutcome::Applied);
        }
        match name {
            "interfaces" => {
                check_host_ports("mysql", name, v)?;
                self.interfaces = v.to_string();
            }
            "server_version" => self.server_version = v.to_string(),
            "max_connections" => self.max_connections = int(name, v, 1, 1_000_000)? as u32,
            "connect_timeout_client" => self.connect_timeout_client = int(name, v, 500, 3_600_000)?,
            "connect_timeout_server" => self.connect_timeout_server = int(name, v, 10, 120_000)?,
            "connect_timeout_server_max" => {
                self.connect_timeout_server_max = int(name, v, 10, 3_600_000)?
            }
            "connect_retries_delay" => self.connect_retries_delay = int(name, v, 0, 10_000)?,
            "max_allowed_packet" => {
                self.max_allowed_packet = int(name, v, 8192, 1024 * 1024 * 1024)? as u32
            }
            "default_schema" => self.default_schema = v.to_string(),
            "default_authentication_plugin" => match v {
                "mysql_native_password" | "caching_sha2_password" => {
                    self.default_authentication_plugin = v.to_string()
                }
                _ => {
                    return Err(VariableError::malformed(
                        "mysql",
                        name,
                        v,
                        "mysql_native_password or caching_sha2_password",
                    ));
                }
            },
            "have_ssl" => self.have_ssl = boolean(name, v)?,
            "ssl_cert" => self.ssl_cert = v.to_string(),
            "ssl_key" => self.ssl_key = v.to_string(),
            "tls_version" => {
                super::TlsVersions::parse_list("mysql", name, v)?;
                self.tls_version = v.to_string();
            }
            "ssl_cipher" => self.ssl_cipher = v.to_string(),
            "threads" => self.threads = int(name, v, 0, 255)? as u32,
            "multiplexing" => self.multiplexing = boolean(name, v)?,
            "max_stmts_per_connection" => {
                self.max_stmts_per_connection = int(name, v, 1, 1024)? as u32
            }
            "max_stmts_cache" => self.max_stmts_cache = int(name, v, 128, 1_000_000)? as u32,
            "auto_increment_delay_multiplex" => {
                self.auto_increment_delay_multiplex = int(name, v, 0, 1_000_000)? as u32
            }
            "auto_increment_delay_multiplex_timeout_ms" => {
                self.auto_increment_delay_multiplex_timeout_ms = int(name, v, 0, 3_600_000)?
            }
            "wait_timeout" => self.wait_timeout = int(name, v, 0, 31_536_000_000)?,
            "select_version_forwarding" => self.select_version_forwarding = int(name, v, 0, 3)? > 0,
            "enable_load_data_local_infile" => {
                self.enable_load_data_local_infile = boolean(name, v)?
            }
            _ if PROXYSQL_MYSQL_VARIABLES.contains(&name) => {
                self.accepted_unimplemented
                    .insert(name.to_string(), v.to_string());
                return Ok(SetOutcome::AcceptedWithoutEffect);
            }
            _ => return Err(VariableError::unknown("mysql", name)),
        }
        Ok(SetOutcome::Applied)
    }

    /// Every variable as (name without prefix, value as text), the way `global_variables` and
    /// `SHOW MYSQL VARIABLES` list them; round-trips through [`MysqlVariables::set`].
    pub fn pairs(&self) -> Vec<(String, String)> {
        let mut v: Vec<(String, String)> = vec![
            ("interfaces".into(), self.interfaces.clone()),
            ("server_version".into(), self.server_version.clone()),
            ("max_connections".into(), self.max_connections.to_string()),
            (
                "connect_timeout_client".into(),
                self.connect_timeout_client.to_string(),
            ),
            (
                "connect_timeout_server".into(),
                self.connect_timeout_server.to_string(),
            ),
            (
                "connect_timeout_server_max".into(),
                self.connect_timeout_server_max.to_string(),
            ),
            (
                "connect_retries_delay".into(),
                self.connect_retries_delay.to_string(),
            ),
            (
                "max_allowed_packet".into(),
                self.max_allowed_packet.to_string(),
            ),
            ("default_schema".into(), self.default_schema.clone()),
            (
                "default_authentication_plugin".into(),
                self.default_authentication_plugin.clone(),
            ),
            ("have_ssl".into(), self.have_ssl.to_string()),
            ("ssl_cert".into(), self.ssl_cert.clone()),
            ("ssl_key".into(), self.ssl_key.clone()),
            ("tls_version".into(), self.tls_version.clone()),
            ("ssl_cipher".into(), self.ssl_cipher.clone()),
            ("threads".into(), self.threads.to_string()),
            ("multiplexing".into(), self.multiplexing.to_string()),
            (
                "max_stmts_per_connection".into(),
                self.max_stmts_per_connection.to_string(),
            ),
            ("max_stmts_cache".into(), self.max_stmts_cache.to_string()),
            (
                "auto_increment_delay_multiplex".into(),
                self.auto_increment_delay_multiplex.to_string(),
            ),
            (
                "auto_increment_delay_multiplex_timeout_ms".into(),
                self.auto_increment_delay_multiplex_timeout_ms.to_string(),
            ),
            ("wait_timeout".into(), self.wait_timeout.to_string()),
            (
                "enable_load_data_local_infile".into(),
                self.enable_load_data_local_infile.to_string(),
            ),
            (
                "select_version_forwarding".into(),
                u8::from(self.select_version_forwarding).to_string(),
            ),
        ];
        v.extend(self.query.pairs());
        v.extend(self.client_hosts.pairs());
        v.extend(self.causal.pairs());
        v.extend(self.backend_tls.pairs());
        v.extend(self.monitor.pairs("mysql"));
        v.extend(
            self.accepted_unimplemented
                .iter()
                .map(|(k, v)| (k.clone(), v.clone())),
        );
        v
    }

    /// Variables that only take effect after a restart.
    pub const RESTART_REQUIRED: &'static [&'static str] =
        &["threads", "interfaces", "have_ssl", "ssl_cert", "ssl_key"];

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

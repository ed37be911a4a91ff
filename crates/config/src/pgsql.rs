//! `pgsql_servers`, `pgsql_users` rows and `pgsql-*` variables.

use super::SetOutcome;
use super::values::*;
use serde::{Deserialize, Serialize};

/// One row of `pgsql_servers`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PgsqlServer {
    /// The hostgroup this row puts the server in.
    #[serde(default)]
    pub hostgroup_id: HostgroupId,
    /// Host name or IP.
    pub hostname: String,
    /// Port (default 5432).
    #[serde(default = "pg_port")]
    pub port: Port,
    /// ONLINE, SHUNNED, OFFLINE_SOFT or OFFLINE_HARD; the monitor may override it at runtime.
    #[serde(default)]
    pub status: ServerStatus,
    /// Share of new connections relative to the hostgroup's other servers.
    #[serde(default)]
    pub weight: Weight,
    /// Accepted; must be 0.
    #[serde(default)]
    pub compression: Flag,
    /// Cap on backend connections.
    #[serde(default)]
    pub max_connections: ServerMaxConnections,
    /// Accepted (monitor issue).
    #[serde(default)]
    pub max_replication_lag: ReplicationLag,
    /// TLS to this server.
    #[serde(default)]
    pub use_ssl: Flag,
    /// Accepted (monitor issue).
    #[serde(default)]
    pub max_latency_ms: LatencyMs,
    /// The operator's note; Sluice ignores it.
    #[serde(default)]
    pub comment: String,
}

fn pg_port() -> Port {
    Port(5432)
}

/// One row of `pgsql_users`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PgsqlUser {
    /// The role clients log in as (and, with `backend=1`, Sluice logs in to servers as).
    pub username: String,
    /// Cleartext password (needed for SCRAM towards clients and backends).
    #[serde(default)]
    pub password: String,
    /// Inactive users cannot log in.
    #[serde(default = "yes")]
    pub active: Flag,
    /// The client must use TLS.
    #[serde(default)]
    pub use_ssl: Flag,
    /// Hostgroup of the user's traffic.
    #[serde(default)]
    pub default_hostgroup: HostgroupId,
    /// Accepted (query-processor issue).
    #[serde(default = "yes")]
    pub transaction_persistent: Flag,
    /// 1: session pooling (the session keeps its backend connection).
    #[serde(default)]
    pub fast_forward: Flag,
    /// Credentials towards backends.
    #[serde(default = "yes")]
    pub backend: Flag,
    /// Clients may log in.
    #[serde(default = "yes")]
    pub frontend: Flag,
    /// Per-user client cap.
    #[serde(default)]
    pub max_connections: UserMaxConnections,
    /// JSON object of per-user options (e.g. `{"authentication_method": 3}`).
    #[serde(default)]
    pub attributes: String,
    /// The operator's note; Sluice ignores it.
    #[serde(default)]
    pub comment: String,
}

fn yes() -> Flag {
    Flag(true)
}

/// The `pgsql-` variables Sluice implements.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PgsqlVariables {
    /// Where the PostgreSQL frontend listens (`;`-separated host:port).
    pub interfaces: String,
    /// `server_version` reported to clients before a backend says otherwise.
    pub server_version: String,
    /// Client connection cap.
    pub max_connections: u32,
    /// Per-attempt backend connect timeout (ms).
    pub connect_timeout_server: u64,
    /// Budget to get a backend connection (ms).
    pub connect_timeout_server_max: u64,
    /// 1 = cleartext, 2 = md5, 3 = SCRAM-SHA-256.
    pub authentication_method: u32,
    /// Whether clients may upgrade to TLS with SSLRequest.
    pub have_ssl: bool,
    /// Protocol-level prepared statements kept per server connection (least recently used
    /// closed beyond it).
    pub max_prepared_statements: u32,
    /// Frontend TLS certificate (PEM path). Sluice addition; empty = the pair generated in the
    /// datadir (shared with the MySQL frontend).
    pub ssl_cert: String,
    /// Frontend TLS key (PEM path). Sluice addition; empty = generated in the datadir.
    pub ssl_key: String,
    /// Oldest TLS version offered to clients (`TLSv1.2` or `TLSv1.3`), as PostgreSQL's
    /// `ssl_min_protocol_version`.
    pub ssl_min_protocol_version: String,
    /// Cipher suites offered to clients (`:`-separated; empty = all), as PostgreSQL's
    /// `ssl_ciphers` (explicit suite names only, not OpenSSL's group words).
    pub ssl_ciphers: String,
    /// Event-loop threads serving PostgreSQL sessions, each with its own poll; 0 = one per CPU but
    /// one, at least 1 (restart required).
    pub threads: u32,
    /// Startup parameters dropped at login (comma-separated names, case-insensitive), like
    /// PgBouncer's `ignore_startup_parameters`: every other parameter is applied to the
    /// session, and one the server rejects fails the login.
    pub ignore_startup_parameters: String,
    /// `RESET ALL` when a server connection passes from one session to another, so state
    /// changed without a visible `SET` (functions, triggers, `DO` blocks) never reaches the next
    /// session. Off: only the settings Sluice tracks follow sessions (PgBouncer's transaction
    /// pooling behaviour), cheaper when many sessions share few connections.
    pub handoff_reset_all: bool,
    /// Query processor: digests, cache, hints, delay, timeout.
    pub query: super::QueryVariables,
    /// Failed-login throttling per client address (`client_host_*`).
    pub client_hosts: super::ClientHostVariables,
    /// Read-your-writes through the read/write split (`causal_reads*`).
    pub causal: super::CausalReadVariables,
    /// LISTEN/NOTIFY under transaction pooling (`listen_*`).
    pub listen: super::ListenVariables,
    /// Backend TLS: CA bundle/folder, client certificate, verification (`ssl_p2s_*`).
    pub backend_tls: super::BackendTls,
    /// The monitor: account, intervals, thresholds.
    pub monitor: super::MonitorVariables,
}

impl Default for PgsqlVariables {
    fn default() -> Self {
        PgsqlVariables {
            interfaces: "0.0.0.0:6133".into(),
            server_version: "16.1".into(),
            max_connections: 10_000,
            connect_timeout_server: 1_000,
            connect_timeout_server_max: 10_000,
            authentication_method: 3,
            have_ssl: true,
            max_prepared_statements: 200,
            ssl_cert: String::new(),
            ssl_key: String::new(),
            ssl_min_protocol_version: "TLSv1.2".into(),
            ssl_ciphers: String::new(),
            // One per CPU: threads beyond the cores only add context switches (ProxySQL's fixed
            // 4 is a known source of kernel CPU on small machines).
            threads: 0,
            ignore_startup_parameters: String::new(),
            handoff_reset_all: true,
            query: super::QueryVariables::default(),
            client_hosts: super::ClientHostVariables::default(),
            causal: super::CausalReadVariables::default(),
            listen: super::ListenVariables::default(),
            backend_tls: super::BackendTls::default(),
            monitor: super::MonitorVariables::defaults("pgsql"),
        }
    }
}

impl PgsqlVariables {
    /// Sets one variable from text.
    pub fn set(&mut self, name: &str, v: &str) -> Result<SetOutcome, VariableError> {
        let int = |min: u64, max: u64| parse_var_int("pgsql", name, v, min, max);
        let boolean = || parse_var_bool("pgsql", name, v);
        if let Some(r) = self.backend_tls.set("pgsql", name, v) {
            return r.map(|()| SetOutcome::Applied);
        }
        if let Some(r) = self.client_hosts.set("pgsql", name, v) {
            return r.map(|()| SetOutcome::Applied);
        }
        if let Some(r) = self.causal.set("pgsql", name, v) {
            return r.map(|()| SetOutcome::Applied);
        }
        if let Some(r) = self.listen.set("pgsql", name, v) {
            return r.map(|()| SetOutcome::Applied);
        }
        if let Some(r) = self.query.set("pgsql", name, v) {
            return r.map(|()| SetOutcome::Applied);
        }
        if let Some(r) = self.monitor.set("pgsql", name, v) {
            return r.map(|()| SetOutcome::Applied);
        }
        match name {
            "interfaces" => self.interfaces = v.to_string(),
            "server_version" => self.server_version = v.to_string(),
            "max_connections" => self.max_connections = int(1, 1_000_000)? as u32,
            "connect_timeout_server" => self.connect_timeout_server = int(10, 120_000)?,
            "connect_timeout_server_max" => self.connect_timeout_server_max = int(10, 3_600_000)?,
            "authentication_method" => self.authentication_method = int(1, 3)? as u32,
            "max_prepared_statements" => self.max_prepared_statements = int(1, 100_000)? as u32,
            "ssl_cert" => self.ssl_cert = v.to_string(),
            "ssl_key" => self.ssl_key = v.to_string(),
            "ssl_min_protocol_version" => {
                super::TlsVersions::parse_min("pgsql", name, v)?;
                self.ssl_min_protocol_version = v.to_string();
            }
            "ssl_ciphers" => self.ssl_ciphers = v.to_string(),
            "threads" => self.threads = int(0, 255)? as u32,
            "handoff_reset_all" => self.handoff_reset_all = boolean()?,
            "ignore_startup_parameters" => {
                self.ignore_startup_parameters = v.trim().to_ascii_lowercase()
            }
            "have_ssl" => self.have_ssl = boolean()?,
            _ if super::PROXYSQL_MYSQL_VARIABLES.contains(&name) => {
                return Ok(SetOutcome::AcceptedWithoutEffect);
            }
            _ => return Err(VariableError::unknown("pgsql", name)),
        }
        Ok(SetOutcome::Applied)
    }

    /// Every variable as (name, value).
    pub fn pairs(&self) -> Vec<(String, String)> {
        let mut v = vec![
            ("interfaces".into(), self.interfaces.clone()),
            ("server_version".into(), self.server_version.clone()),
            ("max_connections".into(), self.max_connections.to_string()),
            (
                "connect_timeout_server".into(),
                self.connect_timeout_server.to_string(),
            ),
            (
                "connect_timeout_server_max".into(),
                self.connect_timeout_server_max.to_string(),
            ),
            (
                "authentication_method".into(),
                self.authentication_method.to_string(),
            ),
            ("have_ssl".into(), self.have_ssl.to_string()),
            (
                "max_prepared_statements".into(),
                self.max_prepared_statements.to_string(),
            ),
            ("ssl_cert".into(), self.ssl_cert.clone()),
            ("ssl_key".into(), self.ssl_key.clone()),
            (
                "ssl_min_protocol_version".into(),
                self.ssl_min_protocol_version.clone(),
            ),
            ("ssl_ciphers".into(), self.ssl_ciphers.clone()),
            ("threads".into(), self.threads.to_string()),
            (
                "ignore_startup_parameters".into(),
                self.ignore_startup_parameters.clone(),
            ),
            (
                "handoff_reset_all".into(),
                self.handoff_reset_all.to_string(),
            ),
        ];
        v.extend(self.query.pairs());
        v.extend(self.client_hosts.pairs());
        v.extend(self.causal.pairs());
        v.extend(self.listen.pairs());
        v.extend(self.backend_tls.pairs());
        v.extend(self.monitor.pairs("pgsql"));
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
            versions: super::TlsVersions::parse_min(
                "pgsql",
                "ssl_min_protocol_version",
                &self.ssl_min_protocol_version,
            )
            .unwrap_or_default(),
            ciphers: self.ssl_ciphers.clone(),
        }
    }

    /// How many session threads to run: `threads`, or when it is 0 one per CPU but one (at
    /// least 1, at most 255).
    pub fn session_threads(&self, cpus: usize) -> usize {
        super::session_threads(self.threads, cpus)
    }
}

impl PgsqlUser {
    /// The `authentication_method` key of `attributes` (1 cleartext, 2 MD5, 3 SCRAM-SHA-256),
    /// when set to one of those: the user's own method instead of `pgsql-authentication_method`.
    pub fn authentication_method_attribute(&self) -> Option<u32> {
        let v: serde_json::Value = serde_json::from_str(&self.attributes).ok()?;
        let m = v.get("authentication_method")?.as_u64()?;
        (1..=3).contains(&m).then_some(m as u32)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn threads_default_to_one_per_cpu_but_one_unless_set() {
        let mut v = PgsqlVariables::default();
        assert_eq!(v.threads, 0);
        assert_eq!(v.session_threads(2), 1);
        assert_eq!(v.session_threads(8), 7);
        assert_eq!(v.session_threads(1), 1);
        assert_eq!(v.session_threads(0), 1);
        assert_eq!(v.session_threads(1024), 255);
        assert_eq!(v.set("threads", "4"), Ok(SetOutcome::Applied));
        assert_eq!(v.session_threads(2), 4);
        assert!(v.set("threads", "256").is_err());
        assert!(v.set("threads", "four").is_err());
        assert!(v.pairs().contains(&("threads".into(), "4".into())));
    }
}

//! `pgsql_servers`, `pgsql_users` rows and `pgsql-*` variables.

use super::SetOutcome;
use super::declared::{Bool, HOST_PORT_LIST, Int, LowerCase, Shaped, Text, variables};
use super::rows::{server_row, user_row};
use super::values::*;
use serde::{Deserialize, Serialize};

server_row! {
    /// One row of `pgsql_servers`: a backend server in a hostgroup.
    pub struct PgsqlServer {
        port {
            /// TCP port (default 5432).
            #[serde(default = "pg_port")]
        }
        after_port {}
    }
}

fn pg_port() -> Port {
    Port(5432)
}

user_row! {
    /// One row of `pgsql_users`: the roles clients log in as and Sluice uses towards servers.
    pub struct PgsqlUser {
        username {
            /// The role clients log in as (and, with `backend=1`, Sluice logs in to servers as).
        }
        password {
            /// Cleartext password (needed for SCRAM towards clients and backends).
        }
        after_default_hostgroup {}
        fast_forward {
            /// 1: session pooling (the session keeps its backend connection).
        }
        attributes {
            /// JSON object of per-user options (e.g. `{"authentication_method": 3}`).
        }
    }
}

variables! {
    /// The `pgsql-` variables Sluice implements.
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub struct PgsqlVariables for _prefix {
        /// Where the PostgreSQL frontend listens (`;`-separated host:port).
        interfaces: String = "0.0.0.0:6133".into()
            => "interfaces", HOST_PORT_LIST, restart;
        /// `server_version` reported to clients before a backend says otherwise.
        server_version: String = "16.1".into() => "server_version", Text;
        /// Client connection cap.
        max_connections: u32 = 10_000 => "max_connections", Int(1, 1_000_000);
        /// Time a client has from its connection to a completed login — SSLRequest, TLS
        /// handshake, StartupMessage, authentication (ms).
        connect_timeout_client: u64 = 10_000 => "connect_timeout_client", Int(500, 3_600_000);
        /// Per-attempt backend connect timeout (ms).
        connect_timeout_server: u64 = 1_000 => "connect_timeout_server", Int(10, 120_000);
        /// Budget to get a backend connection (ms).
        connect_timeout_server_max: u64 = 10_000
            => "connect_timeout_server_max", Int(10, 3_600_000);
        /// 1 = cleartext, 2 = md5, 3 = SCRAM-SHA-256.
        authentication_method: u32 = 3 => "authentication_method", Int(1, 3);
        /// Whether clients may upgrade to TLS with SSLRequest.
        have_ssl: bool = true => "have_ssl", Bool, restart;
        /// Protocol-level prepared statements kept per server connection (least recently used
        /// closed beyond it).
        max_prepared_statements: u32 = 200 => "max_prepared_statements", Int(1, 100_000);
        /// Frontend TLS certificate (PEM path). Sluice addition; empty = the pair generated in
        /// the datadir (shared with the MySQL frontend).
        ssl_cert: String = String::new() => "ssl_cert", Text, restart;
        /// Frontend TLS key (PEM path). Sluice addition; empty = generated in the datadir.
        ssl_key: String = String::new() => "ssl_key", Text, restart;
        /// Oldest TLS version offered to clients (`TLSv1.2` or `TLSv1.3`), as PostgreSQL's
        /// `ssl_min_protocol_version`.
        ssl_min_protocol_version: String = "TLSv1.2".into() => "ssl_min_protocol_version",
            Shaped { check: tls_min, takes: "TLSv1.2 or TLSv1.3" };
        /// Cipher suites offered to clients (`:`-separated; empty = all), as PostgreSQL's
        /// `ssl_ciphers` (explicit suite names only, not OpenSSL's group words).
        ssl_ciphers: String = String::new() => "ssl_ciphers", Text;
        /// Event-loop threads serving PostgreSQL sessions, each with its own poll; 0 = one per
        /// CPU but one, at least 1 (ProxySQL's fixed 4 is a known source of kernel CPU on small
        /// machines).
        threads: u32 = 0 => "threads", Int(0, 255), restart;
        /// Startup parameters dropped at login (comma-separated names, case-insensitive), like
        /// PgBouncer's `ignore_startup_parameters`: every other parameter is applied to the
        /// session, and one the server rejects fails the login.
        ignore_startup_parameters: String = String::new()
            => "ignore_startup_parameters", LowerCase;
        /// `RESET ALL` when a server connection passes from one session to another, so state
        /// changed without a visible `SET` (functions, triggers, `DO` blocks) never reaches the
        /// next session. Off: only the settings Sluice tracks follow sessions (PgBouncer's
        /// transaction pooling behaviour), cheaper when many sessions share few connections.
        handoff_reset_all: bool = true => "handoff_reset_all", Bool;
    }
    groups {
        /// Query processor: digests, cache, hints, delay, timeout.
        query: super::QueryVariables = super::QueryVariables::default();
        /// Failed-login throttling per client address (`client_host_*`).
        client_hosts: super::ClientHostVariables = super::ClientHostVariables::default();
        /// Read-your-writes through the read/write split (`causal_reads*`).
        causal: super::CausalReadVariables = super::CausalReadVariables::default();
        /// LISTEN/NOTIFY under transaction pooling (`listen_*`).
        listen: super::ListenVariables = super::ListenVariables::default();
        /// Backend TLS: CA bundle/folder, client certificate, verification (`ssl_p2s_*`).
        backend_tls: super::BackendTls = super::BackendTls::default();
        /// The monitor: account, intervals, thresholds.
        monitor: super::MonitorVariables = super::MonitorVariables::defaults("pgsql");
    }
}

impl Default for PgsqlVariables {
    fn default() -> Self {
        PgsqlVariables::defaults_for("pgsql")
    }
}

fn tls_min(prefix: &str, name: &str, v: &str) -> Result<(), VariableError> {
    super::TlsVersions::parse_min(prefix, name, v).map(drop)
}

impl PgsqlVariables {
    /// Sets one variable from text.
    pub fn set(&mut self, name: &str, v: &str) -> Result<SetOutcome, VariableError> {
        if let Some(r) = self.set_variable("pgsql", name, v) {
            return r.map(|()| SetOutcome::Applied);
        }
        if super::PROXYSQL_MYSQL_VARIABLES.contains(&name) {
            return Ok(SetOutcome::AcceptedWithoutEffect);
        }
        Err(VariableError::unknown("pgsql", name))
    }

    /// Every variable as (name, value).
    pub fn pairs(&self) -> Vec<(String, String)> {
        self.variable_pairs("pgsql")
    }

    /// Whether `name` (without prefix) takes effect only after a restart.
    pub fn restart_required(name: &str) -> bool {
        PgsqlVariables::needs_restart(name)
    }

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

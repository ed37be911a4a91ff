//! Monitor variables shared by the `mysql-` and `pgsql-` sides (each side has its own copy under
//! its own prefix, as in ProxySQL). Intervals and timeouts are in ms.

use super::values::VariableError;

/// What the monitor checks, how often, and when it acts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MonitorVariables {
    /// Run the monitor at all.
    pub enabled: bool,
    /// The account the monitor logs in to servers with.
    pub username: String,
    /// The monitor account's password.
    pub password: String,
    /// Database the PostgreSQL monitor connects to.
    pub dbname: String,
    /// How long check results are kept in the `monitor.*` logs.
    pub history: u64,
    /// Connect check interval.
    pub connect_interval: u64,
    /// Connect check timeout.
    pub connect_timeout: u64,
    /// How often each server is pinged (ms); missed pings lead to shunning.
    pub ping_interval: u64,
    /// How long a ping may take before it counts as missed (ms).
    pub ping_timeout: u64,
    /// Missed heartbeats in a row that shun a server.
    pub ping_max_failures: u32,
    /// read_only check interval.
    pub read_only_interval: u64,
    /// read_only check timeout.
    pub read_only_timeout: u64,
    /// Failed read_only checks in a row after which the server is assumed read-only.
    pub read_only_max_timeout_count: u32,
    /// The writer of a replication hostgroup pair also serves its reader hostgroup.
    pub writer_is_also_reader: bool,
    /// Replication lag check interval.
    pub replication_lag_interval: u64,
    /// Replication lag check timeout.
    pub replication_lag_timeout: u64,
    /// Checks over the threshold in a row before a server is shunned.
    pub replication_lag_count: u32,
    /// Lag (s) assumed when the server reports NULL (replication stopped or broken).
    pub slave_lag_when_null: u64,
    /// Connect errors within one second that shun a server on the data path.
    pub shun_on_failures: u32,
    /// How long such a shun lasts (s).
    pub shun_recovery_time_sec: u64,
    /// Ping time (ms) above which a server is passed over (rows with `max_latency_ms = 0`).
    pub default_max_latency_ms: u64,
    /// pt-heartbeat table (`schema.table`) to read the lag from instead of
    /// `Seconds_Behind_Master`; empty = off.
    pub replication_lag_use_percona_heartbeat: String,
    /// Accepted for compatibility; lag checks are per server, so this is in effect always on.
    pub replication_lag_group_by_host: bool,
    /// Group Replication check interval.
    pub groupreplication_healthcheck_interval: u64,
    /// Group Replication check timeout.
    pub groupreplication_healthcheck_timeout: u64,
    /// Failed Group Replication checks in a row after which a member counts as UNREACHABLE.
    pub groupreplication_healthcheck_max_timeout_count: u32,
    /// Galera check interval.
    pub galera_healthcheck_interval: u64,
    /// Galera check timeout.
    pub galera_healthcheck_timeout: u64,
    /// Failed Galera checks in a row after which a node counts as unreachable.
    pub galera_healthcheck_max_timeout_count: u32,
}

impl MonitorVariables {
    /// ProxySQL's defaults for `prefix` (`mysql` or `pgsql`; they differ in a few intervals).
    pub fn defaults(prefix: &str) -> Self {
        let pg = prefix == "pgsql";
        MonitorVariables {
            enabled: true,
            username: "monitor".into(),
            password: "monitor".into(),
            dbname: "postgres".into(),
            history: 600_000,
            connect_interval: 60_000,
            connect_timeout: 600,
            ping_interval: if pg { 8_000 } else { 10_000 },
            ping_timeout: 1_000,
            ping_max_failures: 3,
            read_only_interval: if pg { 1_000 } else { 1_500 },
            read_only_timeout: if pg { 800 } else { 500 },
            read_only_max_timeout_count: 3,
            writer_is_also_reader: true,
            replication_lag_interval: 10_000,
            replication_lag_timeout: 1_000,
            replication_lag_count: 1,
            slave_lag_when_null: 60,
            shun_on_failures: 5,
            shun_recovery_time_sec: 10,
            default_max_latency_ms: 1_000,
            replication_lag_use_percona_heartbeat: String::new(),
            replication_lag_group_by_host: false,
            groupreplication_healthcheck_interval: 5_000,
            groupreplication_healthcheck_timeout: 800,
            groupreplication_healthcheck_max_timeout_count: 3,
            galera_healthcheck_interval: 5_000,
            galera_healthcheck_timeout: 800,
            galera_healthcheck_max_timeout_count: 3,
        }
    }

    /// Sets `monitor_<name>` if it is one of these; `None` when it is not.
    pub fn set(&mut self, prefix: &str, name: &str, v: &str) -> Option<Result<(), VariableError>> {
        let key = match name {
            "shun_on_failures" | "shun_recovery_time_sec" | "default_max_latency_ms" => name,
            _ => name.strip_prefix("monitor_")?,
        };
        let int = |min: u64, max: u64| super::values::parse_var_int(prefix, name, v, min, max);
        let boolean = || super::values::parse_var_bool(prefix, name, v);
        let r = (|| {
            match key {
                "enabled" => self.enabled = boolean()?,
                "username" => self.username = v.to_string(),
                "password" => self.password = v.to_string(),
                "dbname" => self.dbname = v.to_string(),
                "history" => self.history = int(1_000, 604_800_000)?,
                "connect_interval" => self.connect_interval = int(100, 604_800_000)?,
                "connect_timeout" => self.connect_timeout = int(100, 600_000)?,
                "ping_interval" => self.ping_interval = int(100, 604_800_000)?,
                "ping_timeout" => self.ping_timeout = int(100, 600_000)?,
                "ping_max_failures" => self.ping_max_failures = int(1, 1_000_000)? as u32,
                "read_only_interval" => self.read_only_interval = int(100, 604_800_000)?,
                "read_only_timeout" => self.read_only_timeout = int(100, 600_000)?,
                "read_only_max_timeout_count" => {
                    self.read_only_max_timeout_count = int(1, 1_000_000)? as u32
                }
                "writer_is_also_reader" => self.writer_is_also_reader = boolean()?,
                "replication_lag_interval" => {
                    self.replication_lag_interval = int(100, 604_800_000)?
                }
                "replication_lag_timeout" => self.replication_lag_timeout = int(100, 600_000)?,
                "replication_lag_count" => self.replication_lag_count = int(1, 10)? as u32,
                "replication_lag_use_percona_heartbeat" => {
                    let ok = v.is_empty()
                        || (v.split('.').count() == 2
                            && v.chars()
                                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '.'));
                    if !ok {
                        return Err(VariableError::malformed(
                            prefix,
                            name,
                            v,
                            "a schema.table name",
                        ));
                    }
                    self.replication_lag_use_percona_heartbeat = v.to_string()
                }
                "replication_lag_group_by_host" => self.replication_lag_group_by_host = boolean()?,
                "slave_lag_when_null" => self.slave_lag_when_null = int(0, 604_800)?,
                "shun_on_failures" => self.shun_on_failures = int(1, 10_000_000)? as u32,
                "default_max_latency_ms" => self.default_max_latency_ms = int(0, 20_000)?,
                "shun_recovery_time_sec" => self.shun_recovery_time_sec = int(0, 31_536_000)?,
                "groupreplication_healthcheck_interval" => {
                    self.groupreplication_healthcheck_interval = int(50, 604_800_000)?
                }
                "groupreplication_healthcheck_timeout" => {
                    self.groupreplication_healthcheck_timeout = int(50, 600_000)?
                }
                "galera_healthcheck_interval" => {
                    self.galera_healthcheck_interval = int(50, 604_800_000)?
                }
                "galera_healthcheck_timeout" => self.galera_healthcheck_timeout = int(50, 600_000)?,
                "galera_healthcheck_max_timeout_count" => {
                    self.galera_healthcheck_max_timeout_count = int(1, 1_000_000)? as u32
                }
                "groupreplication_healthcheck_max_timeout_count" => {
                    self.groupreplication_healthcheck_max_timeout_count = int(1, 1_000_000)? as u32
                }
                _ => return Ok(false),
            }
            Ok(true)
        })();
        match r {
            Ok(true) => Some(Ok(())),
            Ok(false) => None,
            Err(e) => Some(Err(e)),
        }
    }

    /// Every variable as (name, value).
    pub fn pairs(&self, prefix: &str) -> Vec<(String, String)> {
        let named = [
            ("monitor_enabled", self.enabled.to_string()),
            ("monitor_username", self.username.clone()),
            ("monitor_password", self.password.clone()),
            ("monitor_history", self.history.to_string()),
            (
                "monitor_connect_interval",
                self.connect_interval.to_string(),
            ),
            ("monitor_connect_timeout", self.connect_timeout.to_string()),
            ("monitor_ping_interval", self.ping_interval.to_string()),
            ("monitor_ping_timeout", self.ping_timeout.to_string()),
            (
                "monitor_ping_max_failures",
                self.ping_max_failures.to_string(),
            ),
            (
                "monitor_read_only_interval",
                self.read_only_interval.to_string(),
            ),
            (
                "monitor_read_only_timeout",
                self.read_only_timeout.to_string(),
            ),
            (
                "monitor_read_only_max_timeout_count",
                self.read_only_max_timeout_count.to_string(),
            ),
            (
                "monitor_writer_is_also_reader",
                self.writer_is_also_reader.to_string(),
            ),
            (
                "monitor_replication_lag_interval",
                self.replication_lag_interval.to_string(),
            ),
            (
                "monitor_replication_lag_timeout",
                self.replication_lag_timeout.to_string(),
            ),
            (
                "monitor_replication_lag_count",
                self.replication_lag_count.to_string(),
            ),
            (
                "monitor_replication_lag_group_by_host",
                self.replication_lag_group_by_host.to_string(),
            ),
            (
                "monitor_replication_lag_use_percona_heartbeat",
                self.replication_lag_use_percona_heartbeat.clone(),
            ),
            (
                "monitor_slave_lag_when_null",
                self.slave_lag_when_null.to_string(),
            ),
            ("shun_on_failures", self.shun_on_failures.to_string()),
            (
                "default_max_latency_ms",
                self.default_max_latency_ms.to_string(),
            ),
            (
                "monitor_groupreplication_healthcheck_interval",
                self.groupreplication_healthcheck_interval.to_string(),
            ),
            (
                "monitor_groupreplication_healthcheck_timeout",
                self.groupreplication_healthcheck_timeout.to_string(),
            ),
            (
                "monitor_groupreplication_healthcheck_max_timeout_count",
                self.groupreplication_healthcheck_max_timeout_count
                    .to_string(),
            ),
            (
                "monitor_galera_healthcheck_interval",
                self.galera_healthcheck_interval.to_string(),
            ),
            (
                "monitor_galera_healthcheck_timeout",
                self.galera_healthcheck_timeout.to_string(),
            ),
            (
                "monitor_galera_healthcheck_max_timeout_count",
                self.galera_healthcheck_max_timeout_count.to_string(),
            ),
            (
                "shun_recovery_time_sec",
                self.shun_recovery_time_sec.to_string(),
            ),
        ];
        let mut v: Vec<(String, String)> =
            named.into_iter().map(|(k, v)| (k.to_string(), v)).collect();
        if prefix == "pgsql" {
            v.push(("monitor_dbname".into(), self.dbname.clone()));
        }
        v
    }
}

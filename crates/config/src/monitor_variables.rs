//! Monitor variables shared by the `mysql-` and `pgsql-` sides (each side has its own copy under
//! its own prefix, as in ProxySQL). Intervals and timeouts are in ms.

use super::declared::{Bool, Int, Shaped, Text, variables};
use super::values::VariableError;

variables! {
    /// What the monitor checks, how often, and when it acts.
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub struct MonitorVariables for prefix {
        /// Run the monitor at all.
        enabled: bool = true => "monitor_enabled", Bool;
        /// The account the monitor logs in to servers with.
        username: String = "monitor".into() => "monitor_username", Text;
        /// The monitor account's password.
        password: String = "monitor".into() => "monitor_password", Text;
        /// How long check results are kept in the `monitor.*` logs (ms).
        history: u64 = 600_000 => "monitor_history", Int(1_000, 604_800_000);
        /// Connect check interval (ms).
        connect_interval: u64 = 60_000 => "monitor_connect_interval", Int(100, 604_800_000);
        /// Connect check timeout (ms).
        connect_timeout: u64 = 600 => "monitor_connect_timeout", Int(100, 600_000);
        /// How often each server is pinged (ms); missed pings lead to shunning.
        ping_interval: u64 = if prefix == "pgsql" { 8_000 } else { 10_000 }
            => "monitor_ping_interval", Int(100, 604_800_000);
        /// How long a ping may take before it counts as missed (ms).
        ping_timeout: u64 = 1_000 => "monitor_ping_timeout", Int(100, 600_000);
        /// Missed heartbeats in a row that shun a server.
        ping_max_failures: u32 = 3 => "monitor_ping_max_failures", Int(1, 1_000_000);
        /// read_only check interval (ms).
        read_only_interval: u64 = if prefix == "pgsql" { 1_000 } else { 1_500 }
            => "monitor_read_only_interval", Int(100, 604_800_000);
        /// read_only check timeout (ms).
        read_only_timeout: u64 = if prefix == "pgsql" { 800 } else { 500 }
            => "monitor_read_only_timeout", Int(100, 600_000);
        /// Failed read_only checks in a row after which the server is assumed read-only.
        read_only_max_timeout_count: u32 = 3
            => "monitor_read_only_max_timeout_count", Int(1, 1_000_000);
        /// The writer of a replication hostgroup pair also serves its reader hostgroup.
        writer_is_also_reader: bool = true => "monitor_writer_is_also_reader", Bool;
        /// Replication lag check interval (ms).
        replication_lag_interval: u64 = 10_000
            => "monitor_replication_lag_interval", Int(100, 604_800_000);
        /// Replication lag check timeout (ms).
        replication_lag_timeout: u64 = 1_000
            => "monitor_replication_lag_timeout", Int(100, 600_000);
        /// Checks over the threshold in a row before a server is shunned.
        replication_lag_count: u32 = 1 => "monitor_replication_lag_count", Int(1, 10);
        /// Accepted for compatibility; lag checks are per server, so this is in effect always on.
        replication_lag_group_by_host: bool = false
            => "monitor_replication_lag_group_by_host", Bool;
        /// pt-heartbeat table (`schema.table`) to read the lag from instead of
        /// `Seconds_Behind_Master`; empty = off.
        replication_lag_use_percona_heartbeat: String = String::new()
            => "monitor_replication_lag_use_percona_heartbeat",
            Shaped { check: schema_table, takes: "a schema.table name, or empty" };
        /// Lag (s) assumed when the server reports NULL (replication stopped or broken).
        slave_lag_when_null: u64 = 60 => "monitor_slave_lag_when_null", Int(0, 604_800);
        /// Connect errors within one second that shun a server on the data path.
        shun_on_failures: u32 = 5 => "shun_on_failures", Int(1, 10_000_000);
        /// Ping time (ms) above which a server is passed over (rows with `max_latency_ms = 0`).
        default_max_latency_ms: u64 = 1_000 => "default_max_latency_ms", Int(0, 20_000);
        /// Group Replication check interval (ms).
        groupreplication_healthcheck_interval: u64 = 5_000
            => "monitor_groupreplication_healthcheck_interval", Int(50, 604_800_000);
        /// Group Replication check timeout (ms).
        groupreplication_healthcheck_timeout: u64 = 800
            => "monitor_groupreplication_healthcheck_timeout", Int(50, 600_000);
        /// Failed Group Replication checks in a row after which a member counts as UNREACHABLE.
        groupreplication_healthcheck_max_timeout_count: u32 = 3
            => "monitor_groupreplication_healthcheck_max_timeout_count", Int(1, 1_000_000);
        /// Galera check interval (ms).
        galera_healthcheck_interval: u64 = 5_000
            => "monitor_galera_healthcheck_interval", Int(50, 604_800_000);
        /// Galera check timeout (ms).
        galera_healthcheck_timeout: u64 = 800
            => "monitor_galera_healthcheck_timeout", Int(50, 600_000);
        /// Failed Galera checks in a row after which a node counts as unreachable.
        galera_healthcheck_max_timeout_count: u32 = 3
            => "monitor_galera_healthcheck_max_timeout_count", Int(1, 1_000_000);
        /// How long such a shun lasts (s).
        shun_recovery_time_sec: u64 = 10 => "shun_recovery_time_sec", Int(0, 31_536_000);
        /// Database the PostgreSQL monitor connects to.
        dbname: String = "postgres".into() => "monitor_dbname", Text, pgsql_only;
    }
}

impl MonitorVariables {
    /// ProxySQL's defaults for `prefix` (`mysql` or `pgsql`; they differ in a few intervals).
    pub fn defaults(prefix: &str) -> Self {
        MonitorVariables::defaults_for(prefix)
    }
}

/// `schema.table` (letters, digits, `_`), or empty.
fn schema_table(prefix: &str, name: &str, v: &str) -> Result<(), VariableError> {
    let ok = v.is_empty()
        || (v.split('.').count() == 2
            && v.chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '.'));
    if ok {
        Ok(())
    } else {
        Err(VariableError::malformed(
            prefix,
            name,
            v,
            "a schema.table name",
        ))
    }
}

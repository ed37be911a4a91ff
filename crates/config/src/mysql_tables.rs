//! `mysql_servers` and `mysql_users` rows, with ProxySQL's column names and defaults.

use super::values::*;
use serde::{Deserialize, Serialize};

/// One row of `mysql_servers`: a backend server in a hostgroup.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MysqlServer {
    /// Hostgroup the server belongs to.
    #[serde(default)]
    pub hostgroup_id: HostgroupId,
    /// Host name or IP address.
    pub hostname: String,
    /// TCP port (default 3306).
    #[serde(default)]
    pub port: Port,
    /// Port of a binlog reader for GTID causal reads (accepted, not used yet).
    #[serde(default = "zero_port")]
    pub gtid_port: Port,
    /// ONLINE, SHUNNED, OFFLINE_SOFT or OFFLINE_HARD; the monitor may override it at runtime.
    #[serde(default)]
    pub status: ServerStatus,
    /// Relative selection weight.
    #[serde(default)]
    pub weight: Weight,
    /// MySQL compressed protocol to this server (accepted; must be 0 in this version).
    #[serde(default)]
    pub compression: Flag,
    /// Cap on backend connections to this server.
    #[serde(default)]
    pub max_connections: ServerMaxConnections,
    /// Replication lag (s) above which the server is shunned; 0 disables.
    #[serde(default)]
    pub max_replication_lag: ReplicationLag,
    /// Use TLS for backend connections to this server.
    #[serde(default)]
    pub use_ssl: Flag,
    /// Ping latency above which the server is skipped; 0 uses the global default.
    #[serde(default)]
    pub max_latency_ms: LatencyMs,
    /// The operator's note; Sluice ignores it.
    #[serde(default)]
    pub comment: String,
}

fn zero_port() -> Port {
    Port(0)
}

/// One row of `mysql_users`: credentials clients log in with and Sluice uses towards backends.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MysqlUser {
    /// The account name clients log in with (and, with `backend=1`, Sluice logs in to servers
    /// with).
    pub username: String,
    /// Cleartext password, or a `mysql_native_password` hash (`*` + 40 hex digits).
    #[serde(default)]
    pub password: String,
    /// Inactive users cannot log in.
    #[serde(default = "yes")]
    pub active: Flag,
    /// The client must connect over TLS.
    #[serde(default)]
    pub use_ssl: Flag,
    /// Hostgroup that receives this user's traffic when no rule matches.
    #[serde(default)]
    pub default_hostgroup: HostgroupId,
    /// Schema used when the client does not name one.
    #[serde(default)]
    pub default_schema: Option<String>,
    /// Forbid changing schema (accepted; enforced by the query-processor issue).
    #[serde(default)]
    pub schema_locked: Flag,
    /// Keep a transaction on the hostgroup where it started.
    #[serde(default = "yes")]
    pub transaction_persistent: Flag,
    /// Bypass the query processor (accepted; every session is pass-through in this version).
    #[serde(default)]
    pub fast_forward: Flag,
    /// The row provides credentials towards backends.
    #[serde(default = "yes")]
    pub backend: Flag,
    /// The row lets clients log in.
    #[serde(default = "yes")]
    pub frontend: Flag,
    /// Cap on this user's concurrent client connections.
    #[serde(default)]
    pub max_connections: UserMaxConnections,
    /// JSON attributes (ProxySQL's), kept as text.
    #[serde(default)]
    pub attributes: String,
    /// The operator's note; Sluice ignores it.
    #[serde(default)]
    pub comment: String,
}

fn yes() -> Flag {
    Flag(true)
}

/// One row of `mysql_hostgroup_attributes`: per-hostgroup settings.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MysqlHostgroupAttributes {
    /// The hostgroup the attributes apply to.
    pub hostgroup_id: HostgroupId,
    /// Cap on ONLINE servers used (accepted; not used yet).
    #[serde(default = "million")]
    pub max_num_online_servers: i64,
    /// Forced autocommit (-1 = client's; accepted; not used yet).
    #[serde(default = "minus_one")]
    pub autocommit: i64,
    /// Idle connections kept, % of max (accepted; not used yet).
    #[serde(default = "ten")]
    pub free_connections_pct: i64,
    /// SQL run on new backend connections (accepted; not used yet).
    #[serde(default)]
    pub init_connect: String,
    /// 0 turns multiplexing off for sessions routed to this hostgroup.
    #[serde(default = "yes")]
    pub multiplex: Flag,
    /// Pre-open connections (accepted; not used yet).
    #[serde(default)]
    pub connection_warming: Flag,
    /// New connections per second (accepted; not used yet).
    #[serde(default = "million")]
    pub throttle_connections_per_sec: i64,
    /// JSON (accepted; not used yet).
    #[serde(default)]
    pub ignore_session_variables: String,
    /// JSON (accepted; not used yet).
    #[serde(default)]
    pub hostgroup_settings: String,
    /// JSON (accepted; not used yet).
    #[serde(default)]
    pub servers_defaults: String,
    /// The operator's note; Sluice ignores it.
    #[serde(default)]
    pub comment: String,
}

fn minus_one() -> i64 {
    -1
}

fn ten() -> i64 {
    10
}

fn million() -> i64 {
    1_000_000
}

impl MysqlUser {
    /// The `multiplexing` key of `attributes` (Sluice extension), when set.
    pub fn multiplexing_attribute(&self) -> Option<bool> {
        let v: serde_json::Value = serde_json::from_str(&self.attributes).ok()?;
        match v.get("multiplexing")? {
            serde_json::Value::Bool(b) => Some(*b),
            serde_json::Value::Number(n) => n.as_i64().map(|n| n != 0),
            _ => None,
        }
    }
}

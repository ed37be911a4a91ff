//! `mysql_servers` and `mysql_users` rows, with ProxySQL's column names and defaults.

use super::rows::{server_row, user_row, yes};
use super::values::*;
use serde::{Deserialize, Serialize};

server_row! {
    /// One row of `mysql_servers`: a backend server in a hostgroup.
    pub struct MysqlServer {
        port {
            /// TCP port (default 3306).
            #[serde(default)]
        }
        after_port {
            /// Port of a binlog reader for GTID causal reads (accepted, not used yet).
            #[serde(default = "zero_port")]
            pub gtid_port: Port,
        }
    }
}

fn zero_port() -> Port {
    Port(0)
}

user_row! {
    /// One row of `mysql_users`: credentials clients log in with and Sluice uses towards
    /// backends.
    pub struct MysqlUser {
        username {
            /// The account name clients log in with (and, with `backend=1`, Sluice logs in to
            /// servers with).
        }
        password {
            /// Cleartext password, or a `mysql_native_password` hash (`*` + 40 hex digits).
        }
        after_default_hostgroup {
            /// Schema used when the client does not name one.
            #[serde(default)]
            pub default_schema: Option<String>,
            /// Forbid changing schema (accepted; enforced by the query-processor issue).
            #[serde(default)]
            pub schema_locked: Flag,
        }
        fast_forward {
            /// Bypass the query processor (accepted; every session is pass-through in this
            /// version).
        }
        attributes {
            /// JSON attributes (ProxySQL's), kept as text.
        }
    }
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

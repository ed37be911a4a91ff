//! The rows both protocols have — `*_servers` and `*_users` — declared once: the columns they
//! share (names, types, defaults, order) are written here, and each protocol's struct adds
//! what is its own in the place ProxySQL puts it (`gtid_port` after `port`; `default_schema`
//! and `schema_locked` after `default_hostgroup`) and says in its own words what a shared
//! column means on its side.

/// A `*_servers` row: `port { docs and serde default }` and the columns after it that only this
/// protocol has.
macro_rules! server_row {
    (
        $(#[$meta:meta])*
        pub struct $name:ident {
            port { $(#[$port_meta:meta])* }
            after_port { $( $(#[$extra_meta:meta])* pub $extra:ident: $extra_ty:ty, )* }
        }
    ) => {
        $(#[$meta])*
        #[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
        #[serde(deny_unknown_fields)]
        pub struct $name {
            /// The hostgroup this row puts the server in.
            #[serde(default)]
            pub hostgroup_id: HostgroupId,
            /// Host name or IP address.
            pub hostname: String,
            $(#[$port_meta])*
            pub port: Port,
            $( $(#[$extra_meta])* pub $extra: $extra_ty, )*
            /// ONLINE, SHUNNED, OFFLINE_SOFT or OFFLINE_HARD; the monitor may override it at
            /// runtime.
            #[serde(default)]
            pub status: ServerStatus,
            /// Relative selection weight among the hostgroup's servers.
            #[serde(default)]
            pub weight: Weight,
            /// Compressed protocol to this server (accepted; must be 0 in this version).
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
    };
}

/// A `*_users` row: the docs of the columns whose meaning differs per protocol (`username`,
/// `password`, `fast_forward`, `attributes`) and the columns after `default_hostgroup` that
/// only this protocol has.
macro_rules! user_row {
    (
        $(#[$meta:meta])*
        pub struct $name:ident {
            username { $(#[$username_meta:meta])* }
            password { $(#[$password_meta:meta])* }
            after_default_hostgroup {
                $( $(#[$extra_meta:meta])* pub $extra:ident: $extra_ty:ty, )*
            }
            fast_forward { $(#[$fast_forward_meta:meta])* }
            attributes { $(#[$attributes_meta:meta])* }
        }
    ) => {
        $(#[$meta])*
        #[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
        #[serde(deny_unknown_fields)]
        pub struct $name {
            $(#[$username_meta])*
            pub username: String,
            $(#[$password_meta])*
            #[serde(default)]
            pub password: String,
            /// Inactive users cannot log in.
            #[serde(default = "crate::rows::yes")]
            pub active: Flag,
            /// The client must connect over TLS.
            #[serde(default)]
            pub use_ssl: Flag,
            /// Hostgroup that receives this user's traffic when no rule matches.
            #[serde(default)]
            pub default_hostgroup: HostgroupId,
            $( $(#[$extra_meta])* pub $extra: $extra_ty, )*
            /// Keep a transaction on the hostgroup where it started.
            #[serde(default = "crate::rows::yes")]
            pub transaction_persistent: Flag,
            $(#[$fast_forward_meta])*
            #[serde(default)]
            pub fast_forward: Flag,
            /// The row provides credentials towards backends.
            #[serde(default = "crate::rows::yes")]
            pub backend: Flag,
            /// The row lets clients log in.
            #[serde(default = "crate::rows::yes")]
            pub frontend: Flag,
            /// Cap on this user's concurrent client connections.
            #[serde(default)]
            pub max_connections: UserMaxConnections,
            $(#[$attributes_meta])*
            #[serde(default)]
            pub attributes: String,
            /// The operator's note; Sluice ignores it.
            #[serde(default)]
            pub comment: String,
        }
    };
}

/// `true`, the default of the flags that are on unless a row says otherwise.
pub(crate) fn yes() -> Flag {
    Flag(true)
}

use super::values::Flag;
pub(crate) use {server_row, user_row};

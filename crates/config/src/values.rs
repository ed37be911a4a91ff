//! Column value types with ProxySQL's CHECK constraints built into deserialisation, so that a bad
//! value in the config file is reported by the TOML parser with its key and line.

use serde::de::{self, Deserializer, Visitor};
use serde::{Deserialize, Serialize};
use std::fmt;

/// A 0/1 column (ProxySQL stores booleans as INT). Accepts `0`, `1`, `true` and `false`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
pub struct Flag(pub bool);

impl<'de> Deserialize<'de> for Flag {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = Flag;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("0, 1, true or false")
            }
            fn visit_bool<E: de::Error>(self, v: bool) -> Result<Flag, E> {
                Ok(Flag(v))
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<Flag, E> {
                match v {
                    0 => Ok(Flag(false)),
                    1 => Ok(Flag(true)),
                    _ => Err(E::custom(format!("invalid value {v}: expected 0 or 1"))),
                }
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<Flag, E> {
                self.visit_i64(i64::try_from(v).unwrap_or(i64::MAX))
            }
        }
        d.deserialize_any(V)
    }
}

/// Defines an integer column type checked against `[min, max]` when deserialised.
macro_rules! bounded {
    ($(#[$doc:meta])* $name:ident, $ty:ty, $min:expr, $max:expr, $default:expr) => {
        $(#[$doc])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
        pub struct $name(pub $ty);

        impl $name {
            /// Smallest accepted value.
            pub const MIN: $ty = $min;
            /// Largest accepted value.
            pub const MAX: $ty = $max;
        }

        impl Default for $name {
            fn default() -> Self {
                $name($default)
            }
        }

        impl<'de> Deserialize<'de> for $name {
            fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                let v = i64::deserialize(d)?;
                if v < ($min as i64) || v > ($max as i64) {
                    return Err(de::Error::custom(format!(
                        "invalid value {v}: must be between {} and {}",
                        $min, $max
                    )));
                }
                Ok($name(v as $ty))
            }
        }
    };
}

bounded!(
    /// `hostgroup_id`: 0 and up.
    HostgroupId, u32, 0, i32::MAX as u32, 0
);
bounded!(
    /// `port`: 0..65535 (a server row needs a real port; 0 is rejected by validation).
    Port, u16, 0, 65535, 3306
);
bounded!(
    /// `weight`: 0..10,000,000.
    Weight, u32, 0, 10_000_000, 1
);
bounded!(
    /// Server `max_connections`: 0 and up (default 1000).
    ServerMaxConnections, u32, 0, i32::MAX as u32, 1000
);
bounded!(
    /// User `max_connections`: 0 and up (default 10000).
    UserMaxConnections, u32, 0, i32::MAX as u32, 10000
);
bounded!(
    /// `max_replication_lag` in seconds: 0..126,144,000.
    ReplicationLag, u32, 0, 126_144_000, 0
);
bounded!(
    /// `max_latency_ms`: 0 and up.
    LatencyMs, u32, 0, i32::MAX as u32, 0
);

/// A server's configured status (the four values the config tables accept).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum ServerStatus {
    /// Serving.
    #[default]
    Online,
    /// Temporarily excluded.
    Shunned,
    /// Draining: no new connections, existing ones finish.
    OfflineSoft,
    /// Unusable: existing connections are dropped.
    OfflineHard,
    /// Set by the monitor (never configured): replication lag above `max_replication_lag`.
    ShunnedReplicationLag,
}

impl ServerStatus {
    /// ProxySQL's spelling (`ONLINE`, `SHUNNED`, `OFFLINE_SOFT`, `OFFLINE_HARD`).
    pub fn as_str(self) -> &'static str {
        match self {
            ServerStatus::Online => "ONLINE",
            ServerStatus::Shunned => "SHUNNED",
            ServerStatus::OfflineSoft => "OFFLINE_SOFT",
            ServerStatus::OfflineHard => "OFFLINE_HARD",
            ServerStatus::ShunnedReplicationLag => "SHUNNED_REPLICATION_LAG",
        }
    }

    /// Parses a status case-insensitively, as ProxySQL's `UPPER(status) IN (...)` check does.
    pub fn parse(s: &str) -> Option<Self> {
        match s.to_ascii_uppercase().as_str() {
            "ONLINE" => Some(ServerStatus::Online),
            "SHUNNED" => Some(ServerStatus::Shunned),
            "OFFLINE_SOFT" => Some(ServerStatus::OfflineSoft),
            "OFFLINE_HARD" => Some(ServerStatus::OfflineHard),
            _ => None,
        }
    }
}

impl fmt::Display for ServerStatus {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl Serialize for ServerStatus {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for ServerStatus {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        ServerStatus::parse(&s).ok_or_else(|| {
            de::Error::custom(format!(
                "invalid status {s:?}: expected ONLINE, SHUNNED, OFFLINE_SOFT or OFFLINE_HARD"
            ))
        })
    }
}

/// Why `SET <prefix>-<name>` (or a `[<prefix>_variables]` entry) was refused. Each error names
/// the variable as ProxySQL spells it (`mysql-max_connections`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum VariableError {
    /// No such variable (neither Sluice's nor one of ProxySQL's it accepts).
    #[error("unknown variable {0}")]
    Unknown(String),
    /// A number was expected.
    #[error("{name}: {value:?} is not a whole number")]
    NotANumber {
        /// The variable.
        name: String,
        /// The text given.
        value: String,
    },
    /// The number is outside the variable's range.
    #[error("{name}: {value} is out of range {min}..{max}")]
    OutOfRange {
        /// The variable.
        name: String,
        /// The number given.
        value: u64,
        /// Smallest allowed.
        min: u64,
        /// Largest allowed.
        max: u64,
    },
    /// `true`/`false`/`1`/`0` was expected.
    #[error("{name}: {value:?} is not true/false")]
    NotABoolean {
        /// The variable.
        name: String,
        /// The text given.
        value: String,
    },
    /// The text does not have the variable's shape (a host:port list, a schema.table name, ...).
    #[error("{name}: {value:?} is not {expected}")]
    Malformed {
        /// The variable.
        name: String,
        /// The text given.
        value: String,
        /// What the variable takes.
        expected: &'static str,
    },
}

impl VariableError {
    /// `{prefix}-{name}` does not exist.
    pub(crate) fn unknown(prefix: &str, name: &str) -> VariableError {
        VariableError::Unknown(format!("{prefix}-{name}"))
    }

    /// `v` is not what `{prefix}-{name}` takes.
    pub(crate) fn malformed(
        prefix: &str,
        name: &str,
        v: &str,
        expected: &'static str,
    ) -> VariableError {
        VariableError::Malformed {
            name: format!("{prefix}-{name}"),
            value: v.to_string(),
            expected,
        }
    }
}

/// A whole number for variable `{prefix}-{name}` within `min..=max`, with an error naming it.
pub(crate) fn parse_var_int(
    prefix: &str,
    name: &str,
    v: &str,
    min: u64,
    max: u64,
) -> Result<u64, VariableError> {
    let n: u64 = v.trim().parse().map_err(|_| VariableError::NotANumber {
        name: format!("{prefix}-{name}"),
        value: v.to_string(),
    })?;
    if n < min || n > max {
        return Err(VariableError::OutOfRange {
            name: format!("{prefix}-{name}"),
            value: n,
            min,
            max,
        });
    }
    Ok(n)
}

/// `true`/`false`/`1`/`0` for variable `{prefix}-{name}`, with an error naming it.
pub(crate) fn parse_var_bool(prefix: &str, name: &str, v: &str) -> Result<bool, VariableError> {
    match v.trim().to_ascii_lowercase().as_str() {
        "true" | "1" => Ok(true),
        "false" | "0" => Ok(false),
        _ => Err(VariableError::NotABoolean {
            name: format!("{prefix}-{name}"),
            value: v.to_string(),
        }),
    }
}

/// A `;`-separated `host:port` list for variable `{prefix}-{name}`.
pub(crate) fn check_host_ports(prefix: &str, name: &str, v: &str) -> Result<(), VariableError> {
    // Empty: no listener of that kind (a PostgreSQL-only or MySQL-only proxy).
    let ok = v.trim().is_empty()
        || v.split(';').all(|i| {
            i.trim()
                .rsplit_once(':')
                .is_some_and(|(_, p)| p.parse::<u16>().is_ok())
        });
    if ok {
        Ok(())
    } else {
        Err(VariableError::malformed(
            prefix,
            name,
            v,
            "a ';'-separated host:port list",
        ))
    }
}

//! What one monitor check found: its kind and its row in the `monitor.*_log` tables, as the
//! monitor's logs keep them and the admin shows them.

use super::GaleraStatus;
use crate::runtime::ServerKey;

/// The kinds of health check the monitor runs, each with its log table.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CheckKind {
    /// Open a monitor connection.
    Connect,
    /// Heartbeat on the monitor connection.
    Ping,
    /// read_only / pg_is_in_recovery().
    ReadOnly,
    /// Replication lag (Seconds_Behind_Master / replay lag).
    ReplicationLag,
    /// Group Replication member state (MySQL).
    GroupReplication,
    /// Galera node state (MariaDB / Percona XtraDB Cluster).
    Galera,
}

impl CheckKind {
    /// All kinds, in counter order.
    pub const ALL: [CheckKind; 6] = [
        CheckKind::Connect,
        CheckKind::Ping,
        CheckKind::ReadOnly,
        CheckKind::ReplicationLag,
        CheckKind::GroupReplication,
        CheckKind::Galera,
    ];

    /// The name in counters and table names.
    pub fn name(self) -> &'static str {
        match self {
            CheckKind::Connect => "connect",
            CheckKind::Ping => "ping",
            CheckKind::ReadOnly => "read_only",
            CheckKind::ReplicationLag => "replication_lag",
            CheckKind::GroupReplication => "group_replication",
            CheckKind::Galera => "galera",
        }
    }
}

/// One check's row.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CheckRow {
    /// The server checked.
    pub server: ServerKey,
    /// Start (µs since the epoch).
    pub time_start_us: u64,
    /// Duration when it succeeded (µs), else 0.
    pub success_time_us: u64,
    /// The value read: read_only 0/1, or the lag in seconds (`None`: NULL or not applicable).
    pub value: Option<i64>,
    /// What went wrong.
    pub error: Option<String>,
    /// Group Replication: the member's state and role.
    pub member: Option<(String, String)>,
    /// Galera: what the node reported.
    pub galera: Option<GaleraStatus>,
}

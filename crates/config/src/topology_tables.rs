//! The topology tables the monitor acts on: `*_replication_hostgroups` (placement by read_only)
//! and `mysql_group_replication_hostgroups` / `mysql_galera_hostgroups` (placement by cluster
//! member state), with ProxySQL's column names.

use super::values::Flag;
use serde::{Deserialize, Serialize};

/// One `*_replication_hostgroups` row: the monitor places servers of the pair by `read_only`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ReplicationHostgroup {
    /// Hostgroup of the server(s) with read_only=0.
    pub writer_hostgroup: u32,
    /// Hostgroup of the servers with read_only=1.
    pub reader_hostgroup: u32,
    /// Which variable says read-only (MySQL); PostgreSQL uses `pg_is_in_recovery()`.
    #[serde(default = "read_only")]
    pub check_type: String,
    /// The operator's note; Sluice ignores it.
    #[serde(default)]
    pub comment: String,
}

fn read_only() -> String {
    "read_only".into()
}

/// One `mysql_group_replication_hostgroups` row: the monitor places the group's members by
/// their Group Replication state and role.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GroupReplicationHostgroup {
    /// The elected writers.
    pub writer_hostgroup: u32,
    /// Primaries beyond `max_writers`.
    pub backup_writer_hostgroup: u32,
    /// Where the monitor puts the cluster's secondaries (readers).
    pub reader_hostgroup: u32,
    /// Members in any state but ONLINE, or too far behind.
    pub offline_hostgroup: u32,
    /// Inactive rows are ignored.
    #[serde(default = "active")]
    pub active: Flag,
    /// How many primaries write.
    #[serde(default = "one")]
    pub max_writers: u32,
    /// 0: writers only write; 1: writers and backup writers also read; 2: backup writers read.
    #[serde(default)]
    pub writer_is_also_reader: u8,
    /// Applier queue length above which a member is shunned (twice that: offline); 0 = off.
    #[serde(default)]
    pub max_transactions_behind: u64,
    /// The operator's note; Sluice ignores it.
    #[serde(default)]
    pub comment: Option<String>,
}

fn active() -> Flag {
    Flag(true)
}

fn one() -> u32 {
    1
}

impl GroupReplicationHostgroup {
    /// Its four hostgroups.
    pub fn hostgroups(&self) -> [u32; 4] {
        [
            self.writer_hostgroup,
            self.backup_writer_hostgroup,
            self.reader_hostgroup,
            self.offline_hostgroup,
        ]
    }
}

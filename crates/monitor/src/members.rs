//! Which servers the monitor checks, and how: every configured server, lag thresholds,
//! cluster and replication-pair membership.

use sluice_core::Protocol;
use sluice_core::config::ReplicationHostgroup;
use sluice_core::runtime::{HostgroupServer, RuntimeConfig, ServerKey};
use std::collections::{BTreeMap, HashMap, HashSet};

/// Every configured server once.
pub(super) fn servers(hostgroups: &BTreeMap<u32, Vec<HostgroupServer>>) -> Vec<ServerKey> {
    let mut v: Vec<ServerKey> = hostgroups
        .values()
        .flatten()
        .map(|s| s.key.clone())
        .collect();
    v.sort();
    v.dedup();
    v
}

/// Servers with a `max_replication_lag`: the smallest positive one across their rows (the
/// strictest hostgroup decides when the lag check shuns).
pub(super) fn lag_thresholds(
    hostgroups: &BTreeMap<u32, Vec<HostgroupServer>>,
) -> HashMap<ServerKey, u32> {
    let mut m: HashMap<ServerKey, u32> = HashMap::new();
    for s in hostgroups
        .values()
        .flatten()
        .filter(|s| s.max_replication_lag > 0)
    {
        let e = m.entry(s.key.clone()).or_insert(s.max_replication_lag);
        *e = (*e).min(s.max_replication_lag);
    }
    m
}

/// The active Group Replication definitions of a protocol (MySQL only).
pub(super) fn groups(
    rt: &RuntimeConfig,
    p: Protocol,
) -> &[sluice_core::config::GroupReplicationHostgroup] {
    match p {
        Protocol::Mysql => &rt.mysql.group_replication,
        Protocol::Pgsql => &[],
    }
}

/// The active Galera definitions of a protocol (MySQL only).
pub(super) fn galera(
    rt: &RuntimeConfig,
    p: Protocol,
) -> &[sluice_core::config::GroupReplicationHostgroup] {
    match p {
        Protocol::Mysql => &rt.mysql.galera,
        Protocol::Pgsql => &[],
    }
}

/// Servers configured in an active Group Replication definition's hostgroups.
pub(super) fn group_members(
    hostgroups: &BTreeMap<u32, Vec<HostgroupServer>>,
    groups: &[sluice_core::config::GroupReplicationHostgroup],
) -> HashSet<ServerKey> {
    groups
        .iter()
        .filter(|g| g.active.0)
        .flat_map(|g| g.hostgroups())
        .flat_map(|hg| hostgroups.get(&hg).into_iter().flatten())
        .map(|s| s.key.clone())
        .collect()
}

/// Servers of replication pairs, with their pair's check_type.
pub(super) fn pair_members(
    hostgroups: &BTreeMap<u32, Vec<HostgroupServer>>,
    pairs: &[ReplicationHostgroup],
) -> HashMap<ServerKey, String> {
    let mut m = HashMap::new();
    for p in pairs {
        for hg in [p.writer_hostgroup, p.reader_hostgroup] {
            for s in hostgroups.get(&hg).into_iter().flatten() {
                m.insert(s.key.clone(), p.check_type.clone());
            }
        }
    }
    m
}

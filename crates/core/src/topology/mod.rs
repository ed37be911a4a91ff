//! What the monitor believes about the servers of one protocol, and the pure function that lays
//! it over the configured hostgroups: servers of a replication hostgroup pair go to the writer
//! or reader hostgroup by their `read_only` verdict, and servers that missed their heartbeats are
//! SHUNNED. The configuration itself is never changed; a LOAD keeps the monitor's view.

mod check_row;
pub mod cluster;

pub use check_row::{CheckKind, CheckRow};
pub use cluster::{GaleraStatus, MemberState};

use crate::config::{ReplicationHostgroup, ServerStatus};
use crate::runtime::{HostgroupServer, ServerKey};
use std::collections::{BTreeMap, BTreeSet};
use std::time::Instant;

/// The monitor's verdicts for one protocol.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Topology {
    /// Servers shunned for missing heartbeats or connect errors, with when that began.
    pub shunned: BTreeMap<ServerKey, Instant>,
    /// The last read_only verdict per server (true = read-only / in recovery).
    pub read_only: BTreeMap<ServerKey, bool>,
    /// Servers over their `max_replication_lag`.
    pub lag_shunned: BTreeSet<ServerKey>,
    /// Group Replication members' last states.
    pub groups: BTreeMap<ServerKey, cluster::MemberState>,
    /// Last ping times (ms) of servers slower than `default_max_latency_ms` or a row's
    /// `max_latency_ms` (only those: faster ones need no mark).
    pub slow: BTreeMap<ServerKey, u64>,
}

/// The cluster definitions the verdicts are laid out by.
#[derive(Debug, Clone, Copy)]
pub struct Clusters<'a> {
    /// `*_replication_hostgroups`.
    pub replication: &'a [ReplicationHostgroup],
    /// `monitor_writer_is_also_reader`.
    pub writer_is_also_reader: bool,
    /// `mysql_group_replication_hostgroups`.
    pub group_replication: &'a [crate::config::GroupReplicationHostgroup],
    /// `mysql_galera_hostgroups` (placed the same way, from wsrep states).
    pub galera: &'a [crate::config::GroupReplicationHostgroup],
    /// `default_max_latency_ms`, for rows with `max_latency_ms = 0`.
    pub default_max_latency_ms: u64,
}

/// Hostgroups as configured, laid over with the monitor's verdicts.
pub fn apply(
    configured: &BTreeMap<u32, Vec<HostgroupServer>>,
    c: &Clusters<'_>,
    t: &Topology,
) -> BTreeMap<u32, Vec<HostgroupServer>> {
    let writer_is_also_reader = c.writer_is_also_reader;
    let mut out = configured.clone();
    for g in c
        .group_replication
        .iter()
        .chain(c.galera)
        .filter(|g| g.active.0)
    {
        place_group_members(&mut out, configured, g, t);
    }
    for p in c.replication {
        let (w, r) = (p.writer_hostgroup, p.reader_hostgroup);
        // Every server of the pair, with the row it was configured with (writer's first).
        let mut members: Vec<HostgroupServer> = Vec::new();
        for hg in [w, r] {
            for s in configured.get(&hg).into_iter().flatten() {
                if !members.iter().any(|m| m.key == s.key) {
                    members.push(s.clone());
                }
            }
        }
        for m in members {
            let Some(&ro) = t.read_only.get(&m.key) else {
                continue;
            };
            let in_writer = !ro;
            let in_reader = ro || writer_is_also_reader;
            place(&mut out, w, &m, in_writer, configured);
            place(&mut out, r, &m, in_reader, configured);
        }
    }
    for servers in out.values_mut() {
        for s in servers.iter_mut() {
            let limit = match s.max_latency_ms {
                0 => c.default_max_latency_ms,
                n => u64::from(n),
            };
            s.too_slow = limit > 0 && t.slow.get(&s.key).is_some_and(|ms| *ms > limit);
            if s.status != ServerStatus::Online {
                continue;
            }
            if let Some(since) = t.shunned.get(&s.key) {
                s.status = ServerStatus::Shunned;
                s.shunned_since = Some(*since);
            } else if s.max_replication_lag > 0 && t.lag_shunned.contains(&s.key) {
                s.status = ServerStatus::ShunnedReplicationLag;
            }
        }
    }
    out.retain(|_, v| !v.is_empty());
    out
}

/// Replaces the memberships of a Group Replication cluster's members that reported a state with
/// the placement [`cluster::place_group`] computes.
fn place_group_members(
    out: &mut BTreeMap<u32, Vec<HostgroupServer>>,
    configured: &BTreeMap<u32, Vec<HostgroupServer>>,
    g: &crate::config::GroupReplicationHostgroup,
    t: &Topology,
) {
    let mut members: Vec<(HostgroupServer, cluster::MemberState)> = Vec::new();
    for hg in g.hostgroups() {
        for s in configured.get(&hg).into_iter().flatten() {
            if members.iter().any(|(m, _)| m.key == s.key) {
                continue;
            }
            if let Some(state) = t.groups.get(&s.key) {
                members.push((s.clone(), state.clone()));
            }
        }
    }
    if members.is_empty() {
        return;
    }
    for hg in g.hostgroups() {
        if let Some(list) = out.get_mut(&hg) {
            list.retain(|s| !members.iter().any(|(m, _)| m.key == s.key));
        }
    }
    for (hg, row) in cluster::place_group(g, &members) {
        out.entry(hg).or_default().push(row);
    }
}

/// Makes `m` a member of `hg` or not; a member keeps its configured row in that hostgroup when
/// it has one.
fn place(
    out: &mut BTreeMap<u32, Vec<HostgroupServer>>,
    hg: u32,
    m: &HostgroupServer,
    member: bool,
    configured: &BTreeMap<u32, Vec<HostgroupServer>>,
) {
    let list = out.entry(hg).or_default();
    let present = list.iter().any(|s| s.key == m.key);
    if member && !present {
        let row = configured
            .get(&hg)
            .and_then(|v| v.iter().find(|s| s.key == m.key))
            .cloned()
            .unwrap_or_else(|| HostgroupServer {
                hostgroup: hg,
                ..m.clone()
            });
        list.push(row);
    } else if !member && present {
        list.retain(|s| s.key != m.key);
    }
}

/// One line per membership or status difference between two layouts, for the log.
pub fn differences(
    before: &BTreeMap<u32, Vec<HostgroupServer>>,
    after: &BTreeMap<u32, Vec<HostgroupServer>>,
    why: impl Fn(&ServerKey) -> String,
) -> Vec<String> {
    let mut lines = Vec::new();
    let because = |k: &ServerKey| match why(k) {
        w if w.is_empty() => String::new(),
        w => format!(" ({w})"),
    };
    let hostgroups: BTreeSet<u32> = before.keys().chain(after.keys()).copied().collect();
    for hg in hostgroups {
        let b = before.get(&hg).map(Vec::as_slice).unwrap_or(&[]);
        let a = after.get(&hg).map(Vec::as_slice).unwrap_or(&[]);
        for s in a {
            match b.iter().find(|x| x.key == s.key) {
                None => lines.push(format!(
                    "server {} added to hostgroup {hg} as {}{}",
                    s.key,
                    s.status.as_str(),
                    because(&s.key)
                )),
                Some(old) if old.status != s.status => lines.push(format!(
                    "server {} in hostgroup {hg}: {} -> {}{}",
                    s.key,
                    old.status.as_str(),
                    s.status.as_str(),
                    because(&s.key)
                )),
                Some(_) => {}
            }
        }
        for s in b {
            if !a.iter().any(|x| x.key == s.key) {
                lines.push(format!(
                    "server {} removed from hostgroup {hg}{}",
                    s.key,
                    because(&s.key)
                ));
            }
        }
    }
    lines
}

#[cfg(test)]
mod tests {
    use super::*;

    fn srv(hg: u32, port: u16) -> HostgroupServer {
        HostgroupServer {
            max_connections: 10,
            ..HostgroupServer::new("h", port, hg)
        }
    }

    fn key(port: u16) -> ServerKey {
        ServerKey {
            hostname: "h".into(),
            port,
        }
    }

    fn cl(pairs: &[ReplicationHostgroup], writer_is_also_reader: bool) -> Clusters<'_> {
        Clusters {
            replication: pairs,
            writer_is_also_reader,
            group_replication: &[],
            galera: &[],
            default_max_latency_ms: 1000,
        }
    }

    fn pair() -> Vec<ReplicationHostgroup> {
        vec![ReplicationHostgroup {
            writer_hostgroup: 0,
            reader_hostgroup: 1,
            check_type: "read_only".into(),
            comment: String::new(),
        }]
    }

    fn ports(m: &BTreeMap<u32, Vec<HostgroupServer>>, hg: u32) -> Vec<u16> {
        let mut v: Vec<u16> = m
            .get(&hg)
            .into_iter()
            .flatten()
            .map(|s| s.key.port)
            .collect();
        v.sort_unstable();
        v
    }

    fn configured() -> BTreeMap<u32, Vec<HostgroupServer>> {
        BTreeMap::from([(0, vec![srv(0, 1)]), (1, vec![srv(1, 2)])])
    }

    #[test]
    fn no_verdict_keeps_the_configuration() {
        let out = apply(&configured(), &cl(&pair(), true), &Topology::default());
        assert_eq!(out, configured());
    }

    #[test]
    fn placement_by_read_only_with_and_without_writer_as_reader() {
        let mut t = Topology::default();
        t.read_only.insert(key(1), false);
        t.read_only.insert(key(2), true);
        let out = apply(&configured(), &cl(&pair(), true), &t);
        assert_eq!((ports(&out, 0), ports(&out, 1)), (vec![1], vec![1, 2]));
        let out = apply(&configured(), &cl(&pair(), false), &t);
        assert_eq!((ports(&out, 0), ports(&out, 1)), (vec![1], vec![2]));
        assert_eq!(
            out[&1]
                .iter()
                .find(|s| s.key.port == 2)
                .map(|s| s.hostgroup),
            Some(1)
        );
    }

    #[test]
    fn failover_moves_the_promoted_replica_to_the_writer() {
        // The old primary is read-only now (or assumed so after missed checks), the replica not.
        let mut t = Topology::default();
        t.read_only.insert(key(1), true);
        t.read_only.insert(key(2), false);
        let out = apply(&configured(), &cl(&pair(), false), &t);
        assert_eq!((ports(&out, 0), ports(&out, 1)), (vec![2], vec![1]));
        let added = out[&0]
            .iter()
            .find(|s| s.key.port == 2)
            .map(|s| s.hostgroup);
        assert_eq!(added, Some(0), "the copied row carries its new hostgroup");
        let lines = differences(&configured(), &out, |k| {
            format!("read_only={}", u8::from(t.read_only[k]))
        });
        assert_eq!(
            lines,
            vec![
                "server h:2 added to hostgroup 0 as ONLINE (read_only=0)",
                "server h:1 removed from hostgroup 0 (read_only=1)",
                "server h:1 added to hostgroup 1 as ONLINE (read_only=1)",
                "server h:2 removed from hostgroup 1 (read_only=0)",
            ]
        );
    }

    #[test]
    fn two_writers_when_both_say_read_only_0() {
        let mut t = Topology::default();
        t.read_only.insert(key(1), false);
        t.read_only.insert(key(2), false);
        let out = apply(&configured(), &cl(&pair(), false), &t);
        assert_eq!((ports(&out, 0), ports(&out, 1)), (vec![1, 2], vec![]));
    }

    #[test]
    fn shunning_marks_every_membership_but_keeps_operator_states() {
        let mut cfg = configured();
        cfg.get_mut(&1).expect("hg1").push(srv(1, 1));
        let mut soft = srv(2, 1);
        soft.status = ServerStatus::OfflineSoft;
        cfg.insert(2, vec![soft]);
        let mut t = Topology::default();
        t.shunned.insert(key(1), Instant::now());
        let out = apply(&cfg, &cl(&[], true), &t);
        assert_eq!(out[&0][0].status, ServerStatus::Shunned);
        assert_eq!(out[&1][1].status, ServerStatus::Shunned);
        assert_eq!(
            out[&2][0].status,
            ServerStatus::OfflineSoft,
            "an operator's OFFLINE_SOFT stays"
        );
        assert_eq!(
            differences(&cfg, &out, |_| String::new()),
            vec![
                "server h:1 in hostgroup 0: ONLINE -> SHUNNED",
                "server h:1 in hostgroup 1: ONLINE -> SHUNNED"
            ]
        );
    }

    #[test]
    fn lag_shuns_only_rows_with_a_threshold() {
        let mut cfg = configured();
        cfg.get_mut(&1).expect("hg1")[0].max_replication_lag = 5;
        cfg.insert(2, vec![srv(2, 2)]);
        let mut t = Topology::default();
        t.lag_shunned.insert(key(2));
        let out = apply(&cfg, &cl(&[], true), &t);
        assert_eq!(out[&1][0].status, ServerStatus::ShunnedReplicationLag);
        assert_eq!(
            out[&2][0].status,
            ServerStatus::Online,
            "no threshold in hostgroup 2"
        );
        t.shunned.insert(key(2), Instant::now());
        let out = apply(&cfg, &cl(&[], true), &t);
        assert_eq!(
            out[&1][0].status,
            ServerStatus::Shunned,
            "a missed heartbeat wins"
        );
    }

    #[test]
    fn slow_pings_mark_rows_by_their_own_or_the_default_limit() {
        let mut cfg = configured();
        cfg.get_mut(&1).expect("hg1")[0].max_latency_ms = 5;
        let mut t = Topology::default();
        t.slow.insert(key(1), 20);
        t.slow.insert(key(2), 20);
        let out = apply(&cfg, &cl(&[], true), &t);
        assert!(!out[&0][0].too_slow, "20 ms is within the 1000 ms default");
        assert!(out[&1][0].too_slow, "its own limit is 5 ms");
    }

    #[test]
    fn servers_outside_pairs_are_not_moved() {
        let mut cfg = configured();
        cfg.insert(5, vec![srv(5, 9)]);
        let mut t = Topology::default();
        t.read_only.insert(key(9), false);
        let out = apply(&cfg, &cl(&pair(), true), &t);
        assert_eq!(ports(&out, 5), vec![9]);
        assert_eq!(ports(&out, 0), vec![1]);
    }
}

//! Group Replication placement, a pure function of the members' last states: ONLINE PRIMARY
//! members are writers (the first `max_writers` by weight, hostname and port, descending), the
//! rest of them backup writers; ONLINE SECONDARY members are readers; members in any other state
//! go to the offline hostgroup. `writer_is_also_reader` 1 adds the writers to the readers, 2 adds
//! the backup writers. A member behind by more than `max_transactions_behind` is SHUNNED, and by
//! more than twice that moved offline. An operator's OFFLINE_SOFT/OFFLINE_HARD is kept.

use crate::config::{GroupReplicationHostgroup, ServerStatus};
use crate::runtime::HostgroupServer;

/// What a member reports about itself.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemberState {
    /// `MEMBER_STATE`: ONLINE, RECOVERING, ERROR, UNREACHABLE, OFFLINE (or UNREACHABLE when the
    /// check failed too often).
    pub state: String,
    /// `MEMBER_ROLE`: PRIMARY or SECONDARY.
    pub role: String,
    /// Transactions waiting in its applier queue.
    pub transactions_behind: u64,
}

impl MemberState {
    fn online(&self) -> bool {
        self.state.eq_ignore_ascii_case("ONLINE")
    }

    fn primary(&self) -> bool {
        self.role.eq_ignore_ascii_case("PRIMARY")
    }
}

/// What a Galera node reports (`wsrep_*` status and variables).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GaleraStatus {
    /// `wsrep_local_state`: 4 Synced, 2 Donor/Desynced, 1 Joining, 3 Joined.
    pub local_state: u32,
    /// `wsrep_cluster_status` is `Primary`.
    pub primary_partition: bool,
    /// The node's `read_only`: on, it cannot take writes.
    pub read_only: bool,
    /// The node's `wsrep_desync`: on, it left flow control and may fall behind.
    pub desync: bool,
    /// `wsrep_reject_queries` is not NONE.
    pub reject_queries: bool,
    /// The node's `wsrep_sst_donor_rejects_queries`: on, it refuses queries while it is a donor.
    pub donor_rejects_queries: bool,
    /// Write sets received but not yet applied (`wsrep_local_recv_queue`).
    pub recv_queue: u64,
}

impl GaleraStatus {
    /// The node as a cluster member: ONLINE when it can take queries (Synced, or a donor that
    /// accepts them, in the primary partition, not desynced, not rejecting), else a state naming
    /// why not; writable nodes are PRIMARY, read_only ones SECONDARY.
    pub fn member(&self) -> MemberState {
        let state = if !self.primary_partition {
            "NON_PRIMARY"
        } else if self.desync {
            "DESYNCED"
        } else if self.reject_queries {
            "REJECTING_QUERIES"
        } else if self.local_state == 4 || (self.local_state == 2 && !self.donor_rejects_queries) {
            "ONLINE"
        } else if self.local_state == 2 {
            "DONOR"
        } else {
            "JOINING"
        };
        MemberState {
            state: state.into(),
            role: if self.read_only {
                "SECONDARY"
            } else {
                "PRIMARY"
            }
            .into(),
            transactions_behind: self.recv_queue,
        }
    }
}

/// The memberships the group's servers should have: (hostgroup, row with its status). Members
/// without a state yet are left out (the caller keeps their configured rows).
pub fn place_group(
    g: &GroupReplicationHostgroup,
    members: &[(HostgroupServer, MemberState)],
) -> Vec<(u32, HostgroupServer)> {
    let max_behind = g.max_transactions_behind;
    let too_far = |m: &MemberState| max_behind > 0 && m.transactions_behind > max_behind * 2;
    let lagging = |m: &MemberState| max_behind > 0 && m.transactions_behind > max_behind;
    let mut primaries: Vec<&(HostgroupServer, MemberState)> = members
        .iter()
        .filter(|(_, m)| m.online() && m.primary() && !too_far(m))
        .collect();
    primaries.sort_by(|(a, _), (b, _)| {
        (b.weight, &b.key.hostname, b.key.port).cmp(&(a.weight, &a.key.hostname, a.key.port))
    });
    let max_writers = g.max_writers as usize;
    let mut out = Vec::new();
    let offline = g.offline_hostgroup;
    let mut put = |hg: u32, s: &HostgroupServer, m: &MemberState| {
        let mut row = HostgroupServer {
            hostgroup: hg,
            ..s.clone()
        };
        if hg != offline && row.status == ServerStatus::Online && lagging(m) {
            row.status = ServerStatus::Shunned;
        }
        out.push((hg, row));
    };
    for (i, (s, m)) in primaries.iter().enumerate() {
        if i < max_writers {
            put(g.writer_hostgroup, s, m);
            if g.writer_is_also_reader == 1 {
                put(g.reader_hostgroup, s, m);
            }
        } else {
            put(g.backup_writer_hostgroup, s, m);
            if g.writer_is_also_reader >= 1 {
                put(g.reader_hostgroup, s, m);
            }
        }
    }
    for (s, m) in members {
        if m.online() && !m.primary() && !too_far(m) {
            put(g.reader_hostgroup, s, m);
        } else if !m.online() || too_far(m) {
            put(g.offline_hostgroup, s, m);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Flag;

    fn cfg(max_writers: u32, also_reader: u8, max_behind: u64) -> GroupReplicationHostgroup {
        GroupReplicationHostgroup {
            writer_hostgroup: 10,
            backup_writer_hostgroup: 20,
            reader_hostgroup: 30,
            offline_hostgroup: 40,
            active: Flag(true),
            max_writers,
            writer_is_also_reader: also_reader,
            max_transactions_behind: max_behind,
            comment: None,
        }
    }

    fn member(
        port: u16,
        weight: u32,
        state: &str,
        role: &str,
        behind: u64,
    ) -> (HostgroupServer, MemberState) {
        (
            HostgroupServer {
                weight,
                max_connections: 10,
                ..HostgroupServer::new("h", port, 10)
            },
            MemberState {
                state: state.into(),
                role: role.into(),
                transactions_behind: behind,
            },
        )
    }

    fn layout(out: &[(u32, HostgroupServer)]) -> Vec<(u32, u16, &'static str)> {
        let mut v: Vec<(u32, u16, &'static str)> = out
            .iter()
            .map(|(hg, s)| (*hg, s.key.port, s.status.as_str()))
            .collect();
        v.sort();
        v
    }

    #[test]
    fn single_primary_with_secondaries() {
        let m = [
            member(1, 1, "ONLINE", "PRIMARY", 0),
            member(2, 1, "ONLINE", "SECONDARY", 0),
            member(3, 1, "ONLINE", "SECONDARY", 0),
        ];
        assert_eq!(
            layout(&place_group(&cfg(1, 0, 0), &m)),
            vec![(10, 1, "ONLINE"), (30, 2, "ONLINE"), (30, 3, "ONLINE")]
        );
        assert_eq!(
            layout(&place_group(&cfg(1, 1, 0), &m)),
            vec![
                (10, 1, "ONLINE"),
                (30, 1, "ONLINE"),
                (30, 2, "ONLINE"),
                (30, 3, "ONLINE")
            ],
            "writer_is_also_reader=1"
        );
    }

    #[test]
    fn multi_primary_elects_by_weight_hostname_port_and_backs_up_the_rest() {
        let m = [
            member(1, 1, "ONLINE", "PRIMARY", 0),
            member(2, 5, "ONLINE", "PRIMARY", 0),
            member(3, 1, "ONLINE", "PRIMARY", 0),
        ];
        // Weight 5 first, then the higher port among equal weights.
        assert_eq!(
            layout(&place_group(&cfg(2, 0, 0), &m)),
            vec![(10, 2, "ONLINE"), (10, 3, "ONLINE"), (20, 1, "ONLINE")]
        );
        assert_eq!(
            layout(&place_group(&cfg(1, 2, 0), &m)),
            vec![
                (10, 2, "ONLINE"),
                (20, 1, "ONLINE"),
                (20, 3, "ONLINE"),
                (30, 1, "ONLINE"),
                (30, 3, "ONLINE")
            ],
            "writer_is_also_reader=2: only backup writers read"
        );
    }

    #[test]
    fn other_states_go_offline_and_lag_shuns_then_offlines() {
        let m = [
            member(1, 1, "ONLINE", "PRIMARY", 0),
            member(2, 1, "RECOVERING", "SECONDARY", 0),
            member(3, 1, "ERROR", "SECONDARY", 0),
            member(4, 1, "UNREACHABLE", "SECONDARY", 0),
            member(5, 1, "ONLINE", "SECONDARY", 150),
            member(6, 1, "ONLINE", "SECONDARY", 250),
        ];
        assert_eq!(
            layout(&place_group(&cfg(1, 0, 100), &m)),
            vec![
                (10, 1, "ONLINE"),
                (30, 5, "SHUNNED"),
                (40, 2, "ONLINE"),
                (40, 3, "ONLINE"),
                (40, 4, "ONLINE"),
                (40, 6, "ONLINE")
            ]
        );
        let mut soft = member(7, 1, "ONLINE", "SECONDARY", 0);
        soft.0.status = ServerStatus::OfflineSoft;
        assert_eq!(
            layout(&place_group(&cfg(1, 0, 0), &[soft])),
            vec![(30, 7, "OFFLINE_SOFT")],
            "an operator's state stays"
        );
    }

    #[test]
    fn galera_states_map_to_members() {
        let synced = GaleraStatus {
            local_state: 4,
            primary_partition: true,
            read_only: false,
            desync: false,
            reject_queries: false,
            donor_rejects_queries: false,
            recv_queue: 3,
        };
        let m = synced.member();
        assert_eq!(
            (m.state.as_str(), m.role.as_str(), m.transactions_behind),
            ("ONLINE", "PRIMARY", 3)
        );
        let st = |g: GaleraStatus| g.member().state;
        assert_eq!(
            st(GaleraStatus {
                desync: true,
                ..synced.clone()
            }),
            "DESYNCED"
        );
        assert_eq!(
            st(GaleraStatus {
                reject_queries: true,
                ..synced.clone()
            }),
            "REJECTING_QUERIES"
        );
        assert_eq!(
            st(GaleraStatus {
                primary_partition: false,
                ..synced.clone()
            }),
            "NON_PRIMARY"
        );
        assert_eq!(
            st(GaleraStatus {
                local_state: 2,
                ..synced.clone()
            }),
            "ONLINE",
            "a donor that serves"
        );
        assert_eq!(
            st(GaleraStatus {
                local_state: 2,
                donor_rejects_queries: true,
                ..synced.clone()
            }),
            "DONOR"
        );
        assert_eq!(
            st(GaleraStatus {
                local_state: 1,
                ..synced.clone()
            }),
            "JOINING"
        );
        assert_eq!(
            GaleraStatus {
                read_only: true,
                ..synced
            }
            .member()
            .role,
            "SECONDARY"
        );
    }

    #[test]
    fn no_primary_leaves_the_writer_hostgroup_empty() {
        let m = [
            member(1, 1, "ONLINE", "SECONDARY", 0),
            member(2, 1, "OFFLINE", "", 0),
        ];
        assert_eq!(
            layout(&place_group(&cfg(1, 0, 0), &m)),
            vec![(30, 1, "ONLINE"), (40, 2, "ONLINE")]
        );
    }
}

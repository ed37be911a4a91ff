//! When a node takes a module from a peer: ProxySQL Cluster's rule, plus its fix for nodes that
//! pulled an empty configuration.

use sluice_admin::{EMPTY_CHECKSUM, ModuleChecksum, PeerChecksum};

/// What to do about one module after a check of one peer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Decision {
    /// Same checksum, or not (yet) a reason to pull.
    Wait,
    /// The peer holds a newer configuration of the module: pull it.
    Pull,
    /// Same epoch, different content: no way to tell which is newer.
    Conflict,
}

/// Counts the check in `remote.diff_check` and decides. A peer is a source only when its module
/// was loaded after start (`version > 1`) and is not empty; it wins when this node still runs
/// what it started with (`version == 1`) or the peer's epoch is newer, after `diffs_before_sync`
/// differing checks in a row (0: never).
pub(crate) fn decide(
    local: &ModuleChecksum,
    remote: &mut PeerChecksum,
    diffs_before_sync: u32,
) -> Decision {
    if remote.checksum == local.checksum {
        remote.diff_check = 0;
        return Decision::Wait;
    }
    remote.diff_check += 1;
    if diffs_before_sync == 0
        || remote.diff_check < u64::from(diffs_before_sync)
        || remote.version <= 1
        || remote.checksum == EMPTY_CHECKSUM
    {
        return Decision::Wait;
    }
    if local.version == 1 || remote.epoch > local.epoch {
        Decision::Pull
    } else if remote.epoch == local.epoch {
        Decision::Conflict
    } else {
        Decision::Wait
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn local(version: u64, epoch: u64, checksum: &str) -> ModuleChecksum {
        ModuleChecksum {
            name: "mysql_servers",
            version,
            epoch,
            checksum: checksum.into(),
        }
    }

    fn remote(version: u64, epoch: u64, checksum: &str) -> PeerChecksum {
        PeerChecksum {
            version,
            epoch,
            checksum: checksum.into(),
            ..PeerChecksum::default()
        }
    }

    #[test]
    fn a_newer_peer_wins_after_the_configured_number_of_checks() {
        let me = local(2, 100, "0xA");
        let mut peer = remote(3, 200, "0xB");
        assert_eq!(decide(&me, &mut peer, 3), Decision::Wait);
        assert_eq!(decide(&me, &mut peer, 3), Decision::Wait);
        assert_eq!(decide(&me, &mut peer, 3), Decision::Pull);
        let mut same = remote(3, 200, "0xA");
        same.diff_check = 7;
        assert_eq!(decide(&me, &mut same, 3), Decision::Wait);
        assert_eq!(same.diff_check, 0, "a match resets the count");
    }

    #[test]
    fn older_unloaded_empty_peers_and_disabled_modules_are_never_sources() {
        let me = local(2, 100, "0xA");
        for mut peer in [
            remote(3, 50, "0xB"),
            remote(1, 500, "0xB"),
            remote(5, 500, EMPTY_CHECKSUM),
        ] {
            for _ in 0..10 {
                assert_eq!(decide(&me, &mut peer, 1), Decision::Wait, "{peer:?}");
            }
        }
        let mut newer = remote(3, 500, "0xB");
        for _ in 0..10 {
            assert_eq!(decide(&me, &mut newer, 0), Decision::Wait);
        }
    }

    #[test]
    fn a_node_that_just_started_takes_its_peers_configuration() {
        let fresh = local(1, 1_000, "0xA");
        let mut peer = remote(4, 10, "0xB");
        assert_eq!(decide(&fresh, &mut peer, 1), Decision::Pull);
        let mut also_fresh = remote(1, 10, "0xB");
        assert_eq!(decide(&fresh, &mut also_fresh, 1), Decision::Wait);
    }

    #[test]
    fn equal_epochs_with_different_content_are_a_conflict() {
        let me = local(2, 100, "0xA");
        let mut peer = remote(2, 100, "0xB");
        assert_eq!(decide(&me, &mut peer, 1), Decision::Conflict);
    }
}

//! Server selection inside a hostgroup: ONLINE servers under their connection cap, chosen at
//! random in proportion to their weight. Pure functions; the caller supplies live counts and the
//! random number, so every case is unit-testable.

use crate::config::ServerStatus;
use crate::runtime::HostgroupServer;
use std::hash::{BuildHasher, Hasher};
use std::time::{Duration, Instant};

/// Why no server could be chosen.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NoServer {
    /// The hostgroup has no servers at all.
    EmptyHostgroup,
    /// Every server is shunned, offline or has weight 0.
    NoneOnline,
    /// Every usable server is at `max_connections`.
    AllAtMaxConnections,
}

/// How long a server must have been shunned before it is tried as the last resort: a server
/// that just failed is not hammered at once (ProxySQL's rule).
pub const SHUNNED_LAST_RESORT_AFTER: Duration = Duration::from_secs(1);

/// Picks a server: ONLINE, weight > 0, `in_use(server) < max_connections`, not `excluded`,
/// weighted random by `weight` using `random`. When none is ONLINE, one shunned for more than
/// [`SHUNNED_LAST_RESORT_AFTER`] at `now` is tried instead.
pub fn pick(
    servers: &[HostgroupServer],
    in_use: impl Fn(&HostgroupServer) -> u32,
    excluded: impl Fn(&HostgroupServer) -> bool,
    random: u64,
    now: Instant,
) -> Result<&HostgroupServer, NoServer> {
    if servers.is_empty() {
        return Err(NoServer::EmptyHostgroup);
    }
    // No allocation: this runs for every checkout. Each predicate narrows the previous one.
    let online =
        |s: &HostgroupServer| s.status == ServerStatus::Online && s.weight > 0 && !excluded(s);
    // No server available: try the shunned ones (ProxySQL's last resort), so a hostgroup whose
    // only server came back is used before its shun expires. Servers shunned for replication
    // lag stay out: stale reads are what that shun prevents.
    let last_resort = |s: &HostgroupServer| {
        s.status == ServerStatus::Shunned
            && s.weight > 0
            && !excluded(s)
            && s.shunned_since
                .is_none_or(|t| now.saturating_duration_since(t) > SHUNNED_LAST_RESORT_AFTER)
    };
    let any_online = servers.iter().any(online);
    let candidate = |s: &HostgroupServer| {
        if any_online {
            online(s)
        } else {
            last_resort(s)
        }
    };
    if !servers.iter().any(candidate) {
        return Err(NoServer::NoneOnline);
    }
    // Servers pinging slower than their max_latency_ms are passed over while others answer
    // faster; when all are slow, they still serve (slow beats none).
    let any_fast = servers.iter().any(|s| candidate(s) && !s.too_slow);
    let eligible = |s: &HostgroupServer| candidate(s) && !(any_fast && s.too_slow);
    // Connection counts are read once per server (the first few remembered); a count that
    // moves between the two passes cannot make the pick fail.
    let mut counts = [0u32; 8];
    let mut total = 0u64;
    for (i, s) in servers.iter().enumerate() {
        if eligible(s) {
            let used = in_use(s);
            if let Some(c) = counts.get_mut(i) {
                *c = used;
            }
            if used < s.max_connections {
                total += u64::from(s.weight);
            }
        }
    }
    if total == 0 {
        return Err(NoServer::AllAtMaxConnections);
    }
    let mut point = random % total;
    let mut last = None;
    for (i, s) in servers.iter().enumerate() {
        if !eligible(s) {
            continue;
        }
        let used = counts.get(i).copied().unwrap_or_else(|| in_use(s));
        if used >= s.max_connections {
            continue;
        }
        let w = u64::from(s.weight);
        if point < w {
            return Ok(s);
        }
        point -= w;
        last = Some(s);
    }
    last.ok_or(NoServer::AllAtMaxConnections)
}

/// A cheap, non-cryptographic random number for load balancing (std's per-process random keys).
pub fn random_u64() -> u64 {
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u64(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .unwrap_or(0),
    );
    h.finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn now() -> Instant {
        Instant::now()
    }

    fn srv(port: u16, weight: u32, status: ServerStatus, max: u32) -> HostgroupServer {
        HostgroupServer {
            status,
            weight,
            max_connections: max,
            ..HostgroupServer::new("h", port, 0)
        }
    }

    #[test]
    fn empty_and_offline() {
        assert_eq!(
            pick(&[], |_| 0, |_| false, 0, now()).unwrap_err(),
            NoServer::EmptyHostgroup
        );
        let s = [
            srv(1, 1, ServerStatus::ShunnedReplicationLag, 10),
            srv(2, 1, ServerStatus::OfflineSoft, 10),
            srv(3, 1, ServerStatus::OfflineHard, 10),
            srv(4, 0, ServerStatus::Online, 10),
        ];
        assert_eq!(
            pick(&s, |_| 0, |_| false, 0, now()).unwrap_err(),
            NoServer::NoneOnline
        );
        // The last resort: a shunned server when nothing is ONLINE, never while one is.
        let s = [
            srv(1, 1, ServerStatus::Shunned, 10),
            srv(2, 1, ServerStatus::OfflineSoft, 10),
        ];
        assert_eq!(
            pick(&s, |_| 0, |_| false, 0, now()).map(|x| x.key.port),
            Ok(1)
        );
        let s = [
            srv(1, 1, ServerStatus::Shunned, 10),
            srv(2, 1, ServerStatus::Online, 10),
        ];
        for r in 0..10 {
            assert_eq!(
                pick(&s, |_| 0, |_| false, r, now()).map(|x| x.key.port),
                Ok(2)
            );
        }
    }

    #[test]
    fn a_server_shunned_by_the_monitor_is_the_last_resort_only_after_a_second() {
        let t0 = now();
        let mut shunned = srv(1, 1, ServerStatus::Shunned, 10);
        shunned.shunned_since = Some(t0);
        let s = [shunned];
        assert_eq!(
            pick(&s, |_| 0, |_| false, 0, t0 + Duration::from_millis(500)).unwrap_err(),
            NoServer::NoneOnline,
            "shunned half a second ago: not yet"
        );
        assert_eq!(
            pick(&s, |_| 0, |_| false, 0, t0 + Duration::from_millis(1_001)).map(|x| x.key.port),
            Ok(1)
        );
    }

    #[test]
    fn respects_max_connections_and_exclusion() {
        let s = [
            srv(1, 1, ServerStatus::Online, 2),
            srv(2, 1, ServerStatus::Online, 2),
        ];
        let full1 = |x: &HostgroupServer| if x.key.port == 1 { 2 } else { 0 };
        for r in 0..10 {
            assert_eq!(
                pick(&s, full1, |_| false, r, now()).map(|x| x.key.port),
                Ok(2)
            );
            assert_eq!(
                pick(&s, |_| 0, |x| x.key.port == 2, r, now()).map(|x| x.key.port),
                Ok(1)
            );
        }
        assert_eq!(
            pick(&s, |_| 2, |_| false, 0, now()).unwrap_err(),
            NoServer::AllAtMaxConnections
        );
    }

    #[test]
    fn slow_servers_are_passed_over_unless_all_are_slow() {
        let mut slow = srv(1, 1, ServerStatus::Online, 10);
        slow.too_slow = true;
        let s = [slow.clone(), srv(2, 1, ServerStatus::Online, 10)];
        for r in 0..10 {
            assert_eq!(
                pick(&s, |_| 0, |_| false, r, now()).map(|x| x.key.port),
                Ok(2)
            );
        }
        assert_eq!(
            pick(&[slow], |_| 0, |_| false, 0, now()).map(|x| x.key.port),
            Ok(1)
        );
    }

    #[test]
    fn weights_split_traffic_proportionally() {
        let s = [
            srv(1, 1, ServerStatus::Online, 10),
            srv(2, 3, ServerStatus::Online, 10),
        ];
        let hits2 = (0..400u64)
            .filter(|r| pick(&s, |_| 0, |_| false, *r, now()).map(|x| x.key.port) == Ok(2))
            .count();
        assert_eq!(hits2, 300);
    }

    #[test]
    fn random_varies() {
        let a: std::collections::HashSet<u64> = (0..50).map(|_| random_u64()).collect();
        assert!(a.len() > 40);
    }
}

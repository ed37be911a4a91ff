//! Server selection inside a hostgroup: ONLINE servers under their connection cap, chosen at
//! random in proportion to their weight. Pure functions; the caller supplies live counts and the
//! random number, so every case is unit-testable.

use crate::config::ServerStatus;
use crate::runtime::HostgroupServer;
use std::cell::Cell;
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
///
/// `random` is called only when more than one server can take the connection, and `now` only
/// when none is ONLINE: a checkout on a hostgroup of one healthy server — a writer's — draws no
/// random number and reads no clock.
pub fn pick(
    servers: &[HostgroupServer],
    in_use: impl Fn(&HostgroupServer) -> u32,
    excluded: impl Fn(&HostgroupServer) -> bool,
    random: impl FnOnce() -> u64,
    now: impl FnOnce() -> Instant,
) -> Result<&HostgroupServer, NoServer> {
    if servers.is_empty() {
        return Err(NoServer::EmptyHostgroup);
    }
    // No allocation: this runs for every checkout. Each predicate narrows the previous one.
    let online =
        |s: &HostgroupServer| s.status == ServerStatus::Online && s.weight > 0 && !excluded(s);
    let any_online = servers.iter().any(online);
    let now = (!any_online).then(now);
    // No server available: try the shunned ones (ProxySQL's last resort), so a hostgroup whose
    // only server came back is used before its shun expires. Servers shunned for replication
    // lag stay out: stale reads are what that shun prevents.
    let last_resort = |s: &HostgroupServer| {
        s.status == ServerStatus::Shunned
            && s.weight > 0
            && !excluded(s)
            && match (s.shunned_since, now) {
                (None, _) => true,
                (Some(since), Some(now)) => {
                    now.saturating_duration_since(since) > SHUNNED_LAST_RESORT_AFTER
                }
                (Some(_), None) => false,
            }
    };
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
    let mut choices = 0usize;
    for (i, s) in servers.iter().enumerate() {
        if eligible(s) {
            let used = in_use(s);
            if let Some(c) = counts.get_mut(i) {
                *c = used;
            }
            if used < s.max_connections {
                total += u64::from(s.weight);
                choices += 1;
            }
        }
    }
    if total == 0 {
        return Err(NoServer::AllAtMaxConnections);
    }
    let mut point = if choices > 1 { random() % total } else { 0 };
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

/// A random number from std's per-process random keys and the clock (not cryptographic): the
/// seed of [`balance_random`], and what a login's scramble and salt are drawn from.
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

/// A fast random number for load balancing: a per-thread SplitMix64 sequence seeded once from
/// [`random_u64`] — a few instructions where [`random_u64`] costs a SipHash and a clock read
/// (~250 instructions) at every checkout. Not for anything that must not be guessed.
pub fn balance_random() -> u64 {
    thread_local! {
        static STATE: Cell<u64> = Cell::new(random_u64());
    }
    STATE.with(|state| {
        let x = state.get().wrapping_add(0x9E37_79B9_7F4A_7C15);
        state.set(x);
        let mut z = x;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    })
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
            pick(&[], |_| 0, |_| false, || 0, now).unwrap_err(),
            NoServer::EmptyHostgroup
        );
        let s = [
            srv(1, 1, ServerStatus::ShunnedReplicationLag, 10),
            srv(2, 1, ServerStatus::OfflineSoft, 10),
            srv(3, 1, ServerStatus::OfflineHard, 10),
            srv(4, 0, ServerStatus::Online, 10),
        ];
        assert_eq!(
            pick(&s, |_| 0, |_| false, || 0, now).unwrap_err(),
            NoServer::NoneOnline
        );
        // The last resort: a shunned server when nothing is ONLINE, never while one is.
        let s = [
            srv(1, 1, ServerStatus::Shunned, 10),
            srv(2, 1, ServerStatus::OfflineSoft, 10),
        ];
        assert_eq!(
            pick(&s, |_| 0, |_| false, || 0, now).map(|x| x.key.port),
            Ok(1)
        );
        let s = [
            srv(1, 1, ServerStatus::Shunned, 10),
            srv(2, 1, ServerStatus::Online, 10),
        ];
        for r in 0..10 {
            assert_eq!(
                pick(&s, |_| 0, |_| false, || r, now).map(|x| x.key.port),
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
            pick(
                &s,
                |_| 0,
                |_| false,
                || 0,
                || t0 + Duration::from_millis(500)
            )
            .unwrap_err(),
            NoServer::NoneOnline,
            "shunned half a second ago: not yet"
        );
        assert_eq!(
            pick(
                &s,
                |_| 0,
                |_| false,
                || 0,
                || t0 + Duration::from_millis(1_001)
            )
            .map(|x| x.key.port),
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
                pick(&s, full1, |_| false, || r, now).map(|x| x.key.port),
                Ok(2)
            );
            assert_eq!(
                pick(&s, |_| 0, |x| x.key.port == 2, || r, now).map(|x| x.key.port),
                Ok(1)
            );
        }
        assert_eq!(
            pick(&s, |_| 2, |_| false, || 0, now).unwrap_err(),
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
                pick(&s, |_| 0, |_| false, || r, now).map(|x| x.key.port),
                Ok(2)
            );
        }
        assert_eq!(
            pick(&[slow], |_| 0, |_| false, || 0, now).map(|x| x.key.port),
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
            .filter(|r| pick(&s, |_| 0, |_| false, || *r, now).map(|x| x.key.port) == Ok(2))
            .count();
        assert_eq!(hits2, 300);
    }

    #[test]
    fn random_varies() {
        let a: std::collections::HashSet<u64> = (0..50).map(|_| random_u64()).collect();
        assert!(a.len() > 40);
        let b: std::collections::HashSet<u64> = (0..1000).map(|_| balance_random()).collect();
        assert_eq!(b.len(), 1000);
    }

    #[test]
    fn one_choice_draws_no_random_number_and_reads_no_clock() {
        let asked = Cell::new(0);
        let random = || {
            asked.set(asked.get() + 1);
            7
        };
        let clock = || {
            asked.set(asked.get() + 10);
            now()
        };
        let one = [srv(1, 1, ServerStatus::Online, 10)];
        assert_eq!(
            pick(&one, |_| 0, |_| false, random, clock).map(|x| x.key.port),
            Ok(1)
        );
        assert_eq!(asked.get(), 0, "one server online: neither asked");
        // Two servers, one at its cap: still one choice.
        let two = [
            srv(1, 1, ServerStatus::Online, 10),
            srv(2, 1, ServerStatus::Online, 1),
        ];
        let full2 = |s: &HostgroupServer| u32::from(s.key.port == 2);
        assert_eq!(
            pick(&two, full2, |_| false, random, clock).map(|x| x.key.port),
            Ok(1)
        );
        assert_eq!(asked.get(), 0);
        // Two with room: the random number decides; no clock while one is online.
        assert!(pick(&two, |_| 0, |_| false, random, clock).is_ok());
        assert_eq!(asked.get(), 1);
    }

    #[test]
    fn balance_random_splits_by_weight() {
        let s = [
            srv(1, 1, ServerStatus::Online, 10),
            srv(2, 3, ServerStatus::Online, 10),
        ];
        let hits2 = (0..4000)
            .filter(|_| {
                pick(&s, |_| 0, |_| false, balance_random, now).map(|x| x.key.port) == Ok(2)
            })
            .count();
        assert!(
            (2700..=3300).contains(&hits2),
            "{hits2} of 4000, want about 3000"
        );
    }
}

//! Server load readings for workload guards: `Threads_running` (MySQL) or active client
//! statements (PostgreSQL), and a replica's backlog — transactions received but not applied
//! (MariaDB GTID positions) or WAL bytes received but not replayed (PostgreSQL). The monitor
//! reads them every [`LOAD_PROBE_INTERVAL`] on the servers of the hostgroups an active guard
//! watches with such a signal, and on no other server: without those guards nothing is read.

use super::scheduler::{CheckTarget, Checker, Monitor};
use crate::admin::Protocol;
use crate::config::WorkloadGuard;
use crate::runtime::{RuntimeConfig, ServerKey};
use crate::util::lock;
use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tracing::{info, warn};

/// How often a watched server's load is read.
pub const LOAD_PROBE_INTERVAL: Duration = Duration::from_millis(250);
/// A reading older than this is no reading (the server stopped answering the probe).
const STALE_AFTER: Duration = Duration::from_secs(2);

/// One load reading of a server.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ServerLoad {
    /// Statements running on the server now, the probe's own included (MySQL
    /// `Threads_running`; PostgreSQL active client backends).
    pub threads_running: u64,
    /// Received but not yet applied: transactions (MariaDB, per GTID domain, summed) or WAL
    /// bytes (PostgreSQL); 0 on a server that is not a replica, and on a MariaDB replica that
    /// does not replicate by GTID (its `Gtid_IO_Pos` stays empty); `None` when the server
    /// cannot tell (MySQL, a standby not streaming).
    pub replica_backlog: Option<u64>,
}

/// The load signals a guard can watch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LoadSignal {
    /// [`ServerLoad::threads_running`].
    ThreadsRunning,
    /// [`ServerLoad::replica_backlog`].
    ReplicaBacklog,
}

impl LoadSignal {
    /// The guard's `signal` column, when it names a load signal.
    pub fn of(signal: &str) -> Option<LoadSignal> {
        match signal {
            "threads_running" => Some(LoadSignal::ThreadsRunning),
            "replica_backlog" => Some(LoadSignal::ReplicaBacklog),
            _ => None,
        }
    }

    fn value(self, load: &ServerLoad) -> Option<u64> {
        match self {
            LoadSignal::ThreadsRunning => Some(load.threads_running),
            LoadSignal::ReplicaBacklog => load.replica_backlog,
        }
    }
}

/// The latest readings, and the probes in flight.
#[derive(Debug, Default)]
pub(super) struct LoadReadings {
    latest: Mutex<HashMap<ServerKey, (Instant, ServerLoad)>>,
    started: Mutex<HashMap<ServerKey, Instant>>,
    inflight: Mutex<HashSet<ServerKey>>,
    /// Servers whose last probe failed (logged once, until one works again).
    failing: Mutex<HashSet<ServerKey>>,
}

impl Monitor {
    /// The worst `signal` among the servers of `hostgroup` read in the last few seconds;
    /// `None` when no server has a fresh reading with that value.
    pub fn load_signal(
        &self,
        servers: &[ServerKey],
        signal: LoadSignal,
        now: Instant,
    ) -> Option<u64> {
        let latest = lock(&self.load.latest);
        servers
            .iter()
            .filter_map(|s| latest.get(s))
            .filter(|(at, _)| now.saturating_duration_since(*at) < STALE_AFTER)
            .filter_map(|(_, load)| signal.value(load))
            .max()
    }

    /// Starts the load probes that are due (called on every scheduler tick).
    pub(super) fn probe_load(
        self: &Arc<Self>,
        rt: &RuntimeConfig,
        checker: &Arc<dyn Checker>,
        target_for: impl Fn(&ServerKey) -> CheckTarget,
        now: Instant,
    ) {
        let watched = watched_servers(rt, self.protocol);
        if watched.is_empty() {
            return;
        }
        for server in watched {
            let due = lock(&self.load.started)
                .get(&server)
                .is_none_or(|t| now.saturating_duration_since(*t) >= LOAD_PROBE_INTERVAL);
            if !due || !lock(&self.load.inflight).insert(server.clone()) {
                continue;
            }
            lock(&self.load.started).insert(server.clone(), now);
            let target = target_for(&server);
            let budget = target.timeout;
            let (monitor, checker) = (self.clone(), checker.clone());
            tokio::spawn(async move {
                let read = tokio::time::timeout(budget, checker.server_load(target)).await;
                let failure = match read {
                    Ok(Ok(load)) => {
                        lock(&monitor.load.latest).insert(server.clone(), (Instant::now(), load));
                        if lock(&monitor.load.failing).remove(&server) {
                            info!(server = %server, "load probe for workload guards answers again");
                        }
                        None
                    }
                    Ok(Err(e)) => Some(e),
                    Err(_) => Some("timed out".to_string()),
                };
                if let Some(e) = failure {
                    checker.drop_connection(&server);
                    if lock(&monitor.load.failing).insert(server.clone()) {
                        warn!(server = %server, "load probe for workload guards failed: {e}; its guards count the server's reading as unknown until it answers");
                    }
                }
                lock(&monitor.load.inflight).remove(&server);
            });
        }
    }
}

/// The servers of `protocol` an active guard watches with a load signal.
fn watched_servers(rt: &RuntimeConfig, protocol: Protocol) -> Vec<ServerKey> {
    let hostgroups = match protocol {
        Protocol::Mysql => &rt.mysql.hostgroups,
        Protocol::Pgsql => &rt.pgsql.hostgroups,
    };
    let mut out: Vec<ServerKey> = rt
        .workload_guards
        .iter()
        .filter(|g| watches_load(g, protocol))
        .filter_map(|g| hostgroups.get(&g.hostgroup?))
        .flatten()
        .map(|s| s.key.clone())
        .collect();
    out.sort_by(|a, b| (&a.hostname, a.port).cmp(&(&b.hostname, b.port)));
    out.dedup();
    out
}

fn watches_load(g: &WorkloadGuard, protocol: Protocol) -> bool {
    let p = if g.protocol == "pgsql" {
        Protocol::Pgsql
    } else {
        Protocol::Mysql
    };
    g.active.0 && p == protocol && LoadSignal::of(&g.signal).is_some()
}

/// Transactions received but not applied, from MariaDB's `Gtid_IO_Pos` (what the IO threads
/// received, `SHOW ALL SLAVES STATUS`) and `gtid_slave_pos` (what was applied): per replication
/// domain the difference of sequence numbers, summed; 0 when nothing was received (not a GTID replica). A malformed
/// position is an error.
pub fn gtid_backlog(io_pos: &str, applied_pos: &str) -> Result<u64, String> {
    let applied = gtid_domains(applied_pos)?;
    let mut behind = 0u64;
    for (domain, received) in gtid_domains(io_pos)? {
        let done = applied.get(&domain).copied().unwrap_or(0);
        behind = behind.saturating_add(received.saturating_sub(done));
    }
    Ok(behind)
}

/// `domain-server-seq[,…]` → domain → seq.
fn gtid_domains(pos: &str) -> Result<HashMap<u32, u64>, String> {
    let mut out = HashMap::new();
    for gtid in pos.split(',').map(str::trim).filter(|g| !g.is_empty()) {
        let mut parts = gtid.split('-');
        let (Some(d), Some(_server), Some(seq), None) =
            (parts.next(), parts.next(), parts.next(), parts.next())
        else {
            return Err(format!(
                "GTID position {gtid:?} is not domain-server-sequence"
            ));
        };
        let (Ok(d), Ok(seq)) = (d.parse::<u32>(), seq.parse::<u64>()) else {
            return Err(format!("GTID position {gtid:?} is not numeric"));
        };
        // Several channels may list one domain: the furthest position counts.
        let at = out.entry(d).or_insert(seq);
        *at = (*at).max(seq);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gtid_backlog_sums_each_domain() {
        assert_eq!(gtid_backlog("", ""), Ok(0));
        assert_eq!(gtid_backlog("0-1-120", "0-1-100"), Ok(20));
        assert_eq!(gtid_backlog("0-1-120,1-2-7", "1-2-5,0-1-120"), Ok(2));
        // A domain applied further than received (positions read a moment apart): not negative.
        assert_eq!(gtid_backlog("0-1-100", "0-1-101"), Ok(0));
        // A domain not applied at all yet counts whole.
        assert_eq!(gtid_backlog("0-1-10,3-1-4", "0-1-10"), Ok(4));
        assert!(gtid_backlog("0-1", "").is_err());
        assert!(gtid_backlog("a-b-c", "").is_err());
        assert!(gtid_backlog("0-1-2-3", "").is_err());
    }

    #[test]
    fn a_stale_or_missing_reading_is_no_reading() {
        let m = Monitor::new(Protocol::Mysql);
        let a = ServerKey {
            hostname: "a".into(),
            port: 1,
        };
        let b = ServerKey {
            hostname: "b".into(),
            port: 2,
        };
        let now = Instant::now();
        let load = |t, backlog| ServerLoad {
            threads_running: t,
            replica_backlog: backlog,
        };
        lock(&m.load.latest).insert(a.clone(), (now, load(3, None)));
        lock(&m.load.latest).insert(b.clone(), (now, load(9, Some(40))));
        let both = [a.clone(), b.clone()];
        assert_eq!(
            m.load_signal(&both, LoadSignal::ThreadsRunning, now),
            Some(9)
        );
        assert_eq!(
            m.load_signal(&both, LoadSignal::ReplicaBacklog, now),
            Some(40)
        );
        assert_eq!(
            m.load_signal(std::slice::from_ref(&a), LoadSignal::ReplicaBacklog, now),
            None
        );
        let later = now + STALE_AFTER;
        assert_eq!(
            m.load_signal(&both, LoadSignal::ThreadsRunning, later),
            None
        );
    }
}

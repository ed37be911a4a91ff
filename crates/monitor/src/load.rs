//! Server load readings for workload guards: `Threads_running` (MySQL) or active client
//! statements (PostgreSQL), a replica's backlog — transactions received but not applied
//! (MariaDB GTID positions) or WAL bytes received but not replayed (PostgreSQL) — and a
//! heartbeat's age: Sluice writes a timestamp on the writer and reads how old the replicated
//! row is on each replica (sub-second lag, where `Seconds_Behind_Master` counts whole seconds).
//! The monitor probes every [`LOAD_PROBE_INTERVAL`] the servers of the hostgroups an active
//! guard watches with such a signal (and, for a heartbeat, the writers of their replication
//! hostgroups), and no other server: without those guards nothing is read or written.

use super::CheckError;
use super::checker::{CheckTarget, Checker};
use super::scheduler::Monitor;
use sluice_core::Protocol;
use sluice_core::admission::LoadSignal;
use sluice_core::config::WorkloadGuard;
use sluice_core::runtime::{RuntimeConfig, ServerKey};
use sluice_core::util::lock;
use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tracing::{info, warn};

/// How often a watched server's load is read.
pub const LOAD_PROBE_INTERVAL: Duration = Duration::from_millis(100);
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
    /// Milliseconds since the newest heartbeat this server holds was written on the writer;
    /// `None` when it holds none (or the probe was not asked for it).
    pub heartbeat_age_ms: Option<u64>,
}

impl ServerLoad {
    /// This reading's value of `signal`, when the probe read it.
    fn reading(&self, signal: LoadSignal) -> Option<u64> {
        match signal {
            LoadSignal::ThreadsRunning => Some(self.threads_running),
            LoadSignal::ReplicaBacklog => self.replica_backlog,
            LoadSignal::HeartbeatLag => self.heartbeat_age_ms,
        }
    }
}

/// What the probe does on one server.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct Probe {
    /// Read [`ServerLoad::threads_running`] and [`ServerLoad::replica_backlog`].
    load: bool,
    /// Read the heartbeat's age.
    heartbeat_read: bool,
    /// Write the heartbeat (a writer of a watched replica hostgroup).
    heartbeat_write: bool,
}

impl Probe {
    /// Runs the probe's statements on `t`'s server, in one monitor connection's turn.
    async fn run(self, checker: &dyn Checker, t: CheckTarget) -> Result<ServerLoad, CheckError> {
        if self.heartbeat_write {
            checker.write_heartbeat(t.clone()).await?;
        }
        let mut load = ServerLoad::default();
        if self.load {
            load = checker.server_load(t.clone()).await?;
        }
        if self.heartbeat_read {
            load.heartbeat_age_ms = checker.heartbeat_age_ms(t).await?;
        }
        Ok(load)
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
            .filter_map(|(_, load)| load.reading(signal))
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
        for (server, probe) in watched {
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
                let read = tokio::time::timeout(budget, probe.run(&*checker, target)).await;
                let failure = match read {
                    Ok(Ok(load)) => {
                        lock(&monitor.load.latest).insert(server.clone(), (Instant::now(), load));
                        if lock(&monitor.load.failing).remove(&server) {
                            info!(server = %server, "load probe for workload guards answers again");
                        }
                        None
                    }
                    Ok(Err(e)) => Some(e),
                    Err(_) => Some(CheckError::TimedOut),
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

/// The servers of `protocol` an active guard watches with a load signal, and what to do on
/// each.
fn watched_servers(rt: &RuntimeConfig, protocol: Protocol) -> HashMap<ServerKey, Probe> {
    let (hostgroups, pairs) = match protocol {
        Protocol::Mysql => (&rt.mysql.hostgroups, &rt.mysql.replication),
        Protocol::Pgsql => (&rt.pgsql.hostgroups, &rt.pgsql.replication),
    };
    let mut out: HashMap<ServerKey, Probe> = HashMap::new();
    let servers = |hg: u32| hostgroups.get(&hg).into_iter().flatten();
    for g in rt
        .workload_guards
        .iter()
        .filter(|g| watches_load(g, protocol))
    {
        let (Some(hg), Some(signal)) = (g.hostgroup, LoadSignal::of(&g.signal)) else {
            continue;
        };
        for s in servers(hg) {
            let p = out.entry(s.key.clone()).or_default();
            match signal {
                LoadSignal::HeartbeatLag => p.heartbeat_read = true,
                _ => p.load = true,
            }
        }
        if signal == LoadSignal::HeartbeatLag {
            let writers = pairs.iter().filter(|r| r.reader_hostgroup == hg);
            for s in writers.flat_map(|r| servers(r.writer_hostgroup)) {
                out.entry(s.key.clone()).or_default().heartbeat_write = true;
            }
        }
    }
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
pub fn gtid_backlog(io_pos: &str, applied_pos: &str) -> Result<u64, CheckError> {
    let applied = gtid_domains(applied_pos)?;
    let mut behind = 0u64;
    for (domain, received) in gtid_domains(io_pos)? {
        let done = applied.get(&domain).copied().unwrap_or(0);
        behind = behind.saturating_add(received.saturating_sub(done));
    }
    Ok(behind)
}

/// `domain-server-seq[,…]` → domain → seq.
fn gtid_domains(pos: &str) -> Result<HashMap<u32, u64>, CheckError> {
    let mut out = HashMap::new();
    for gtid in pos.split(',').map(str::trim).filter(|g| !g.is_empty()) {
        let mut parts = gtid.split('-');
        let (Some(d), Some(_server), Some(seq), None) =
            (parts.next(), parts.next(), parts.next(), parts.next())
        else {
            return Err(CheckError::Unreadable(format!(
                "GTID position {gtid:?} is not domain-server-sequence"
            )));
        };
        let (Ok(d), Ok(seq)) = (d.parse::<u32>(), seq.parse::<u64>()) else {
            return Err(CheckError::Unreadable(format!(
                "GTID position {gtid:?} is not numeric"
            )));
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
        assert_eq!(gtid_backlog("", "").ok(), Some(0));
        assert_eq!(gtid_backlog("0-1-120", "0-1-100").ok(), Some(20));
        assert_eq!(gtid_backlog("0-1-120,1-2-7", "1-2-5,0-1-120").ok(), Some(2));
        // A domain applied further than received (positions read a moment apart): not negative.
        assert_eq!(gtid_backlog("0-1-100", "0-1-101").ok(), Some(0));
        // A domain not applied at all yet counts whole.
        assert_eq!(gtid_backlog("0-1-10,3-1-4", "0-1-10").ok(), Some(4));
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
            heartbeat_age_ms: None,
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

    #[test]
    fn a_heartbeat_guard_writes_on_the_pairs_writer_and_reads_on_its_readers() {
        use sluice_core::config::{Flag, ReplicationHostgroup};
        use sluice_core::runtime::HostgroupServer;
        let mut rt = RuntimeConfig::default();
        let server = |h: &str, hg| HostgroupServer::new(h, 3306, hg);
        rt.mysql.hostgroups.insert(0, vec![server("writer", 0)]);
        rt.mysql
            .hostgroups
            .insert(1, vec![server("r1", 1), server("r2", 1)]);
        rt.mysql.hostgroups.insert(2, vec![server("other", 2)]);
        rt.mysql.replication.push(ReplicationHostgroup {
            writer_hostgroup: 0,
            reader_hostgroup: 1,
            check_type: "read_only".into(),
            comment: String::new(),
        });
        let guard = |id, signal: &str, hg| sluice_core::config::WorkloadGuard {
            guard_id: id,
            active: Flag(true),
            classes: "c".into(),
            signal: signal.into(),
            protocol: "mysql".into(),
            hostgroup: Some(hg),
            watch_class: String::new(),
            window_s: 10,
            low: 1.0,
            high: 2.0,
            reject_above: None,
            reject_span: 0.0,
            max_delay_ms: 0,
            mode: "shed".into(),
            fallback_hostgroup: None,
            hysteresis_pct: 20,
            min_open_ms: 1000,
            release_ms: 0,
            unknown_grace_ms: 5000,
            apps: "*".into(),
            comment: String::new(),
        };
        rt.workload_guards = Arc::new(vec![
            guard(1, "heartbeat_lag", 1),
            guard(2, "threads_running", 2),
            guard(3, "class_p99", 0),
        ]);
        let w = watched_servers(&rt, Protocol::Mysql);
        let at = |h: &str| {
            w.get(&ServerKey {
                hostname: h.into(),
                port: 3306,
            })
            .copied()
        };
        let probe = |load, heartbeat_read, heartbeat_write| Probe {
            load,
            heartbeat_read,
            heartbeat_write,
        };
        assert_eq!(at("writer"), Some(probe(false, false, true)));
        assert_eq!(at("r1"), Some(probe(false, true, false)));
        assert_eq!(at("r2"), Some(probe(false, true, false)));
        assert_eq!(at("other"), Some(probe(true, false, false)));
        assert_eq!(w.len(), 4, "class_p99 probes no server");
        assert!(watched_servers(&rt, Protocol::Pgsql).is_empty());
    }
}

//! The monitor loop of one protocol: schedules connect, ping and read_only checks per server at
//! their intervals (each bounded by its timeout, one in flight per server and kind), records
//! them, turns outcomes into decisions ([`super::health`]) and publishes the resulting topology
//! through the [`ConfigHandle`]. The checks themselves are implemented by the backend crates.

use super::check_run::{Done, check_target, spawn_check};
use super::checker::{CheckTarget, Checker, OnShun};
use super::health::{LagPolicy, ServerHealth, Verdict};
use super::log::MonitorLog;
use super::members::{galera, group_members, groups, lag_thresholds, pair_members, servers};
use sluice_core::Protocol;
use sluice_core::config::{MonitorVariables, ReplicationHostgroup};
use sluice_core::runtime::{ConfigHandle, HostgroupServer, RuntimeConfig, ServerKey};
use sluice_core::topology::{CheckKind, CheckRow};
use sluice_core::topology::{Topology, differences};
use sluice_core::util::lock;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tracing::{error, info, warn};

/// The monitor of one protocol: its logs, counters and per-server health.
#[derive(Debug)]
pub struct Monitor {
    /// Which side it watches.
    pub protocol: Protocol,
    /// The `monitor.*` logs and counters.
    pub log: MonitorLog,
    health: Mutex<HashMap<ServerKey, ServerHealth>>,
    /// Load readings for workload guards.
    pub(super) load: super::load::LoadReadings,
}

impl Monitor {
    /// A monitor for `protocol`.
    pub fn new(protocol: Protocol) -> Arc<Self> {
        Arc::new(Monitor {
            protocol,
            log: MonitorLog::default(),
            health: Mutex::default(),
            load: super::load::LoadReadings::default(),
        })
    }

    fn prefix(&self) -> &'static str {
        match self.protocol {
            Protocol::Mysql => "MySQL_Monitor",
            Protocol::Pgsql => "PgSQL_Monitor",
        }
    }

    /// `stats_*_global` counters.
    pub fn counters(&self) -> Vec<(String, String)> {
        self.log.counters(self.prefix())
    }

    /// The data path could not connect to `server` (not an access-denied error): after
    /// `shun_on_failures` such errors within a second it is shunned for
    /// `shun_recovery_time_sec`.
    pub fn connect_error(&self, server: &ServerKey, config: &ConfigHandle) {
        let base = config.load_base();
        let vars = &Self::side(&base, self.protocol).vars;
        let shunned = {
            let mut g = lock(&self.health);
            g.entry(server.clone())
                .or_default()
                .connect_error(Instant::now(), vars.shun_on_failures)
        };
        if let Some(n) = shunned {
            error!(
                "Shunning server {server} with {n} connect errors within a second; it gets no new connections for {} seconds",
                vars.shun_recovery_time_sec
            );
            self.publish(config);
        }
    }

    /// A data-path connection to `server` succeeded: an error shun on it is lifted (the server
    /// was tried as the last resort and answered).
    pub fn connect_ok(&self, server: &ServerKey, config: &ConfigHandle) {
        let lifted = {
            let mut g = lock(&self.health);
            g.get_mut(server)
                .is_some_and(|h| h.error_shunned_at.take().is_some())
        };
        if lifted {
            info!("Re-enabling server {server}: a connection to it succeeded");
            self.publish(config);
        }
    }

    /// Lifts connect-error shuns older than `shun_recovery_time_sec`.
    fn recover_error_shuns(&self, config: &ConfigHandle, recovery: Duration) {
        let now = Instant::now();
        let lifted: Vec<ServerKey> = {
            let mut g = lock(&self.health);
            g.iter_mut()
                .filter_map(|(k, h)| h.error_shun_expired(now, recovery).then(|| k.clone()))
                .collect()
        };
        if lifted.is_empty() {
            return;
        }
        for s in &lifted {
            info!(
                "Re-enabling server {s} after shun_recovery_time_sec; new connect errors shun it again"
            );
        }
        self.publish(config);
    }

    /// The smallest latency limit (ms) among `server`'s rows: slower than that it is worth
    /// marking (each row then compares with its own limit).
    fn slow_floor_ms(&self, config: &ConfigHandle, server: &ServerKey) -> u64 {
        let base = config.load_base();
        let side = Self::side(&base, self.protocol);
        side.hostgroups
            .values()
            .flatten()
            .filter(|s| &s.key == server)
            .map(|s| match s.max_latency_ms {
                0 => side.vars.default_max_latency_ms,
                n => u64::from(n),
            })
            .filter(|l| *l > 0)
            .min()
            .unwrap_or(u64::MAX)
    }

    /// The last ping latency of `server` (µs), for `stats_*_connection_pool.Latency_us`.
    pub fn latency_us(&self, server: &ServerKey) -> u64 {
        lock(&self.health)
            .get(server)
            .and_then(|h| h.latency_us)
            .unwrap_or(0)
    }

    /// The replication lag (s) the monitor last read (or assumed) for `server`; `None` before
    /// the first lag check or for servers it does not check.
    pub fn replication_lag(&self, server: &ServerKey) -> Option<u64> {
        lock(&self.health).get(server).and_then(|h| h.lag)
    }

    fn side(rt: &RuntimeConfig, p: Protocol) -> Side<'_> {
        match p {
            Protocol::Mysql => Side {
                hostgroups: &rt.mysql.hostgroups,
                pairs: &rt.mysql.replication,
                vars: &rt.mysql.variables.monitor,
            },
            Protocol::Pgsql => Side {
                hostgroups: &rt.pgsql.hostgroups,
                pairs: &rt.pgsql.replication,
                vars: &rt.pgsql.variables.monitor,
            },
        }
    }

    /// Runs until the task is aborted.
    pub async fn run(
        self: Arc<Self>,
        config: ConfigHandle,
        checker: Arc<dyn Checker>,
        on_shun: OnShun,
    ) {
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<Done>();
        // When each check last started: the interval is applied at every tick, so a changed
        // interval (SET … LOAD) takes effect at once.
        let mut last: HashMap<(ServerKey, CheckKind), Instant> = HashMap::new();
        let mut inflight: HashSet<(ServerKey, CheckKind)> = HashSet::new();
        loop {
            tokio::select! {
                Some(done) = rx.recv() => {
                    inflight.remove(&(done.server.clone(), done.kind));
                    self.handle(done, &config, &checker, &on_shun);
                    continue;
                }
                _ = tokio::time::sleep(Duration::from_millis(50)) => {}
            }
            let base = config.load_base();
            let side = Self::side(&base, self.protocol);
            self.recover_error_shuns(
                &config,
                Duration::from_secs(side.vars.shun_recovery_time_sec),
            );
            if !side.vars.enabled {
                continue;
            }
            let now = Instant::now();
            let in_pair = pair_members(side.hostgroups, side.pairs);
            let lag_checked = lag_thresholds(side.hostgroups);
            let grouped = group_members(side.hostgroups, groups(&base, self.protocol));
            let galera_nodes = group_members(side.hostgroups, galera(&base, self.protocol));
            let tls_servers: HashMap<ServerKey, &HostgroupServer> = side
                .hostgroups
                .values()
                .flatten()
                .filter(|s| s.use_ssl)
                .map(|s| (s.key.clone(), s))
                .collect();
            self.probe_load(
                &base,
                &checker,
                |server| check_target(server, side.vars, &tls_servers),
                now,
            );
            let shunned: HashSet<ServerKey> = lock(&self.health)
                .iter()
                .filter(|(_, h)| h.shunned_at.is_some())
                .map(|(k, _)| k.clone())
                .collect();
            for server in servers(side.hostgroups) {
                for kind in CheckKind::ALL {
                    let check_type = in_pair.get(&server);
                    // A shunned server only gets heartbeats until it answers again.
                    if (kind == CheckKind::ReadOnly && check_type.is_none())
                        || (kind == CheckKind::ReplicationLag && !lag_checked.contains_key(&server))
                        || (kind == CheckKind::GroupReplication && !grouped.contains(&server))
                        || (kind == CheckKind::Galera && !galera_nodes.contains(&server))
                        || (kind != CheckKind::Ping && shunned.contains(&server))
                    {
                        continue;
                    }
                    let key = (server.clone(), kind);
                    let v = side.vars;
                    let (interval, timeout) = match kind {
                        CheckKind::Connect => (v.connect_interval, v.connect_timeout),
                        CheckKind::Ping => (v.ping_interval, v.ping_timeout),
                        CheckKind::ReadOnly => (v.read_only_interval, v.read_only_timeout),
                        CheckKind::ReplicationLag => {
                            (v.replication_lag_interval, v.replication_lag_timeout)
                        }
                        CheckKind::GroupReplication => (
                            v.groupreplication_healthcheck_interval,
                            v.groupreplication_healthcheck_timeout,
                        ),
                        CheckKind::Galera => {
                            (v.galera_healthcheck_interval, v.galera_healthcheck_timeout)
                        }
                    };
                    let due = last
                        .get(&key)
                        .is_none_or(|t| now.duration_since(*t) >= Duration::from_millis(interval));
                    if inflight.contains(&key) || !due {
                        continue;
                    }
                    last.insert(key.clone(), now);
                    inflight.insert(key);
                    let target = CheckTarget {
                        check_type: check_type.cloned().unwrap_or_default(),
                        timeout: Duration::from_millis(timeout),
                        heartbeat_table: v.replication_lag_use_percona_heartbeat.clone(),
                        ..check_target(&server, v, &tls_servers)
                    };
                    spawn_check(kind, target, checker.clone(), tx.clone());
                }
            }
        }
    }

    /// One finished check: recorded in the log tables, folded into the server's health, and
    /// any change of verdict logged and published.
    fn handle(
        &self,
        done: Done,
        config: &ConfigHandle,
        checker: &Arc<dyn Checker>,
        on_shun: &OnShun,
    ) {
        let base = config.load_base();
        let side = Self::side(&base, self.protocol);
        self.record(&done, side.vars);
        let s = &done.server;
        if let Err(e) = &done.outcome {
            checker.drop_connection(s);
            if done.kind == CheckKind::Connect {
                error!(
                    "{} monitor connect failed addr='{s}' error='{e}'",
                    self.protocol_name()
                );
            }
        }
        let floor = self.slow_floor_ms(config, s);
        let slow = |us: Option<u64>| us.is_some_and(|us| us / 1000 > floor);
        let (verdict, slowness_changed) = self.judge(&done, &side, slow);
        if slowness_changed && verdict.is_none() {
            let took = done.outcome.as_ref().map_or(0, |o| o.0);
            let (position, effect) = if slow(Some(took)) {
                (
                    "over",
                    "it gets no new connections while faster servers answer",
                )
            } else {
                ("back under", "it is used again")
            };
            warn!("Server {s} ping time is {position} its max_latency_ms: {effect}");
            self.publish(config);
            return;
        }
        let Some(verdict) = verdict else { return };
        self.log_verdict(s, &verdict, &side);
        if let Verdict::Shun { .. } = verdict {
            on_shun(s);
        }
        self.publish(config);
    }

    /// "MySQL" or "PgSQL", as ProxySQL's log lines name the monitors.
    fn protocol_name(&self) -> &'static str {
        match self.protocol {
            Protocol::Mysql => "MySQL",
            Protocol::Pgsql => "PgSQL",
        }
    }

    /// Adds the check to its log table (`mysql_server_ping_log`, ...).
    fn record(&self, done: &Done, vars: &MonitorVariables) {
        let (took, value) = match &done.outcome {
            Ok((us, v)) => (*us, *v),
            Err(_) => (0, None),
        };
        self.log.record(
            done.kind,
            CheckRow {
                server: done.server.clone(),
                time_start_us: done.started_us,
                success_time_us: took,
                value,
                error: done.outcome.as_ref().err().map(ToString::to_string),
                member: done
                    .member
                    .as_ref()
                    .map(|m| (m.state.clone(), m.role.clone())),
                galera: done.galera.clone(),
            },
            vars.history,
        );
    }

    /// Folds the check into the server's health: the verdict it leads to, if any, and whether
    /// the server crossed its latency limit (`slow`) either way.
    fn judge(
        &self,
        done: &Done,
        side: &Side<'_>,
        slow: impl Fn(Option<u64>) -> bool,
    ) -> (Option<Verdict>, bool) {
        let vars = side.vars;
        let mut g = lock(&self.health);
        let h = g.entry(done.server.clone()).or_default();
        let was_slow = slow(h.latency_us);
        let v = match done.kind {
            CheckKind::Connect => None,
            CheckKind::Ping => h.ping(
                Instant::now(),
                done.outcome.as_ref().map(|o| o.0).map_err(|_| ()),
                vars.ping_max_failures,
            ),
            CheckKind::ReadOnly => h.read_only(
                done.outcome
                    .as_ref()
                    .map(|o| o.1 != Some(0))
                    .map_err(|_| ()),
                vars.read_only_max_timeout_count,
            ),
            CheckKind::GroupReplication => h.group_replication(
                done.member.clone().ok_or(()),
                vars.groupreplication_healthcheck_max_timeout_count,
            ),
            CheckKind::Galera => h.group_replication(
                done.member.clone().ok_or(()),
                vars.galera_healthcheck_max_timeout_count,
            ),
            CheckKind::ReplicationLag => h.replication_lag(
                done.outcome
                    .as_ref()
                    .map(|o| o.1.map(|v| v.max(0) as u64))
                    .map_err(|_| ()),
                LagPolicy {
                    max: u64::from(
                        lag_thresholds(side.hostgroups)
                            .get(&done.server)
                            .copied()
                            .unwrap_or(0),
                    ),
                    count: vars.replication_lag_count,
                    when_null: vars.slave_lag_when_null,
                },
            ),
        };
        let changed = slow(h.latency_us) != was_slow;
        (v, changed)
    }

    /// The error-log line for a new verdict about server `s`, worded as ProxySQL's.
    fn log_verdict(&self, s: &ServerKey, verdict: &Verdict, side: &Side<'_>) {
        let vars = side.vars;
        match verdict {
            Verdict::Shun { missed } => error!(
                "Server {s} missed {missed} heartbeats, shunning it and killing all the connections. Disabling other checks until the node comes back online."
            ),
            Verdict::Unshun => {
                info!("Server {s} answered the heartbeat again; back ONLINE, other checks resumed")
            }
            Verdict::ShunLag { lag } => warn!(
                "Shunning server {s} with replication lag of {lag} seconds (max_replication_lag {}, {} check(s) in a row)",
                lag_thresholds(side.hostgroups).get(s).copied().unwrap_or(0),
                vars.replication_lag_count
            ),
            Verdict::Group { from, to } => warn!(
                "cluster member {s} is {} {} with {} transactions behind (was {})",
                to.state,
                to.role,
                to.transactions_behind,
                from.as_ref()
                    .map_or("unknown".to_string(), |f| format!("{} {}", f.state, f.role))
            ),
            Verdict::UnshunLag { lag } => info!(
                "Re-enabling server {s}: replication lag {lag} seconds is within max_replication_lag"
            ),
            Verdict::ReadOnly {
                value,
                assumed: true,
                ..
            } => error!(
                "Server {s} missed {} read_only checks. Assuming read_only={}",
                vars.read_only_max_timeout_count,
                u8::from(*value)
            ),
            Verdict::ReadOnly {
                value, previous, ..
            } => info!(
                "{} monitor: server {s} reports read_only={} (was {})",
                self.protocol_name(),
                u8::from(*value),
                previous.map_or("unknown".to_string(), |p| u8::from(p).to_string())
            ),
        }
    }

    /// Lays the current health over the configuration and logs what moved.
    fn publish(&self, config: &ConfigHandle) {
        let (t, facts) = {
            let g = lock(&self.health);
            let facts: HashMap<ServerKey, String> =
                g.iter().map(|(k, h)| (k.clone(), h.facts())).collect();
            let t = Topology {
                shunned: g
                    .iter()
                    .filter_map(|(k, h)| {
                        // The earlier of the two shuns is how long it has been out.
                        let since = match (h.shunned_at, h.error_shunned_at) {
                            (Some(a), Some(b)) => a.min(b),
                            (a, b) => a.or(b)?,
                        };
                        Some((k.clone(), since))
                    })
                    .collect(),
                read_only: g
                    .iter()
                    .filter_map(|(k, h)| h.read_only.map(|v| (k.clone(), v)))
                    .collect(),
                lag_shunned: g
                    .iter()
                    .filter(|(_, h)| h.lag_shunned)
                    .map(|(k, _)| k.clone())
                    .collect(),
                groups: g
                    .iter()
                    .filter_map(|(k, h)| h.group.clone().map(|m| (k.clone(), m)))
                    .collect(),
                slow: g
                    .iter()
                    .filter_map(|(k, h)| {
                        let ms = h.latency_us? / 1000;
                        (ms > self.slow_floor_ms(config, k)).then(|| (k.clone(), ms))
                    })
                    .collect(),
            };
            (t, facts)
        };
        let before = config.load();
        config.set_topology(self.protocol, t);
        let after = config.load();
        let (b, a) = match self.protocol {
            Protocol::Mysql => (&before.mysql.hostgroups, &after.mysql.hostgroups),
            Protocol::Pgsql => (&before.pgsql.hostgroups, &after.pgsql.hostgroups),
        };
        let why = |k: &ServerKey| facts.get(k).cloned().unwrap_or_default();
        for line in differences(b, a, why) {
            warn!("hostgroup manager: {line}");
        }
    }
}

struct Side<'a> {
    hostgroups: &'a BTreeMap<u32, Vec<HostgroupServer>>,
    pairs: &'a [ReplicationHostgroup],
    vars: &'a MonitorVariables,
}

impl sluice_core::live::ServerReadings for Monitor {
    fn latency_us(&self, server: &ServerKey) -> u64 {
        Monitor::latency_us(self, server)
    }

    fn replication_lag(&self, server: &ServerKey) -> Option<u64> {
        Monitor::replication_lag(self, server)
    }
}

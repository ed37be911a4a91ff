//! The monitor loop of one protocol: schedules connect, ping and read_only checks per server at
//! their intervals (each bounded by its timeout, one in flight per server and kind), records
//! them, turns outcomes into decisions ([`super::health`]) and publishes the resulting topology
//! through the [`ConfigHandle`]. The checks themselves are implemented by the backend crates.

use super::health::{LagPolicy, ServerHealth, Verdict};
use super::log::{CheckKind, CheckRow, MonitorLog};
use super::topology::{Topology, differences};
use crate::admin::Protocol;
use crate::config::{MonitorVariables, ReplicationHostgroup};
use crate::runtime::{ConfigHandle, HostgroupServer, RuntimeConfig, ServerKey};
use crate::util::lock;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};
use tracing::{error, info, warn};

/// A check's result: `Ok` with its value, or why it failed.
pub type CheckFuture<T> = Pin<Box<dyn Future<Output = Result<T, String>> + Send + 'static>>;

/// Where and as whom a check runs.
#[derive(Debug, Clone)]
pub struct CheckTarget {
    /// The server to check.
    pub server: ServerKey,
    /// The account the check logs in with (`monitor_username`).
    pub username: String,
    /// Its password (`monitor_password`).
    pub password: String,
    /// The database a PostgreSQL check connects to (`monitor_dbname`).
    pub dbname: String,
    /// `check_type` of the server's replication pair (MySQL).
    pub check_type: String,
    /// Time budget for connecting, when a check has to.
    pub timeout: Duration,
    /// pt-heartbeat table for the lag check (`schema.table`), or empty.
    pub heartbeat_table: String,
    /// A row of the server has `use_ssl=1`: the check connects over TLS, with the same
    /// verification as the data path's connections.
    pub use_ssl: bool,
    /// The server's `*_servers_ssl_params` rows (the one for the monitor user, else the one
    /// for every user, overrides the `ssl_p2s_*` variables).
    pub ssl_params: Vec<std::sync::Arc<crate::config::ServerSslParams>>,
}

/// The checks a backend crate implements.
pub trait Checker: Send + Sync + 'static {
    /// Opens a new monitor connection; its time in µs.
    fn connect(&self, t: CheckTarget) -> CheckFuture<u64>;
    /// A heartbeat on the server's monitor connection (opened when needed); its time in µs.
    fn ping(&self, t: CheckTarget) -> CheckFuture<u64>;
    /// Whether the server is read-only (MySQL `check_type`; PostgreSQL `pg_is_in_recovery()`).
    fn read_only(&self, t: CheckTarget) -> CheckFuture<bool>;
    /// Replication lag in seconds (`None` when the server reports NULL); on multi-source
    /// replicas the worst channel.
    fn replication_lag(&self, t: CheckTarget) -> CheckFuture<Option<u64>>;
    /// The member's Group Replication state, role and applier queue (MySQL only).
    fn group_replication(&self, _t: CheckTarget) -> CheckFuture<super::cluster::MemberState> {
        Box::pin(async { Err("Group Replication is a MySQL feature".to_string()) })
    }
    /// The node's Galera state (`wsrep_*`; MySQL/MariaDB only).
    fn galera(&self, _t: CheckTarget) -> CheckFuture<super::cluster::GaleraStatus> {
        Box::pin(async { Err("Galera is a MySQL/MariaDB feature".to_string()) })
    }
    /// The server's load for workload guards ([`super::load`]).
    fn server_load(&self, _t: CheckTarget) -> CheckFuture<super::load::ServerLoad> {
        Box::pin(async { Err("this checker reads no server load".to_string()) })
    }
    /// Writes the heartbeat row on a writer, creating its table when missing
    /// ([`super::load`]).
    fn write_heartbeat(&self, _t: CheckTarget) -> CheckFuture<()> {
        Box::pin(async { Err("this checker writes no heartbeat".to_string()) })
    }
    /// How old (ms) the newest heartbeat row the server holds is; `None` when it holds none.
    fn heartbeat_age_ms(&self, _t: CheckTarget) -> CheckFuture<Option<u64>> {
        Box::pin(async { Err("this checker reads no heartbeat".to_string()) })
    }
    /// Forgets the monitor connection to `server` (after a failure or a shun).
    fn drop_connection(&self, server: &ServerKey);
}

/// Monitor connections kept per server between checks, shared by a checker's futures.
#[derive(Debug)]
pub struct ConnCache<C> {
    inner: Arc<Mutex<HashMap<ServerKey, C>>>,
}

impl<C> Clone for ConnCache<C> {
    fn clone(&self) -> Self {
        ConnCache {
            inner: self.inner.clone(),
        }
    }
}

impl<C> Default for ConnCache<C> {
    fn default() -> Self {
        ConnCache {
            inner: Arc::default(),
        }
    }
}

impl<C> ConnCache<C> {
    /// Takes the server's connection out (a failed check then simply does not put it back).
    pub fn take(&self, server: &ServerKey) -> Option<C> {
        lock(&self.inner).remove(server)
    }

    /// Keeps a connection that just worked.
    pub fn put(&self, server: ServerKey, conn: C) {
        lock(&self.inner).insert(server, conn);
    }
}

/// Called by the pools after each connect attempt: the server and whether it worked (error
/// shunning, and its lifting when a shunned server answers again).
#[derive(Clone)]
pub struct ConnectErrorHook(pub Arc<ConnectOutcomeFn>);

/// The function behind a [`ConnectErrorHook`]: (server, connected?).
pub type ConnectOutcomeFn = dyn Fn(&ServerKey, bool) + Send + Sync;

impl std::fmt::Debug for ConnectErrorHook {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ConnectErrorHook")
    }
}

/// Called when a server is shunned, to close the data path's connections to it.
pub type OnShun = Arc<dyn Fn(&ServerKey) + Send + Sync>;

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

fn now_us() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_micros() as u64)
}

/// One finished check.
struct Done {
    server: ServerKey,
    kind: CheckKind,
    started_us: u64,
    outcome: Result<(u64, Option<i64>), String>,
    /// Group Replication and Galera checks: what the member reported.
    member: Option<super::cluster::MemberState>,
    /// Galera checks: the node's raw status.
    galera: Option<super::cluster::GaleraStatus>,
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
                error: done.outcome.as_ref().err().cloned(),
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

/// Every configured server once.
fn servers(hostgroups: &BTreeMap<u32, Vec<HostgroupServer>>) -> Vec<ServerKey> {
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
fn lag_thresholds(hostgroups: &BTreeMap<u32, Vec<HostgroupServer>>) -> HashMap<ServerKey, u32> {
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
fn groups(rt: &RuntimeConfig, p: Protocol) -> &[crate::config::GroupReplicationHostgroup] {
    match p {
        Protocol::Mysql => &rt.mysql.group_replication,
        Protocol::Pgsql => &[],
    }
}

/// The active Galera definitions of a protocol (MySQL only).
fn galera(rt: &RuntimeConfig, p: Protocol) -> &[crate::config::GroupReplicationHostgroup] {
    match p {
        Protocol::Mysql => &rt.mysql.galera,
        Protocol::Pgsql => &[],
    }
}

/// Servers configured in an active Group Replication definition's hostgroups.
fn group_members(
    hostgroups: &BTreeMap<u32, Vec<HostgroupServer>>,
    groups: &[crate::config::GroupReplicationHostgroup],
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
fn pair_members(
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

/// A check of `server` as the monitor user, over TLS when a row of the server says
/// `use_ssl=1`; bounded by `monitor_ping_timeout` unless the caller sets another.
fn check_target(
    server: &ServerKey,
    v: &MonitorVariables,
    tls_servers: &HashMap<ServerKey, &HostgroupServer>,
) -> CheckTarget {
    CheckTarget {
        server: server.clone(),
        username: v.username.clone(),
        password: v.password.clone(),
        dbname: v.dbname.clone(),
        check_type: String::new(),
        timeout: Duration::from_millis(v.ping_timeout),
        heartbeat_table: String::new(),
        use_ssl: tls_servers.contains_key(server),
        ssl_params: tls_servers
            .get(server)
            .map(|s| s.ssl_params.clone())
            .unwrap_or_default(),
    }
}

fn spawn_check(
    kind: CheckKind,
    target: CheckTarget,
    checker: Arc<dyn Checker>,
    tx: tokio::sync::mpsc::UnboundedSender<Done>,
) {
    let server = target.server.clone();
    let budget = target.timeout;
    let started_us = now_us();
    tokio::spawn(async move {
        let t0 = Instant::now();
        let mut member = None;
        let mut galera = None;
        let run = async {
            match kind {
                CheckKind::Galera => checker.galera(target).await.map(|g| {
                    let m = g.member();
                    let behind = i64::try_from(m.transactions_behind).unwrap_or(i64::MAX);
                    member = Some(m);
                    galera = Some(g);
                    ((t0.elapsed().as_micros() as u64).max(1), Some(behind))
                }),
                CheckKind::GroupReplication => checker.group_replication(target).await.map(|m| {
                    let behind = i64::try_from(m.transactions_behind).unwrap_or(i64::MAX);
                    member = Some(m);
                    ((t0.elapsed().as_micros() as u64).max(1), Some(behind))
                }),
                CheckKind::Connect => checker.connect(target).await.map(|us| (us, None)),
                CheckKind::Ping => checker.ping(target).await.map(|us| (us, None)),
                CheckKind::ReadOnly => checker
                    .read_only(target)
                    .await
                    .map(|v| (t0.elapsed().as_micros() as u64, Some(i64::from(v)))),
                CheckKind::ReplicationLag => checker.replication_lag(target).await.map(|v| {
                    (
                        (t0.elapsed().as_micros() as u64).max(1),
                        v.map(|s| i64::try_from(s).unwrap_or(i64::MAX)),
                    )
                }),
            }
        };
        let outcome = match tokio::time::timeout(budget, run).await {
            Ok(r) => r,
            Err(_) => Err("Operation timed out".to_string()),
        };
        let _ = tx.send(Done {
            server,
            kind,
            started_us,
            outcome,
            member,
            galera,
        });
    });
}

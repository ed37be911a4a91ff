//! Counters the data path keeps for the metrics endpoint and the `stats_*_global` tables, and
//! the Prometheus text format they are written in. Everything here is updated with relaxed
//! atomics on the hot path and read without a lock held across a scrape; a scrape costs
//! O(servers + hostgroups + rules), never O(sessions).

mod fine;
mod notify;
mod render;

pub(crate) use fine::bucket_of;
pub use fine::{FINE_BUCKETS, FineHistogram, FineSnapshot, WindowedHistogram, fine_bound_s};
pub use notify::NotifyStats;
pub use render::{ProtocolMetrics, global_rows, write_process, write_protocol};
pub use sluice_query::counters::{Counter, PerThread, thread_slot};

use crate::util::lock;
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};

/// Upper bounds (seconds) of the latency histograms' buckets; `+Inf` follows.
pub const LATENCY_BUCKETS_S: [f64; 11] = [
    0.0001, 0.0005, 0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1.0, 5.0, 10.0,
];

/// What a metric family is, for its `# TYPE` line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// Only goes up (restarts at 0 with the process).
    Counter,
    /// Goes up and down.
    Gauge,
    /// Cumulative buckets, a sum and a count.
    Histogram,
}

impl Kind {
    fn as_str(self) -> &'static str {
        match self {
            Kind::Counter => "counter",
            Kind::Gauge => "gauge",
            Kind::Histogram => "histogram",
        }
    }
}

/// Prometheus text exposition (format 0.0.4) being written: samples are grouped under their
/// family's `# HELP` and `# TYPE` whatever order they are added in, as the format requires.
#[derive(Debug, Default)]
pub struct Exposition {
    families: Vec<(String, String)>,
    index: BTreeMap<String, usize>,
}

impl Exposition {
    /// An empty exposition.
    pub fn new() -> Exposition {
        Exposition::default()
    }

    fn family(&mut self, name: &str, kind: Kind, help: &str) -> &mut String {
        let i = match self.index.get(name) {
            Some(i) => *i,
            None => {
                let head = format!("# HELP {name} {help}\n# TYPE {name} {}\n", kind.as_str());
                self.families.push((name.to_string(), head));
                self.index.insert(name.to_string(), self.families.len() - 1);
                self.families.len() - 1
            }
        };
        &mut self.families[i].1
    }

    /// Adds one sample of counter `name` with `labels`.
    pub fn counter(&mut self, name: &str, help: &str, labels: &[(&str, &str)], value: u64) {
        let out = self.family(name, Kind::Counter, help);
        sample(out, name, "", labels, None, &value.to_string());
    }

    /// Adds one sample of counter `name` measured in seconds (or another fractional unit).
    pub fn counter_f64(&mut self, name: &str, help: &str, labels: &[(&str, &str)], value: f64) {
        let out = self.family(name, Kind::Counter, help);
        sample(out, name, "", labels, None, &fmt_f64(value));
    }

    /// Adds one sample of gauge `name` with `labels`.
    pub fn gauge(&mut self, name: &str, help: &str, labels: &[(&str, &str)], value: f64) {
        let out = self.family(name, Kind::Gauge, help);
        sample(out, name, "", labels, None, &fmt_f64(value));
    }

    /// Adds histogram `name` with `labels` from a snapshot of its buckets.
    pub fn histogram(
        &mut self,
        name: &str,
        help: &str,
        labels: &[(&str, &str)],
        h: &HistogramSnapshot,
    ) {
        let bounds = LATENCY_BUCKETS_S.iter().copied();
        self.histogram_buckets(
            name,
            help,
            labels,
            bounds,
            &h.buckets,
            h.sum_seconds,
            h.count,
        );
    }

    /// Adds histogram `name` from per-bucket counts (not cumulative) under `bounds_s`; `counts`
    /// has one more entry than `bounds_s`, for observations over the largest bound.
    #[allow(clippy::too_many_arguments)] // one histogram's parts, as the text format has them
    pub fn histogram_buckets(
        &mut self,
        name: &str,
        help: &str,
        labels: &[(&str, &str)],
        bounds_s: impl Iterator<Item = f64>,
        counts: &[u64],
        sum_seconds: f64,
        count: u64,
    ) {
        let out = self.family(name, Kind::Histogram, help);
        let mut cumulative = 0u64;
        let mut n = 0usize;
        for (bound, c) in bounds_s.zip(counts) {
            cumulative += c;
            n += 1;
            let le = fmt_f64(bound);
            sample(
                out,
                name,
                "_bucket",
                labels,
                Some(&le),
                &cumulative.to_string(),
            );
        }
        cumulative += counts.get(n..).map_or(0, |rest| rest.iter().sum());
        sample(
            out,
            name,
            "_bucket",
            labels,
            Some("+Inf"),
            &cumulative.to_string(),
        );
        sample(out, name, "_sum", labels, None, &fmt_f64(sum_seconds));
        sample(out, name, "_count", labels, None, &count.to_string());
    }

    /// The text, families in the order they were first added.
    pub fn finish(self) -> String {
        let mut text = String::new();
        for (_, body) in self.families {
            text.push_str(&body);
        }
        text
    }
}

/// Writes one sample line; `le` adds the histogram bucket label.
fn sample(
    out: &mut String,
    name: &str,
    suffix: &str,
    labels: &[(&str, &str)],
    le: Option<&str>,
    value: &str,
) {
    out.push_str(name);
    out.push_str(suffix);
    let all = labels.iter().copied().chain(le.map(|v| ("le", v)));
    let mut first = true;
    for (k, v) in all {
        out.push(if first { '{' } else { ',' });
        first = false;
        let _ = write!(out, "{k}=\"");
        for c in v.chars() {
            match c {
                '\\' => out.push_str("\\\\"),
                '"' => out.push_str("\\\""),
                '\n' => out.push_str("\\n"),
                c => out.push(c),
            }
        }
        out.push('"');
    }
    if !first {
        out.push('}');
    }
    out.push(' ');
    out.push_str(value);
    out.push('\n');
}

fn fmt_f64(v: f64) -> String {
    if v.is_finite() && v.fract() == 0.0 && v.abs() < 1e15 {
        format!("{}", v as i64)
    } else {
        format!("{v}")
    }
}

/// A latency histogram with [`LATENCY_BUCKETS_S`] buckets, updated with relaxed atomics.
#[derive(Debug, Default)]
pub struct LatencyHistogram {
    buckets: [AtomicU64; 12],
    sum_us: AtomicU64,
    count: AtomicU64,
}

/// The state of a [`LatencyHistogram`] at one moment (buckets not cumulative).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct HistogramSnapshot {
    /// Observations per bucket; the last is over the largest bound.
    pub buckets: [u64; 12],
    /// Sum of all observations, in seconds.
    pub sum_seconds: f64,
    /// Observations.
    pub count: u64,
}

impl HistogramSnapshot {
    /// Adds `other`'s observations to these (the same histogram kept by another thread).
    pub fn add(&mut self, other: HistogramSnapshot) {
        for (a, b) in self.buckets.iter_mut().zip(other.buckets) {
            *a += b;
        }
        self.sum_seconds += other.sum_seconds;
        self.count += other.count;
    }
}

impl LatencyHistogram {
    /// Records one observation of `us` microseconds.
    pub fn observe_us(&self, us: u64) {
        let i = LATENCY_BUCKETS_S
            .iter()
            .position(|b| us as f64 <= b * 1e6)
            .unwrap_or(LATENCY_BUCKETS_S.len());
        self.buckets[i].fetch_add(1, Ordering::Relaxed);
        self.sum_us.fetch_add(us, Ordering::Relaxed);
        self.count.fetch_add(1, Ordering::Relaxed);
    }

    /// The buckets, sum and count now.
    pub fn snapshot(&self) -> HistogramSnapshot {
        let mut s = HistogramSnapshot::default();
        for (i, b) in self.buckets.iter().enumerate() {
            s.buckets[i] = b.load(Ordering::Relaxed);
        }
        s.sum_seconds = self.sum_us.load(Ordering::Relaxed) as f64 / 1e6;
        s.count = self.count.load(Ordering::Relaxed);
        s
    }
}

/// One `T` per hostgroup and thread slot, created on first use. The hot path takes a read lock
/// of its own thread's map (no writer once every hostgroup has been seen there), so threads never
/// contend for it; readers combine the slots.
#[derive(Debug)]
struct PerHostgroup<T> {
    by_thread: PerThread<RwLock<BTreeMap<i64, Arc<T>>>>,
}

impl<T> Default for PerHostgroup<T> {
    fn default() -> Self {
        PerHostgroup {
            by_thread: PerThread::default(),
        }
    }
}

impl<T: Default> PerHostgroup<T> {
    /// The calling thread's `T` of `hostgroup`.
    fn of(&self, hostgroup: i64) -> Arc<T> {
        let map = self.by_thread.local();
        let found = map
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .get(&hostgroup)
            .cloned();
        match found {
            Some(t) => t,
            None => map
                .write()
                .unwrap_or_else(|p| p.into_inner())
                .entry(hostgroup)
                .or_default()
                .clone(),
        }
    }

    /// `f` of every thread's `T`, combined per hostgroup with `merge`, ordered by hostgroup.
    fn each<R>(&self, f: impl Fn(&T) -> R, merge: impl Fn(&mut R, R)) -> Vec<(i64, R)> {
        let mut out: BTreeMap<i64, R> = BTreeMap::new();
        for map in self.by_thread.iter() {
            for (hg, t) in map.read().unwrap_or_else(|p| p.into_inner()).iter() {
                let r = f(t);
                match out.get_mut(hg) {
                    Some(acc) => merge(acc, r),
                    None => {
                        out.insert(*hg, r);
                    }
                }
            }
        }
        out.into_iter().collect()
    }
}

/// One latency histogram per hostgroup.
#[derive(Debug, Default)]
pub struct HostgroupLatency {
    by_hostgroup: PerHostgroup<LatencyHistogram>,
}

impl HostgroupLatency {
    /// Records a statement of `us` microseconds in `hostgroup` (-1: answered by Sluice).
    pub fn observe(&self, hostgroup: i64, us: u64) {
        self.by_hostgroup.of(hostgroup).observe_us(us);
    }

    /// Every hostgroup's histogram now.
    pub fn snapshot(&self) -> Vec<(i64, HistogramSnapshot)> {
        self.by_hostgroup
            .each(LatencyHistogram::snapshot, HistogramSnapshot::add)
    }
}

/// A counter per hostgroup.
#[derive(Debug, Default)]
pub struct HostgroupCounters {
    by_hostgroup: PerHostgroup<AtomicU64>,
}

impl HostgroupCounters {
    /// Adds `n` to `hostgroup`'s counter.
    pub fn add(&self, hostgroup: i64, n: u64) {
        self.by_hostgroup
            .of(hostgroup)
            .fetch_add(n, Ordering::Relaxed);
    }

    /// `hostgroup`'s counter (0 when never counted).
    pub fn get(&self, hostgroup: i64) -> u64 {
        self.by_hostgroup
            .each(|c| c.load(Ordering::Relaxed), |a, b| *a += b)
            .into_iter()
            .find(|(hg, _)| *hg == hostgroup)
            .map_or(0, |(_, n)| n)
    }
}

/// A gauge that sessions raise while in some state (in a transaction, ...) and lower when they
/// leave it — also when they end, through [`GaugeHold`]'s drop.
#[derive(Debug, Default)]
pub struct Gauge(AtomicI64);

impl Gauge {
    /// Raises the gauge until the returned hold is dropped.
    pub fn hold(self: &Arc<Gauge>) -> GaugeHold {
        self.0.fetch_add(1, Ordering::Relaxed);
        GaugeHold(self.clone())
    }

    /// The value now (never negative).
    pub fn get(&self) -> u64 {
        self.0.load(Ordering::Relaxed).max(0) as u64
    }
}

/// One unit of a [`Gauge`], released on drop.
#[derive(Debug)]
pub struct GaugeHold(Arc<Gauge>);

impl Drop for GaugeHold {
    fn drop(&mut self) {
        self.0.0.fetch_sub(1, Ordering::Relaxed);
    }
}

/// What one protocol's frontend counts about its clients and statements (`stats_*_global`,
/// `proxysql_client_connections_*`, `proxysql_questions_total`, ...).
#[derive(Debug, Default)]
pub struct FrontendStats {
    /// Clients that completed the login.
    pub client_connections_created: AtomicU64,
    /// Clients that left before or during the login (bad password, timeout, protocol error).
    pub client_connections_aborted: AtomicU64,
    /// Logins refused for a wrong password or an unknown user.
    pub access_denied_wrong_password: AtomicU64,
    /// Logins refused by the global `max_connections`.
    pub access_denied_max_connections: AtomicU64,
    /// Logins refused by the user's `max_connections`.
    pub access_denied_max_user_connections: AtomicU64,
    /// Statements from clients (queries, executes, prepares).
    pub questions: Counter,
    /// Statements that took longer than `long_query_time`.
    pub slow_queries: Counter,
    /// Time from a statement's arrival to the end of its reply, all statements, in µs.
    pub statement_time_us: Counter,
    /// Time spent in the query processor (digest, rules, hints), in ns.
    pub processor_time_ns: Counter,
    /// Sessions inside a transaction now.
    pub active_transactions: Arc<Gauge>,
    /// Statement latency per hostgroup (`sluice_query_duration_seconds`).
    pub latency: HostgroupLatency,
    /// Transactions started per hostgroup (PgBouncer's `xact_count`).
    pub transactions: HostgroupCounters,
    /// Time sessions waited for a server connection per hostgroup, in µs (`wait_time`).
    pub wait_us: HostgroupCounters,
    /// Sessions pinned to a server connection, per reason, counted when the pin starts.
    pins: Mutex<BTreeMap<&'static str, u64>>,
    /// Read-your-writes: tokens, known replica positions, outcomes.
    pub causal: crate::causal::CausalReads,
    /// LISTEN/NOTIFY fan-out (PostgreSQL only), shared with the listener tasks.
    pub notify: Arc<NotifyStats>,
}

impl FrontendStats {
    /// Counts one statement of `us` microseconds routed to `hostgroup` (-1 when Sluice answered
    /// it); `slow_us` is `long_query_time` in µs.
    pub fn statement(&self, hostgroup: i64, us: u64, slow_us: u64) {
        self.questions.add(1);
        self.statement_time_us.add(us);
        if us > slow_us {
            self.slow_queries.add(1);
        }
        self.latency.observe(hostgroup, us);
    }

    /// Counts `since`'s elapsed time as query-processor time.
    pub fn processor_time(&self, since: std::time::Instant) {
        let ns = u64::try_from(since.elapsed().as_nanos()).unwrap_or(u64::MAX);
        self.processor_time_ns.add(ns);
    }

    /// A session became pinned to its server connection for `reason`.
    pub fn pinned(&self, reason: &'static str) {
        *lock(&self.pins).entry(reason).or_default() += 1;
    }

    /// Pins started so far, per reason.
    pub fn pins(&self) -> Vec<(&'static str, u64)> {
        lock(&self.pins).iter().map(|(r, n)| (*r, *n)).collect()
    }
}

/// What one protocol's pools count (`proxysql_server_connections_total`,
/// `proxysql_connpool_get_conn_*`, pool wait time).
#[derive(Debug, Default)]
pub struct PoolStats {
    /// Server connections opened.
    pub connections_created: AtomicU64,
    /// Connect attempts that failed (refused, timed out, login refused).
    pub connections_aborted: AtomicU64,
    /// Checkouts that got a connection (one per statement when multiplexing: per thread).
    pub get_conn_success: Counter,
    /// Checkouts that gave up (timeout or a fatal error).
    pub get_conn_failure: AtomicU64,
    /// Checkouts served by an idle connection at once (per thread, as above).
    pub get_conn_immediate: Counter,
    /// Time sessions waited for a connection, in µs (`sluice_pool_wait_seconds_total`).
    pub wait_us: AtomicU64,
    /// Sessions waiting now for a connection because every server is at `max_connections`
    /// (`sluice_pool_waiting_sessions`).
    pub waiting: AtomicU64,
}

impl PoolStats {
    /// Counts one session as waiting for a connection until the returned guard drops.
    pub fn waiting(&self) -> WaitingSession<'_> {
        self.waiting.fetch_add(1, Ordering::Relaxed);
        WaitingSession(self)
    }
}

/// A session counted in [`PoolStats::waiting`]; dropping it ends the count.
#[derive(Debug)]
pub struct WaitingSession<'a>(&'a PoolStats);

impl Drop for WaitingSession<'_> {
    fn drop(&mut self) {
        self.0.waiting.fetch_sub(1, Ordering::Relaxed);
    }
}

/// Per server connection: statements and bytes, for `stats_*_connection_pool` and
/// `proxysql_connpool_*`. A connection holds its server's counters, so counting takes no lock;
/// the per-statement ones are kept per thread (every session on every core counts them).
#[derive(Debug, Default)]
pub struct ServerTraffic {
    /// Statements sent to the server.
    pub queries: Counter,
    /// Bytes sent to the server.
    pub bytes_sent: Counter,
    /// Bytes received from the server.
    pub bytes_recv: Counter,
    /// Connections opened to the server (`ConnOK`).
    pub connects_ok: AtomicU64,
    /// Connect attempts to the server that failed (`ConnERR`).
    pub connects_err: AtomicU64,
}

impl ServerTraffic {
    /// Counts `n` bytes sent.
    pub fn sent(&self, n: usize) {
        self.bytes_sent.add(n as u64);
    }

    /// Counts `n` bytes received.
    pub fn received(&self, n: usize) {
        self.bytes_recv.add(n as u64);
    }
}

/// Every (hostgroup, server)'s [`ServerTraffic`], handed to connections when they open.
#[derive(Debug, Default)]
pub struct TrafficRegistry {
    map: Mutex<BTreeMap<(u32, String), Arc<ServerTraffic>>>,
}

impl TrafficRegistry {
    /// The counters of `server` (`host:port`) in `hostgroup`, created on first use.
    pub fn of(&self, hostgroup: u32, server: &str) -> Arc<ServerTraffic> {
        lock(&self.map)
            .entry((hostgroup, server.to_string()))
            .or_default()
            .clone()
    }

    /// Counts a connect to `server` in `hostgroup` that succeeded (`ConnOK`) or failed
    /// (`ConnERR`); returns the server's counters, for a new connection to hold.
    pub fn count_connect(&self, hostgroup: u32, server: &str, ok: bool) -> Arc<ServerTraffic> {
        let t = self.of(hostgroup, server);
        let counter = if ok { &t.connects_ok } else { &t.connects_err };
        counter.fetch_add(1, Ordering::Relaxed);
        t
    }

    /// (hostgroup, server, counters) for every server seen.
    pub fn all(&self) -> Vec<(u32, String, Arc<ServerTraffic>)> {
        lock(&self.map)
            .iter()
            .map(|((hg, s), t)| (*hg, s.clone(), t.clone()))
            .collect()
    }
}

#[cfg(test)]
mod tests;

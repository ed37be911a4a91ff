//! Failed logins per client address, and the spacing of attempts from an address that failed
//! too often (`<prefix>-client_host_*`): an address that guesses passwords gets one attempt per
//! `client_host_error_delay_ms` however many connections it opens, and attempts that would queue
//! beyond ten turns are refused at once, so waiting connections stay bounded. A successful
//! login forgets the address; the table holds at most `client_host_cache_size` addresses.
//! Shown as `stats_{mysql,pgsql}_client_host_cache`, cleared by `PROXYSQL FLUSH … CLIENT HOSTS`.

use crate::config::ClientHostVariables;
use crate::util::{lock, unix_now};
use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

/// Turns an attempt may queue behind before it is refused instead.
const MAX_QUEUED_TURNS: u32 = 10;

/// What to do with a new connection from an address.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Admission {
    /// Go ahead with the login.
    Now,
    /// Wait this long first (the address is throttled; this is its turn).
    After(Duration),
    /// Refuse without a login: the address failed too often and its queue is full.
    Refused,
}

/// One address's record.
#[derive(Debug, Clone)]
struct Host {
    failures: u32,
    window_start: Instant,
    last_failure: Instant,
    /// Unix seconds of the last failure (`last_updated`).
    last_updated: u64,
    /// The earliest moment the next throttled attempt may start.
    next_turn: Instant,
}

/// A row of `stats_*_client_host_cache`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClientHostRow {
    /// The client's IP address.
    pub client_address: String,
    /// Failed logins counted in the current window.
    pub error_count: u32,
    /// Unix time of the last failure.
    pub last_updated: u64,
}

/// Failed logins per client address of one protocol's ports (data and admin).
#[derive(Debug, Default)]
pub struct LoginThrottle {
    hosts: Mutex<HashMap<IpAddr, Host>>,
    /// Addresses held, readable without the lock: a clean address costs one atomic load.
    tracked: AtomicUsize,
}

impl LoginThrottle {
    /// An empty table.
    pub fn new() -> Self {
        LoginThrottle::default()
    }

    /// Whether a new connection from `ip` may log in now, later, or not at all.
    pub fn admit(&self, ip: IpAddr, vars: &ClientHostVariables, now: Instant) -> Admission {
        if self.tracked.load(Ordering::Relaxed) == 0 || vars.error_counts == 0 {
            return Admission::Now;
        }
        let mut hosts = lock(&self.hosts);
        let Some(h) = hosts.get_mut(&ip) else {
            return Admission::Now;
        };
        if now.duration_since(h.window_start) > Duration::from_millis(vars.error_window_ms) {
            hosts.remove(&ip);
            self.tracked.store(hosts.len(), Ordering::Relaxed);
            return Admission::Now;
        }
        if h.failures < vars.error_counts {
            return Admission::Now;
        }
        let delay = Duration::from_millis(vars.error_delay_ms);
        if delay.is_zero() {
            return Admission::Refused;
        }
        let turn = h.next_turn.max(now);
        let wait = turn.duration_since(now);
        if wait > delay * MAX_QUEUED_TURNS {
            return Admission::Refused;
        }
        h.next_turn = turn + delay;
        Admission::After(wait)
    }

    /// Counts a failed login from `ip`; returns its failures in the window (0 when throttling
    /// is off), and whether this failure is the one that starts throttling.
    pub fn failed(&self, ip: IpAddr, vars: &ClientHostVariables, now: Instant) -> (u32, bool) {
        if vars.cache_size == 0 || vars.error_counts == 0 {
            return (0, false);
        }
        let mut hosts = lock(&self.hosts);
        if !hosts.contains_key(&ip) && hosts.len() >= vars.cache_size as usize {
            // Full: forget the address whose last failure is oldest (a scan, on failures only).
            let oldest = hosts
                .iter()
                .min_by_key(|(_, h)| h.last_failure)
                .map(|(ip, _)| *ip);
            if let Some(old) = oldest {
                hosts.remove(&old);
            }
        }
        let h = hosts.entry(ip).or_insert(Host {
            failures: 0,
            window_start: now,
            last_failure: now,
            last_updated: 0,
            next_turn: now,
        });
        if now.duration_since(h.window_start) > Duration::from_millis(vars.error_window_ms) {
            h.failures = 0;
            h.window_start = now;
        }
        h.failures = h.failures.saturating_add(1);
        h.last_failure = now;
        h.last_updated = unix_now();
        let (failures, starts) = (h.failures, h.failures == vars.error_counts);
        self.tracked.store(hosts.len(), Ordering::Relaxed);
        (failures, starts)
    }

    /// A login from `ip` succeeded: its failures are forgotten.
    pub fn succeeded(&self, ip: IpAddr) {
        if self.tracked.load(Ordering::Relaxed) == 0 {
            return;
        }
        let mut hosts = lock(&self.hosts);
        hosts.remove(&ip);
        self.tracked.store(hosts.len(), Ordering::Relaxed);
    }

    /// Every remembered address, most failures first.
    pub fn rows(&self) -> Vec<ClientHostRow> {
        let hosts = lock(&self.hosts);
        let mut rows: Vec<ClientHostRow> = hosts
            .iter()
            .map(|(ip, h)| ClientHostRow {
                client_address: ip.to_string(),
                error_count: h.failures,
                last_updated: h.last_updated,
            })
            .collect();
        rows.sort_by(|a, b| {
            b.error_count
                .cmp(&a.error_count)
                .then_with(|| a.client_address.cmp(&b.client_address))
        });
        rows
    }

    /// Forgets every address (`PROXYSQL FLUSH … CLIENT HOSTS`, or reading the `_reset` table).
    pub fn flush(&self) {
        let mut hosts = lock(&self.hosts);
        hosts.clear();
        self.tracked.store(0, Ordering::Relaxed);
    }
}

/// One protocol's throttle with the settings it reads: what every login path (data port and
/// admin port) calls before and after a login. Clones share the table.
#[derive(Debug, Clone)]
pub struct LoginGate {
    throttle: std::sync::Arc<LoginThrottle>,
    config: crate::ConfigHandle,
    protocol: crate::Protocol,
}

impl LoginGate {
    /// A gate over `throttle`, reading `<protocol>-client_host_*` from `config` at each call.
    pub fn new(
        throttle: std::sync::Arc<LoginThrottle>,
        config: crate::ConfigHandle,
        protocol: crate::Protocol,
    ) -> LoginGate {
        LoginGate {
            throttle,
            config,
            protocol,
        }
    }

    /// The table (for `stats_*_client_host_cache` and the flush command).
    pub fn throttle(&self) -> &std::sync::Arc<LoginThrottle> {
        &self.throttle
    }

    fn vars(&self) -> ClientHostVariables {
        let rt = self.config.load();
        match self.protocol {
            crate::Protocol::Mysql => rt.mysql.variables.client_hosts.clone(),
            crate::Protocol::Pgsql => rt.pgsql.variables.client_hosts.clone(),
        }
    }

    fn prefix(&self) -> &'static str {
        self.protocol.prefix()
    }

    /// Whether a connection from `ip` may log in now, after a wait, or not at all.
    pub fn admit(&self, ip: IpAddr) -> Admission {
        if self.throttle.tracked.load(Ordering::Relaxed) == 0 {
            return Admission::Now;
        }
        let a = self.throttle.admit(ip, &self.vars(), Instant::now());
        if a == Admission::Refused {
            tracing::debug!(client = %ip, "login attempt refused: too many failed logins");
        }
        a
    }

    /// Counts a failed login on `port` (`"MySQL"`, `"MySQL admin"`, …) for `reason`, and logs
    /// it with the address's failures in the window; the failure that starts throttling says so.
    pub fn failed(&self, ip: IpAddr, port: &str, reason: &dyn std::fmt::Display) {
        let vars = self.vars();
        let (failures, starts) = self.throttle.failed(ip, &vars, Instant::now());
        tracing::warn!(client = %ip, failures, "{port} login failed: {reason}");
        if starts {
            let p = self.prefix();
            tracing::warn!(
                client = %ip,
                "throttling logins from {ip}: {failures} failed logins within {}s \
                 ({p}-client_host_error_counts); one attempt per {} ms from now on, \
                 until the window passes or PROXYSQL FLUSH {} CLIENT HOSTS",
                vars.error_window_ms / 1000,
                vars.error_delay_ms,
                p.to_uppercase()
            );
        }
    }

    /// A login from `ip` succeeded.
    pub fn succeeded(&self, ip: IpAddr) {
        self.throttle.succeeded(ip);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vars(counts: u32, delay_ms: u64) -> ClientHostVariables {
        ClientHostVariables {
            error_counts: counts,
            cache_size: 3,
            error_window_ms: 60_000,
            error_delay_ms: delay_ms,
        }
    }

    const A: IpAddr = IpAddr::V4(std::net::Ipv4Addr::new(10, 0, 0, 1));
    const B: IpAddr = IpAddr::V4(std::net::Ipv4Addr::new(10, 0, 0, 2));

    #[test]
    fn spaces_attempts_after_n_failures_and_refuses_a_full_queue() {
        let (t, v, now) = (LoginThrottle::new(), vars(3, 1000), Instant::now());
        for i in 1..=2 {
            assert_eq!(t.failed(A, &v, now), (i, false));
            assert_eq!(t.admit(A, &v, now), Admission::Now);
        }
        assert_eq!(t.failed(A, &v, now), (3, true));
        // One turn per second, however many connections arrive at once.
        let waits: Vec<Admission> = (0..12).map(|_| t.admit(A, &v, now)).collect();
        assert_eq!(waits[0], Admission::After(Duration::ZERO));
        assert_eq!(waits[1], Admission::After(Duration::from_secs(1)));
        assert_eq!(waits[10], Admission::After(Duration::from_secs(10)));
        assert_eq!(waits[11], Admission::Refused);
        // Another address is not affected; success forgets the address.
        assert_eq!(t.admit(B, &v, now), Admission::Now);
        t.succeeded(A);
        assert_eq!(t.admit(A, &v, now), Admission::Now);
    }

    #[test]
    fn failures_expire_with_the_window_and_zero_delay_blocks() {
        let (t, v, now) = (LoginThrottle::new(), vars(1, 0), Instant::now());
        t.failed(A, &v, now);
        assert_eq!(t.admit(A, &v, now), Admission::Refused);
        let later = now + Duration::from_millis(60_001);
        assert_eq!(t.admit(A, &v, later), Admission::Now);
        assert!(t.rows().is_empty());
    }

    #[test]
    fn the_table_is_bounded_and_off_when_configured_off() {
        let (t, v, now) = (LoginThrottle::new(), vars(5, 1000), Instant::now());
        for i in 0..10u8 {
            let ip = IpAddr::V4(std::net::Ipv4Addr::new(10, 1, 0, i));
            t.failed(ip, &v, now + Duration::from_millis(u64::from(i)));
        }
        let rows = t.rows();
        assert_eq!(rows.len(), 3, "{rows:?}");
        assert!(rows.iter().any(|r| r.client_address == "10.1.0.9"));
        t.flush();
        assert!(t.rows().is_empty());
        assert_eq!(t.failed(A, &vars(0, 1000), now), (0, false));
        assert_eq!(t.admit(A, &vars(0, 1000), now), Admission::Now);
    }
}

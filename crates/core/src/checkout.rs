//! The checkout loop both protocols' pools share: try the hostgroup's servers until one gives a
//! connection, skip servers that failed in this round, pause and read the hostgroup again when
//! none is usable (a failover may have moved a new server in), and give up with a timeout error
//! once the budget (`connect_timeout_server_max`) is spent. What an attempt does — reuse an idle
//! connection, queue for a slot, open a connection — is the protocol's [`Connector`].

use crate::runtime::{HostgroupServer, ServerKey};
use std::collections::HashSet;
use std::future::Future;
use std::sync::atomic::Ordering::Relaxed;
use std::time::{Duration, Instant};

/// Shortest pause before a new round: a zero `connect_retries_delay` must not spin.
const MIN_ROUND_PAUSE: Duration = Duration::from_millis(10);

/// What one attempt of a [`Connector`] came to.
#[derive(Debug)]
pub enum Attempt<C, E> {
    /// A connection for the caller.
    Ready(C),
    /// Nothing yet, but worth trying again at once (a dead idle connection was dropped, a wait
    /// ended empty-handed); the budget is checked first.
    Again,
    /// Connecting to `server` failed in a way another attempt may fix; it is skipped for the
    /// rest of this round.
    Failed {
        /// The server that failed.
        server: ServerKey,
        /// Why, kept for the timeout error.
        error: String,
    },
    /// No server is usable now (all offline, shunned or failed this round): pause, forget this
    /// round's failures, read the hostgroup again.
    Exhausted,
    /// An error no retry fixes (login refused, TLS misconfigured): returned at once.
    Fatal(E),
}

/// A protocol's side of the checkout loop.
pub trait Connector {
    /// What a checkout returns.
    type Conn;
    /// The pool's error type.
    type Error;

    /// One attempt on `servers` (the hostgroup as last read), avoiding `failed`; waits inside
    /// (for a slot, a connect) must end by `deadline`.
    fn attempt(
        &self,
        servers: &[HostgroupServer],
        failed: &HashSet<ServerKey>,
        deadline: Instant,
    ) -> impl Future<Output = Attempt<Self::Conn, Self::Error>>;

    /// Where the loop counts checkouts that succeed or fail and the time they waited.
    fn stats(&self) -> &crate::metrics::PoolStats;

    /// The hostgroup's servers as the runtime has them now; `None` keeps the ones given.
    fn reread(&self) -> Option<Vec<HostgroupServer>>;

    /// The error for a spent budget, after `elapsed` and with the last connect error.
    fn timed_out(&self, elapsed: Duration, last_error: Option<String>) -> Self::Error;
}

/// The loop's budget.
#[derive(Debug, Clone, Copy)]
pub struct CheckoutBudget {
    /// When the checkout began.
    pub start: Instant,
    /// Total time allowed (`connect_timeout_server_max`).
    pub total: Duration,
    /// Pause between rounds (`connect_retries_delay`); at least 10 ms.
    pub round_pause: Duration,
}

impl CheckoutBudget {
    /// A budget of `total` starting now, pausing `round_pause` (at least 10 ms) between rounds.
    pub fn starting_now(total: Duration, round_pause: Duration) -> CheckoutBudget {
        CheckoutBudget {
            start: Instant::now(),
            total,
            round_pause,
        }
    }
}

/// Runs attempts of `connector` on `servers` until one is [`Attempt::Ready`] or fatal, or the
/// budget is spent.
pub async fn checkout<K: Connector>(
    connector: &K,
    servers: &[HostgroupServer],
    budget: CheckoutBudget,
) -> Result<K::Conn, K::Error> {
    let result = rounds(connector, servers, budget).await;
    let stats = connector.stats();
    match &result {
        Ok(_) => stats.get_conn_success.add(1),
        Err(_) => {
            stats.get_conn_failure.fetch_add(1, Relaxed);
        }
    }
    let waited = u64::try_from(budget.start.elapsed().as_micros()).unwrap_or(u64::MAX);
    stats.wait_us.fetch_add(waited, Relaxed);
    result
}

/// The attempts, round after round, until a connection, a fatal error or the end of the budget.
async fn rounds<K: Connector>(
    connector: &K,
    servers: &[HostgroupServer],
    budget: CheckoutBudget,
) -> Result<K::Conn, K::Error> {
    let deadline = budget.start + budget.total;
    let mut failed: HashSet<ServerKey> = HashSet::new();
    let mut last_error: Option<String> = None;
    let mut fresh: Option<Vec<HostgroupServer>> = None;
    loop {
        let current = fresh.as_deref().unwrap_or(servers);
        match connector.attempt(current, &failed, deadline).await {
            Attempt::Ready(conn) => return Ok(conn),
            Attempt::Fatal(e) => return Err(e),
            Attempt::Again => {}
            Attempt::Failed { server, error } => {
                failed.insert(server);
                last_error = Some(error);
            }
            Attempt::Exhausted => {
                failed.clear();
                let remaining = deadline.saturating_duration_since(Instant::now());
                tokio::time::sleep(budget.round_pause.max(MIN_ROUND_PAUSE).min(remaining)).await;
                if let Some(servers) = connector.reread() {
                    fresh = Some(servers);
                }
            }
        }
        if Instant::now() >= deadline {
            return Err(connector.timed_out(budget.start.elapsed(), last_error));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Mutex;

    /// A scripted connector: each server either connects (its name is the connection) or fails;
    /// after `failover_after` re-reads the hostgroup holds `promoted` instead.
    struct Fake {
        down: Vec<&'static str>,
        attempts: Mutex<Vec<String>>,
        rereads: Mutex<u32>,
        failover_after: u32,
        promoted: Vec<HostgroupServer>,
        fatal_on: Option<&'static str>,
        stats: crate::metrics::PoolStats,
    }

    impl Fake {
        fn new(down: &[&'static str]) -> Fake {
            Fake {
                down: down.to_vec(),
                attempts: Mutex::new(Vec::new()),
                rereads: Mutex::new(0),
                failover_after: u32::MAX,
                promoted: Vec::new(),
                fatal_on: None,
                stats: Default::default(),
            }
        }
    }

    impl Connector for Fake {
        type Conn = String;
        type Error = String;

        async fn attempt(
            &self,
            servers: &[HostgroupServer],
            failed: &HashSet<ServerKey>,
            _deadline: Instant,
        ) -> Attempt<String, String> {
            let Some(s) = servers.iter().find(|s| !failed.contains(&s.key)) else {
                return Attempt::Exhausted;
            };
            let name = s.key.hostname.clone();
            crate::util::lock(&self.attempts).push(name.clone());
            if self.fatal_on == Some(name.as_str()) {
                return Attempt::Fatal(format!("{name} refused the login"));
            }
            if self.down.contains(&name.as_str()) {
                return Attempt::Failed {
                    server: s.key.clone(),
                    error: format!("{name}: connection refused"),
                };
            }
            Attempt::Ready(name)
        }

        fn stats(&self) -> &crate::metrics::PoolStats {
            &self.stats
        }

        fn reread(&self) -> Option<Vec<HostgroupServer>> {
            let mut n = crate::util::lock(&self.rereads);
            *n += 1;
            (*n >= self.failover_after).then(|| self.promoted.clone())
        }

        fn timed_out(&self, elapsed: Duration, last: Option<String>) -> String {
            format!(
                "timed out after {elapsed:?}; last error: {}",
                last.unwrap_or_default()
            )
        }
    }

    fn servers(names: &[&str]) -> Vec<HostgroupServer> {
        names
            .iter()
            .map(|n| HostgroupServer::new(n, 3306, 0))
            .collect()
    }

    fn budget(ms: u64) -> CheckoutBudget {
        CheckoutBudget {
            start: Instant::now(),
            total: Duration::from_millis(ms),
            round_pause: Duration::ZERO,
        }
    }

    #[tokio::test]
    async fn a_failed_server_is_skipped_for_the_next_in_the_same_round() {
        let fake = Fake::new(&["a"]);
        let got = checkout(&fake, &servers(&["a", "b"]), budget(1000)).await;
        assert_eq!(got, Ok("b".to_string()));
        assert_eq!(*crate::util::lock(&fake.attempts), ["a", "b"]);
        assert_eq!(fake.stats.get_conn_success.get(), 1);
        assert_eq!(fake.stats.get_conn_failure.load(Relaxed), 0);
        assert_eq!(*crate::util::lock(&fake.rereads), 0);
    }

    #[tokio::test]
    async fn an_exhausted_round_pauses_rereads_the_hostgroup_and_finds_the_new_server() {
        let mut fake = Fake::new(&["old"]);
        fake.failover_after = 2;
        fake.promoted = servers(&["new"]);
        let got = checkout(&fake, &servers(&["old"]), budget(2000)).await;
        assert_eq!(got, Ok("new".to_string()));
        // Round 1: old fails; exhausted, re-read (still old); round 2: old fails again;
        // exhausted, re-read (now new).
        assert_eq!(*crate::util::lock(&fake.attempts), ["old", "old", "new"]);
        assert_eq!(*crate::util::lock(&fake.rereads), 2);
    }

    #[tokio::test]
    async fn a_spent_budget_returns_the_timeout_with_the_last_error() {
        let fake = Fake::new(&["a"]);
        let started = Instant::now();
        let got = checkout(&fake, &servers(&["a"]), budget(60)).await;
        let err = got.expect_err("no server can connect");
        assert!(err.contains("last error: a: connection refused"), "{err}");
        assert!(started.elapsed() >= Duration::from_millis(60));
        // Paused between rounds (at least 10 ms each), not spinning.
        assert!(crate::util::lock(&fake.attempts).len() <= 8);
    }

    #[tokio::test]
    async fn a_fatal_error_ends_the_checkout_at_once() {
        let mut fake = Fake::new(&[]);
        fake.fatal_on = Some("a");
        let got = checkout(&fake, &servers(&["a", "b"]), budget(1000)).await;
        assert_eq!(got, Err("a refused the login".to_string()));
        assert_eq!(fake.stats.get_conn_failure.load(Relaxed), 1);
        assert_eq!(crate::util::lock(&fake.attempts).len(), 1);
    }
}

//! How Sluice stops: on a signal or `PROXYSQL SHUTDOWN` (sessions finish their statement or
//! transaction, then close), or after a successor took the listeners (`--takeover`: clients get
//! `--shutdown-timeout` to leave first).

use std::path::PathBuf;
use std::time::Duration;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tracing::{info, warn};

/// Why Sluice stops.
pub(crate) enum Stop {
    /// The host's stop future resolved (the binary's: SIGTERM / SIGINT), with its reason.
    Signal(&'static str),
    /// `PROXYSQL SHUTDOWN`.
    Admin,
    /// A successor (this pid) accepts on the listeners.
    HandedOver(u32),
}

impl Stop {
    fn name(&self) -> &'static str {
        match self {
            Stop::Signal(s) => s,
            Stop::Admin => "PROXYSQL SHUTDOWN",
            Stop::HandedOver(_) => "a takeover",
        }
    }
}

/// Waits for a reason to stop: `stop`, `PROXYSQL SHUTDOWN` (`admin`) or a successor; SIGUSR2
/// on the way starts a successor (`--takeover`).
pub(crate) async fn wait(
    stop: impl std::future::Future<Output = &'static str>,
    admin: &CancellationToken,
    handed_over: Option<tokio::sync::oneshot::Receiver<u32>>,
    mut upgrade: crate::signals::UpgradeSignal,
) -> Stop {
    let successor = async {
        match handed_over {
            Some(rx) => match rx.await {
                Ok(pid) => pid,
                Err(_) => std::future::pending().await,
            },
            None => std::future::pending().await,
        }
    };
    tokio::pin!(successor);
    // One stop future for the whole wait: a new one per turn could miss a SIGTERM.
    tokio::pin!(stop);
    loop {
        tokio::select! {
            why = &mut stop => return Stop::Signal(why),
            _ = admin.cancelled() => return Stop::Admin,
            pid = &mut successor => return Stop::HandedOver(pid),
            _ = upgrade.recv() => match crate::takeover::start_successor() {
                Ok(pid) => info!("SIGUSR2: started pid {pid} with --takeover; it takes the listeners when it is ready"),
                Err(e) => warn!("SIGUSR2: no successor started: {e}"),
            },
        }
    }
}

/// The old process after a takeover: it stops accepting and gives its clients `limit` to leave.
struct Draining<'a, F: Fn() -> usize> {
    /// The data ports' and the other ports' accept loops.
    accepting: [CancellationToken; 3],
    sessions: &'a F,
    limit: Duration,
}

impl<F: Fn() -> usize> Draining<'_, F> {
    async fn run(self, successor: u32) {
        info!(
            "pid {successor} took over the listeners: no longer accepting; waiting up to {}s for {} session(s) to end",
            self.limit.as_secs(),
            (self.sessions)()
        );
        for t in &self.accepting {
            t.cancel();
        }
        let deadline = tokio::time::Instant::now() + self.limit;
        while (self.sessions)() > 0 {
            if tokio::time::Instant::now() >= deadline {
                info!(
                    "{} session(s) still open after {}s: each closes at its next transaction boundary",
                    (self.sessions)(),
                    self.limit.as_secs()
                );
                return;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        info!("every session ended");
    }
}

/// What a stop winds down.
pub(crate) struct Stopping {
    /// The two data ports' accept loops.
    pub data_ports: sluice_core::PerProtocol<CancellationToken>,
    /// The admin, HTTP and MCP ports' accept loops.
    pub accepting: CancellationToken,
    /// Sessions close at their next boundary once it is cancelled.
    pub shutdown: CancellationToken,
    /// Session tasks.
    pub tasks: TaskTracker,
    /// `--shutdown-timeout`.
    pub limit: Duration,
    /// This process's takeover socket, removed at a stop that handed nothing over.
    pub takeover_socket: Option<PathBuf>,
}

impl Stopping {
    /// Stops for `why`, with `sessions` counting the client sessions left; `servers` are the
    /// accept loops, `stop_monitors` ends the health checks.
    pub(crate) async fn run(
        self,
        why: Stop,
        sessions: &impl Fn() -> usize,
        servers: Vec<JoinHandle<()>>,
        stop_monitors: impl FnOnce(),
    ) {
        if let Stop::HandedOver(pid) = why {
            // The successor is the service's main process now; never STOPPING=1 (systemd would
            // stop the unit, successor included).
            crate::notify::notify(&format!("MAINPID={pid}\nSTATUS=draining after a takeover"));
            let sluice_core::PerProtocol {
                mysql: my,
                pgsql: pg,
            } = self.data_ports;
            let draining = Draining {
                accepting: [my, pg, self.accepting.clone()],
                sessions,
                limit: self.limit,
            };
            draining.run(pid).await;
        } else {
            crate::notify::notify("STOPPING=1");
            if let Some(path) = &self.takeover_socket {
                crate::takeover::remove_socket(path);
            }
            info!(
                "received {}: no longer accepting connections; waiting up to {}s for {} session(s) to finish their current statement",
                why.name(),
                self.limit.as_secs(),
                sessions()
            );
        }
        self.shutdown.cancel();
        stop_monitors();
        for server in servers {
            let _ = server.await;
        }
        self.tasks.close();
        if tokio::time::timeout(self.limit, self.tasks.wait())
            .await
            .is_err()
        {
            warn!(
                "{} session(s) still busy after {}s; closing them",
                sessions(),
                self.limit.as_secs()
            );
        }
    }
}

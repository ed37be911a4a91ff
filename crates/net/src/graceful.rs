//! A data port's serving, as a value: `.await` it to serve until the frontend's shutdown, or
//! call [`Serve::with_graceful_shutdown`] to also stop on a signal of the host's and wait for the
//! sessions to end. Both frontends' `serve` return one.

use std::future::{Future, IntoFuture};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

/// A port accepting clients. Awaited, it serves until the frontend's shutdown token is
/// cancelled (`PROXYSQL SHUTDOWN`, or the host cancelling it).
#[must_use = "a port serves only when awaited"]
pub struct Serve<F> {
    serving: F,
    shutdown: CancellationToken,
    tasks: TaskTracker,
}

impl<F: Future<Output = ()>> Serve<F> {
    /// Wraps the accept loop `serving` of a frontend stopped by `shutdown`, whose session tasks
    /// are tracked by `tasks`.
    pub fn new(serving: F, shutdown: CancellationToken, tasks: TaskTracker) -> Serve<F> {
        Serve {
            serving,
            shutdown,
            tasks,
        }
    }

    /// Serves until the frontend's shutdown or `signal` (e.g. `tokio::signal::ctrl_c()`);
    /// then stops accepting, lets each session end at its next idle point (a transaction under
    /// way finishes), and resolves once every session has ended.
    pub async fn with_graceful_shutdown(self, signal: impl Future<Output = ()>) {
        let Serve {
            serving,
            shutdown,
            tasks,
        } = self;
        tokio::select! {
            () = serving => {}
            () = signal => {
                tracing::info!("stop requested: no new clients; waiting for the sessions to end");
            }
        }
        // After the signal, or after a shutdown cancelled elsewhere (a no-op then).
        shutdown.cancel();
        tasks.close();
        tasks.wait().await;
    }
}

/// `accepting` (a port's accept loop), which first starts a task — tracked by `tasks`, so a
/// graceful shutdown waits for it — that calls `fan_out` once `shutdown` is cancelled: the
/// frontend raises the shutdown signal of each of its sessions there
/// ([`crate::SessionSignal`]), as they do not watch the shutdown token themselves.
pub fn with_shutdown_fanned_out<F, G>(
    accepting: F,
    (shutdown, tasks): (&CancellationToken, &TaskTracker),
    fan_out: G,
) -> impl Future<Output = ()> + use<F, G>
where
    F: Future<Output = ()>,
    G: FnOnce() + Send + 'static,
{
    let (shutdown, tasks) = (shutdown.clone(), tasks.clone());
    async move {
        tasks.spawn(async move {
            shutdown.cancelled().await;
            fan_out();
        });
        accepting.await
    }
}

impl<F: Future<Output = ()>> IntoFuture for Serve<F> {
    type Output = ();
    type IntoFuture = F;

    fn into_future(self) -> F {
        self.serving
    }
}

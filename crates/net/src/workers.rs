//! Event-loop threads for sessions (`pgsql-threads`), ProxySQL's worker model: each thread runs
//! a single-threaded runtime with its own poll, and a session lives on one thread from accept to
//! close. Its client socket, its server connections and its timers are all
//! served by that thread, so forwarding a transaction never wakes another thread — on a
//! work-stealing runtime those cross-thread wake-ups cost more than parsing and pooling together
//! (measured in docs/benchmarks.md).

use std::future::Future;
use std::sync::atomic::{AtomicUsize, Ordering};
use tokio::runtime::Handle;
use tokio::sync::oneshot;
use tracing::warn;

/// The session threads. Dropping this stops them; their sessions end with their runtime.
#[derive(Debug)]
pub struct Workers {
    handles: Vec<Handle>,
    /// Dropped (closing the channel) to let each thread's runtime end.
    _stop: Vec<oneshot::Sender<()>>,
    next: AtomicUsize,
}

/// One thread's runtime, for [`Workers::next`].
#[derive(Debug, Clone, Copy)]
pub struct Worker<'a> {
    /// The thread's position (0-based): server connections remember where they were opened.
    pub index: usize,
    /// The thread's tokio runtime, to spawn the session's task on.
    pub handle: &'a Handle,
}

impl Workers {
    /// Starts `n` threads (at least one), named `<prefix>-N` (`sluice-pg-0`, … in `top -H`).
    pub fn start(n: usize, prefix: &str) -> std::io::Result<Workers> {
        let mut handles = Vec::new();
        let mut stops = Vec::new();
        for i in 0..n.max(1) {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()?;
            handles.push(rt.handle().clone());
            let (tx, rx) = oneshot::channel::<()>();
            stops.push(tx);
            std::thread::Builder::new()
                .name(format!("{prefix}-{i}"))
                .spawn(move || {
                    // Runs the spawned sessions until told to stop; dropping the runtime then
                    // cancels what is left.
                    let _ = rt.block_on(rx);
                })?;
        }
        Ok(Workers {
            handles,
            _stop: stops,
            next: AtomicUsize::new(0),
        })
    }

    /// How many threads there are.
    pub fn len(&self) -> usize {
        self.handles.len()
    }

    /// Always false: there is at least one thread.
    pub fn is_empty(&self) -> bool {
        self.handles.is_empty()
    }

    /// The thread for the next session (round robin).
    pub fn next(&self) -> Worker<'_> {
        let index = self.next.fetch_add(1, Ordering::Relaxed) % self.handles.len();
        Worker {
            index,
            handle: &self.handles[index],
        }
    }
}

/// Moves an accepted client socket to `worker`'s poll and runs `session` there. A socket is
/// registered with the poll of the runtime that accepted it, so it is handed over as a plain
/// file descriptor and registered again on the session's own thread.
pub fn spawn_session<F, Fut>(
    tasks: &tokio_util::task::TaskTracker,
    worker: Worker<'_>,
    tcp: tokio::net::TcpStream,
    session: F,
) where
    F: FnOnce(tokio::net::TcpStream) -> Fut + Send + 'static,
    Fut: Future<Output = ()> + Send + 'static,
{
    let std = match tcp.into_std() {
        Ok(s) => s,
        Err(e) => {
            warn!("cannot hand an accepted connection to a session thread: {e}");
            return;
        }
    };
    tasks.spawn_on(
        async move {
            match tokio::net::TcpStream::from_std(std) {
                Ok(tcp) => session(tcp).await,
                Err(e) => warn!("cannot register a client connection with its thread: {e}"),
            }
        },
        worker.handle,
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sessions_are_spread_over_every_thread() {
        let w = Workers::start(3, "sluice-pg").expect("threads");
        let picks: Vec<usize> = (0..6).map(|_| w.next().index).collect();
        assert_eq!(picks, [0, 1, 2, 0, 1, 2]);
        let names: Vec<String> = (0..3)
            .map(|_| {
                let (tx, rx) = std::sync::mpsc::channel();
                w.next().handle.spawn(async move {
                    let _ = tx.send(std::thread::current().name().map(str::to_string));
                });
                rx.recv_timeout(std::time::Duration::from_secs(5))
                    .expect("ran")
                    .unwrap_or_default()
            })
            .collect();
        assert_eq!(names, ["sluice-pg-0", "sluice-pg-1", "sluice-pg-2"]);
    }
}

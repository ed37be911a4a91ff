//! The accept loop every port uses: sessions start on the thread they are dealt to, new
//! connections wait in the kernel's queue while `PROXYSQL PAUSE` is in force, the loop ends
//! when Sluice stops, and a failing `accept` (typically EMFILE) backs off instead of spinning.

use crate::workers::Workers;
use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;
use tokio::net::{TcpListener, TcpStream};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tracing::{debug, warn};

/// How often a paused listener looks whether it was resumed.
const PAUSE_POLL: Duration = Duration::from_millis(100);
/// Pause after a failed `accept`.
const ACCEPT_BACKOFF: Duration = Duration::from_millis(50);

/// What an accept loop obeys and where its sessions run.
#[derive(Debug, Clone)]
pub struct AcceptControl {
    /// Names the port in log lines ("MySQL", "PostgreSQL admin", …).
    pub name: &'static str,
    /// Cancelled when Sluice stops: the listeners close.
    pub shutdown: CancellationToken,
    /// Set by `PROXYSQL PAUSE`: connections wait in the kernel's queue until it is cleared.
    /// `None`: the port is never paused (the admin ports).
    pub paused: Option<Arc<AtomicBool>>,
    /// Every session task, so a graceful stop can wait for them.
    pub tasks: TaskTracker,
    /// The event-loop threads sessions are dealt to (round robin); `None` runs them on the
    /// runtime that accepts.
    pub workers: Option<Arc<Workers>>,
}

impl AcceptControl {
    fn paused(&self) -> bool {
        self.paused
            .as_ref()
            .is_some_and(|p| p.load(Ordering::Relaxed))
    }
}

/// Accepts connections on every listener until shutdown. Each socket (`TCP_NODELAY` set) goes
/// to `session(socket, peer, worker)`, run on the event-loop thread dealt to it — `worker` is
/// that thread's index — or on the accepting runtime without workers.
pub async fn serve<F, Fut>(listeners: Vec<TcpListener>, ctl: AcceptControl, session: F)
where
    F: Fn(TcpStream, SocketAddr, Option<usize>) -> Fut + Clone + Send + Sync + 'static,
    Fut: Future<Output = ()> + Send + 'static,
{
    let mut loops = Vec::new();
    for l in listeners {
        let (ctl, session) = (ctl.clone(), session.clone());
        loops.push(tokio::spawn(accept_loop(l, ctl, session)));
    }
    for l in loops {
        let _ = l.await;
    }
}

async fn accept_loop<F, Fut>(listener: TcpListener, ctl: AcceptControl, session: F)
where
    F: Fn(TcpStream, SocketAddr, Option<usize>) -> Fut + Clone + Send + Sync + 'static,
    Fut: Future<Output = ()> + Send + 'static,
{
    loop {
        if ctl.paused() {
            // PROXYSQL PAUSE: leave new connections in the kernel's queue until RESUME.
            tokio::select! {
                _ = ctl.shutdown.cancelled() => break,
                _ = tokio::time::sleep(PAUSE_POLL) => continue,
            }
        }
        let accepted = tokio::select! {
            _ = ctl.shutdown.cancelled() => break,
            a = listener.accept() => a,
        };
        match accepted {
            Ok((tcp, peer)) => {
                let _ = tcp.set_nodelay(true);
                dispatch(&ctl, tcp, peer, session.clone());
            }
            Err(e) => {
                warn!(
                    "{} accept failed on {:?}: {e}",
                    ctl.name,
                    listener.local_addr().ok()
                );
                tokio::time::sleep(ACCEPT_BACKOFF).await;
            }
        }
    }
    debug!(
        "{} listener {:?} closed",
        ctl.name,
        listener.local_addr().ok()
    );
}

/// Waits while `PROXYSQL PAUSE` is in force; false when Sluice stops meanwhile.
async fn resumed(paused: Option<Arc<AtomicBool>>, shutdown: CancellationToken) -> bool {
    let Some(p) = paused else { return true };
    while p.load(Ordering::Relaxed) {
        tokio::select! {
            _ = shutdown.cancelled() => return false,
            _ = tokio::time::sleep(PAUSE_POLL) => {}
        }
    }
    true
}

/// Starts the session of one accepted socket where it belongs. A connection accepted just as
/// `PROXYSQL PAUSE` came in waits for `RESUME` before its session starts.
fn dispatch<F, Fut>(ctl: &AcceptControl, tcp: TcpStream, peer: SocketAddr, session: F)
where
    F: Fn(TcpStream, SocketAddr, Option<usize>) -> Fut + Send + 'static,
    Fut: Future<Output = ()> + Send + 'static,
{
    let (paused, shutdown) = (ctl.paused.clone(), ctl.shutdown.clone());
    match &ctl.workers {
        Some(w) => {
            let worker = w.next();
            let index = worker.index;
            crate::workers::spawn_session(&ctl.tasks, worker, tcp, move |tcp| async move {
                if resumed(paused, shutdown).await {
                    session(tcp, peer, Some(index)).await;
                }
            });
        }
        None => {
            ctl.tasks.spawn(async move {
                if resumed(paused, shutdown).await {
                    session(tcp, peer, None).await;
                }
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    async fn echo(mut tcp: TcpStream, _peer: SocketAddr, worker: Option<usize>) {
        let mut b = [0u8; 1];
        if tcp.read_exact(&mut b).await.is_ok() {
            let w = worker.map_or(b'-', |w| b'0' + w as u8);
            let _ = tcp.write_all(&[b[0], w]).await;
        }
    }

    async fn ask(addr: SocketAddr) -> Option<[u8; 2]> {
        let mut c = TcpStream::connect(addr).await.ok()?;
        c.write_all(b"x").await.ok()?;
        let mut out = [0u8; 2];
        tokio::time::timeout(Duration::from_secs(5), c.read_exact(&mut out))
            .await
            .ok()?
            .ok()?;
        Some(out)
    }

    #[tokio::test]
    async fn sessions_are_dealt_to_workers_paused_and_stopped() {
        let l = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = l.local_addr().expect("addr");
        let paused = Arc::new(AtomicBool::new(false));
        let ctl = AcceptControl {
            name: "test",
            shutdown: CancellationToken::new(),
            paused: Some(paused.clone()),
            tasks: TaskTracker::new(),
            workers: Some(Arc::new(Workers::start(2, "sluice-test").expect("threads"))),
        };
        let server = tokio::spawn(serve(vec![l], ctl.clone(), echo));
        assert_eq!(ask(addr).await, Some(*b"x0"));
        assert_eq!(
            ask(addr).await,
            Some(*b"x1"),
            "round robin over the threads"
        );
        // Paused: the connection waits in the queue and is served after RESUME.
        paused.store(true, Ordering::Relaxed);
        tokio::time::sleep(PAUSE_POLL * 2).await;
        let waiting = tokio::spawn(ask(addr));
        tokio::time::sleep(PAUSE_POLL * 3).await;
        assert!(!waiting.is_finished(), "served while paused");
        paused.store(false, Ordering::Relaxed);
        assert!(waiting.await.expect("join").is_some());
        ctl.shutdown.cancel();
        tokio::time::timeout(Duration::from_secs(5), server)
            .await
            .expect("loops end at shutdown")
            .expect("join");
    }
}

//! A session's signals — shutdown, `KILL CONNECTION`, `pg_terminate_backend` — as one atomic
//! word and one waker per session.
//!
//! A session waits on its client, its server and its signals at once. Cancellation tokens made
//! every wait pay for the signals: a token's future takes the token's mutex and its `Notify`'s
//! waiter list each time it is polled, and a session polls its signals at every wait (to leave
//! its waker with them), twice per statement. A [`SessionSignal`] is polled with an atomic load
//! and, when nothing is raised, an [`AtomicWaker`] registration of the waker it already holds.
//! Raising a signal sets its bit and wakes the session's task. Shutdown reaches every session
//! because the frontend's session registry raises it on each (and on each session that enters
//! after it): see the frontends' `shut_down_all`.
//!
//! Because a raised signal is one atomic load away, a session looks at its signals before its
//! sockets at every wait: a client that never stops sending (a `COPY`, a pipeline) cannot keep
//! a KILL or a shutdown waiting, and the `select!` polls the signals after the sockets only to
//! leave its waker.

use atomic_waker::AtomicWaker;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU8, Ordering};
use std::task::{Context, Poll};

/// What a session can be told from outside its task.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Signal {
    /// End the session (`KILL CONNECTION`, `pg_terminate_backend`, the admin's `KILL`).
    End = 1,
    /// Sluice is shutting down: the session closes at its next idle point.
    Shutdown = 2,
}

/// The signals of one session: raised by anyone, awaited by the session's own task only (one
/// waker is kept: the last task to poll is the one woken).
#[derive(Debug, Default)]
pub struct SessionSignal {
    raised: AtomicU8,
    waker: AtomicWaker,
}

impl SessionSignal {
    /// Raises `signal` and wakes the session's task.
    pub fn raise(&self, signal: Signal) {
        self.raised.fetch_or(signal as u8, Ordering::AcqRel);
        self.waker.wake();
    }

    /// Whether `signal` was raised.
    pub fn is_raised(&self, signal: Signal) -> bool {
        self.raised.load(Ordering::Acquire) & signal as u8 != 0
    }

    /// Resolves once `signal` is raised (at once if it was). Cheap to make and drop: a session
    /// makes one per wait.
    pub fn raised(&self, signal: Signal) -> Raised<'_> {
        Raised { of: self, signal }
    }
}

/// The future of [`SessionSignal::raised`].
#[derive(Debug)]
#[must_use = "futures do nothing unless polled"]
pub struct Raised<'a> {
    of: &'a SessionSignal,
    signal: Signal,
}

impl Future for Raised<'_> {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if self.of.is_raised(self.signal) {
            return Poll::Ready(());
        }
        self.of.waker.register(cx.waker());
        // Raised between the load and the registration: its wake may have missed the waker.
        if self.of.is_raised(self.signal) {
            return Poll::Ready(());
        }
        Poll::Pending
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[tokio::test]
    async fn a_raised_signal_wakes_the_waiting_task_and_stays_raised() {
        let signal = Arc::new(SessionSignal::default());
        let waiting = {
            let signal = signal.clone();
            tokio::spawn(async move {
                signal.raised(Signal::End).await;
                signal.is_raised(Signal::Shutdown)
            })
        };
        tokio::task::yield_now().await;
        assert!(!waiting.is_finished());
        signal.raise(Signal::End);
        assert!(
            !waiting.await.expect("the waiting task"),
            "only End was raised"
        );
        assert!(signal.is_raised(Signal::End));
        // Raised before it is awaited: ready at once.
        signal.raised(Signal::End).await;
    }

    #[tokio::test]
    async fn a_signal_waits_only_for_its_own_kind() {
        let signal = SessionSignal::default();
        signal.raise(Signal::Shutdown);
        let end = signal.raised(Signal::End);
        let waited = tokio::time::timeout(std::time::Duration::from_millis(20), end).await;
        assert!(waited.is_err(), "End was not raised");
        signal.raised(Signal::Shutdown).await;
    }
}

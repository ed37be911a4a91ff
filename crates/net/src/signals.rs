//! A session's signals — shutdown, `KILL`, `pg_terminate_backend` — polled after its sockets.
//!
//! A session waits on its client, its server and its signals at once. Polled in a random order
//! (`tokio::select!`'s default), every wake-up for a message — nearly all of them — also polls
//! the signals: each a cancellation token's lock and its waiter list, ~700 instructions per
//! PostgreSQL statement, and `select!`'s random start besides. Polled after the sockets
//! (`biased`), a wake-up for a message polls none of them; the signals are still polled, and
//! their wakers kept, whenever the sockets have nothing. So that a client that never stops
//! sending (a `COPY`, a pipeline) cannot keep a signal waiting, every [`SIGNALS_FIRST_EVERY`]th
//! wait polls the signals first ([`SignalTurns`], [`fired`]).

use std::future::Future;
use std::pin::Pin;
use std::task::Poll;

/// Every how many waits a session polls its signals before its sockets.
pub const SIGNALS_FIRST_EVERY: u32 = 16;

/// Counts a session's waits and says which ones poll the signals first.
#[derive(Debug, Default)]
pub struct SignalTurns(u32);

impl SignalTurns {
    /// Counts one wait; true when this one polls the signals first.
    pub fn next_wait(&mut self) -> bool {
        self.0 = self.0.wrapping_add(1);
        self.0.is_multiple_of(SIGNALS_FIRST_EVERY)
    }

    /// The number of the current wait (counting from 1, wrapping): a wait that finds the
    /// number it noted earlier unchanged knows the session has not woken since.
    pub fn waits(&self) -> u32 {
        self.0
    }
}

/// Whether `signal` has fired, polled once with the task's waker: when it fires later, the task
/// is still woken (and polls it in its `select!`).
pub async fn fired<F: Future>(mut signal: Pin<&mut F>) -> bool {
    std::future::poll_fn(|cx| Poll::Ready(signal.as_mut().poll(cx).is_ready())).await
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio_util::sync::CancellationToken;

    #[test]
    fn one_wait_in_every_sixteen_polls_the_signals_first() {
        let mut turns = SignalTurns::default();
        let first: Vec<u32> = (1..=48).filter(|_| turns.next_wait()).collect();
        assert_eq!(first, [16, 32, 48]);
    }

    #[tokio::test]
    async fn fired_says_whether_the_signal_fired() {
        let token = CancellationToken::new();
        let signal = token.cancelled();
        tokio::pin!(signal);
        assert!(!fired(signal.as_mut()).await);
        token.cancel();
        assert!(fired(signal.as_mut()).await);
    }
}

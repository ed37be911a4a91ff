//! A listening session's notifications waiting for delivery: one FIFO per session (order kept
//! across channels, as PostgreSQL keeps it), bounded in count and bytes. A session that lets it
//! fill is ended — never a silent drop.

use bytes::Bytes;
use sluice_core::util::lock;
use std::collections::VecDeque;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::Instant;
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

/// Per-channel counters (`stats_pgsql_listen_channels`).
#[derive(Debug, Default)]
pub(crate) struct ChannelCounters {
    /// Notifications the listener connection received on the channel.
    pub(crate) received: AtomicU64,
    /// Notifications written to clients.
    pub(crate) delivered: AtomicU64,
    /// Notifications lost with sessions ended for not reading them.
    pub(crate) dropped: AtomicU64,
}

/// One notification waiting: the NotificationResponse frame, when it reached Sluice, and its
/// channel's counters.
pub(crate) struct Mail {
    pub(crate) frame: Bytes,
    pub(crate) arrived: Instant,
    pub(crate) counters: std::sync::Arc<ChannelCounters>,
    pub(crate) channel: std::sync::Arc<str>,
}

#[derive(Default)]
struct Queue {
    mail: VecDeque<Mail>,
    bytes: usize,
}

/// What overflowed, for the session's FATAL and log line.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Overflow {
    pub(crate) count: usize,
    pub(crate) bytes: usize,
}

/// A session's notification queue.
pub(crate) struct Mailbox {
    queue: Mutex<Queue>,
    /// New mail.
    wake: Notify,
    /// Cancelled when the queue overflowed; the session ends.
    overflowed: CancellationToken,
    overflow: Mutex<Option<Overflow>>,
    max_count: usize,
    max_bytes: usize,
}

impl Mailbox {
    /// An empty queue holding at most `max_count` notifications and `max_bytes` bytes.
    pub(crate) fn new(max_count: u64, max_bytes: u64) -> Mailbox {
        Mailbox {
            queue: Mutex::default(),
            wake: Notify::new(),
            overflowed: CancellationToken::new(),
            overflow: Mutex::new(None),
            max_count: usize::try_from(max_count).unwrap_or(usize::MAX),
            max_bytes: usize::try_from(max_bytes).unwrap_or(usize::MAX),
        }
    }

    /// Queues one notification; false when the queue is (or just became) full: the mail is
    /// dropped and the session will be ended.
    pub(crate) fn push(&self, mail: Mail) -> bool {
        if self.overflowed.is_cancelled() {
            mail.counters.dropped.fetch_add(1, Relaxed);
            return false;
        }
        let mut q = lock(&self.queue);
        if q.mail.len() >= self.max_count || q.bytes + mail.frame.len() > self.max_bytes {
            *lock(&self.overflow) = Some(Overflow {
                count: q.mail.len(),
                bytes: q.bytes,
            });
            mail.counters.dropped.fetch_add(1, Relaxed);
            drop(q);
            self.overflowed.cancel();
            return false;
        }
        q.bytes += mail.frame.len();
        q.mail.push_back(mail);
        drop(q);
        self.wake.notify_one();
        true
    }

    /// Everything waiting, oldest first.
    pub(crate) fn take(&self) -> VecDeque<Mail> {
        let mut q = lock(&self.queue);
        q.bytes = 0;
        std::mem::take(&mut q.mail)
    }

    /// Keeps only the mail `keep` says to (a transaction's LISTEN or UNLISTEN settled).
    pub(crate) fn retain(&self, mut keep: impl FnMut(&Mail) -> bool) {
        let mut q = lock(&self.queue);
        q.mail.retain(|m| keep(m));
        q.bytes = q.mail.iter().map(|m| m.frame.len()).sum();
    }

    /// Returns once mail is waiting.
    pub(crate) async fn ready(&self) {
        loop {
            let woken = self.wake.notified();
            tokio::pin!(woken);
            woken.as_mut().enable();
            if !lock(&self.queue).mail.is_empty() {
                return;
            }
            woken.await;
        }
    }

    /// Returns once the queue overflowed, with what it held.
    pub(crate) async fn overflowed(&self) -> Overflow {
        self.overflowed.cancelled().await;
        lock(&self.overflow).unwrap_or(Overflow { count: 0, bytes: 0 })
    }

    /// Mail lost when the session ends without delivering it (counted as dropped).
    pub(crate) fn drop_all(&self) -> usize {
        let lost = self.take();
        for m in &lost {
            m.counters.dropped.fetch_add(1, Relaxed);
        }
        lost.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mail(n: usize, c: &std::sync::Arc<ChannelCounters>) -> Mail {
        Mail {
            frame: Bytes::from(vec![b'A'; n]),
            arrived: Instant::now(),
            counters: c.clone(),
            channel: "c".into(),
        }
    }

    #[tokio::test]
    async fn keeps_order_and_overflows_on_count_or_bytes() {
        let c = std::sync::Arc::new(ChannelCounters::default());
        let b = Mailbox::new(2, 1_000);
        assert!(b.push(mail(10, &c)));
        assert!(b.push(mail(20, &c)));
        b.ready().await;
        let got: Vec<usize> = b.take().iter().map(|m| m.frame.len()).collect();
        assert_eq!(got, [10, 20]);
        assert!(b.push(mail(1, &c)) && b.push(mail(1, &c)));
        assert!(!b.push(mail(1, &c)));
        assert_eq!(b.overflowed().await.count, 2);
        assert!(!b.push(mail(1, &c)), "a full queue stays full");
        assert_eq!(c.dropped.load(Relaxed), 2);

        let by_bytes = Mailbox::new(100, 50);
        assert!(by_bytes.push(mail(40, &c)));
        assert!(!by_bytes.push(mail(20, &c)));
    }
}

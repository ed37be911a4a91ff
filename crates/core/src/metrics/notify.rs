//! LISTEN/NOTIFY fan-out counters (`sluice_pg_notifications_*`, `sluice_pg_listen_*`): what the
//! listener connections received, what reached clients, what was lost with a client that did
//! not keep up, and how long delivery took.

use super::{Counter, LatencyHistogram};
use std::sync::atomic::{AtomicI64, Ordering::Relaxed};

/// What the notification fan-out counts, across listener connections.
#[derive(Debug, Default)]
pub struct NotifyStats {
    /// Notifications the listener connections received from the server.
    pub received: Counter,
    /// Notifications written to clients.
    pub delivered: Counter,
    /// Notifications lost with a session that was ended for not reading them in time.
    pub dropped: Counter,
    /// Times a listener connection was opened again after it was lost or the writer changed.
    pub reconnects: Counter,
    /// Channels listened to now, across listener connections.
    channels: AtomicI64,
    /// Time from a notification's arrival at Sluice to its write to a client.
    pub delay: LatencyHistogram,
}

impl NotifyStats {
    /// `delta` channels were listened to (positive) or given up (negative).
    pub fn channels_changed(&self, delta: i64) {
        self.channels.fetch_add(delta, Relaxed);
    }

    /// Channels listened to now.
    pub fn channels(&self) -> i64 {
        self.channels.load(Relaxed)
    }
}

//! `pgsql-listen_*`: how LISTEN/NOTIFY works under transaction pooling. ProxySQL 3.0 refuses
//! LISTEN (`reject` here), a pinning pooler keeps a server connection per listening client
//! (`pin`); Sluice's default fans notifications out from one listener connection per writer
//! hostgroup and database (`fanout`).

use super::declared::{Int, OneOf, Text, Words, variables};
use super::values::VariableError;

/// What a client's `LISTEN` does (`pgsql-listen_mode`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ListenMode {
    /// Sluice subscribes the session on a shared listener connection; the session stays
    /// transaction pooled.
    #[default]
    Fanout,
    /// `LISTEN` runs on the session's server connection, which the session then keeps.
    Pin,
    /// `LISTEN` fails with SQLSTATE 0A000 (ProxySQL 3.0's behaviour).
    Reject,
}

impl Words for ListenMode {
    const WORDS: &'static [(&'static str, Self)] = &[
        ("fanout", ListenMode::Fanout),
        ("pin", ListenMode::Pin),
        ("reject", ListenMode::Reject),
    ];
    const EXPECTED: &'static str = "fanout, pin or reject";
}

variables! {
    /// `listen_mode`, `listen_queue_max`, `listen_queue_max_bytes`, `listen_ack_timeout_ms`,
    /// `listen_reset_channel`.
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub struct ListenVariables for _prefix {
        /// What a client's `LISTEN` does: `fanout` (one shared listener connection per writer
        /// hostgroup and database; the session stays transaction pooled), `pin` (on the
        /// session's own server connection, which it then keeps) or `reject` (SQLSTATE 0A000,
        /// ProxySQL 3.0's behaviour).
        mode: ListenMode = ListenMode::Fanout => "listen_mode", OneOf;
        /// Notifications a session may have waiting for delivery; one more ends the session
        /// (never a silent drop).
        queue_max: u64 = 10_000 => "listen_queue_max", Int(1, 10_000_000);
        /// Payload bytes a session may have waiting for delivery, likewise.
        queue_max_bytes: u64 = 8 << 20 => "listen_queue_max_bytes", Int(8_192, 1 << 34);
        /// How long a `LISTEN` on a new channel waits for the listener connection's own `LISTEN`
        /// to complete before it fails (ms).
        ack_timeout_ms: u64 = 2_000 => "listen_ack_timeout_ms", Int(1, 600_000);
        /// When not empty: after the listener connection was lost (or the writer changed) and
        /// every channel was listened to again, each listening session gets a notification on
        /// this channel, its payload the reason, so it can resynchronise what it may have missed.
        reset_channel: String = String::new() => "listen_reset_channel", Text;
    }
}

impl Default for ListenVariables {
    fn default() -> Self {
        ListenVariables::defaults_for("")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn set_and_list_round_trip() {
        let mut l = ListenVariables::default();
        let mut set = |k: &str, v: &str| l.set_variable("pgsql", k, v).expect("one of ours");
        assert!(set("listen_mode", "PIN").is_ok());
        assert!(set("listen_queue_max", "5").is_ok());
        assert!(set("listen_reset_channel", "sluice_reset").is_ok());
        assert!(set("listen_mode", "sometimes").is_err());
        assert!(set("listen_queue_max", "0").is_err());
        assert!(set("listen_queue_max_bytes", "100").is_err());
        assert_eq!(l.mode, ListenMode::Pin);
        assert_eq!(l.queue_max, 5);
        let mut again = ListenVariables::default();
        for (k, v) in l.variable_pairs("pgsql") {
            again
                .set_variable("pgsql", &k, &v)
                .expect("ours")
                .expect("valid");
        }
        assert_eq!(again, l);
        assert!(l.set_variable("pgsql", "threads", "4").is_none());
    }
}

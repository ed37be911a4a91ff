//! `pgsql-listen_*`: how LISTEN/NOTIFY works under transaction pooling. ProxySQL 3.0 refuses
//! LISTEN (`reject` here), a pinning pooler keeps a server connection per listening client
//! (`pin`); Sluice's default fans notifications out from one listener connection per writer
//! hostgroup and database (`fanout`).

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

impl ListenMode {
    /// Parses `fanout|pin|reject` (any case).
    pub fn parse(v: &str) -> Option<ListenMode> {
        Some(match v.trim().to_ascii_lowercase().as_str() {
            "fanout" => ListenMode::Fanout,
            "pin" => ListenMode::Pin,
            "reject" => ListenMode::Reject,
            _ => return None,
        })
    }

    /// The variable's value.
    pub fn as_str(self) -> &'static str {
        match self {
            ListenMode::Fanout => "fanout",
            ListenMode::Pin => "pin",
            ListenMode::Reject => "reject",
        }
    }
}

/// `listen_mode`, `listen_queue_max`, `listen_queue_max_bytes`, `listen_ack_timeout_ms`,
/// `listen_reset_channel`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListenVariables {
    /// What `LISTEN` does.
    pub mode: ListenMode,
    /// Notifications a session may have waiting for delivery; one more ends the session
    /// (never a silent drop).
    pub queue_max: u64,
    /// Payload bytes a session may have waiting for delivery, likewise.
    pub queue_max_bytes: u64,
    /// How long a `LISTEN` on a new channel waits for the listener connection's own `LISTEN`
    /// to complete before it fails.
    pub ack_timeout_ms: u64,
    /// When not empty: after the listener connection was lost (or the writer changed) and
    /// every channel was listened to again, each listening session gets a notification on
    /// this channel, its payload the reason, so it can resynchronise what it may have missed.
    pub reset_channel: String,
}

impl Default for ListenVariables {
    fn default() -> Self {
        ListenVariables {
            mode: ListenMode::Fanout,
            queue_max: 10_000,
            queue_max_bytes: 8 << 20,
            ack_timeout_ms: 2_000,
            reset_channel: String::new(),
        }
    }
}

impl ListenVariables {
    /// Sets `name` if it is one of these; `None` when it is not.
    pub fn set(&mut self, prefix: &str, name: &str, v: &str) -> Option<Result<(), VariableError>> {
        let int = |min, max| super::values::parse_var_int(prefix, name, v, min, max);
        let r = match name {
            "listen_mode" => ListenMode::parse(v)
                .map(|m| self.mode = m)
                .ok_or_else(|| VariableError::malformed(prefix, name, v, "fanout, pin or reject")),
            "listen_queue_max" => int(1, 10_000_000).map(|n| self.queue_max = n),
            "listen_queue_max_bytes" => int(8_192, 1 << 34).map(|n| self.queue_max_bytes = n),
            "listen_ack_timeout_ms" => int(1, 600_000).map(|n| self.ack_timeout_ms = n),
            "listen_reset_channel" => {
                self.reset_channel = v.to_string();
                Ok(())
            }
            _ => return None,
        };
        Some(r)
    }

    /// Every variable as (name, value).
    pub fn pairs(&self) -> Vec<(String, String)> {
        vec![
            ("listen_mode".into(), self.mode.as_str().into()),
            ("listen_queue_max".into(), self.queue_max.to_string()),
            (
                "listen_queue_max_bytes".into(),
                self.queue_max_bytes.to_string(),
            ),
            (
                "listen_ack_timeout_ms".into(),
                self.ack_timeout_ms.to_string(),
            ),
            ("listen_reset_channel".into(), self.reset_channel.clone()),
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn set_and_list_round_trip() {
        let mut l = ListenVariables::default();
        let mut set = |k: &str, v: &str| l.set("pgsql", k, v).expect("one of ours");
        assert!(set("listen_mode", "PIN").is_ok());
        assert!(set("listen_queue_max", "5").is_ok());
        assert!(set("listen_reset_channel", "sluice_reset").is_ok());
        assert!(set("listen_mode", "sometimes").is_err());
        assert!(set("listen_queue_max", "0").is_err());
        assert!(set("listen_queue_max_bytes", "100").is_err());
        assert_eq!(l.mode, ListenMode::Pin);
        assert_eq!(l.queue_max, 5);
        let mut again = ListenVariables::default();
        for (k, v) in l.pairs() {
            again.set("pgsql", &k, &v).expect("ours").expect("valid");
        }
        assert_eq!(again, l);
        assert!(l.set("pgsql", "threads", "4").is_none());
    }
}

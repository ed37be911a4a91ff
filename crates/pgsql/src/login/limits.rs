//! Client connection caps on the PostgreSQL port: `pgsql-max_connections` for everyone and each
//! user's `max_connections`, refused with PostgreSQL's own SQLSTATE 53300 messages.

use sluice_core::util::lock;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

/// Logged-in clients, in total and per user.
#[derive(Debug, Default)]
pub(crate) struct ClientCounts {
    inner: Mutex<(u32, HashMap<String, u32>)>,
}

/// One admitted client; dropping it frees the slot.
#[derive(Debug)]
pub(crate) struct ClientSlot {
    counts: Arc<ClientCounts>,
    user: String,
}

/// Why a login is refused by the client caps (SQLSTATE 53300, PostgreSQL's words).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum TooManyClients {
    /// `pgsql-max_connections` is reached.
    #[error("sorry, too many clients already")]
    InTotal,
    /// The user's `max_connections` is reached.
    #[error("too many connections for role \"{0}\"")]
    ForRole(String),
}

impl ClientCounts {
    /// Admits `user` unless a cap is reached; the error is the message the client gets.
    pub(crate) fn admit(
        self: &Arc<Self>,
        user: &str,
        user_max: u32,
        global_max: u32,
    ) -> Result<ClientSlot, TooManyClients> {
        let mut g = lock(&self.inner);
        if g.0 >= global_max {
            return Err(TooManyClients::InTotal);
        }
        let mine = g.1.get(user).copied().unwrap_or(0);
        if mine >= user_max {
            return Err(TooManyClients::ForRole(user.to_string()));
        }
        g.0 += 1;
        g.1.insert(user.to_string(), mine + 1);
        Ok(ClientSlot {
            counts: self.clone(),
            user: user.to_string(),
        })
    }
}

impl Drop for ClientSlot {
    fn drop(&mut self) {
        let mut g = lock(&self.counts.inner);
        g.0 = g.0.saturating_sub(1);
        if let Some(n) = g.1.get_mut(&self.user) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                g.1.remove(&self.user);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn caps_per_user_and_in_total() {
        let c = Arc::new(ClientCounts::default());
        let a1 = c.admit("a", 2, 3).expect("first");
        let _a2 = c.admit("a", 2, 3).expect("second");
        assert_eq!(
            c.admit("a", 2, 3).err().map(|e| e.to_string()).as_deref(),
            Some("too many connections for role \"a\"")
        );
        let _b = c.admit("b", 5, 3).expect("b");
        assert_eq!(c.admit("b", 5, 3).err(), Some(TooManyClients::InTotal));
        drop(a1);
        assert!(c.admit("b", 5, 3).is_ok());
    }
}

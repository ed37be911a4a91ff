//! Logged-in PostgreSQL sessions for `stats_pgsql_processlist`: who, from where, on which
//! database, and why the session holds its server connection (`None` = transaction pooled).

use sluice_core::util::lock;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};

/// One session as the processlist shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PgSessionInfo {
    /// Sluice's id for the session (`stats_pgsql_processlist.SessionID`).
    pub id: u32,
    /// The role the client logged in as.
    pub user: String,
    /// The database the client connected to.
    pub database: String,
    /// The client's `ip:port`.
    pub client: String,
    /// The user's default hostgroup.
    pub hostgroup: u32,
    /// Why the session keeps its server connection.
    pub pin_reason: Option<&'static str>,
    /// Since when it has kept it (for any reason, without a break).
    pub pinned_since: Option<std::time::Instant>,
    /// The workload class whose queue the session waits in, and since when.
    pub waiting: Option<(String, std::time::Instant)>,
    /// The session thread (`pgsql-threads`) it runs on; `None` off the session threads.
    pub thread: Option<usize>,
    /// The channels it listens to through the listener connection (no pin).
    pub listening: Vec<String>,
}

/// The sessions of the PostgreSQL frontend.
#[derive(Debug, Default)]
pub struct PgSessions {
    next: AtomicU32,
    map: Mutex<HashMap<u32, PgSessionInfo>>,
}

/// A session's entry; dropping it removes the entry.
#[derive(Debug)]
pub struct PgSessionEntry {
    sessions: Arc<PgSessions>,
    /// The session id.
    pub id: u32,
}

impl PgSessions {
    /// Registers a session (its `id` is assigned here).
    pub fn enter(self: &Arc<Self>, mut info: PgSessionInfo) -> PgSessionEntry {
        let id = self.next.fetch_add(1, Ordering::Relaxed) + 1;
        info.id = id;
        lock(&self.map).insert(id, info);
        PgSessionEntry {
            sessions: self.clone(),
            id,
        }
    }

    /// How many sessions are logged in.
    pub fn len(&self) -> usize {
        lock(&self.map).len()
    }

    /// True when no session is logged in.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Every session, by id.
    pub fn list(&self) -> Vec<PgSessionInfo> {
        let mut v: Vec<PgSessionInfo> = lock(&self.map).values().cloned().collect();
        v.sort_by_key(|s| s.id);
        v
    }
}

impl PgSessionEntry {
    /// Publishes why the session holds its server connection.
    pub fn set_pin(&self, reason: Option<&'static str>) {
        if let Some(s) = lock(&self.sessions.map).get_mut(&self.id) {
            s.pin_reason = reason;
            s.pinned_since = sluice_core::live::pinned_since(s.pinned_since, reason.is_some());
        }
    }

    /// Shows the channels the session listens to.
    pub fn set_listening(&self, channels: Vec<String>) {
        if let Some(s) = lock(&self.sessions.map).get_mut(&self.id) {
            s.listening = channels;
        }
    }

    /// Shows (or clears) the workload class whose queue the session waits in.
    pub fn set_waiting(&self, class: Option<&str>) {
        if let Some(s) = lock(&self.sessions.map).get_mut(&self.id) {
            s.waiting = class.map(|c| (c.to_string(), std::time::Instant::now()));
        }
    }
}

impl Drop for PgSessionEntry {
    fn drop(&mut self) {
        lock(&self.sessions.map).remove(&self.id);
    }
}

/// The servers' errors as the PostgreSQL data path saw them (statements and bytes per server
/// are the pool's: `PgPool::traffic`).
#[derive(Debug, Default)]
pub struct ServerStats {
    /// `stats_pgsql_errors`, keyed like MySQL's (the SQLSTATE in place of errno).
    pub errors: sluice_core::query::commands::CommandCounters,
}

impl ServerStats {
    /// An ErrorResponse a server sent to a client.
    pub fn error(
        &self,
        (hostgroup, server, user, database): (i64, &str, &str, &str),
        client: &str,
        sqlstate: &str,
        message: &str,
    ) {
        let (host, port) = server.rsplit_once(':').unwrap_or((server, "0"));
        self.errors.record_error(
            (
                u32::try_from(hostgroup).unwrap_or(0),
                host.to_string(),
                port.parse().unwrap_or(0),
                user.to_string(),
                client.to_string(),
                database.to_string(),
            ),
            sqlstate,
            message,
        );
    }
}

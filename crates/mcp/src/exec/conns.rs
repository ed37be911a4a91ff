//! The MCP endpoint's own backend connections: opened without multi-statements, never shared
//! with client sessions, kept idle per (server, login, database) up to a bound, and dropped
//! whenever a call left them in doubt (a cut result, a timeout, an error mid-reply).

use crate::stats::McpStats;
use sluice_mysql_backend::BackendConn;
use sluice_pgsql_backend::PgConn;
use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};

/// Idle connections kept per key.
const MAX_IDLE_PER_KEY: usize = 8;

/// What an idle connection is for.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ConnKey {
    /// `host:port`.
    pub server: String,
    /// The login.
    pub user: String,
    /// The database it was opened on (PostgreSQL; MySQL selects per call).
    pub database: String,
    /// Opened over TLS.
    pub tls: bool,
}

/// A connection that can wait idle.
trait Reusable {
    /// The server closed it (or sent something unasked) while it waited.
    fn looks_dead(&self) -> bool;
}

impl Reusable for BackendConn {
    fn looks_dead(&self) -> bool {
        BackendConn::looks_dead(self)
    }
}

impl Reusable for PgConn {
    fn looks_dead(&self) -> bool {
        PgConn::looks_dead(self)
    }
}

/// One protocol's idle connections.
struct Idle<C>(Mutex<HashMap<ConnKey, Vec<C>>>);

impl<C: Reusable> Idle<C> {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<ConnKey, Vec<C>>> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn take(&self, key: &ConnKey, stats: &McpStats) -> Option<C> {
        let mut map = self.lock();
        let list = map.get_mut(key)?;
        while let Some(c) = list.pop() {
            stats.backend_idle.fetch_sub(1, Ordering::Relaxed);
            if !c.looks_dead() {
                return Some(c);
            }
        }
        None
    }

    fn put(&self, key: ConnKey, conn: C, stats: &McpStats) {
        let mut map = self.lock();
        let list = map.entry(key).or_default();
        if list.len() < MAX_IDLE_PER_KEY {
            list.push(conn);
            stats.backend_idle.fetch_add(1, Ordering::Relaxed);
        }
    }
}

/// Idle MCP connections of both protocols, counted in the MCP stats.
pub struct Conns {
    mysql: Idle<BackendConn>,
    pgsql: Idle<PgConn>,
    stats: Arc<McpStats>,
}

impl Conns {
    /// No connections yet; `stats` counts them.
    pub fn new(stats: Arc<McpStats>) -> Conns {
        Conns {
            mysql: Idle(Mutex::default()),
            pgsql: Idle(Mutex::default()),
            stats,
        }
    }

    /// An idle MySQL connection for `key` that still looks alive.
    pub fn take_mysql(&self, key: &ConnKey) -> Option<BackendConn> {
        self.mysql.take(key, &self.stats)
    }

    /// Keeps a MySQL connection that ended a call cleanly.
    pub fn put_mysql(&self, key: ConnKey, conn: BackendConn) {
        self.mysql.put(key, conn, &self.stats);
    }

    /// An idle PostgreSQL connection for `key` that still looks alive.
    pub fn take_pgsql(&self, key: &ConnKey) -> Option<PgConn> {
        self.pgsql.take(key, &self.stats)
    }

    /// Keeps a PostgreSQL connection that ended a call cleanly.
    pub fn put_pgsql(&self, key: ConnKey, conn: PgConn) {
        self.pgsql.put(key, conn, &self.stats);
    }

    /// Counts a connection opened.
    pub fn note_opened(&self) {
        self.stats.backend_opened.fetch_add(1, Ordering::Relaxed);
    }

    /// Counts a connection dropped in doubt.
    pub fn note_discarded(&self) {
        self.stats.backend_discarded.fetch_add(1, Ordering::Relaxed);
    }
}

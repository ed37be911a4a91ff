//! Live client sessions: counts per user and in total, checked against `max_connections`, and
//! what `KILL [QUERY|CONNECTION] id` needs to reach a session by the id its client was given.

use sluice_core::util::lock;
use sluice_net::{SessionSignal, Signal};
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Mutex};

/// Counts of connected clients.
#[derive(Debug, Default)]
pub struct SessionRegistry {
    total: AtomicU32,
    per_user: Mutex<HashMap<String, u32>>,
    next_id: AtomicU32,
    processes: Mutex<HashMap<u32, ProcessInfo>>,
    kills: Mutex<HashMap<u32, KillTarget>>,
    /// Set by [`SessionRegistry::shut_down_all`]: sessions entering after it are told at once.
    shutting_down: AtomicBool,
}

/// What another session needs to stop this one.
#[derive(Debug, Clone)]
pub(crate) struct KillTarget {
    /// Raised to end the session (`KILL CONNECTION`, the admin's `KILL CONNECTION`) and at
    /// shutdown.
    pub(crate) signal: Arc<SessionSignal>,
    /// The statement running now on a backend connection, if any. A killer holds the lock while
    /// its `KILL QUERY` reaches the server, and the session takes it before its backend
    /// connection may go back to the pool: the kill can never hit another client's statement.
    pub(crate) running: Arc<tokio::sync::Mutex<Option<RunningOn>>>,
}

/// Where a session's statement is running: the backend connection's server and thread id.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct RunningOn {
    /// Hostgroup of the connection.
    pub(crate) hostgroup: u32,
    /// The server.
    pub(crate) server: sluice_core::runtime::ServerKey,
    /// The backend connection's thread id on that server.
    pub(crate) thread_id: u32,
    /// True while a statement runs there. The place is kept between statements (only marked
    /// idle), so a session that keeps its connection publishes without copying the server.
    pub(crate) active: bool,
}

/// One row of the processlist: who is connected and whether the session is multiplexed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProcessInfo {
    /// Session id (the client's thread id).
    pub id: u32,
    /// User (empty before login).
    pub user: String,
    /// The client's `ip:port`.
    pub client: String,
    /// The schema the session has selected now.
    pub schema: String,
    /// Why the session holds its backend connection; `None` = multiplexed.
    pub pin_reason: Option<&'static str>,
    /// Since when it has held it (for any reason, without a break).
    pub pinned_since: Option<std::time::Instant>,
    /// The workload class whose queue the session waits in, and since when.
    pub waiting: Option<(String, std::time::Instant)>,
    /// The session thread (`mysql-threads`) it runs on; `None` off the session threads.
    pub thread: Option<usize>,
}

/// Holds one client's place; dropping it frees the place.
#[derive(Debug)]
pub struct SessionSlot {
    registry: Arc<SessionRegistry>,
    user: Option<String>,
    id: u32,
    target: KillTarget,
}

impl SessionRegistry {
    /// A new, empty registry.
    pub fn new() -> Arc<Self> {
        Arc::new(SessionRegistry {
            next_id: AtomicU32::new(1),
            ..Default::default()
        })
    }

    /// A fresh connection id (shown to clients as their thread id).
    pub fn next_id(&self) -> u32 {
        self.next_id.fetch_add(1, Ordering::Relaxed)
    }

    /// Clients connected now, logged in or still in the handshake.
    pub fn total(&self) -> u32 {
        self.total.load(Ordering::Relaxed)
    }

    /// Takes a place in the global count, unless `global_max` is reached.
    pub fn enter(self: &Arc<Self>, global_max: u32, id: u32, client: &str) -> Option<SessionSlot> {
        let prev = self.total.fetch_add(1, Ordering::AcqRel);
        if prev >= global_max {
            self.total.fetch_sub(1, Ordering::AcqRel);
            return None;
        }
        let info = ProcessInfo {
            id,
            user: String::new(),
            client: client.to_string(),
            schema: String::new(),
            pin_reason: None,
            pinned_since: None,
            waiting: None,
            thread: None,
        };
        lock(&self.processes).insert(id, info);
        let target = KillTarget {
            signal: Arc::default(),
            running: Arc::default(),
        };
        lock(&self.kills).insert(id, target.clone());
        // After the insert: a shutdown either saw this session or is seen here.
        if self.shutting_down.load(Ordering::Acquire) {
            target.signal.raise(Signal::Shutdown);
        }
        Some(SessionSlot {
            registry: self.clone(),
            user: None,
            id,
            target,
        })
    }

    /// Asks session `id` to close (admin `KILL CONNECTION`); false when there is no such session.
    pub fn kill(&self, id: u32) -> bool {
        match lock(&self.kills).get(&id) {
            Some(t) => {
                t.signal.raise(Signal::End);
                true
            }
            None => false,
        }
    }

    /// Tells every session, and each that enters from now on, that Sluice is shutting down:
    /// each closes at its next idle point.
    pub fn shut_down_all(&self) {
        self.shutting_down.store(true, Ordering::Release);
        for t in lock(&self.kills).values() {
            t.signal.raise(Signal::Shutdown);
        }
    }

    /// Session `id`'s user and kill target, for a client's `KILL`; `None` when there is no such
    /// session.
    pub(crate) fn target(&self, id: u32) -> Option<(String, KillTarget)> {
        let target = lock(&self.kills).get(&id)?.clone();
        let user = lock(&self.processes).get(&id)?.user.clone();
        Some((user, target))
    }

    /// The processlist, ordered by session id.
    pub fn processlist(&self) -> Vec<ProcessInfo> {
        let mut v: Vec<ProcessInfo> = lock(&self.processes).values().cloned().collect();
        v.sort_by_key(|p| p.id);
        v
    }
}

impl SessionSlot {
    /// This session's signals: [`Signal::End`] when the admin or a client's `KILL CONNECTION`
    /// kills it, [`Signal::Shutdown`] when Sluice shuts down.
    pub fn signal(&self) -> &Arc<SessionSignal> {
        &self.target.signal
    }

    /// Where this session publishes the statement it is running (see [`KillTarget::running`]).
    pub(crate) fn running(&self) -> &Arc<tokio::sync::Mutex<Option<RunningOn>>> {
        &self.target.running
    }

    /// Publishes the session thread the session runs on to the processlist.
    pub fn set_thread(&self, thread: Option<usize>) {
        if let Some(p) = lock(&self.registry.processes).get_mut(&self.id) {
            p.thread = thread;
        }
    }

    /// Shows (or clears) the workload class whose queue the session waits in.
    pub fn set_waiting(&self, class: Option<&str>) {
        if let Some(p) = lock(&self.registry.processes).get_mut(&self.id) {
            p.waiting = class.map(|c| (c.to_string(), std::time::Instant::now()));
        }
    }

    /// Publishes the session's user, schema and pin reason to the processlist.
    pub fn update(&self, user: &str, schema: &str, pin_reason: Option<&'static str>) {
        if let Some(p) = lock(&self.registry.processes).get_mut(&self.id) {
            p.user = user.to_string();
            p.schema = schema.to_string();
            p.pin_reason = pin_reason;
            p.pinned_since = sluice_core::live::pinned_since(p.pinned_since, pin_reason.is_some());
        }
    }

    /// Counts the session against `user`, unless the user already has `user_max` sessions.
    /// Re-assigning (COM_CHANGE_USER) moves the count.
    pub fn assign_user(&mut self, user: &str, user_max: u32) -> bool {
        let mut map = lock(&self.registry.per_user);
        let n = map.get(user).copied().unwrap_or(0);
        if n >= user_max {
            return false;
        }
        map.insert(user.to_string(), n + 1);
        if let Some(old) = self.user.replace(user.to_string())
            && let Some(c) = map.get_mut(&old)
        {
            *c = c.saturating_sub(1);
        }
        true
    }
}

impl Drop for SessionSlot {
    fn drop(&mut self) {
        self.registry.total.fetch_sub(1, Ordering::AcqRel);
        lock(&self.registry.processes).remove(&self.id);
        lock(&self.registry.kills).remove(&self.id);
        if let Some(u) = self.user.take() {
            let mut map = lock(&self.registry.per_user);
            if let Some(c) = map.get_mut(&u) {
                *c = c.saturating_sub(1);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limits_and_release() {
        let r = SessionRegistry::new();
        let mut a = r.enter(2, 1, "c1").expect("first");
        let mut b = r.enter(2, 2, "c2").expect("second");
        assert!(r.enter(2, 3, "c3").is_none(), "global cap");
        b.update("u", "app", Some("transaction"));
        assert_eq!(r.processlist()[1].pin_reason, Some("transaction"));
        assert_eq!(r.processlist().len(), 2);
        assert!(a.assign_user("u", 1));
        assert!(!b.assign_user("u", 1), "per-user cap");
        drop(a);
        assert!(b.assign_user("u", 1), "freed by drop");
        assert_eq!(r.total(), 1);
        assert_eq!(r.processlist().len(), 1);
    }

    #[test]
    fn kill_and_shutdown_reach_the_sessions_they_name() {
        let r = SessionRegistry::new();
        let a = r.enter(10, 1, "c1").expect("a");
        let b = r.enter(10, 2, "c2").expect("b");
        assert!(r.kill(2));
        assert!(!r.kill(9), "no such session");
        assert!(!a.signal().is_raised(Signal::End));
        assert!(b.signal().is_raised(Signal::End));
        r.shut_down_all();
        let late = r.enter(10, 3, "c3").expect("entering after the shutdown");
        for s in [&a, &b, &late] {
            assert!(s.signal().is_raised(Signal::Shutdown));
        }
        assert!(!late.signal().is_raised(Signal::End));
    }
}

//! Sluice pids: every logged-in PostgreSQL session by the pid Sluice gave its client in
//! BackendKeyData, so that it can be reached from outside — a CancelRequest (pid and secret),
//! `pg_cancel_backend(pid)` / `pg_terminate_backend(pid)` from another session of the same user
//! — and the pid a NotificationResponse names (the notifying session's Sluice pid, so
//! `Notify.pid` matches the other client's `backend_pid`). The port keeps one registry; what a
//! session's statements signal is `session/signals.rs`.

use sluice_core::util::lock;
use sluice_net::{SessionSignal, Signal};
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use tracing::info;

/// The server connection a statement runs on, as a CancelRequest to the server names it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct BackendKey {
    /// The server's address (`host:port`).
    pub(crate) server: Arc<str>,
    /// The server process's pid (its BackendKeyData).
    pub(crate) pid: u32,
    /// The server's cancel secret.
    pub(crate) secret: u32,
}

/// Where a cancel request for a session must go: the connection running its statement, if any.
pub(crate) type CancelTarget = Arc<Mutex<Option<BackendKey>>>;

/// Sluice pids lie in `PID_BASE..2 * PID_BASE` (2^30..2^31).
const PID_BASE: u32 = 1 << 30;

/// Bound on remembered (server connection → session) pairs for notifications; past it the
/// memory is dropped and rebuilt as connections change hands.
const MAX_OWNERS: usize = 65_536;

/// One logged-in session, as others reach it.
#[derive(Debug, Clone)]
struct Entry {
    secret: u32,
    user: Arc<str>,
    handle: SessionHandle,
}

/// What a session shares with whoever may signal it.
#[derive(Debug, Clone, Default)]
pub(crate) struct SessionHandle {
    /// The server connection running its statement now (for cancels).
    pub(crate) target: CancelTarget,
    /// [`Signal::End`] by `pg_terminate_backend` (the session ends), [`Signal::Shutdown`] when
    /// Sluice shuts down.
    pub(crate) signal: Arc<SessionSignal>,
}

/// Every logged-in PostgreSQL session by its Sluice pid, and which session each server
/// connection serves.
#[derive(Debug, Default)]
pub(crate) struct SessionSignals {
    by_pid: Mutex<HashMap<u32, Entry>>,
    owners: Mutex<HashMap<(Arc<str>, u32), u32>>,
    /// Set by [`SessionSignals::shut_down_all`]: sessions registered after it are told at once.
    shutting_down: AtomicBool,
}

impl SessionSignals {
    /// Registers a session of `user`: its (pid, secret) for BackendKeyData, unique among the
    /// live sessions, and its handle.
    pub(crate) fn register(&self, user: &str) -> (u32, u32, SessionHandle) {
        let mut map = lock(&self.by_pid);
        loop {
            let key = sluice_core::hostgroup::random_u64();
            // A positive Int32 as the protocol has it, and above any Linux pid (pid_max is at
            // most 2^22), so a Sluice pid is never mistaken for a server's.
            let pid = PID_BASE | ((key >> 32) as u32 & (PID_BASE - 1));
            let secret = key as u32;
            if map.contains_key(&pid) {
                continue;
            }
            let handle = SessionHandle::default();
            map.insert(
                pid,
                Entry {
                    secret,
                    user: Arc::from(user),
                    handle: handle.clone(),
                },
            );
            // Under the map's lock: a shutdown either saw this session or is seen here.
            if self.shutting_down.load(Ordering::Acquire) {
                handle.signal.raise(Signal::Shutdown);
            }
            return (pid, secret, handle);
        }
    }

    /// Tells every session, and each registered from now on, that Sluice is shutting down:
    /// each closes at its next idle point.
    pub(crate) fn shut_down_all(&self) {
        let map = lock(&self.by_pid);
        self.shutting_down.store(true, Ordering::Release);
        for e in map.values() {
            e.handle.signal.raise(Signal::Shutdown);
        }
    }

    /// Forgets a session that ended.
    pub(crate) fn remove(&self, pid: u32) {
        lock(&self.by_pid).remove(&pid);
    }

    /// The server statement a CancelRequest with (pid, secret) must cancel, if any.
    pub(crate) fn cancel_target(&self, pid: u32, secret: u32) -> Option<BackendKey> {
        let target = {
            let map = lock(&self.by_pid);
            let e = map.get(&pid).filter(|e| e.secret == secret)?;
            e.handle.target.clone()
        };
        lock(&target).clone()
    }

    /// Session `pid`'s user and handle.
    pub(crate) fn session(&self, pid: u32) -> Option<(Arc<str>, SessionHandle)> {
        let map = lock(&self.by_pid);
        map.get(&pid).map(|e| (e.user.clone(), e.handle.clone()))
    }

    /// Notes that the server connection (`server`, server pid) now serves session `pid`.
    pub(crate) fn note_owner(&self, server: &Arc<str>, server_pid: u32, pid: u32) {
        let mut owners = lock(&self.owners);
        if owners.len() >= MAX_OWNERS {
            owners.clear();
        }
        owners.insert((server.clone(), server_pid), pid);
    }

    /// The Sluice pid of the session the server connection (`server`, server pid) serves.
    pub(crate) fn owner_of(&self, server: &Arc<str>, server_pid: u32) -> Option<u32> {
        lock(&self.owners)
            .get(&(server.clone(), server_pid))
            .copied()
    }
}

/// Replaces the server pid in the NotificationResponse at the start of `frame` with the Sluice
/// pid of the session the notifying server connection serves (left as is when unknown).
pub(crate) fn rewrite_notify_pid(signals: &SessionSignals, server: &Arc<str>, frame: &mut [u8]) {
    let Some(pid) = frame.get(5..9) else { return };
    let server_pid = u32::from_be_bytes([pid[0], pid[1], pid[2], pid[3]]);
    if let Some(ours) = signals.owner_of(server, server_pid) {
        frame[5..9].copy_from_slice(&ours.to_be_bytes());
    }
}

/// Records which server connection runs the session's statements now (for cancels).
pub(crate) fn set_target(t: &CancelTarget, v: Option<BackendKey>) {
    *lock(t) = v;
}

/// Forwards a client's CancelRequest to the server running its query (no-op otherwise).
pub(crate) async fn forward_cancel(signals: &SessionSignals, pid: u32, secret: u32) {
    let Some(k) = signals.cancel_target(pid, secret) else {
        return;
    };
    if sluice_pgsql_backend::send_cancel(&k.server, k.pid, k.secret).await {
        info!(server = %k.server, "forwarded a client's cancel request");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sessions_are_found_by_pid_and_secret() {
        let s = SessionSignals::default();
        let (pid, secret, handle) = s.register("app");
        let (pid2, _, _) = s.register("app");
        assert_ne!(pid, pid2);
        for p in [pid, pid2] {
            assert!(
                (PID_BASE..2 * PID_BASE).contains(&p),
                "{p}: positive, not a Linux pid"
            );
        }
        assert_eq!(s.cancel_target(pid, secret), None, "nothing running");
        let key = BackendKey {
            server: Arc::from("h:1"),
            pid: 5,
            secret: 6,
        };
        *lock(&handle.target) = Some(key.clone());
        assert_eq!(s.cancel_target(pid, secret), Some(key));
        assert_eq!(s.cancel_target(pid, secret ^ 1), None, "wrong secret");
        let server: Arc<str> = Arc::from("h:1");
        s.note_owner(&server, 5, pid);
        assert_eq!(s.owner_of(&server, 5), Some(pid));
        s.remove(pid);
        assert_eq!(s.cancel_target(pid, secret), None);
    }

    #[test]
    fn shutdown_reaches_every_session_and_those_registered_after() {
        let s = SessionSignals::default();
        let (_, _, before) = s.register("app");
        assert!(!before.signal.is_raised(Signal::Shutdown));
        s.shut_down_all();
        let (_, _, after) = s.register("app");
        for h in [&before, &after] {
            assert!(h.signal.is_raised(Signal::Shutdown));
            assert!(!h.signal.is_raised(Signal::End), "not terminated");
        }
    }
}

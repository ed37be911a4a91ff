//! Reaching a PostgreSQL session from outside by the pid Sluice gave its client in
//! BackendKeyData: a CancelRequest (pid and secret), `pg_cancel_backend(pid)` /
//! `pg_terminate_backend(pid)` from another session of the same user, and the pid a
//! NotificationResponse names (the notifying session's Sluice pid, so `Notify.pid` matches the
//! other client's `backend_pid`).

use sluice_core::util::lock;
use sluice_pgsql_proto::frame::{error_response, message, ready};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use tokio_util::sync::CancellationToken;

/// Where a cancel request for a session must go: (server address, server pid, server secret)
/// of the connection running its statement, if any.
pub type CancelTarget = Arc<Mutex<Option<(Arc<str>, u32, u32)>>>;

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
    /// Cancelled by `pg_terminate_backend`: the session ends.
    pub(crate) terminate: CancellationToken,
}

/// Every logged-in PostgreSQL session by its Sluice pid, and which session each server
/// connection serves.
#[derive(Debug, Default)]
pub struct SessionSignals {
    by_pid: Mutex<HashMap<u32, Entry>>,
    owners: Mutex<HashMap<(Arc<str>, u32), u32>>,
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
            return (pid, secret, handle);
        }
    }

    /// Forgets a session that ended.
    pub(crate) fn remove(&self, pid: u32) {
        lock(&self.by_pid).remove(&pid);
    }

    /// The server statement a CancelRequest with (pid, secret) must cancel, if any.
    pub(crate) fn cancel_target(&self, pid: u32, secret: u32) -> Option<(Arc<str>, u32, u32)> {
        let target = {
            let map = lock(&self.by_pid);
            let e = map.get(&pid).filter(|e| e.secret == secret)?;
            e.handle.target.clone()
        };
        lock(&target).clone()
    }

    /// Session `pid`'s user and handle.
    fn session(&self, pid: u32) -> Option<(Arc<str>, SessionHandle)> {
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

/// `pg_cancel_backend` or `pg_terminate_backend`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Signal {
    /// Cancel the session's running statement.
    Cancel,
    /// Cancel it and end the session.
    Terminate,
}

impl Signal {
    fn function(self) -> &'static str {
        match self {
            Signal::Cancel => "pg_cancel_backend",
            Signal::Terminate => "pg_terminate_backend",
        }
    }
}

/// Reads a Query that is exactly `SELECT [pg_catalog.]pg_cancel_backend(pid)` or
/// `…pg_terminate_backend(pid)` (any case, optional `;`).
pub(crate) fn parse(sql: &[u8]) -> Option<(Signal, u32)> {
    // Runs for every Query that starts a transaction: anything without "_backend" is decided
    // without allocating.
    if sql.len() > 128 || !sql.windows(8).any(|w| w.eq_ignore_ascii_case(b"_backend")) {
        return None;
    }
    let text = std::str::from_utf8(sql.strip_suffix(&[0]).unwrap_or(sql)).ok()?;
    let lower = text
        .trim()
        .trim_end_matches(';')
        .trim_end()
        .to_ascii_lowercase();
    let rest = lower.strip_prefix("select")?;
    if !rest.starts_with(char::is_whitespace) {
        return None;
    }
    let rest = rest.trim_start();
    let rest = rest.strip_prefix("pg_catalog.").unwrap_or(rest);
    let (signal, rest) = if let Some(r) = rest.strip_prefix("pg_cancel_backend") {
        (Signal::Cancel, r)
    } else {
        (
            Signal::Terminate,
            rest.strip_prefix("pg_terminate_backend")?,
        )
    };
    let inner = rest.trim_start().strip_prefix('(')?.strip_suffix(')')?;
    let pid = inner.trim().parse().ok()?;
    Some((signal, pid))
}

/// What a client's `pg_*_backend(pid)` did.
pub(crate) enum Outcome {
    /// `pid` is not a Sluice session: the statement goes to the server (a server pid works
    /// there as on a direct connection).
    NotOurs,
    /// The reply to send (result or error, then ReadyForQuery).
    Reply(Vec<u8>),
}

/// Carries out `signal` on session `pid` for a session of `user`.
pub(crate) async fn carry_out(
    signals: &SessionSignals,
    user: &str,
    (signal, pid): (Signal, u32),
) -> Outcome {
    let Some((owner, handle)) = signals.session(pid) else {
        return Outcome::NotOurs;
    };
    if *owner != *user {
        let verb = match signal {
            Signal::Cancel => "cancel query",
            Signal::Terminate => "terminate process",
        };
        let msg = format!(
            "permission denied to {verb}: only sessions of the same user can be signalled through Sluice"
        );
        let mut out = error_response("ERROR", "42501", &msg);
        out.extend(ready(b'I'));
        return Outcome::Reply(out);
    }
    let running = lock(&handle.target).clone();
    if let Some((server, spid, secret)) = running {
        sluice_pgsql_backend::conn::send_cancel(&server, spid, secret).await;
    }
    if signal == Signal::Terminate {
        handle.terminate.cancel();
    }
    tracing::info!(
        target_pid = pid,
        user,
        "{}() from a client",
        signal.function()
    );
    Outcome::Reply(bool_result(signal.function(), true))
}

/// A one-row, one-column boolean result, CommandComplete and ReadyForQuery.
fn bool_result(column: &str, value: bool) -> Vec<u8> {
    let mut desc = 1u16.to_be_bytes().to_vec();
    desc.extend_from_slice(column.as_bytes());
    desc.push(0);
    desc.extend_from_slice(&0u32.to_be_bytes()); // table oid
    desc.extend_from_slice(&0u16.to_be_bytes()); // column number
    desc.extend_from_slice(&16u32.to_be_bytes()); // bool
    desc.extend_from_slice(&1i16.to_be_bytes()); // type size
    desc.extend_from_slice(&(-1i32).to_be_bytes()); // type modifier
    desc.extend_from_slice(&0u16.to_be_bytes()); // text format
    let mut row = 1u16.to_be_bytes().to_vec();
    row.extend_from_slice(&1u32.to_be_bytes());
    row.push(if value { b't' } else { b'f' });
    let mut out = message(b'T', &desc);
    out.extend(message(b'D', &row));
    out.extend(message(b'C', b"SELECT 1\0"));
    out.extend(ready(b'I'));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_signal_functions_only_as_whole_statements() {
        assert_eq!(
            parse(b"SELECT pg_cancel_backend(42)\0"),
            Some((Signal::Cancel, 42))
        );
        assert_eq!(
            parse(b"select pg_catalog.PG_TERMINATE_BACKEND( 7 );"),
            Some((Signal::Terminate, 7))
        );
        for sql in [
            &b"SELECT pg_cancel_backend(pid) FROM pg_stat_activity"[..],
            b"SELECT pg_cancel_backend(1), 2",
            b"SELECT pg_cancel_backend(99999999999)",
            b"selectpg_cancel_backend(1)",
            b"SELECT pg_terminate_backend(1, 1000)",
        ] {
            assert_eq!(parse(sql), None, "{}", String::from_utf8_lossy(sql));
        }
    }

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
        *lock(&handle.target) = Some((Arc::from("h:1"), 5, 6));
        assert_eq!(s.cancel_target(pid, secret), Some((Arc::from("h:1"), 5, 6)));
        assert_eq!(s.cancel_target(pid, secret ^ 1), None, "wrong secret");
        let server: Arc<str> = Arc::from("h:1");
        s.note_owner(&server, 5, pid);
        assert_eq!(s.owner_of(&server, 5), Some(pid));
        s.remove(pid);
        assert_eq!(s.cancel_target(pid, secret), None);
    }

    #[tokio::test]
    async fn only_the_same_user_may_signal() {
        let s = SessionSignals::default();
        let (pid, _, handle) = s.register("app");
        let Outcome::Reply(r) = carry_out(&s, "other", (Signal::Terminate, pid)).await else {
            panic!("a Sluice pid is answered");
        };
        assert_eq!(r[0], b'E');
        assert!(!handle.terminate.is_cancelled());
        assert!(matches!(
            carry_out(&s, "app", (Signal::Cancel, pid ^ 1)).await,
            Outcome::NotOurs
        ));
        let Outcome::Reply(r) = carry_out(&s, "app", (Signal::Terminate, pid)).await else {
            panic!("answered");
        };
        assert_eq!(r[0], b'T');
        assert!(handle.terminate.is_cancelled());
    }
}

//! Read-your-writes through the read/write split for PostgreSQL ([`sluice_core::causal`]):
//! after a transaction that wrote, Sluice reads `pg_current_wal_insert_lsn()` on its server
//! connection (the insert LSN: with `synchronous_commit=off` the write and flush positions may
//! not have reached the commit yet) before the connection goes back to the pool; a transaction
//! whose first statement reads, routed away from the writer, starts only once its replica has
//! replayed that LSN — polled with `pg_last_wal_replay_lsn()` (PostgreSQL 15–18 have no wait
//! primitive, and a server-side loop would hold a snapshot that can block the very replay it
//! waits for) — else on the writer, or with SQLSTATE 40001.

use crate::frontend::PgFrontend;
use sluice_core::RuntimeConfig;
use sluice_core::causal::{CausalOutcome, Lsn, Position, TokenQuery};
use sluice_core::config::{CausalFallback, CausalMode};
use sluice_pgsql_backend::PgConn;
use std::time::{Duration, Instant};
use tracing::warn;

/// Between two reads of the replica's replay position.
const POLL: Duration = Duration::from_millis(5);

/// What a transaction's first statement asks of read-your-writes (a read; a write needs none).
#[derive(Debug, Clone, Default)]
pub(crate) struct ReadWants {
    /// A rule's `causal_reads` or a hint; `None`: `pgsql-causal_reads` decides.
    pub mode: Option<CausalMode>,
    /// A `min_lsn=` hint.
    pub min: Option<Position>,
}

/// A read that must wait for a token, decided before the checkout.
pub(crate) struct Gate {
    pub token: Position,
    pub writer_hostgroup: u32,
    /// The writer hostgroup's servers: a read landing on one needs no wait.
    writers: Vec<String>,
    timeout: Duration,
    pub on_timeout: CausalFallback,
}

/// The gate for a read routed to `hostgroup`, when it needs one: `local` is the session's own
/// token (with the hostgroup its writes went to).
pub(crate) fn plan(
    fe: &PgFrontend,
    rt: &RuntimeConfig,
    (user, writer_hostgroup): (&str, u32),
    local: &mut Option<(u32, Position)>,
    hostgroup: u32,
    wants: &ReadWants,
) -> Option<Gate> {
    if hostgroup == writer_hostgroup {
        return None;
    }
    let vars = &rt.pgsql.variables.causal;
    let mode = wants.mode.unwrap_or(vars.mode);
    if mode == CausalMode::None && wants.min.is_none() {
        return None;
    }
    let writers: Vec<String> = rt
        .pgsql
        .hostgroups
        .get(&writer_hostgroup)
        .map(|v| v.iter().map(|s| s.key.to_string()).collect())
        .unwrap_or_default();
    let read = TokenQuery {
        protocol: "pgsql",
        mode,
        user,
        writer_hostgroup,
        writers: &writers,
        min: wants.min.as_ref(),
    };
    let token = fe.stats.causal.token_for(&read, local)?;
    Some(Gate {
        token,
        writer_hostgroup,
        writers,
        timeout: Duration::from_millis(vars.timeout_ms),
        on_timeout: vars.on_timeout,
    })
}

/// How waiting for a token ended.
pub(crate) enum Waited {
    /// The replica has replayed it (or is the writer, or a primary).
    Reached,
    /// Not within the timeout.
    TimedOut(Duration),
    /// The connection failed while polling: it must be dropped.
    Broken(Duration),
}

/// Waits until the replica behind `conn` has replayed the token, within the timeout, counting
/// a reached token as `ready` or `waited` (the caller counts what a timeout leads to).
pub(crate) async fn wait(fe: &PgFrontend, conn: &mut PgConn, gate: &Gate) -> Waited {
    let causal = &fe.stats.causal;
    let server = conn.server.to_string();
    if gate.writers.contains(&server) || causal.known_past(&server, &gate.token) {
        causal.stats.count(CausalOutcome::Ready, Duration::ZERO);
        return Waited::Reached;
    }
    let started = Instant::now();
    let Position::Lsn(lsn) = &gate.token else {
        return Waited::TimedOut(Duration::ZERO);
    };
    let sql = format!("SELECT pg_last_wal_replay_lsn() >= '{lsn}'::pg_lsn");
    let mut polls = 0u32;
    loop {
        polls += 1;
        let reached = match conn.query_value(&sql).await {
            Ok(Some(v)) => v == "t",
            // NULL: not in recovery, a primary: it has everything it committed.
            Ok(None) => true,
            // The server answered with an error: the connection is fine, the read is not gated.
            Err(sluice_pgsql_backend::Error::Server { code, message }) => {
                warn!(server = %server, "pgsql: reading the replay position for a causal read failed ({code}: {message}); the read is treated as timed out");
                return Waited::TimedOut(started.elapsed());
            }
            Err(e) => {
                warn!(server = %server, "pgsql: the connection failed while reading the replay position for a causal read ({e}); it is closed and the read treated as timed out");
                return Waited::Broken(started.elapsed());
            }
        };
        if reached {
            causal.applied(&server, &gate.token);
            let outcome = if polls == 1 {
                CausalOutcome::Ready
            } else {
                CausalOutcome::Waited
            };
            causal.stats.count(outcome, started.elapsed());
            return Waited::Reached;
        }
        if started.elapsed() + POLL > gate.timeout {
            return Waited::TimedOut(started.elapsed());
        }
        tokio::time::sleep(POLL).await;
    }
}

/// True when writes must leave a token: the variable or an active rule asks for causal reads.
pub(crate) fn tokens_wanted(rt: &RuntimeConfig) -> bool {
    rt.pgsql.variables.causal.mode != CausalMode::None || rt.pgsql.rules.sets_causal_reads()
}

/// After a transaction that wrote, on its connection: the insert LSN becomes the session's
/// token (`local`), and its user's and hostgroup's. `Err` when the connection broke.
pub(crate) async fn take_token(
    fe: &PgFrontend,
    (user, hostgroup): (&str, i64),
    local: &mut Option<(u32, Position)>,
    conn: &mut PgConn,
) -> Result<(), sluice_pgsql_backend::Error> {
    let text = match conn.query_value("SELECT pg_current_wal_insert_lsn()").await {
        Ok(v) => v,
        // A server error (a standby refuses: recovery is in progress): no token, the
        // connection is fine.
        Err(sluice_pgsql_backend::Error::Server { code, message }) => {
            warn!(server = %conn.server, "pgsql: no read-your-writes token after a write ({code}: {message})");
            return Ok(());
        }
        Err(e) => return Err(e),
    };
    let (Some(lsn), Ok(hostgroup)) = (
        text.as_deref().and_then(Lsn::parse),
        u32::try_from(hostgroup),
    ) else {
        return Ok(());
    };
    let position = Position::Lsn(lsn);
    let server = conn.server.to_string();
    fe.stats.causal.wrote(user, hostgroup, &server, &position);
    match local {
        Some((hg, token)) if *hg == hostgroup => token.merge(&position),
        other => *other = Some((hostgroup, position)),
    }
    Ok(())
}

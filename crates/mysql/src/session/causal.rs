//! Read-your-writes through the read/write split ([`sluice_core::causal`]): the GTID each
//! write's OK packet carries becomes a token, and a read routed away from the writer is
//! served by a replica that applied it — one already known to, or one that catches up within
//! `mysql-causal_reads_timeout_ms` (`MASTER_GTID_WAIT` on that replica, never on the writer) —
//! else by the writer (`causal_reads_on_timeout = primary`) or with error 9110.

use super::{Next, Session};
use crate::error::CAUSAL_READ_TIMEOUT;
use sluice_core::RuntimeConfig;
use sluice_core::causal::{CausalOutcome, CausalReads, GtidPosition, Position, TokenQuery};
use sluice_core::config::{CausalFallback, CausalMode};
use sluice_core::query::Decision;
use sluice_mysql_proto::packets::err_payload;
use std::time::{Duration, Instant};
use tracing::{debug, info, warn};

/// What a gated read needs from the configuration, read before any wait.
pub(super) struct Gate {
    token: Position,
    writer_hostgroup: u32,
    /// The writer hostgroup's servers (`host:port`): a read landing on one needs no wait.
    writers: Vec<String>,
    timeout: Duration,
    on_timeout: CausalFallback,
}

/// What the relay tells of each GTID a reply commits (before the client has the OK): it
/// becomes the session's token and its user's and writer hostgroup's (the shared scopes).
pub(super) fn commit_sink<'a>(
    causal: &'a CausalReads,
    user: &'a str,
    hostgroup: u32,
    local: &'a mut Option<(u32, Position)>,
) -> impl FnMut(&str, &str) + Send + 'a {
    move |gtid, server| {
        let Some(gtid) = GtidPosition::parse(gtid) else {
            return;
        };
        let position = Position::Gtid(gtid);
        causal.wrote(user, hostgroup, server, &position);
        match &mut *local {
            Some((hg, token)) if *hg == hostgroup => token.merge(&position),
            other => *other = Some((hostgroup, position)),
        }
    }
}

impl Session {
    /// The token a read must see and how to wait for it; `None` when the read needs no gate
    /// (a write, a read of the writer, a held connection, mode `none`, nothing written).
    pub(super) fn causal_plan(&mut self, rt: &RuntimeConfig, d: Option<&Decision>) -> Option<Gate> {
        let d = d?;
        if d.digest.kind.writes() || self.backend.is_some() {
            return None;
        }
        let writer_hostgroup = self.login.user.default_hostgroup.0;
        if self.route_hostgroup == writer_hostgroup {
            return None;
        }
        let vars = &rt.mysql.variables.causal;
        let causal = &self.fe.counters.stats.causal;
        let mode = d.action.causal_reads.unwrap_or(vars.mode);
        if mode == CausalMode::None && d.action.min_position.is_none() {
            return None;
        }
        let writers: Vec<String> = rt
            .mysql
            .hostgroups
            .get(&writer_hostgroup)
            .map(|v| v.iter().map(|s| s.key.to_string()).collect())
            .unwrap_or_default();
        let min = d
            .action
            .min_position
            .as_deref()
            .and_then(GtidPosition::parse)
            .map(Position::Gtid);
        let read = TokenQuery {
            protocol: "mysql",
            mode,
            user: &self.login.user.username,
            writer_hostgroup,
            writers: &writers,
            min: min.as_ref(),
        };
        let token = causal.token_for(&read, &mut self.causal_token)?;
        Some(Gate {
            token,
            writer_hostgroup,
            writers,
            timeout: Duration::from_millis(vars.timeout_ms),
            on_timeout: vars.on_timeout,
        })
    }

    /// Gates a read that must see earlier writes ([`Self::causal_plan`] decided it does).
    /// `None`: go on (perhaps rerouted to the writer); `Some`: the client has its answer (an
    /// error). Boxed by the callers: its state would otherwise be part of every statement's
    /// future.
    pub(super) async fn causal_gate(&mut self, gate: Gate, reply_seq: u8) -> Option<Next> {
        let started = Instant::now();
        if let Err(f) = self.ensure_backend().await {
            self.report(reply_seq, f).await;
            return Some(Next::Continue);
        }
        let b = self.backend.as_mut()?;
        let server = b.key().server.to_string();
        let causal = &self.fe.counters.stats.causal;
        if gate.writers.contains(&server) || causal.known_past(&server, &gate.token) {
            causal.stats.count(CausalOutcome::Ready, Duration::ZERO);
            return None;
        }
        let sql = format!(
            "SELECT MASTER_GTID_WAIT('{}', {:.3})",
            gate.token,
            gate.timeout.as_secs_f64()
        );
        let reached = match b.conn().query_row(&sql).await {
            Ok(Ok(row)) => row.first().is_some_and(|v| v.as_deref() == Some("0")),
            Ok(Err(err)) => {
                let why = sluice_mysql_proto::packets::parse_err(&err)
                    .map_or_else(|_| "a malformed error".to_string(), |e| e.message);
                warn!(session = self.id, server = %server, "MASTER_GTID_WAIT failed ({why}); the read is treated as timed out");
                false
            }
            Err(e) => {
                warn!(session = self.id, server = %server, "backend connection lost while waiting for GTID {}: {e}", gate.token);
                self.backend = None;
                false
            }
        };
        let waited = started.elapsed();
        if reached {
            causal.applied(&server, &gate.token);
            let outcome = if gate.timeout.is_zero() {
                CausalOutcome::Ready
            } else {
                CausalOutcome::Waited
            };
            causal.stats.count(outcome, waited);
            return None;
        }
        // The replica's connection is clean (only the wait ran on it): back to the pool.
        if let Some(b) = self.backend.take() {
            b.release_clean();
        }
        match gate.on_timeout {
            CausalFallback::Primary => {
                causal.stats.count(CausalOutcome::Fallback, waited);
                debug!(session = self.id, replica = %server, token = %gate.token,
                    "causal read: the replica did not reach the token in time; the writer answers");
                self.route_hostgroup = gate.writer_hostgroup;
                None
            }
            CausalFallback::Error => {
                causal.stats.count(CausalOutcome::Error, waited);
                let msg = format!(
                    "Causal read timed out: replica {server} did not apply GTID {} within {} ms; retry, or read from hostgroup {}",
                    gate.token,
                    gate.timeout.as_millis(),
                    gate.writer_hostgroup
                );
                info!(session = self.id, user = %self.login.user.username, replica = %server, token = %gate.token,
                    "causal read timed out; the client gets error 9110 (mysql-causal_reads_on_timeout=error)");
                self.send_err(
                    reply_seq,
                    &err_payload(CAUSAL_READ_TIMEOUT.0, CAUSAL_READ_TIMEOUT.1, &msg),
                )
                .await;
                Some(Next::Continue)
            }
        }
    }
}

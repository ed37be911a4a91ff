//! One check run in its own task, bounded by its budget, its outcome sent back to the
//! monitor loop as a [`Done`].

use super::CheckError;
use super::checker::{CheckTarget, Checker};
use sluice_core::config::MonitorVariables;
use sluice_core::runtime::{HostgroupServer, ServerKey};
use sluice_core::topology::CheckKind;
use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

pub(super) fn now_us() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_micros() as u64)
}

/// One finished check.
pub(super) struct Done {
    pub(super) server: ServerKey,
    pub(super) kind: CheckKind,
    pub(super) started_us: u64,
    pub(super) outcome: Result<(u64, Option<i64>), CheckError>,
    /// Group Replication and Galera checks: what the member reported.
    pub(super) member: Option<sluice_core::topology::MemberState>,
    /// Galera checks: the node's raw status.
    pub(super) galera: Option<sluice_core::topology::GaleraStatus>,
}

/// A check of `server` as the monitor user, over TLS when a row of the server says
/// `use_ssl=1`; bounded by `monitor_ping_timeout` unless the caller sets another.
pub(super) fn check_target(
    server: &ServerKey,
    v: &MonitorVariables,
    tls_servers: &HashMap<ServerKey, &HostgroupServer>,
) -> CheckTarget {
    CheckTarget {
        server: server.clone(),
        username: v.username.clone(),
        password: v.password.clone(),
        dbname: v.dbname.clone(),
        check_type: String::new(),
        timeout: Duration::from_millis(v.ping_timeout),
        heartbeat_table: String::new(),
        use_ssl: tls_servers.contains_key(server),
        ssl_params: tls_servers
            .get(server)
            .map(|s| s.ssl_params.clone())
            .unwrap_or_default(),
    }
}

pub(super) fn spawn_check(
    kind: CheckKind,
    target: CheckTarget,
    checker: Arc<dyn Checker>,
    tx: tokio::sync::mpsc::UnboundedSender<Done>,
) {
    let server = target.server.clone();
    let budget = target.timeout;
    let started_us = now_us();
    tokio::spawn(async move {
        let t0 = Instant::now();
        let mut member = None;
        let mut galera = None;
        let run = async {
            match kind {
                CheckKind::Galera => checker.galera(target).await.map(|g| {
                    let m = g.member();
                    let behind = i64::try_from(m.transactions_behind).unwrap_or(i64::MAX);
                    member = Some(m);
                    galera = Some(g);
                    ((t0.elapsed().as_micros() as u64).max(1), Some(behind))
                }),
                CheckKind::GroupReplication => checker.group_replication(target).await.map(|m| {
                    let behind = i64::try_from(m.transactions_behind).unwrap_or(i64::MAX);
                    member = Some(m);
                    ((t0.elapsed().as_micros() as u64).max(1), Some(behind))
                }),
                CheckKind::Connect => checker.connect(target).await.map(|us| (us, None)),
                CheckKind::Ping => checker.ping(target).await.map(|us| (us, None)),
                CheckKind::ReadOnly => checker
                    .read_only(target)
                    .await
                    .map(|v| (t0.elapsed().as_micros() as u64, Some(i64::from(v)))),
                CheckKind::ReplicationLag => checker.replication_lag(target).await.map(|v| {
                    (
                        (t0.elapsed().as_micros() as u64).max(1),
                        v.map(|s| i64::try_from(s).unwrap_or(i64::MAX)),
                    )
                }),
            }
        };
        let outcome = match tokio::time::timeout(budget, run).await {
            Ok(r) => r,
            Err(_) => Err(CheckError::TimedOut),
        };
        let _ = tx.send(Done {
            server,
            kind,
            started_us,
            outcome,
            member,
            galera,
        });
    });
}

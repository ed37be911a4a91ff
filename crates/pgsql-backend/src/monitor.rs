//! The PostgreSQL monitor checks (`sluice_core::monitor::Checker`): connect, a heartbeat
//! (`SELECT 1`) on a kept monitor connection per server, and `pg_is_in_recovery()` for
//! read_only placement.

use crate::Error;
use crate::conn::{ConnectParams, PgConn};
use sluice_core::monitor::{CheckFuture, CheckTarget, Checker, ConnCache};
use sluice_core::runtime::ServerKey;
use std::time::Instant;

/// Monitor connections, one per server, reused between checks.
#[derive(Debug, Default, Clone)]
pub struct PgChecker {
    conns: ConnCache<PgConn>,
}

fn params(t: &CheckTarget) -> ConnectParams {
    ConnectParams {
        host: t.server.hostname.clone(),
        port: t.server.port,
        user: t.username.clone(),
        password: t.password.clone(),
        database: t.dbname.clone(),
        options: vec![("application_name".into(), "sluice-monitor".into())],
        timeout: t.timeout,
        tls: None,
    }
}

fn text(e: Error) -> String {
    match e {
        Error::Server { code, message } => format!("FATAL: {message} (SQLSTATE {code})"),
        other => other.to_string(),
    }
}

impl PgChecker {
    /// A checker with no connections yet.
    pub fn new() -> Self {
        PgChecker::default()
    }
}

/// The server's kept monitor connection, or a new one.
async fn connection(held: Option<PgConn>, t: &CheckTarget) -> Result<PgConn, String> {
    match held {
        Some(c) => Ok(c),
        None => PgConn::connect(&params(t)).await.map_err(text),
    }
}

impl Checker for PgChecker {
    fn connect(&self, t: CheckTarget) -> CheckFuture<u64> {
        Box::pin(async move {
            let t0 = Instant::now();
            PgConn::connect(&params(&t)).await.map_err(text)?;
            Ok(t0.elapsed().as_micros() as u64)
        })
    }

    fn ping(&self, t: CheckTarget) -> CheckFuture<u64> {
        let held = self.conns.take(&t.server);
        let conns = self.conns.clone();
        Box::pin(async move {
            let mut c = connection(held, &t).await?;
            let t0 = Instant::now();
            c.run_quietly("SELECT 1").await.map_err(text)?;
            let us = t0.elapsed().as_micros() as u64;
            conns.put(t.server, c);
            Ok(us.max(1))
        })
    }

    fn read_only(&self, t: CheckTarget) -> CheckFuture<bool> {
        let held = self.conns.take(&t.server);
        let conns = self.conns.clone();
        Box::pin(async move {
            let mut c = connection(held, &t).await?;
            let v = c
                .query_value("SELECT pg_is_in_recovery()")
                .await
                .map_err(text)?;
            conns.put(t.server, c);
            match v.as_deref() {
                Some("t") => Ok(true),
                Some("f") => Ok(false),
                other => Err(format!("unexpected pg_is_in_recovery() value {other:?}")),
            }
        })
    }

    fn replication_lag(&self, t: CheckTarget) -> CheckFuture<Option<u64>> {
        let held = self.conns.take(&t.server);
        let conns = self.conns.clone();
        Box::pin(async move {
            let mut c = connection(held, &t).await?;
            // A replica that has replayed everything it received is not behind, however old
            // its last replayed transaction is (an idle primary writes nothing).
            let v = c
                .query_value(
                    "SELECT CASE WHEN NOT pg_is_in_recovery() THEN 0 \
                     WHEN pg_last_wal_receive_lsn() IS NOT NULL AND pg_last_wal_receive_lsn() = pg_last_wal_replay_lsn() THEN 0 \
                     ELSE EXTRACT(EPOCH FROM now() - pg_last_xact_replay_timestamp())::bigint END",
                )
                .await
                .map_err(text)?;
            conns.put(t.server, c);
            match v {
                None => Ok(None),
                Some(s) => s
                    .trim()
                    .parse::<i64>()
                    .map(|n| Some(n.max(0) as u64))
                    .map_err(|_| format!("replication lag {s:?} is not a number")),
            }
        })
    }

    fn drop_connection(&self, server: &ServerKey) {
        self.conns.take(server);
    }
}

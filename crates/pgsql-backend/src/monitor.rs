//! The PostgreSQL monitor checks (`sluice_monitor::Checker`): connect, a heartbeat
//! (`SELECT 1`) on a kept monitor connection per server, and `pg_is_in_recovery()` for
//! read_only placement.

use crate::Error;
use crate::conn::{ConnectParams, PgConn};
use sluice_core::runtime::ServerKey;
use sluice_monitor::{
    CheckError, CheckFuture, CheckTarget, Checker, KeptConnections, MonitorConnector, ServerLoad,
    parse_number,
};
use sluice_net::client_tls::TlsSource;
use std::sync::Arc;
use std::time::Instant;

/// Monitor connections, one per server, reused between checks.
#[derive(Debug, Clone)]
pub struct PgChecker {
    kept: KeptConnections<PgConnector>,
}

/// Opens PostgreSQL monitor connections.
#[derive(Debug, Default)]
struct PgConnector {
    /// TLS towards servers with `use_ssl=1`, as the data path's connections use it.
    tls: Option<Arc<TlsSource>>,
}

impl MonitorConnector for PgConnector {
    type Conn = PgConn;
    type Params = ConnectParams;

    fn params(&self, t: &CheckTarget) -> Result<ConnectParams, CheckError> {
        let tls = TlsSource::for_check(self.tls.as_deref(), t.use_ssl, &t.ssl_params, &t.username)
            .map_err(CheckError::tls)?;
        Ok(ConnectParams {
            host: t.server.hostname.clone(),
            port: t.server.port,
            user: t.username.clone(),
            secret: sluice_pgsql_proto::scram::ClientSecret::Password(t.password.clone()),
            database: t.dbname.clone(),
            options: vec![("application_name".into(), "sluice-monitor".into())],
            timeout: t.timeout,
            tls,
        })
    }

    async fn open(p: &ConnectParams) -> Result<PgConn, CheckError> {
        PgConn::connect(p).await.map_err(text)
    }
}

/// The backend's error as the check's: a server's refusal with its SQLSTATE in the message.
fn text(e: Error) -> CheckError {
    match e {
        Error::Server { code, message } => {
            CheckError::refused(format!("FATAL: {message} (SQLSTATE {code})"))
        }
        other => CheckError::connection(other),
    }
}

impl Default for PgChecker {
    fn default() -> Self {
        PgChecker::with_tls(None)
    }
}

impl PgChecker {
    /// A checker with no connections yet.
    pub fn new() -> Self {
        PgChecker::default()
    }

    /// A checker connecting over `tls` to servers with `use_ssl=1` (the pool's configuration,
    /// so checks verify certificates as the data path does).
    pub fn with_tls(tls: Option<Arc<TlsSource>>) -> Self {
        PgChecker {
            kept: KeptConnections::new(PgConnector { tls }),
        }
    }
}

/// One value a check reads on the server's kept connection (kept when the statement worked).
fn read_value(
    kept: &KeptConnections<PgConnector>,
    t: &CheckTarget,
    sql: &'static str,
) -> CheckFuture<Option<String>> {
    let checkout = kept.checkout(t);
    Box::pin(async move {
        let mut c = checkout.open().await?;
        let v = c.query_value(sql).await.map_err(text)?;
        c.keep();
        Ok(v)
    })
}

/// The heartbeat's table, in the monitor's database (`monitor_dbname`), created on a writer
/// by its first write.
const HEARTBEAT_SETUP: &str =
    "CREATE TABLE IF NOT EXISTS sluice_heartbeat (id int PRIMARY KEY, ts timestamptz NOT NULL)";
/// One heartbeat: the writer's time, replicated like any write.
const HEARTBEAT_WRITE: &str = "INSERT INTO sluice_heartbeat (id, ts) VALUES (1, clock_timestamp()) \
     ON CONFLICT (id) DO UPDATE SET ts = excluded.ts";
/// How old (ms) the heartbeat a server holds is.
const HEARTBEAT_AGE: &str = "SELECT (EXTRACT(EPOCH FROM clock_timestamp() - ts) * 1000)::bigint \
     FROM sluice_heartbeat WHERE id = 1";

impl Checker for PgChecker {
    fn connect(&self, t: CheckTarget) -> CheckFuture<u64> {
        self.kept.connect_time(&t)
    }

    fn ping(&self, t: CheckTarget) -> CheckFuture<u64> {
        let checkout = self.kept.checkout(&t);
        Box::pin(async move {
            let mut c = checkout.open().await?;
            let t0 = Instant::now();
            c.run_quietly("SELECT 1").await.map_err(text)?;
            let us = t0.elapsed().as_micros() as u64;
            c.keep();
            Ok(us.max(1))
        })
    }

    fn read_only(&self, t: CheckTarget) -> CheckFuture<bool> {
        let value = read_value(&self.kept, &t, "SELECT pg_is_in_recovery()");
        Box::pin(async move {
            match value.await?.as_deref() {
                Some("t") => Ok(true),
                Some("f") => Ok(false),
                other => Err(CheckError::Unreadable(format!(
                    "unexpected pg_is_in_recovery() value {other:?}"
                ))),
            }
        })
    }

    fn replication_lag(&self, t: CheckTarget) -> CheckFuture<Option<u64>> {
        // A replica that has replayed everything it received is not behind, however old its
        // last replayed transaction is (an idle primary writes nothing).
        let value = read_value(
            &self.kept,
            &t,
            "SELECT CASE WHEN NOT pg_is_in_recovery() THEN 0 \
             WHEN pg_last_wal_receive_lsn() IS NOT NULL AND pg_last_wal_receive_lsn() = pg_last_wal_replay_lsn() THEN 0 \
             ELSE EXTRACT(EPOCH FROM now() - pg_last_xact_replay_timestamp())::bigint END",
        );
        Box::pin(async move {
            let lag = value.await?;
            let lag = lag
                .map(|s| parse_number::<i64>("replication lag", &s))
                .transpose()?;
            Ok(lag.map(|n| n.max(0) as u64))
        })
    }

    fn server_load(&self, t: CheckTarget) -> CheckFuture<ServerLoad> {
        let checkout = self.kept.checkout(&t);
        Box::pin(async move {
            let mut c = checkout.open().await?;
            let running = c
                .query_value(
                    "SELECT count(*) FROM pg_stat_activity \
                     WHERE state = 'active' AND backend_type = 'client backend'",
                )
                .await
                .map_err(text)?;
            // WAL received but not replayed; NULL on a standby that is not streaming.
            let backlog = c
                .query_value(
                    "SELECT CASE WHEN NOT pg_is_in_recovery() THEN 0 \
                     ELSE pg_wal_lsn_diff(pg_last_wal_receive_lsn(), pg_last_wal_replay_lsn())::bigint END",
                )
                .await
                .map_err(text)?;
            c.keep();
            let number = |what: &str, v: Option<String>| -> Result<Option<u64>, CheckError> {
                v.map(|s| parse_number::<i64>(what, &s).map(|n| n.max(0) as u64))
                    .transpose()
            };
            Ok(ServerLoad {
                threads_running: number("active statements", running)?.unwrap_or(0),
                replica_backlog: number("replay backlog", backlog)?,
                heartbeat_age_ms: None,
            })
        })
    }

    fn write_heartbeat(&self, t: CheckTarget) -> CheckFuture<()> {
        let checkout = self.kept.checkout(&t);
        Box::pin(async move {
            let mut c = checkout.open().await?;
            if c.query_value(HEARTBEAT_WRITE).await.is_err() {
                // The first write on a server: the table may not exist yet.
                c.query_value(HEARTBEAT_SETUP).await.map_err(text)?;
                c.query_value(HEARTBEAT_WRITE).await.map_err(text)?;
            }
            c.keep();
            Ok(())
        })
    }

    fn heartbeat_age_ms(&self, t: CheckTarget) -> CheckFuture<Option<u64>> {
        let checkout = self.kept.checkout(&t);
        Box::pin(async move {
            let mut c = checkout.open().await?;
            let v = match c.query_value(HEARTBEAT_AGE).await {
                // No heartbeat has reached this server yet (its table is made by the first).
                Err(Error::Server { code, .. }) if code == "42P01" => None,
                other => other.map_err(text)?,
            };
            c.keep();
            let age = v
                .map(|v| parse_number::<i64>("heartbeat age", &v))
                .transpose()?;
            Ok(age.map(|ms| ms.max(0) as u64))
        })
    }

    fn drop_connection(&self, server: &ServerKey) {
        self.kept.forget(server);
    }
}

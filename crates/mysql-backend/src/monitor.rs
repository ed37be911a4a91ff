//! The MySQL monitor checks (`sluice_monitor::Checker`): connect, a heartbeat
//! (COM_PING) on a kept monitor connection per server, and the `read_only` variables the
//! replication pair's `check_type` names.

use crate::conn::{BackendConn, BackendSecret, ConnectParams};
use sluice_core::runtime::ServerKey;
use sluice_monitor::gtid_backlog;
use sluice_monitor::{
    CheckError, CheckFuture, CheckTarget, Checker, KeptConnections, MonitorConnector, ServerLoad,
    parse_number,
};
use sluice_monitor::{GaleraStatus, MemberState};
use sluice_mysql_proto::consts::com;
use sluice_mysql_proto::reply::ReplyKind;
use sluice_net::client_tls::TlsSource;
use std::sync::Arc;
use std::time::Instant;

/// utf8mb4_general_ci: the monitor's queries are ASCII either way.
const MONITOR_COLLATION: u8 = 45;

/// Monitor connections, one per server, reused between checks.
#[derive(Debug, Clone)]
pub struct MysqlChecker {
    kept: KeptConnections<MysqlConnector>,
}

/// Opens MySQL monitor connections.
#[derive(Debug, Default)]
struct MysqlConnector {
    /// TLS towards servers with `use_ssl=1`, as the data path's connections use it.
    tls: Option<Arc<TlsSource>>,
}

impl MonitorConnector for MysqlConnector {
    type Conn = BackendConn;
    type Params = ConnectParams;

    fn params(&self, t: &CheckTarget) -> Result<ConnectParams, CheckError> {
        let tls = TlsSource::for_check(self.tls.as_deref(), t.use_ssl, &t.ssl_params, &t.username)
            .map_err(CheckError::tls)?;
        Ok(ConnectParams {
            host: t.server.hostname.clone(),
            port: t.server.port,
            user: t.username.clone(),
            secret: BackendSecret::Clear(t.password.clone()),
            schema: None,
            charset: MONITOR_COLLATION,
            client_caps: 0,
            tls,
            compress: false,
            timeout: t.timeout,
            max_packet: 1 << 20,
            multi_statements: true,
            track_gtid: false,
        })
    }

    async fn open(p: &ConnectParams) -> Result<BackendConn, CheckError> {
        BackendConn::connect(p)
            .await
            .map_err(CheckError::connection)
    }
}

/// The SQL that answers "is it read-only?" for a `check_type`.
pub fn read_only_sql(check_type: &str) -> &'static str {
    match check_type.to_ascii_lowercase().as_str() {
        "innodb_read_only" => "SELECT @@global.innodb_read_only",
        "super_read_only" => "SELECT @@global.super_read_only",
        "read_only|innodb_read_only" => "SELECT @@global.read_only OR @@global.innodb_read_only",
        "read_only&innodb_read_only" => "SELECT @@global.read_only AND @@global.innodb_read_only",
        _ => "SELECT @@global.read_only",
    }
}

/// This member's Group Replication state, role and applier queue length.
const GROUP_REPLICATION_SQL: &str = "SELECT m.MEMBER_STATE, m.MEMBER_ROLE, \
     (SELECT s.COUNT_TRANSACTIONS_REMOTE_IN_APPLIER_QUEUE FROM performance_schema.replication_group_member_stats s WHERE s.MEMBER_ID = m.MEMBER_ID) \
     FROM performance_schema.replication_group_members m WHERE m.MEMBER_ID = @@server_uuid";

/// A Galera node's state, partition, read_only and flow-control queue.
const GALERA_SQL: &str = "SELECT \
     (SELECT VARIABLE_VALUE FROM information_schema.GLOBAL_STATUS WHERE VARIABLE_NAME = 'WSREP_LOCAL_STATE'), \
     (SELECT VARIABLE_VALUE FROM information_schema.GLOBAL_STATUS WHERE VARIABLE_NAME = 'WSREP_CLUSTER_STATUS'), \
     @@global.read_only, @@global.wsrep_desync, @@global.wsrep_reject_queries, @@global.wsrep_sst_donor_rejects_queries, \
     (SELECT VARIABLE_VALUE FROM information_schema.GLOBAL_STATUS WHERE VARIABLE_NAME = 'WSREP_LOCAL_RECV_QUEUE')";

/// The lag of the worst channel: `Seconds_Behind_Master` (or `Seconds_Behind_Source`) of every
/// row; any NULL makes the result NULL (that channel is not replicating). No rows: not a
/// replica, lag 0.
pub(crate) fn worst_lag(
    names: &[String],
    rows: &[Vec<Option<String>>],
) -> Result<Option<u64>, CheckError> {
    let col = names
        .iter()
        .position(|n| n == "Seconds_Behind_Master" || n == "Seconds_Behind_Source")
        .ok_or_else(|| {
            CheckError::Unreadable(
                "no Seconds_Behind_Master column in the replication status".into(),
            )
        })?;
    let mut worst = Some(0u64);
    for r in rows {
        match r.get(col).cloned().flatten() {
            None => return Ok(None),
            Some(v) => {
                let n: u64 = parse_number("lag", &v)?;
                worst = worst.map(|w| w.max(n));
            }
        }
    }
    Ok(worst)
}

impl Default for MysqlChecker {
    fn default() -> Self {
        MysqlChecker::with_tls(None)
    }
}

impl MysqlChecker {
    /// A checker with no connections yet.
    pub fn new() -> Self {
        MysqlChecker::default()
    }

    /// A checker connecting over `tls` to servers with `use_ssl=1` (the pool's configuration,
    /// so checks verify certificates as the data path does).
    pub fn with_tls(tls: Option<Arc<TlsSource>>) -> Self {
        MysqlChecker {
            kept: KeptConnections::new(MysqlConnector { tls }),
        }
    }

    /// The first row of `sql` on the server's kept connection (kept when the statement worked).
    fn first_row(&self, t: &CheckTarget, sql: &'static str) -> CheckFuture<Vec<Option<String>>> {
        let checkout = self.kept.checkout(t);
        Box::pin(async move {
            let mut c = checkout.open().await?;
            let row = first_row(&mut c, sql).await?;
            c.keep();
            Ok(row)
        })
    }
}

/// The first row of a monitor query; a server error as its message.
async fn first_row(c: &mut BackendConn, sql: &str) -> Result<Vec<Option<String>>, CheckError> {
    c.query_row(sql)
        .await
        .map_err(CheckError::connection)?
        .map_err(|err| refused(&err))
}

/// The heartbeat's schema and table, created on a writer by its first write.
const HEARTBEAT_SETUP: [&str; 2] = [
    "CREATE DATABASE IF NOT EXISTS sluice",
    "CREATE TABLE IF NOT EXISTS sluice.heartbeat (id INT PRIMARY KEY, ts DATETIME(6) NOT NULL)",
];
/// One heartbeat: the writer's time, replicated like any write.
const HEARTBEAT_WRITE: &str =
    "INSERT INTO sluice.heartbeat (id, ts) VALUES (1, NOW(6)) ON DUPLICATE KEY UPDATE ts = NOW(6)";
/// How old (µs) the heartbeat a server holds is.
const HEARTBEAT_AGE: &str =
    "SELECT TIMESTAMPDIFF(MICROSECOND, ts, NOW(6)) FROM sluice.heartbeat WHERE id = 1";

/// An ERR packet's error number.
fn errno(err: &[u8]) -> Option<u16> {
    Some(u16::from_le_bytes([*err.get(1)?, *err.get(2)?]))
}

/// An ERR packet as the check's error: its number and message.
fn refused(err: &[u8]) -> CheckError {
    CheckError::Refused {
        code: errno(err),
        message: String::from_utf8_lossy(err.get(9..).unwrap_or_default()).into_owned(),
    }
}

/// Runs a statement that returns no rows; the server's refusal as its message.
async fn run(c: &mut BackendConn, sql: &str) -> Result<(), CheckError> {
    c.run_sql(sql)
        .await
        .map_err(CheckError::connection)?
        .map_err(|err| refused(&err))
}

impl Checker for MysqlChecker {
    fn connect(&self, t: CheckTarget) -> CheckFuture<u64> {
        self.kept.connect_time(&t)
    }

    fn ping(&self, t: CheckTarget) -> CheckFuture<u64> {
        let checkout = self.kept.checkout(&t);
        Box::pin(async move {
            let mut c = checkout.open().await?;
            let t0 = Instant::now();
            let (tracker, _) = c
                .command_collect(&[com::PING], ReplyKind::Single)
                .await
                .map_err(CheckError::connection)?;
            if tracker.error {
                return Err(CheckError::refused(
                    tracker
                        .error_message
                        .unwrap_or_else(|| "COM_PING failed".into()),
                ));
            }
            let us = t0.elapsed().as_micros() as u64;
            c.keep();
            Ok(us.max(1))
        })
    }

    fn read_only(&self, t: CheckTarget) -> CheckFuture<bool> {
        let row = self.first_row(&t, read_only_sql(&t.check_type));
        Box::pin(async move {
            let row = row.await?;
            match row.first().cloned().flatten().as_deref() {
                Some("1") => Ok(true),
                Some("0") => Ok(false),
                other => Err(CheckError::Unreadable(format!(
                    "unexpected read_only value {other:?}"
                ))),
            }
        })
    }

    fn replication_lag(&self, t: CheckTarget) -> CheckFuture<Option<u64>> {
        let checkout = self.kept.checkout(&t);
        Box::pin(async move {
            let mut c = checkout.open().await?;
            if !t.heartbeat_table.is_empty() {
                // pt-heartbeat: the age of the newest heartbeat row that reached this server.
                let sql = format!(
                    "SELECT MIN(ROUND(TIMESTAMPDIFF(MICROSECOND, ts, SYSDATE(6)) / 1000000)) FROM {}",
                    t.heartbeat_table
                );
                let row = first_row(&mut c, &sql).await?;
                c.keep();
                let lag = row.first().cloned().flatten();
                let lag = lag
                    .map(|v| parse_number::<f64>("heartbeat lag", &v))
                    .transpose()?;
                return Ok(lag.map(|n| n.max(0.0).round() as u64));
            }
            // MariaDB lists every replication channel with SHOW ALL SLAVES STATUS; MySQL has
            // SHOW REPLICA STATUS (one row per channel).
            let mut table = None;
            for sql in ["SHOW ALL SLAVES STATUS", "SHOW REPLICA STATUS"] {
                if let Ok(r) = c.query_table(sql).await.map_err(CheckError::connection)? {
                    table = Some(r);
                    break;
                }
            }
            c.keep();
            let (names, rows) = table.ok_or(CheckError::refused(
                "the server refused SHOW ALL SLAVES STATUS and SHOW REPLICA STATUS",
            ))?;
            worst_lag(&names, &rows)
        })
    }

    fn group_replication(&self, t: CheckTarget) -> CheckFuture<MemberState> {
        let row = self.first_row(&t, GROUP_REPLICATION_SQL);
        Box::pin(async move {
            let row = row.await?;
            let cell = |i: usize| row.get(i).cloned().flatten().unwrap_or_default();
            Ok(MemberState {
                state: cell(0),
                role: cell(1),
                transactions_behind: cell(2).trim().parse().unwrap_or(0),
            })
        })
    }

    fn galera(&self, t: CheckTarget) -> CheckFuture<GaleraStatus> {
        let row = self.first_row(&t, GALERA_SQL);
        Box::pin(async move {
            let row = row.await?;
            let cell = |i: usize| row.get(i).cloned().flatten().unwrap_or_default();
            let on = |i: usize| matches!(cell(i).to_ascii_uppercase().as_str(), "1" | "ON" | "YES");
            Ok(GaleraStatus {
                local_state: cell(0).trim().parse().unwrap_or(0),
                primary_partition: cell(1).eq_ignore_ascii_case("Primary"),
                read_only: on(2),
                desync: on(3),
                reject_queries: !cell(4).eq_ignore_ascii_case("NONE") && !cell(4).is_empty(),
                donor_rejects_queries: on(5),
                recv_queue: cell(6).trim().parse().unwrap_or(0),
            })
        })
    }

    fn server_load(&self, t: CheckTarget) -> CheckFuture<ServerLoad> {
        let checkout = self.kept.checkout(&t);
        Box::pin(async move {
            let mut c = checkout.open().await?;
            let row = first_row(&mut c, "SHOW GLOBAL STATUS LIKE 'Threads_running'").await?;
            let threads_running = row
                .get(1)
                .cloned()
                .flatten()
                .and_then(|v| v.trim().parse::<u64>().ok())
                .ok_or_else(|| {
                    CheckError::Unreadable(format!("Threads_running {row:?} is not a number"))
                })?;
            // MariaDB's GTID positions per replication channel; MySQL refuses the statement
            // and gives no backlog reading.
            let channels = c
                .query_table("SHOW ALL SLAVES STATUS")
                .await
                .map_err(CheckError::connection)?;
            c.keep();
            let replica_backlog = match channels {
                Ok((names, rows)) => Some(channels_backlog(&names, &rows)?),
                Err(_) => None,
            };
            Ok(ServerLoad {
                threads_running,
                replica_backlog,
                heartbeat_age_ms: None,
            })
        })
    }

    fn write_heartbeat(&self, t: CheckTarget) -> CheckFuture<()> {
        let checkout = self.kept.checkout(&t);
        Box::pin(async move {
            let mut c = checkout.open().await?;
            if run(&mut c, HEARTBEAT_WRITE).await.is_err() {
                // The first write on a server: its schema and table may not exist yet.
                for sql in HEARTBEAT_SETUP {
                    run(&mut c, sql).await?;
                }
                run(&mut c, HEARTBEAT_WRITE).await?;
            }
            c.keep();
            Ok(())
        })
    }

    fn heartbeat_age_ms(&self, t: CheckTarget) -> CheckFuture<Option<u64>> {
        let checkout = self.kept.checkout(&t);
        Box::pin(async move {
            let mut c = checkout.open().await?;
            let rows = match c
                .query_table(HEARTBEAT_AGE)
                .await
                .map_err(CheckError::connection)?
            {
                Ok((_, rows)) => rows,
                // No heartbeat has reached this server yet (its schema and table are made by
                // the first): ER_BAD_DB_ERROR, ER_NO_SUCH_TABLE.
                Err(err) if matches!(errno(&err), Some(1049 | 1146)) => Vec::new(),
                Err(err) => return Err(refused(&err)),
            };
            c.keep();
            let age = rows.first().and_then(|r| r.first()).cloned().flatten();
            let age = age
                .map(|v| parse_number::<i64>("heartbeat age", &v))
                .transpose()?;
            Ok(age.map(|us| (us.max(0) / 1000) as u64))
        })
    }

    fn drop_connection(&self, server: &ServerKey) {
        self.kept.forget(server);
    }
}

/// Transactions received but not applied over every channel of `SHOW ALL SLAVES STATUS`: the
/// channels' `Gtid_IO_Pos` against `Gtid_Slave_Pos`. No channel: not a replica, 0.
fn channels_backlog(names: &[String], rows: &[Vec<Option<String>>]) -> Result<u64, CheckError> {
    let col = |name: &str| {
        names
            .iter()
            .position(|n| n.eq_ignore_ascii_case(name))
            .ok_or_else(|| {
                CheckError::Unreadable(format!("SHOW ALL SLAVES STATUS has no {name} column"))
            })
    };
    if rows.is_empty() {
        return Ok(0);
    }
    let (io, applied) = (col("Gtid_IO_Pos")?, col("Gtid_Slave_Pos")?);
    let cell = |r: &Vec<Option<String>>, i: usize| r.get(i).cloned().flatten().unwrap_or_default();
    let received: Vec<String> = rows.iter().map(|r| cell(r, io)).collect();
    gtid_backlog(&received.join(","), &cell(&rows[0], applied))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_backlog_is_received_minus_applied_over_all_channels() {
        let names = vec![
            "Connection_name".to_string(),
            "Gtid_IO_Pos".to_string(),
            "Gtid_Slave_Pos".to_string(),
        ];
        let row = |io: &str, applied: &str| {
            vec![
                Some("c".to_string()),
                Some(io.to_string()),
                Some(applied.to_string()),
            ]
        };
        assert_eq!(channels_backlog(&names, &[]).ok(), Some(0), "not a replica");
        assert_eq!(
            channels_backlog(&names, &[row("0-1-50", "0-1-42,1-2-9")]).ok(),
            Some(8)
        );
        assert_eq!(
            channels_backlog(
                &names,
                &[row("0-1-50", "0-1-42,1-2-9"), row("1-2-12", "0-1-42,1-2-9")]
            )
            .ok(),
            Some(11),
            "two channels, two domains"
        );
        assert!(channels_backlog(&names[..1], &[vec![None]]).is_err());
    }

    #[test]
    fn multi_source_lag_is_the_worst_channel() {
        let names = vec![
            "Connection_name".to_string(),
            "Seconds_Behind_Master".to_string(),
        ];
        let row = |n: Option<&str>| vec![Some("c".to_string()), n.map(str::to_string)];
        assert_eq!(worst_lag(&names, &[]).ok(), Some(Some(0)), "not a replica");
        assert_eq!(
            worst_lag(&names, &[row(Some("3")), row(Some("40")), row(Some("7"))]).ok(),
            Some(Some(40))
        );
        assert_eq!(
            worst_lag(&names, &[row(Some("3")), row(None)]).ok(),
            Some(None),
            "a stopped channel"
        );
        assert!(worst_lag(&["x".to_string()], &[]).is_err());
    }
}

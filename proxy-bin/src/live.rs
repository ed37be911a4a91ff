//! The data path's live state as the admin tables show it.

use sluice_core::ConfigHandle;
use sluice_core::admin::{LiveStats, PoolRow, ProcessRow};
use sluice_mysql::MysqlFrontend;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use tokio_util::sync::CancellationToken;

/// Reads counters and sessions of the running frontends.
pub struct Live {
    pub mysql: Arc<MysqlFrontend>,
    pub config: ConfigHandle,
    /// Cancelled by `PROXYSQL SHUTDOWN`.
    pub stop: CancellationToken,
}

impl LiveStats for Live {
    fn mysql_connection_pool(&self) -> Vec<PoolRow> {
        let rt = self.config.load();
        self.mysql
            .pool
            .stats()
            .into_iter()
            .map(|s| {
                let status = rt
                    .mysql
                    .hostgroups
                    .get(&s.hostgroup)
                    .and_then(|v| v.iter().find(|h| h.key == s.server))
                    .map_or("OFFLINE_HARD", |h| h.status.as_str())
                    .to_string();
                PoolRow {
                    hostgroup: s.hostgroup,
                    srv_host: s.server.hostname.clone(),
                    srv_port: s.server.port,
                    status,
                    conn_used: s.open.saturating_sub(s.idle),
                    conn_free: s.idle,
                }
            })
            .collect()
    }

    fn mysql_processlist(&self) -> Vec<ProcessRow> {
        let rt = self.config.load();
        self.mysql
            .registry
            .processlist()
            .into_iter()
            .map(|p| ProcessRow {
                session_id: p.id,
                hostgroup: rt
                    .mysql
                    .frontend_users
                    .get(&p.user)
                    .map_or(0, |u| u.default_hostgroup.0),
                user: p.user,
                db: p.schema,
                client: p.client,
                pin_reason: p.pin_reason.map(str::to_string),
            })
            .collect()
    }

    fn mysql_global(&self) -> Vec<(String, String)> {
        vec![
            (
                "Client_Connections_connected".into(),
                self.mysql.registry.total().to_string(),
            ),
            (
                "Stmt_Cached".into(),
                self.mysql.statements.len().to_string(),
            ),
            (
                "Unparsed_SET_statements".into(),
                self.mysql
                    .counters
                    .unparsed_set
                    .load(Ordering::Relaxed)
                    .to_string(),
            ),
            (
                "Paused".into(),
                self.mysql.paused.load(Ordering::Relaxed).to_string(),
            ),
        ]
    }

    fn kill_session(&self, id: u32) -> bool {
        self.mysql.registry.kill(id)
    }

    fn shutdown(&self) {
        self.stop.cancel();
    }

    fn set_paused(&self, paused: bool) {
        self.mysql.paused.store(paused, Ordering::Relaxed);
    }
}

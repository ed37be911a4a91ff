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

    fn mysql_commands_counters(&self) -> Vec<Vec<Option<String>>> {
        self.mysql
            .counters
            .commands
            .commands()
            .into_iter()
            .map(|c| {
                let mut row = vec![
                    Some(c.command.to_string()),
                    Some(c.total_time_us.to_string()),
                    Some(c.total_cnt.to_string()),
                ];
                row.extend(c.buckets.iter().map(|b| Some(b.to_string())));
                row
            })
            .collect()
    }

    fn mysql_errors(&self) -> Vec<Vec<Option<String>>> {
        self.mysql
            .counters
            .commands
            .errors()
            .into_iter()
            .map(|e| {
                vec![
                    Some(e.hostgroup.to_string()),
                    Some(e.hostname),
                    Some(e.port.to_string()),
                    Some(e.username),
                    Some(e.client_address),
                    Some(e.schemaname),
                    Some(e.errno.to_string()),
                    Some(e.count_star.to_string()),
                    Some(e.first_seen.to_string()),
                    Some(e.last_seen.to_string()),
                    Some(e.last_error),
                ]
            })
            .collect()
    }

    fn mysql_free_connections(&self) -> Vec<Vec<Option<String>>> {
        self.mysql
            .pool
            .free_connections()
            .into_iter()
            .map(|f| {
                vec![
                    Some(f.thread_id.to_string()),
                    Some(f.hostgroup.to_string()),
                    Some(f.server.hostname.clone()),
                    Some(f.server.port.to_string()),
                    Some(f.user),
                    f.schema,
                    None,
                    f.time_zone,
                    f.sql_mode,
                    f.autocommit,
                    Some(f.idle_ms.to_string()),
                    None,
                    None,
                ]
            })
            .collect()
    }

    fn runtime_changed(&self) {
        let rt = self.config.load();
        self.mysql
            .pool
            .purge_idle(|hg, server| rt.mysql.server_in_service(hg, server));
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

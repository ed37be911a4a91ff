//! The admin statements [`Admin`] runs: the parsed commands (`LOAD … TO RUNTIME`, `SHOW …`,
//! `PROXYSQL …`, `KILL`, …) and plain SQL on the store, with the stats user's limits.

use super::{Admin, RUNTIME_MODULES};
use crate::command::Command;
use crate::export::config_to_toml;
use crate::layers::memory_to_config;
use crate::stats;
use sluice_core::admin::{AdminError, AdminReply, AdminRole, AdminRows};
use tracing::{info, warn};

impl Admin {
    /// `PROXYSQL PAUSE|RESUME|SHUTDOWN|FLUSH …` on the running data path.
    fn proxysql(&self, what: &str) -> Result<AdminReply, AdminError> {
        let control = self.control()?;
        match what {
            "PAUSE" => control.set_paused(true),
            "RESUME" => control.set_paused(false),
            "SHUTDOWN" | "SHUTDOWN SLOW" | "STOP" | "KILL" => control.shutdown(),
            "FLUSH LOGS" => {}
            "RELOAD TLS" => {
                control.reload_tls().map_err(|e| {
                    warn!("PROXYSQL RELOAD TLS refused, the current certificates stay: {e}");
                    AdminError::new(format!(
                        "TLS reload failed, the current certificates stay: {e}"
                    ))
                })?;
                info!("PROXYSQL RELOAD TLS: new handshakes use the certificates read now");
            }
            "FLUSH QUERY CACHE" | "FLUSH MYSQL QUERY CACHE" => {
                let n = control.flush_query_cache(sluice_core::Protocol::Mysql);
                return Ok(AdminReply::Done {
                    affected: n as u64,
                    message: None,
                });
            }
            "FLUSH MYSQL CLIENT HOSTS" | "FLUSH PGSQL CLIENT HOSTS" => {
                let p = if what.contains("PGSQL") {
                    sluice_core::Protocol::Pgsql
                } else {
                    sluice_core::Protocol::Mysql
                };
                let n = control.flush_client_hosts(p);
                info!(
                    "PROXYSQL {what}: {n} client address(es) forgotten; their logins are no longer throttled"
                );
                return Ok(AdminReply::Done {
                    affected: n as u64,
                    message: None,
                });
            }
            "FLUSH PGSQL QUERY CACHE" => {
                let n = control.flush_query_cache(sluice_core::Protocol::Pgsql);
                return Ok(AdminReply::Done {
                    affected: n as u64,
                    message: None,
                });
            }
            other => {
                return Err(AdminError::new(format!(
                    "PROXYSQL {other} is not supported by Sluice"
                )));
            }
        }
        Ok(AdminReply::Done {
            affected: 0,
            message: None,
        })
    }

    /// `global_variables` rows whose name matches the `LIKE` pattern, as `SHOW … VARIABLES` lists
    /// them.
    /// `SHOW VARIABLES`; the stats account sees passwords and credentials as `********`.
    async fn show_variables(&self, role: AdminRole, like: &str) -> Result<AdminReply, AdminError> {
        let mask = if role == AdminRole::Stats { "1" } else { "0" };
        let rows = self
            .store
            .query_bound(
                "SELECT variable_name AS Variable_name, \
                 CASE WHEN ?2 = '1' AND (variable_name LIKE '%password%' \
                   OR variable_name LIKE '%credentials%') THEN '********' \
                   ELSE variable_value END AS Value \
                 FROM main.global_variables WHERE variable_name LIKE ?1 ORDER BY variable_name",
                &[like, mask],
            )
            .await?;
        Ok(AdminReply::Rows(rows))
    }

    pub(super) async fn run_command(
        &self,
        role: AdminRole,
        c: Command,
    ) -> Result<AdminReply, AdminError> {
        if role == AdminRole::Stats && !c.is_read_only() {
            return Err(AdminError {
                code: 1045,
                sqlstate: "28000",
                message: "the stats user may only read".into(),
            });
        }
        match c {
            Command::Move(m, d) => self.move_module(m, d).await,
            Command::SetVariable(n, v) => self.set_variable(&n, &v).await,
            Command::ShowVariables(prefix) => {
                self.show_variables(role, &format!("{prefix}%")).await
            }
            Command::ShowAllVariables(pattern) => {
                self.show_variables(role, pattern.as_deref().unwrap_or("%"))
                    .await
            }
            Command::ShowTables(db) => self.show_tables(db.as_deref()).await,
            Command::ShowDatabases => Ok(AdminReply::Rows(
                self.store
                    .query("SELECT seq, name, file FROM pragma_database_list")
                    .await?,
            )),
            Command::ShowCreateTable(t) => self.show_create_table(&t).await,
            Command::ShowProcesslist => self.show_processlist().await,
            c @ (Command::ShowPrometheusMetrics
            | Command::ShowStatus(_)
            | Command::PgBouncer(_)
            | Command::PgBouncerReload
            | Command::Unsupported(_)) => self.monitoring_command(c).await,
            Command::Proxysql(what) => self.proxysql(&what),
            Command::ProxySelect(table) => Ok(AdminReply::Rows(self.proxy_select(&table)?)),
            Command::RagSync(id) => self.rag_sync(id),
            Command::Kill(id) => self.kill(id),
            Command::SaveConfigToFile(path) => self.save_config_to_file(&path).await,
            Command::SessionSet => Ok(done()),
            Command::EmptyShow(cols) => Ok(AdminReply::Rows(AdminRows {
                columns: cols.iter().map(|c| c.to_string()).collect(),
                rows: Vec::new(),
            })),
            Command::SelectSysvars(names) => Ok(AdminReply::Rows(AdminRows {
                rows: vec![names.iter().map(|n| Some(sysvar_value(n))).collect()],
                columns: names,
            })),
            Command::SelectVersion => Ok(AdminReply::Rows(AdminRows {
                columns: vec!["@@version".into()],
                rows: vec![vec![Some(format!(
                    "{}-sluice-admin",
                    env!("CARGO_PKG_VERSION")
                ))]],
            })),
        }
    }

    /// `SHOW TABLES [FROM db]`.
    async fn show_tables(&self, db: Option<&str>) -> Result<AdminReply, AdminError> {
        let schema = match db {
            None | Some("main") => "main",
            Some("disk") => "disk",
            Some("stats") => "stats",
            Some("monitor") => "monitor",
            Some(other) => {
                return Err(AdminError::new(format!("unknown database {other}")));
            }
        };
        Ok(AdminReply::Rows(
            self.store
                .query(&format!("SELECT name AS tables FROM {schema}.sqlite_master WHERE type = 'table' ORDER BY name"))
                .await?,
        ))
    }

    /// `SHOW CREATE TABLE t`, from whichever schema holds it.
    async fn show_create_table(&self, t: &str) -> Result<AdminReply, AdminError> {
        let rows = self
            .store
            .query_bound(
                "SELECT name AS \"table\", sql AS \"Create Table\" FROM (SELECT name, sql FROM main.sqlite_master UNION ALL SELECT name, sql FROM stats.sqlite_master UNION ALL SELECT name, sql FROM monitor.sqlite_master) WHERE name = ?1 LIMIT 1",
                &[t],
            )
            .await?;
        if rows.rows.is_empty() {
            return Err(AdminError::new(format!("no such table: {t}")));
        }
        Ok(AdminReply::Rows(rows))
    }

    /// `SHOW PROCESSLIST`: the MySQL sessions, refreshed now.
    async fn show_processlist(&self) -> Result<AdminReply, AdminError> {
        stats::refresh(&self.store, self.live()?.as_ref(), &self.running_config()).await?;
        Ok(AdminReply::Rows(
            self.store
                .query("SELECT SessionID, user, db, cli_host, hostgroup, command, multiplexed, pin_reason FROM stats.stats_mysql_processlist ORDER BY SessionID")
                .await?,
        ))
    }

    /// `RAG SYNC SOURCE n`.
    fn rag_sync(&self, id: u32) -> Result<AdminReply, AdminError> {
        let message = self
            .control()?
            .rag_sync(id)
            .map_err(|e| AdminError::new(e.to_string()))?;
        info!(source_id = id, "RAG SYNC SOURCE: {message}");
        Ok(AdminReply::Done {
            affected: 0,
            message: Some(message),
        })
    }

    /// `KILL n`: ends session `n` of either protocol.
    fn kill(&self, id: u32) -> Result<AdminReply, AdminError> {
        if self.control()?.kill_session(id) {
            Ok(done())
        } else {
            Err(AdminError {
                code: 1094,
                sqlstate: "HY000",
                message: format!("Unknown thread id: {id}"),
            })
        }
    }

    /// `SAVE CONFIG TO FILE path`: the memory layer as a TOML config file.
    async fn save_config_to_file(&self, path: &str) -> Result<AdminReply, AdminError> {
        let cfg = memory_to_config(&self.store, &self.running_config(), &RUNTIME_MODULES).await?;
        let text = config_to_toml(&cfg).map_err(|e| AdminError::new(e.to_string()))?;
        std::fs::write(path, text).map_err(|e| AdminError::new(format!("{path}: {e}")))?;
        Ok(done())
    }

    pub(super) async fn run_sql(
        &self,
        role: AdminRole,
        sql: &str,
    ) -> Result<AdminReply, AdminError> {
        if let Some(why) = crate::guard::refused(sql) {
            warn!("admin statement refused: {why}");
            return Err(AdminError {
                code: 1142,
                sqlstate: "42000",
                message: why,
            });
        }
        let sql = &*crate::functions::rewrite_mysql_functions(sql);
        let lower = sql.trim_start().to_ascii_lowercase();
        let is_read = lower.starts_with("select")
            || lower.starts_with("with")
            || lower.starts_with("pragma")
            || lower.starts_with("explain");
        if role == AdminRole::Stats
            && let Some(why) = crate::guard::stats_refusal(sql)
        {
            return Err(AdminError {
                code: 1045,
                sqlstate: "28000",
                message: why,
            });
        }
        self.refresh_cluster_tables(&lower).await?;
        if let Some(live) = self.live.get() {
            if lower.contains("stats_") {
                stats::refresh(&self.store, live.as_ref(), &self.running_config()).await?;
                stats::refresh_query_tables(&self.store, live.as_ref(), &lower).await?;
            }
            if lower.contains("_log") || lower.contains("runtime_") {
                stats::refresh_monitor_tables(
                    &self.store,
                    live.as_ref(),
                    &self.running_config(),
                    &lower,
                )
                .await?;
            }
        }
        if is_read {
            Ok(AdminReply::Rows(self.store.query(sql).await?))
        } else {
            let n = self.store.exec(sql).await?;
            Ok(AdminReply::Done {
                affected: n,
                message: None,
            })
        }
    }
}

/// Values client libraries expect from `SELECT @@var` on connect.
fn sysvar_value(name: &str) -> String {
    let n = name.trim_start_matches("@@").to_ascii_lowercase();
    let n = n
        .strip_prefix("session.")
        .or_else(|| n.strip_prefix("global."))
        .unwrap_or(&n)
        .to_string();
    match n.as_str() {
        "max_allowed_packet" => "67108864".into(),
        "version" => format!("{}-sluice-admin", env!("CARGO_PKG_VERSION")),
        "version_comment" => "(Sluice Admin)".into(),
        "autocommit" | "auto_increment_increment" | "auto_increment_offset" => "1".into(),
        "tx_isolation" | "transaction_isolation" => "READ-COMMITTED".into(),
        "wait_timeout" | "interactive_timeout" => "28800".into(),
        "sql_mode" | "init_connect" | "socket" => String::new(),
        "lower_case_table_names" => "0".into(),
        "time_zone" | "system_time_zone" => "UTC".into(),
        n if n.starts_with("character_set") => "utf8mb4".into(),
        n if n.starts_with("collation") => "utf8mb4_general_ci".into(),
        _ => String::new(),
    }
}

/// A statement's success with nothing to report.
fn done() -> AdminReply {
    AdminReply::Done {
        affected: 0,
        message: None,
    }
}

//! [`Admin`]: runs admin statements against the store and moves configuration between layers.

use crate::command::{Command, Direction, Module, parse_command};
use crate::export::config_to_toml;
use crate::layers::{
    config_rows, copy_module_sql, memory_to_config, replace_rows_sql, variables_sql,
};
use crate::schema::ddl;
use crate::stats;
use crate::store::Store;
use sluice_core::admin::{
    AdminCredential, AdminError, AdminExecutor, AdminFuture, AdminReply, AdminRole, AdminRows,
    LiveStats,
};
use sluice_core::config::{AdminVariables, Config, MysqlVariables, PgsqlVariables, SetOutcome};
use sluice_core::util::lock;
use sluice_core::{ConfigHandle, RuntimeConfig};
use std::path::PathBuf;
use std::sync::{Arc, Mutex, OnceLock};
use tracing::{info, warn};

/// How the admin store starts.
#[derive(Debug, Clone)]
pub struct AdminOptions {
    /// Data folder; the disk schema is `<datadir>/sluice.db` (memory only without one).
    pub datadir: Option<PathBuf>,
    /// Take the config file even when the disk database has a configuration.
    pub initial: bool,
    /// The parsed config file.
    pub file: Config,
}

/// Where the configuration the process starts with came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StartupSource {
    /// The disk database (a previous SAVE ... TO DISK).
    Disk,
    /// The config file.
    ConfigFile,
}

/// The admin interface's state.
pub struct Admin {
    pub(crate) store: Store,
    /// The configuration the runtime was built from.
    running: Mutex<Config>,
    file: Config,
    runtime: OnceLock<ConfigHandle>,
    live: OnceLock<Arc<dyn LiveStats>>,
    /// When the process started (`proxysql_uptime_seconds_total`, `ProxySQL_Uptime`).
    pub(crate) started: std::time::Instant,
    /// Each cluster module's version, epoch and checksum (`runtime_checksums_values`).
    pub(crate) checksums: crate::cluster::Checksums,
    /// What is known of the other nodes of the fleet.
    pub(crate) cluster: crate::cluster::ClusterBoard,
    /// Syncs from several peers (or the store) apply one at a time.
    pub(crate) apply_lock: tokio::sync::Mutex<()>,
    /// The shared configuration store, when one is configured.
    pub(crate) config_store: OnceLock<Arc<dyn crate::config_store::ConfigStore>>,
    /// Its connection state.
    pub(crate) store_status: Mutex<Option<crate::config_store::StoreStatus>>,
}

const RUNTIME_MODULES: [Module; 15] = [
    Module::MysqlUsers,
    Module::MysqlServers,
    Module::MysqlVariables,
    Module::AdminVariables,
    Module::PgsqlUsers,
    Module::PgsqlServers,
    Module::PgsqlVariables,
    Module::MysqlQueryRules,
    Module::PgsqlQueryRules,
    Module::ProxysqlServers,
    Module::McpVariables,
    Module::McpProfiles,
    Module::McpQueryRules,
    Module::RagSources,
    Module::WorkloadClasses,
];
const ALL_MODULES: [Module; 16] = [
    Module::MysqlUsers,
    Module::MysqlServers,
    Module::MysqlQueryRules,
    Module::MysqlVariables,
    Module::PgsqlUsers,
    Module::PgsqlServers,
    Module::PgsqlQueryRules,
    Module::PgsqlVariables,
    Module::AdminVariables,
    Module::Scheduler,
    Module::ProxysqlServers,
    Module::McpVariables,
    Module::McpProfiles,
    Module::McpQueryRules,
    Module::RagSources,
    Module::WorkloadClasses,
];

/// Adds the columns a newer Sluice defines to a disk database an older one wrote.
async fn migrate_disk(store: &Store) -> Result<(), crate::Error> {
    for (table, cols) in crate::schema_defs::CONFIG_TABLES {
        let info = store
            .query(&format!(
                "SELECT name FROM pragma_table_info('{table}', 'disk')"
            ))
            .await
            .map_err(|e| crate::Error::Schema(e.to_string()))?;
        let on_disk: Vec<String> = info
            .rows
            .into_iter()
            .filter_map(|r| r.into_iter().next().flatten())
            .collect();
        for sql in crate::schema::disk_migrations(table, cols, &on_disk) {
            store
                .exec(&sql)
                .await
                .map_err(|e| crate::Error::Schema(format!("{sql}: {e}")))?;
            info!("admin disk database: {sql} (a column this version adds)");
        }
    }
    Ok(())
}

impl Admin {
    /// Opens the store and decides the starting configuration: the disk database's when it holds
    /// one (unless `initial`), else the config file's, which is then also saved to disk.
    pub async fn open(opts: AdminOptions) -> Result<(Admin, Config, StartupSource), crate::Error> {
        let disk = opts.datadir.as_ref().map(|d| d.join("sluice.db"));
        if disk.is_none() {
            warn!(
                "no datadir: the admin disk layer lives in memory and SAVE ... TO DISK does not survive a restart"
            );
        }
        let store = Store::open(disk.as_deref())
            .await
            .map_err(|e| crate::Error::Open(e.to_string()))?;
        store
            .exec_all(&ddl())
            .await
            .map_err(|e| crate::Error::Schema(e.to_string()))?;
        migrate_disk(&store).await?;
        let admin = Admin {
            store,
            running: Mutex::new(opts.file.clone()),
            file: opts.file.clone(),
            runtime: OnceLock::new(),
            live: OnceLock::new(),
            started: std::time::Instant::now(),
            checksums: Default::default(),
            cluster: Default::default(),
            apply_lock: tokio::sync::Mutex::new(()),
            config_store: OnceLock::new(),
            store_status: Mutex::new(None),
        };
        let disk_has_config = admin
            .store
            .query("SELECT (SELECT COUNT(*) FROM disk.mysql_servers) + (SELECT COUNT(*) FROM disk.mysql_users) + (SELECT COUNT(*) FROM disk.global_variables)")
            .await
            .ok()
            .and_then(|r| r.rows.first()?.first()?.clone())
            .is_some_and(|n| n != "0");
        let (cfg, source) = if disk_has_config && !opts.initial {
            for m in ALL_MODULES {
                admin
                    .store
                    .exec_all(&copy_module_sql(m, ("disk", ""), ("main", "")))
                    .await
                    .map_err(|e| crate::Error::Layers(e.to_string()))?;
            }
            let cfg = memory_to_config(&admin.store, &opts.file, &RUNTIME_MODULES)
                .await
                .map_err(|e| crate::Error::SavedConfig {
                    path: disk
                        .as_ref()
                        .map(|p| p.display().to_string())
                        .unwrap_or_default(),
                    why: e.to_string(),
                })?;
            (cfg, StartupSource::Disk)
        } else {
            for m in ALL_MODULES {
                admin
                    .config_to_memory(m)
                    .await
                    .map_err(|e| crate::Error::Layers(e.to_string()))?;
                admin
                    .store
                    .exec_all(&copy_module_sql(m, ("main", ""), ("disk", "")))
                    .await
                    .map_err(|e| crate::Error::Layers(e.to_string()))?;
            }
            (opts.file.clone(), StartupSource::ConfigFile)
        };
        *lock(&admin.running) = cfg.clone();
        for m in ALL_MODULES {
            admin.checksums.loaded(m, &cfg);
            admin
                .refresh_runtime_tables(m)
                .await
                .map_err(|e| crate::Error::Layers(e.to_string()))?;
        }
        Ok((admin, cfg, source))
    }

    /// Connects the admin to the data path: the runtime handle it swaps and the live state.
    pub fn attach(&self, runtime: ConfigHandle, live: Arc<dyn LiveStats>) {
        let _ = self.runtime.set(runtime);
        let _ = self.live.set(live);
    }

    /// The configuration the runtime uses now.
    pub fn running_config(&self) -> Config {
        lock(&self.running).clone()
    }

    async fn config_to_memory(&self, m: Module) -> Result<(), AdminError> {
        let sql = match m.variable_prefix() {
            Some("mysql-") => variables_sql("main", "mysql-", &self.file.mysql_variables.pairs()),
            Some("admin-") => variables_sql("main", "admin-", &self.file.admin_variables.pairs()),
            Some("mcp-") => variables_sql("main", "mcp-", &self.file.mcp_variables.pairs()),
            Some(_) => variables_sql("main", "pgsql-", &self.file.pgsql_variables.pairs()),
            None => {
                let mut sql = Vec::new();
                for t in m.tables() {
                    sql.extend(replace_rows_sql("main", t, &config_rows(&self.file, t)));
                }
                sql
            }
        };
        self.store.exec_all(&sql).await
    }

    /// After a runtime change: `runtime_*` shows what the data path uses.
    async fn refresh_runtime_tables(&self, m: Module) -> Result<(), AdminError> {
        let cfg = self.running_config();
        let sql = match m {
            Module::MysqlVariables => variables_sql("main", "mysql-", &cfg.mysql_variables.pairs())
                .into_iter()
                .map(|s| s.replacen("main.global_variables", "main.runtime_global_variables", 1))
                .collect(),
            Module::AdminVariables => variables_sql("main", "admin-", &cfg.admin_variables.pairs())
                .into_iter()
                .map(|s| s.replacen("main.global_variables", "main.runtime_global_variables", 1))
                .collect(),
            Module::PgsqlVariables => variables_sql("main", "pgsql-", &cfg.pgsql_variables.pairs())
                .into_iter()
                .map(|s| s.replacen("main.global_variables", "main.runtime_global_variables", 1))
                .collect(),
            Module::McpVariables => variables_sql("main", "mcp-", &cfg.mcp_variables.pairs())
                .into_iter()
                .map(|s| s.replacen("main.global_variables", "main.runtime_global_variables", 1))
                .collect(),
            Module::MysqlUsers
            | Module::MysqlServers
            | Module::PgsqlUsers
            | Module::PgsqlServers
            | Module::MysqlQueryRules
            | Module::PgsqlQueryRules
            | Module::ProxysqlServers
            | Module::McpProfiles
            | Module::McpQueryRules
            | Module::RagSources
            | Module::WorkloadClasses => {
                let mut sql = Vec::new();
                for t in m.tables() {
                    if crate::layers::RUNTIME_TABLES.contains(t) {
                        sql.extend(replace_rows_sql(
                            "main",
                            &format!("runtime_{t}"),
                            &config_rows(&cfg, t),
                        ));
                    } else {
                        sql.push(format!("DELETE FROM main.runtime_{t}"));
                        sql.push(format!(
                            "INSERT INTO main.runtime_{t} SELECT * FROM main.{t}"
                        ));
                    }
                }
                sql
            }
            other => copy_module_sql(other, ("main", ""), ("main", "runtime_")),
        };
        self.store.exec_all(&sql).await
    }

    pub(crate) async fn memory_to_runtime(&self, m: Module) -> Result<AdminReply, AdminError> {
        let mut message = None;
        if RUNTIME_MODULES.contains(&m) {
            let base = self.running_config();
            let mut cfg = memory_to_config(&self.store, &base, &[m]).await?;
            if m == Module::MysqlUsers && cfg.admin_variables.hash_passwords {
                hash_mysql_passwords(&mut cfg);
            }
            let mut restart = restart_changes(
                "mysql-",
                MysqlVariables::RESTART_REQUIRED,
                &base.mysql_variables.pairs(),
                &cfg.mysql_variables.pairs(),
            );
            restart.extend(restart_changes(
                "pgsql-",
                PgsqlVariables::RESTART_REQUIRED,
                &base.pgsql_variables.pairs(),
                &cfg.pgsql_variables.pairs(),
            ));
            if !restart.is_empty() {
                message = Some(format!(
                    "{} take effect after a restart",
                    restart.join(", ")
                ));
            }
            if let Some(h) = self.runtime.get() {
                h.store(RuntimeConfig::build(&cfg));
            }
            self.checksums.loaded(m, &cfg);
            *lock(&self.running) = cfg;
            if let Some(live) = self.live.get() {
                live.runtime_changed();
            }
            info!("admin: loaded {m:?} to runtime");
        }
        self.refresh_runtime_tables(m).await?;
        Ok(AdminReply::Done {
            affected: 0,
            message,
        })
    }

    pub(crate) async fn move_module(
        &self,
        m: Module,
        d: Direction,
    ) -> Result<AdminReply, AdminError> {
        match d {
            Direction::MemoryToRuntime => return self.memory_to_runtime(m).await,
            Direction::RuntimeToMemory => {
                self.store
                    .exec_all(&copy_module_sql(m, ("main", "runtime_"), ("main", "")))
                    .await?
            }
            Direction::DiskToMemory => {
                self.store
                    .exec_all(&copy_module_sql(m, ("disk", ""), ("main", "")))
                    .await?
            }
            Direction::MemoryToDisk => {
                self.store
                    .exec_all(&copy_module_sql(m, ("main", ""), ("disk", "")))
                    .await?
            }
            Direction::ConfigToMemory => self.config_to_memory(m).await?,
            Direction::RuntimeToCluster => return self.save_to_cluster(m).await,
            Direction::ClusterToRuntime => return self.load_from_cluster(m).await,
        }
        Ok(AdminReply::Done {
            affected: 0,
            message: None,
        })
    }

    async fn set_variable(&self, name: &str, value: &str) -> Result<AdminReply, AdminError> {
        // Check the name and value now, as ProxySQL does; LOAD ... TO RUNTIME applies it.
        let checked = if let Some(n) = name.strip_prefix("mysql-") {
            MysqlVariables::default().set(n, value)
        } else if let Some(n) = name.strip_prefix("pgsql-") {
            PgsqlVariables::default().set(n, value)
        } else if let Some(n) = name.strip_prefix("admin-") {
            AdminVariables::default().set(n, value)
        } else if let Some(n) = name.strip_prefix("mcp-") {
            sluice_core::config::McpVariables::default().set(n, value)
        } else {
            Ok(SetOutcome::Applied)
        };
        checked.map_err(|e| AdminError::new(e.to_string()))?;
        let n = self
            .store
            .exec_bound(
                "UPDATE main.global_variables SET variable_value = ?2 WHERE variable_name = ?1",
                &[name, value],
            )
            .await?;
        if n == 0 {
            self.store
                .exec_bound("INSERT INTO main.global_variables (variable_name, variable_value) VALUES (?1, ?2)", &[name, value])
                .await?;
        }
        Ok(AdminReply::Done {
            affected: 1,
            message: None,
        })
    }

    pub(crate) fn runtime_handle(&self) -> Result<&ConfigHandle, AdminError> {
        self.runtime
            .get()
            .ok_or_else(|| AdminError::new("the data path is not running"))
    }

    pub(crate) fn live(&self) -> Result<&Arc<dyn LiveStats>, AdminError> {
        self.live
            .get()
            .ok_or_else(|| AdminError::new("the data path is not running"))
    }

    /// `PROXYSQL PAUSE|RESUME|SHUTDOWN|FLUSH …` on the running data path.
    fn proxysql(&self, what: &str) -> Result<AdminReply, AdminError> {
        let live = self.live()?;
        match what {
            "PAUSE" => live.set_paused(true),
            "RESUME" => live.set_paused(false),
            "SHUTDOWN" | "SHUTDOWN SLOW" | "STOP" | "KILL" => live.shutdown(),
            "FLUSH LOGS" => {}
            "RELOAD TLS" => {
                live.reload_tls().map_err(|e| {
                    warn!("PROXYSQL RELOAD TLS refused, the current certificates stay: {e}");
                    AdminError::new(format!(
                        "TLS reload failed, the current certificates stay: {e}"
                    ))
                })?;
                info!("PROXYSQL RELOAD TLS: new handshakes use the certificates read now");
            }
            "FLUSH QUERY CACHE" | "FLUSH MYSQL QUERY CACHE" => {
                let n = live.flush_query_cache(sluice_core::admin::Protocol::Mysql);
                return Ok(AdminReply::Done {
                    affected: n as u64,
                    message: None,
                });
            }
            "FLUSH MYSQL CLIENT HOSTS" | "FLUSH PGSQL CLIENT HOSTS" => {
                let p = if what.contains("PGSQL") {
                    sluice_core::admin::Protocol::Pgsql
                } else {
                    sluice_core::admin::Protocol::Mysql
                };
                let n = live.flush_client_hosts(p);
                info!(
                    "PROXYSQL {what}: {n} client address(es) forgotten; their logins are no longer throttled"
                );
                return Ok(AdminReply::Done {
                    affected: n as u64,
                    message: None,
                });
            }
            "FLUSH PGSQL QUERY CACHE" => {
                let n = live.flush_query_cache(sluice_core::admin::Protocol::Pgsql);
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

    async fn run_command(&self, role: AdminRole, c: Command) -> Result<AdminReply, AdminError> {
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
            Command::ShowTables(db) => {
                let schema = match db.as_deref() {
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
            Command::ShowDatabases => Ok(AdminReply::Rows(
                self.store
                    .query("SELECT seq, name, file FROM pragma_database_list")
                    .await?,
            )),
            Command::ShowCreateTable(t) => {
                let rows = self
                    .store
                    .query_bound(
                        "SELECT name AS \"table\", sql AS \"Create Table\" FROM (SELECT name, sql FROM main.sqlite_master UNION ALL SELECT name, sql FROM stats.sqlite_master UNION ALL SELECT name, sql FROM monitor.sqlite_master) WHERE name = ?1 LIMIT 1",
                        &[&t],
                    )
                    .await?;
                if rows.rows.is_empty() {
                    return Err(AdminError::new(format!("no such table: {t}")));
                }
                Ok(AdminReply::Rows(rows))
            }
            Command::ShowProcesslist => {
                stats::refresh(&self.store, self.live()?.as_ref(), &self.running_config()).await?;
                Ok(AdminReply::Rows(
                    self.store
                        .query("SELECT SessionID, user, db, cli_host, hostgroup, command, multiplexed, pin_reason FROM stats.stats_mysql_processlist ORDER BY SessionID")
                        .await?,
                ))
            }
            c @ (Command::ShowPrometheusMetrics
            | Command::ShowStatus(_)
            | Command::PgBouncer(_)
            | Command::PgBouncerReload
            | Command::Unsupported(_)) => self.monitoring_command(c).await,
            Command::Proxysql(what) => self.proxysql(&what),
            Command::ProxySelect(table) => Ok(AdminReply::Rows(self.proxy_select(&table)?)),
            Command::RagSync(id) => {
                let message = self.live()?.rag_sync(id).map_err(AdminError::new)?;
                info!(source_id = id, "RAG SYNC SOURCE: {message}");
                Ok(AdminReply::Done {
                    affected: 0,
                    message: Some(message),
                })
            }
            Command::Kill(id) => {
                if self.live()?.kill_session(id) {
                    Ok(AdminReply::Done {
                        affected: 0,
                        message: None,
                    })
                } else {
                    Err(AdminError {
                        code: 1094,
                        sqlstate: "HY000",
                        message: format!("Unknown thread id: {id}"),
                    })
                }
            }
            Command::SaveConfigToFile(path) => {
                let cfg =
                    memory_to_config(&self.store, &self.running_config(), &RUNTIME_MODULES).await?;
                let text = config_to_toml(&cfg).map_err(|e| AdminError::new(e.to_string()))?;
                std::fs::write(&path, text).map_err(|e| AdminError::new(format!("{path}: {e}")))?;
                Ok(AdminReply::Done {
                    affected: 0,
                    message: None,
                })
            }
            Command::SessionSet => Ok(AdminReply::Done {
                affected: 0,
                message: None,
            }),
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

    async fn run_sql(&self, role: AdminRole, sql: &str) -> Result<AdminReply, AdminError> {
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

impl AdminExecutor for Admin {
    fn execute<'a>(&'a self, role: AdminRole, sql: &'a str) -> AdminFuture<'a> {
        Box::pin(async move {
            match parse_command(sql) {
                Some(c) => self.run_command(role, c).await,
                None => self.run_sql(role, sql).await,
            }
        })
    }

    fn credentials(&self) -> Vec<AdminCredential> {
        let cfg = self.running_config();
        let mut out: Vec<AdminCredential> =
            AdminVariables::parse_credentials(&cfg.admin_variables.admin_credentials)
                .into_iter()
                .map(|(user, password)| AdminCredential {
                    user,
                    password,
                    role: AdminRole::Admin,
                })
                .collect();
        out.extend(
            AdminVariables::parse_credentials(&cfg.admin_variables.stats_credentials)
                .into_iter()
                .map(|(user, password)| AdminCredential {
                    user,
                    password,
                    role: AdminRole::Stats,
                }),
        );
        out
    }
}

/// `admin-hash_passwords`: every cleartext `mysql_users` password becomes its
/// `mysql_native_password` hash (`*` + 40 upper-case hex); hashes stay as they are.
fn hash_mysql_passwords(cfg: &mut Config) {
    let mut hashed = 0;
    for u in &mut cfg.mysql_users {
        let is_hash = sluice_mysql_proto::scramble::parse_native_hash(&u.password).is_some();
        if !is_hash && !u.password.is_empty() {
            u.password = sluice_mysql_proto::scramble::format_native_hash(&u.password);
            hashed += 1;
        }
    }
    if hashed > 0 {
        info!("admin-hash_passwords: {hashed} mysql_users password(s) hashed in the runtime");
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

/// The restart-only variables whose value differs between `before` and `after`, prefixed.
fn restart_changes(
    prefix: &str,
    names: &[&str],
    before: &[(String, String)],
    after: &[(String, String)],
) -> Vec<String> {
    let value = |pairs: &[(String, String)], name: &str| {
        pairs
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.clone())
    };
    names
        .iter()
        .filter(|n| value(before, n) != value(after, n))
        .map(|n| format!("{prefix}{n}"))
        .collect()
}

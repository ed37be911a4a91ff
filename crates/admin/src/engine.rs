//! [`Admin`]: runs admin statements against the store and moves configuration between layers.

use crate::command::{Direction, Module, parse_command};
use crate::layers::{
    config_rows, copy_module_sql, memory_to_config, replace_rows_sql, variables_sql,
};
use crate::schema::ddl;
use crate::store::Store;
use sluice_core::admin::{
    AdminCredential, AdminError, AdminExecutor, AdminFuture, AdminReply, AdminRole,
};
use sluice_core::config::{AdminVariables, Config, MysqlVariables, PgsqlVariables, SetOutcome};
use sluice_core::live::{Control, LiveStats};
use sluice_core::util::lock;
use sluice_core::{ConfigHandle, RuntimeConfig};
use std::path::PathBuf;
use std::sync::{Arc, Mutex, OnceLock};
use tracing::{info, warn};

mod statements;

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
    control: OnceLock<Arc<dyn Control>>,
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
            control: OnceLock::new(),
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

    /// Connects the admin to the data path: the runtime handle it swaps, the live state its
    /// stats tables show and the controls its commands use.
    pub fn attach(
        &self,
        runtime: ConfigHandle,
        live: Arc<dyn LiveStats>,
        control: Arc<dyn Control>,
    ) {
        let _ = self.runtime.set(runtime);
        let _ = self.live.set(live);
        let _ = self.control.set(control);
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
                MysqlVariables::restart_required,
                &base.mysql_variables.pairs(),
                &cfg.mysql_variables.pairs(),
            );
            restart.extend(restart_changes(
                "pgsql-",
                PgsqlVariables::restart_required,
                &base.pgsql_variables.pairs(),
                &cfg.pgsql_variables.pairs(),
            ));
            restart.extend(restart_changes(
                "admin-",
                AdminVariables::restart_required,
                &base.admin_variables.pairs(),
                &cfg.admin_variables.pairs(),
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
            if let Some(control) = self.control.get() {
                control.runtime_changed();
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

    pub(crate) fn control(&self) -> Result<&Arc<dyn Control>, AdminError> {
        self.control
            .get()
            .ok_or_else(|| AdminError::new("the data path is not running"))
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

/// The restart-only variables whose value differs between `before` and `after`, prefixed.
fn restart_changes(
    prefix: &str,
    restart_required: fn(&str) -> bool,
    before: &[(String, String)],
    after: &[(String, String)],
) -> Vec<String> {
    after
        .iter()
        .filter(|(name, _)| restart_required(name))
        .filter(|(name, value)| !before.iter().any(|(k, v)| k == name && v == value))
        .map(|(name, _)| format!("{prefix}{name}"))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `LOAD … VARIABLES TO RUNTIME` names the changed variables the declarations mark as read
    /// at start, and only those.
    #[test]
    fn restart_notes_name_changed_start_time_variables() {
        let before = MysqlVariables::default();
        let mut after = before.clone();
        after.set("threads", "3").expect("threads");
        after.set("max_connections", "50").expect("max_connections");
        after.set("have_ssl", "true").expect("unchanged");
        let notes = restart_changes(
            "mysql-",
            MysqlVariables::restart_required,
            &before.pairs(),
            &after.pairs(),
        );
        assert_eq!(notes, ["mysql-threads"]);
        let before = AdminVariables::default();
        let mut after = before.clone();
        after.set("restapi_port", "7070").expect("restapi_port");
        after.set("hash_passwords", "true").expect("hash_passwords");
        let notes = restart_changes(
            "admin-",
            AdminVariables::restart_required,
            &before.pairs(),
            &after.pairs(),
        );
        assert_eq!(notes, ["admin-restapi_port"]);
    }
}

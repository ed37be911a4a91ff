//! The admin's side of keeping a fleet of nodes in step (ProxySQL Cluster, and the etcd store):
//! each cluster module's runtime identity (version, epoch, checksum, as in
//! `runtime_checksums_values`), the module's runtime content as rows a peer can pull
//! (`PROXY_SELECT * FROM runtime_<table>`), applying a pulled module with one runtime swap, and
//! the board of what is known about the other nodes (`stats_proxysql_servers_*`).

use crate::command::Module;
use crate::engine::Admin;
use crate::layers::{config_rows, replace_rows_sql, table_columns};
use sluice_core::admin::{AdminError, AdminRows};
use sluice_core::config::{CLUSTER_MODULES, Config, NODE_LOCAL_VARIABLES};
use sluice_core::util::lock;
use std::collections::BTreeMap;
use std::sync::Mutex;
use std::time::{SystemTime, UNIX_EPOCH};
use tracing::info;

/// The checksum of a module with no rows: never a source for a sync (a node that lost or never
/// had its configuration must not empty its peers').
pub const EMPTY_CHECKSUM: &str = "0x0000000000000000";

/// One module's runtime identity, as `runtime_checksums_values` shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModuleChecksum {
    /// The module's ProxySQL name (`mysql_servers`, `pgsql_users`, ...).
    pub name: &'static str,
    /// 1 when the module was loaded at start, +1 on every `LOAD … TO RUNTIME` or sync.
    pub version: u64,
    /// Unix time (seconds) of the last load; the newer epoch wins a sync.
    pub epoch: u64,
    /// `0x` and 16 upper-case hex digits over the module's runtime rows.
    pub checksum: String,
}

/// A module's runtime content: its tables' rows (for variable modules, one `global_variables`
/// table of the variables that are not node-local).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ModuleRows {
    /// (table name, rows with column names), in the module's table order.
    pub tables: Vec<(String, AdminRows)>,
}

impl ModuleRows {
    /// True when no table has a row.
    pub fn is_empty(&self) -> bool {
        self.tables.iter().all(|(_, r)| r.rows.is_empty())
    }

    /// The checksum peers compare: SHA-256 over the table names, column names and the rows in
    /// sorted order (so the order rows were written in does not matter), its first 8 bytes as
    /// `0x%016X`; [`EMPTY_CHECKSUM`] when there are no rows.
    pub fn checksum(&self) -> String {
        if self.is_empty() {
            return EMPTY_CHECKSUM.to_string();
        }
        let mut ctx = ring::digest::Context::new(&ring::digest::SHA256);
        let field = |ctx: &mut ring::digest::Context, v: Option<&str>| match v {
            None => ctx.update(&[0]),
            Some(s) => {
                ctx.update(&[1]);
                ctx.update(&(s.len() as u64).to_le_bytes());
                ctx.update(s.as_bytes());
            }
        };
        for (table, rows) in &self.tables {
            field(&mut ctx, Some(table));
            for c in &rows.columns {
                field(&mut ctx, Some(c));
            }
            let mut sorted: Vec<&Vec<Option<String>>> = rows.rows.iter().collect();
            sorted.sort();
            for r in sorted {
                ctx.update(&[2]);
                for v in r {
                    field(&mut ctx, v.as_deref());
                }
            }
        }
        let d = ctx.finish();
        let mut first = [0u8; 8];
        first.copy_from_slice(&d.as_ref()[..8]);
        format!("0x{:016X}", u64::from_be_bytes(first))
    }
}

/// The LOAD/SAVE module behind a cluster module name.
pub(crate) fn module_of(name: &str) -> Option<Module> {
    Some(match name {
        "admin_variables" => Module::AdminVariables,
        "mysql_query_rules" => Module::MysqlQueryRules,
        "mysql_servers" => Module::MysqlServers,
        "mysql_users" => Module::MysqlUsers,
        "mysql_variables" => Module::MysqlVariables,
        "pgsql_query_rules" => Module::PgsqlQueryRules,
        "pgsql_servers" => Module::PgsqlServers,
        "pgsql_users" => Module::PgsqlUsers,
        "pgsql_variables" => Module::PgsqlVariables,
        "proxysql_servers" => Module::ProxysqlServers,
        _ => return None,
    })
}

/// The cluster module name of a LOAD/SAVE module (the scheduler is not synchronised).
pub(crate) fn name_of(m: Module) -> Option<&'static str> {
    CLUSTER_MODULES
        .iter()
        .copied()
        .find(|n| module_of(n) == Some(m))
}

fn unix_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

/// A module's rows in `cfg`, the runtime configuration.
pub(crate) fn rows_of(cfg: &Config, m: Module) -> ModuleRows {
    let tables = match m.variable_prefix() {
        Some(prefix) => {
            let pairs = match prefix {
                "mysql-" => cfg.mysql_variables.pairs(),
                "pgsql-" => cfg.pgsql_variables.pairs(),
                "mcp-" => cfg.mcp_variables.pairs(),
                _ => cfg.admin_variables.pairs(),
            };
            let mut rows: Vec<Vec<Option<String>>> = pairs
                .into_iter()
                .map(|(k, v)| (format!("{prefix}{k}"), v))
                .filter(|(k, _)| !NODE_LOCAL_VARIABLES.contains(&k.as_str()))
                .map(|(k, v)| vec![Some(k), Some(v)])
                .collect();
            rows.sort();
            vec![(
                "global_variables".to_string(),
                AdminRows {
                    columns: vec!["variable_name".into(), "variable_value".into()],
                    rows,
                },
            )]
        }
        None => m
            .tables()
            .iter()
            .map(|t| (t.to_string(), config_rows(cfg, t)))
            .collect(),
    };
    ModuleRows { tables }
}

/// What is known of one other node: its reachability, the checksums it reported and its
/// traffic (`stats_proxysql_servers_status`, `_checksums`, `_metrics`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PeerRecord {
    /// `proxysql_servers.weight`.
    pub weight: u32,
    /// `proxysql_servers.comment` (or, for etcd members, what the member announced).
    pub comment: String,
    /// Checks that got an answer.
    pub checks_ok: u64,
    /// Checks that failed (connect, login or query).
    pub checks_err: u64,
    /// Unix time in milliseconds of the last check, answered or not.
    pub last_check_ms: u64,
    /// Round trip of the last answered check.
    pub ping_time_us: u64,
    /// The peer's highest module version (`global_version`).
    pub global_version: u64,
    /// Per module name: what the peer reported, with this node's count of differing checks.
    pub checksums: BTreeMap<String, PeerChecksum>,
    /// The peer's counters, from its `stats_mysql_global`.
    pub metrics: PeerMetrics,
}

/// One module as a peer reported it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PeerChecksum {
    /// The peer's version of the module.
    pub version: u64,
    /// Its epoch.
    pub epoch: u64,
    /// Its checksum.
    pub checksum: String,
    /// Unix time (s) this node first saw this checksum.
    pub changed_at: u64,
    /// Unix time (s) of the last report.
    pub updated_at: u64,
    /// Checks in a row whose checksum differed from this node's.
    pub diff_check: u64,
}

impl PeerRecord {
    /// Records that the node reported `checksum` (at `version`, `epoch`) for `module` at Unix
    /// time `now` (s); returns the module's entry.
    pub fn observe(
        &mut self,
        module: &str,
        (version, epoch, checksum): (u64, u64, &str),
        now: u64,
    ) -> &mut PeerChecksum {
        let entry = self
            .checksums
            .entry(module.to_string())
            .or_insert_with(|| PeerChecksum {
                changed_at: now,
                ..PeerChecksum::default()
            });
        if entry.checksum != checksum {
            entry.changed_at = now;
            entry.checksum = checksum.to_string();
        }
        entry.version = version;
        entry.epoch = epoch;
        entry.updated_at = now;
        entry
    }
}

/// A peer's traffic counters.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PeerMetrics {
    /// `ProxySQL_Uptime`.
    pub uptime_s: u64,
    /// `Questions`.
    pub queries: u64,
    /// `Client_Connections_connected`.
    pub client_connections_connected: u64,
    /// `Client_Connections_created`.
    pub client_connections_created: u64,
    /// Time the metrics query took.
    pub response_time_ms: u64,
}

/// The other nodes as this node sees them, and notes about the fleet's health that
/// `/readyz` shows (e.g. "the etcd store is unreachable").
#[derive(Debug, Default)]
pub struct ClusterBoard {
    peers: Mutex<BTreeMap<(String, u16), PeerRecord>>,
    notes: Mutex<BTreeMap<&'static str, String>>,
}

impl ClusterBoard {
    /// Changes (or creates) the record of `host:port`.
    pub fn update<R>(&self, host: &str, port: u16, f: impl FnOnce(&mut PeerRecord) -> R) -> R {
        let mut peers = lock(&self.peers);
        f(peers.entry((host.to_string(), port)).or_default())
    }

    /// Forgets every node `keep` says no.
    pub fn retain(&self, keep: impl Fn(&str, u16) -> bool) {
        lock(&self.peers).retain(|(h, p), _| keep(h, *p));
    }

    /// Every known node and its record.
    pub fn snapshot(&self) -> Vec<((String, u16), PeerRecord)> {
        lock(&self.peers)
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect()
    }

    /// Sets (`Some`) or clears (`None`) the note kept under `key`.
    pub fn set_note(&self, key: &'static str, note: Option<String>) {
        let mut notes = lock(&self.notes);
        match note {
            Some(n) => notes.insert(key, n),
            None => notes.remove(key),
        };
    }

    /// The notes, in key order.
    pub fn notes(&self) -> Vec<String> {
        lock(&self.notes).values().cloned().collect()
    }
}

/// Per-module identities, updated on every runtime load.
#[derive(Debug, Default)]
pub(crate) struct Checksums(Mutex<BTreeMap<&'static str, ModuleChecksum>>);

impl Checksums {
    /// Records module `m`'s new runtime content: version 1 the first time, +1 after.
    pub(crate) fn loaded(&self, m: Module, cfg: &Config) -> Option<ModuleChecksum> {
        let name = name_of(m)?;
        let checksum = rows_of(cfg, m).checksum();
        let mut all = lock(&self.0);
        let version = all.get(name).map_or(1, |c| c.version + 1);
        let c = ModuleChecksum {
            name,
            version,
            epoch: unix_now(),
            checksum,
        };
        all.insert(name, c.clone());
        Some(c)
    }

    pub(crate) fn all(&self) -> Vec<ModuleChecksum> {
        lock(&self.0).values().cloned().collect()
    }

    /// Module `name`'s checksum now (empty for an unknown name).
    pub(crate) fn of(&self, name: &str) -> String {
        lock(&self.0)
            .get(name)
            .map(|c| c.checksum.clone())
            .unwrap_or_default()
    }
}

impl Admin {
    /// Every cluster module's runtime identity, by name.
    pub fn checksums(&self) -> Vec<ModuleChecksum> {
        self.checksums.all()
    }

    /// The runtime rows of cluster module `name` (what `PROXY_SELECT` serves a peer), or
    /// `None` for a name that is not a cluster module.
    pub fn module_rows(&self, name: &str) -> Option<ModuleRows> {
        Some(rows_of(&self.running_config(), module_of(name)?))
    }

    /// What this node knows of the other nodes.
    pub fn cluster_board(&self) -> &crate::cluster::ClusterBoard {
        &self.cluster
    }

    /// Replaces module `name`'s memory tables with `rows` (a peer's or the store's), loads it to
    /// runtime in one swap, and saves it to disk when asked. Node-local variables are kept.
    /// Returns the module's checksum before and after.
    pub async fn apply_module(
        &self,
        name: &str,
        rows: &ModuleRows,
        save_to_disk: bool,
    ) -> Result<(String, String), AdminError> {
        let m = module_of(name)
            .ok_or_else(|| AdminError::new(format!("{name} is not a cluster module")))?;
        let _one_at_a_time = self.apply_lock.lock().await;
        let before = self.checksums.of(name);
        let sql = apply_sql(m, rows)?;
        self.store.exec_all(&sql).await?;
        self.memory_to_runtime(m).await?;
        if save_to_disk {
            self.store
                .exec_all(&crate::layers::copy_module_sql(
                    m,
                    ("main", ""),
                    ("disk", ""),
                ))
                .await?;
        }
        let after = self.checksums.of(name);
        Ok((before, after))
    }

    /// `PROXY_SELECT * FROM runtime_<table>`: a module table's runtime rows as configured (not
    /// the monitor's live placement), for a peer pulling the module.
    pub(crate) fn proxy_select(&self, table: &str) -> Result<AdminRows, AdminError> {
        let t = table.strip_prefix("runtime_").unwrap_or(table);
        let cfg = self.running_config();
        if t == "global_variables" {
            let mut out = AdminRows {
                columns: vec!["variable_name".into(), "variable_value".into()],
                rows: Vec::new(),
            };
            for m in [
                Module::AdminVariables,
                Module::MysqlVariables,
                Module::PgsqlVariables,
                Module::McpVariables,
            ] {
                for (_, r) in rows_of(&cfg, m).tables {
                    out.rows.extend(r.rows);
                }
            }
            return Ok(out);
        }
        CLUSTER_MODULES
            .iter()
            .filter_map(|n| module_of(n))
            .find(|m| m.variable_prefix().is_none() && m.tables().contains(&t))
            .map(|_| config_rows(&cfg, t))
            .ok_or_else(|| AdminError::new(format!("PROXY_SELECT: {table} is not a cluster table")))
    }

    /// Fills `runtime_checksums_values` and `stats_proxysql_servers_*` for a query naming them.
    pub(crate) async fn refresh_cluster_tables(&self, sql_lower: &str) -> Result<(), AdminError> {
        let mut sql = Vec::new();
        if sql_lower.contains("runtime_checksums_values") {
            let rows = self
                .checksums
                .all()
                .into_iter()
                .map(|c| {
                    vec![
                        Some(c.name.to_string()),
                        Some(c.version.to_string()),
                        Some(c.epoch.to_string()),
                        Some(c.checksum),
                    ]
                })
                .collect();
            sql.extend(replace_rows_sql(
                "main",
                "runtime_checksums_values",
                &AdminRows {
                    columns: ["name", "version", "epoch", "checksum"]
                        .map(String::from)
                        .to_vec(),
                    rows,
                },
            ));
        }
        if sql_lower.contains("stats_proxysql_servers") {
            sql.extend(crate::cluster_tables::board_sql(&self.cluster));
        }
        if sql_lower.contains("stats_config_store") {
            sql.extend(crate::cluster_tables::store_sql(self.store_status()));
        }
        if sql.is_empty() {
            return Ok(());
        }
        self.store.exec_all(&sql).await
    }
}

/// Statements that put `rows` into module `m`'s memory tables. Columns are checked against the
/// local table definitions (a peer's rows are data, never SQL).
fn apply_sql(m: Module, rows: &ModuleRows) -> Result<Vec<String>, AdminError> {
    let mut sql = Vec::new();
    if let Some(prefix) = m.variable_prefix() {
        let mut keep_local = Vec::new();
        for name in NODE_LOCAL_VARIABLES
            .iter()
            .filter(|n| n.starts_with(prefix))
        {
            keep_local.push(format!("'{name}'"));
        }
        sql.push(format!(
            "DELETE FROM main.global_variables WHERE variable_name LIKE '{prefix}%'{}",
            if keep_local.is_empty() {
                String::new()
            } else {
                format!(" AND variable_name NOT IN ({})", keep_local.join(", "))
            }
        ));
        for (_, t) in &rows.tables {
            let mut only = AdminRows {
                columns: vec!["variable_name".into(), "variable_value".into()],
                rows: Vec::new(),
            };
            for r in &t.rows {
                let (Some(Some(n)), Some(v)) = (r.first(), r.get(1)) else {
                    continue;
                };
                if n.starts_with(prefix) && !NODE_LOCAL_VARIABLES.contains(&n.as_str()) {
                    only.rows.push(vec![Some(n.clone()), v.clone()]);
                }
            }
            // Appends (the DELETE above cleared them): replace_rows_sql's own DELETE would
            // also remove the node-local ones.
            sql.extend(
                replace_rows_sql("main", "global_variables", &only)
                    .into_iter()
                    .skip(1),
            );
        }
        return Ok(sql);
    }
    for t in m.tables() {
        let Some((_, r)) = rows.tables.iter().find(|(name, _)| name == t) else {
            return Err(AdminError::new(format!(
                "the module's table {t} is missing from what the peer sent"
            )));
        };
        let known = table_columns(t);
        if let Some(bad) = r.columns.iter().find(|c| !known.contains(c)) {
            return Err(AdminError::new(format!(
                "{t}: column {bad} is not one of this node's (a different Sluice version?)"
            )));
        }
        if r.rows.iter().any(|row| row.len() != r.columns.len()) {
            return Err(AdminError::new(format!(
                "{t}: a row has the wrong number of cells"
            )));
        }
        sql.extend(replace_rows_sql("main", t, r));
    }
    Ok(sql)
}

/// Logs a module that changed by a sync (one line per sync, as ProxySQL's cluster log).
pub fn log_sync(module: &str, source: &str, before: &str, after: &str) {
    info!("cluster: {module} synced from {source}: checksum {before} -> {after}");
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rows(v: &[&[&str]]) -> AdminRows {
        AdminRows {
            columns: vec!["a".into(), "b".into()],
            rows: v
                .iter()
                .map(|r| r.iter().map(|s| Some(s.to_string())).collect())
                .collect(),
        }
    }

    #[test]
    fn checksums_ignore_row_order_and_see_every_cell() {
        let m = |r| ModuleRows {
            tables: vec![("t".into(), r)],
        };
        let a = m(rows(&[&["1", "x"], &["2", "y"]])).checksum();
        assert_eq!(a, m(rows(&[&["2", "y"], &["1", "x"]])).checksum());
        assert_ne!(a, m(rows(&[&["1", "x"], &["2", "z"]])).checksum());
        assert_ne!(a, m(rows(&[&["1", "x"]])).checksum());
        assert!(a.starts_with("0x") && a.len() == 18);
        assert_eq!(m(rows(&[])).checksum(), EMPTY_CHECKSUM);
    }

    #[test]
    fn node_local_variables_are_not_part_of_the_module() {
        let cfg = Config::parse("[mysql_variables]\nthreads = 3\ninterfaces = \"0.0.0.0:7033\"\n")
            .expect("config");
        let r = rows_of(&cfg, Module::MysqlVariables);
        let names: Vec<&str> = r.tables[0]
            .1
            .rows
            .iter()
            .filter_map(|r| r[0].as_deref())
            .collect();
        assert!(names.contains(&"mysql-max_connections"));
        assert!(!names.contains(&"mysql-threads") && !names.contains(&"mysql-interfaces"));
        let other = Config::parse("[mysql_variables]\nthreads = 1\n").expect("config");
        assert_eq!(
            r.checksum(),
            rows_of(&other, Module::MysqlVariables).checksum(),
            "threads differ, the module does not"
        );
    }

    #[test]
    fn a_peer_column_that_is_not_ours_is_refused() {
        let bad = ModuleRows {
            tables: vec![(
                "proxysql_servers".into(),
                AdminRows {
                    columns: vec!["hostname".into(), "port); DROP TABLE x; --".into()],
                    rows: vec![vec![Some("h".into()), Some("1".into())]],
                },
            )],
        };
        assert!(apply_sql(Module::ProxysqlServers, &bad).is_err());
    }
}

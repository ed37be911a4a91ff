//! The runtime snapshot the data path reads, and the handle that publishes a new one atomically.

use crate::config::{Config, MysqlServer, MysqlUser, MysqlVariables, ServerStatus};
use crate::topology::{Clusters, Topology, apply};
use crate::{PerProtocol, Protocol};
use arc_swap::ArcSwap;
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

/// Users by name, looked up at every statement that takes a server connection (the backend
/// account): foldhash, seeded per process, where std's SipHash cost ~170 instructions per
/// lookup of a short name.
pub type UserMap<T> = HashMap<String, T, hashbrown::DefaultHashBuilder>;

/// Identity of a backend server: where it listens. Live state (health, pools) is keyed by it so
/// that a config reload keeps warm connections to servers that remain.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ServerKey {
    /// Host name or IP.
    pub hostname: String,
    /// The server's TCP port.
    pub port: u16,
}

impl std::fmt::Display for ServerKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}:{}", self.hostname, self.port)
    }
}

/// A server as a member of one hostgroup, with the row's settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostgroupServer {
    /// The server (host and port).
    pub key: ServerKey,
    /// The hostgroup this row puts it in.
    pub hostgroup: u32,
    /// ONLINE, SHUNNED, OFFLINE_SOFT or OFFLINE_HARD, as configured and as the monitor decided.
    pub status: ServerStatus,
    /// Share of new connections relative to the hostgroup's other servers.
    pub weight: u32,
    /// Connection cap for this (hostgroup, server).
    pub max_connections: u32,
    /// Whether connections to it use TLS.
    pub use_ssl: bool,
    /// The compressed protocol towards the server (`compression=1`; MySQL only).
    pub compression: bool,
    /// Lag (s) above which the monitor shuns it here; 0 = never.
    pub max_replication_lag: u32,
    /// Ping time (ms) above which it is passed over here; 0 = `default_max_latency_ms`.
    pub max_latency_ms: u32,
    /// Set by the monitor: its last ping took longer than its `max_latency_ms`.
    pub too_slow: bool,
    /// Set by the monitor: when it shunned the server (an operator's SHUNNED has none).
    pub shunned_since: Option<std::time::Instant>,
    /// Its `*_servers_ssl_params` rows (per backend user, or for every user): TLS settings that
    /// override the protocol's `ssl_p2s_*` variables.
    pub ssl_params: Vec<Arc<crate::config::ServerSslParams>>,
}

/// Gives every server row its `*_servers_ssl_params` rows.
fn attach_ssl_params(
    hostgroups: &mut BTreeMap<u32, Vec<HostgroupServer>>,
    rows: &[crate::config::ServerSslParams],
) {
    if rows.is_empty() {
        return;
    }
    let rows: Vec<Arc<crate::config::ServerSslParams>> =
        rows.iter().cloned().map(Arc::new).collect();
    for s in hostgroups.values_mut().flatten() {
        s.ssl_params = rows
            .iter()
            .filter(|r| r.hostname == s.key.hostname && r.port == s.key.port)
            .cloned()
            .collect();
    }
}

impl HostgroupServer {
    /// An ONLINE server `hostname:port` in `hostgroup` with `mysql_servers`' column defaults
    /// (weight 1, max_connections 1000, no TLS, no compression, no lag or latency limit): what
    /// an embedding service hands a pool without a runtime configuration.
    pub fn new(hostname: &str, port: u16, hostgroup: u32) -> Self {
        HostgroupServer {
            key: ServerKey {
                hostname: hostname.to_string(),
                port,
            },
            hostgroup,
            status: ServerStatus::Online,
            weight: 1,
            max_connections: 1000,
            use_ssl: false,
            compression: false,
            max_replication_lag: 0,
            max_latency_ms: 0,
            too_slow: false,
            shunned_since: None,
            ssl_params: Vec::new(),
        }
    }

    fn from_row(s: &MysqlServer) -> Self {
        HostgroupServer {
            key: ServerKey {
                hostname: s.hostname.clone(),
                port: s.port.0,
            },
            hostgroup: s.hostgroup_id.0,
            status: s.status,
            weight: s.weight.0,
            max_connections: s.max_connections.0,
            use_ssl: s.use_ssl.0,
            compression: s.compression.0,
            max_replication_lag: s.max_replication_lag.0,
            max_latency_ms: s.max_latency_ms.0,
            too_slow: false,
            shunned_since: None,
            ssl_params: Vec::new(),
        }
    }
}

/// What the MySQL data path uses: variables, users and hostgroups.
#[derive(Debug, Clone, Default)]
pub struct MysqlRuntime {
    /// `mysql-*` variables.
    pub variables: MysqlVariables,
    /// Users allowed to log in (`frontend=1`), by name.
    pub frontend_users: HashMap<String, Arc<MysqlUser>>,
    /// Credentials towards backends (`backend=1`), by name.
    pub backend_users: UserMap<Arc<MysqlUser>>,
    /// Hostgroup id → its servers, in config order.
    pub hostgroups: BTreeMap<u32, Vec<HostgroupServer>>,
    /// Hostgroups with `mysql_hostgroup_attributes.multiplex = 0`.
    pub no_multiplex_hostgroups: std::collections::HashSet<u32>,
    /// Users whose `attributes` say `"multiplexing": false`.
    pub no_multiplex_users: std::collections::HashSet<String>,
    /// `mysql_query_rules` + fast routing, compiled.
    pub rules: crate::query::RuleSet,
    /// `mysql_replication_hostgroups`.
    pub replication: Vec<crate::config::ReplicationHostgroup>,
    /// `mysql_group_replication_hostgroups`.
    pub group_replication: Vec<crate::config::GroupReplicationHostgroup>,
    /// `mysql_galera_hostgroups`.
    pub galera: Vec<crate::config::GroupReplicationHostgroup>,
}

impl MysqlRuntime {
    /// True when `server` is in `hostgroup` and ONLINE or draining (OFFLINE_SOFT): connections
    /// to it may stay. A shunned, OFFLINE_HARD or removed server's connections are given up,
    /// as ProxySQL does when a session finds its server shunned.
    pub fn server_in_service(&self, hostgroup: u32, server: &ServerKey) -> bool {
        self.hostgroups.get(&hostgroup).is_some_and(|v| {
            v.iter().any(|s| {
                &s.key == server
                    && matches!(s.status, ServerStatus::Online | ServerStatus::OfflineSoft)
            })
        })
    }

    /// Whether sessions of `user` routed to `hostgroup` may be multiplexed: the global
    /// `mysql-multiplexing`, the hostgroup's `multiplex` attribute and the user's
    /// `attributes.multiplexing` must all allow it.
    pub fn multiplexing_allowed(&self, user: &MysqlUser, hostgroup: u32) -> bool {
        self.variables.multiplexing
            && !self.no_multiplex_hostgroups.contains(&hostgroup)
            && !self.no_multiplex_users.contains(&user.username)
    }
}

/// What the PostgreSQL data path uses.
#[derive(Debug, Clone, Default)]
pub struct PgsqlRuntime {
    /// `pgsql-*` variables.
    pub variables: crate::config::PgsqlVariables,
    /// Users allowed to log in, by name.
    pub frontend_users: HashMap<String, Arc<crate::config::PgsqlUser>>,
    /// Hostgroup id → its servers.
    pub hostgroups: BTreeMap<u32, Vec<HostgroupServer>>,
    /// `pgsql_query_rules` + fast routing, compiled.
    pub rules: crate::query::RuleSet,
    /// `pgsql_replication_hostgroups`.
    pub replication: Vec<crate::config::ReplicationHostgroup>,
}

/// An immutable snapshot of everything the data path reads. Sessions `load()` it once per command.
#[derive(Debug, Clone, Default)]
pub struct RuntimeConfig {
    /// Where the admin database and generated files live (`--datadir`).
    pub datadir: Option<String>,
    /// What the MySQL frontend, pools and monitor read.
    pub mysql: MysqlRuntime,
    /// What the PostgreSQL frontend, pools and monitor read.
    pub pgsql: PgsqlRuntime,
    /// What the MCP endpoint reads.
    pub mcp: Arc<McpRuntime>,
    /// `workload_classes` rows (admission control), by name; one list for both protocols.
    pub workload_classes: Arc<Vec<crate::config::WorkloadClass>>,
    /// `workload_guards` rows, by guard_id.
    pub workload_guards: Arc<Vec<crate::config::WorkloadGuard>>,
}

/// The MCP endpoint's part of the snapshot: its variables and rows as loaded.
#[derive(Debug, Clone, Default)]
pub struct McpRuntime {
    /// `mcp-*` variables.
    pub variables: crate::config::McpVariables,
    /// Active `mcp_users` rows.
    pub users: Vec<crate::config::McpUser>,
    /// `mcp_targets` rows.
    pub targets: Vec<crate::config::McpTarget>,
    /// `mcp_query_rules` rows, by rule_id.
    pub rules: Vec<crate::config::McpQueryRule>,
    /// `rag_sources` rows, by source_id.
    pub rag_sources: Vec<crate::config::RagSource>,
}

impl RuntimeConfig {
    /// Builds a snapshot from a validated config.
    pub fn build(cfg: &Config) -> RuntimeConfig {
        let mut hostgroups: BTreeMap<u32, Vec<HostgroupServer>> = BTreeMap::new();
        for s in &cfg.mysql_servers {
            hostgroups
                .entry(s.hostgroup_id.0)
                .or_default()
                .push(HostgroupServer::from_row(s));
        }
        let mut frontend_users = HashMap::new();
        let mut backend_users = UserMap::default();
        for u in &cfg.mysql_users {
            let u = Arc::new(u.clone());
            if u.frontend.0 {
                frontend_users.insert(u.username.clone(), u.clone());
            }
            if u.backend.0 {
                backend_users.insert(u.username.clone(), u);
            }
        }
        let mut pg_hostgroups = pgsql_hostgroups(&cfg.pgsql_servers);
        attach_ssl_params(&mut hostgroups, &cfg.mysql_servers_ssl_params);
        attach_ssl_params(&mut pg_hostgroups, &cfg.pgsql_servers_ssl_params);
        let pgsql = PgsqlRuntime {
            variables: cfg.pgsql_variables.clone(),
            frontend_users: cfg
                .pgsql_users
                .iter()
                .filter(|u| u.frontend.0)
                .map(|u| (u.username.clone(), Arc::new(u.clone())))
                .collect(),
            hostgroups: pg_hostgroups,
            rules: compile_rules(
                &cfg.pgsql_query_rules,
                &cfg.pgsql_query_rules_fast_routing,
                cfg.pgsql_variables.query.query_processor_iterations,
            ),
            replication: cfg.pgsql_replication_hostgroups.clone(),
        };
        RuntimeConfig {
            datadir: cfg.datadir.clone(),
            workload_classes: Arc::new(cfg.workload_classes.clone()),
            workload_guards: Arc::new(cfg.workload_guards.clone()),
            mcp: Arc::new(McpRuntime {
                variables: cfg.mcp_variables.clone(),
                users: cfg
                    .mcp_users
                    .iter()
                    .filter(|u| u.active.0)
                    .cloned()
                    .collect(),
                targets: cfg.mcp_targets.clone(),
                rules: cfg.mcp_query_rules.clone(),
                rag_sources: cfg.rag_sources.clone(),
            }),
            pgsql,
            mysql: MysqlRuntime {
                variables: cfg.mysql_variables.clone(),
                frontend_users,
                backend_users,
                hostgroups,
                no_multiplex_hostgroups: cfg
                    .mysql_hostgroup_attributes
                    .iter()
                    .filter(|a| !a.multiplex.0)
                    .map(|a| a.hostgroup_id.0)
                    .collect(),
                no_multiplex_users: cfg
                    .mysql_users
                    .iter()
                    .filter(|u| u.multiplexing_attribute() == Some(false))
                    .map(|u| u.username.clone())
                    .collect(),
                rules: compile_rules(
                    &cfg.mysql_query_rules,
                    &cfg.mysql_query_rules_fast_routing,
                    cfg.mysql_variables.query.query_processor_iterations,
                ),
                replication: cfg.mysql_replication_hostgroups.clone(),
                group_replication: cfg.mysql_group_replication_hostgroups.clone(),
                galera: cfg.mysql_galera_hostgroups.clone(),
            },
        }
    }
}

/// The `pgsql_servers` rows by hostgroup (no compression on PostgreSQL).
fn pgsql_hostgroups(rows: &[crate::config::PgsqlServer]) -> BTreeMap<u32, Vec<HostgroupServer>> {
    let mut hostgroups: BTreeMap<u32, Vec<HostgroupServer>> = BTreeMap::new();
    for s in rows {
        hostgroups
            .entry(s.hostgroup_id.0)
            .or_default()
            .push(HostgroupServer {
                key: ServerKey {
                    hostname: s.hostname.clone(),
                    port: s.port.0,
                },
                hostgroup: s.hostgroup_id.0,
                status: s.status,
                weight: s.weight.0,
                max_connections: s.max_connections.0,
                use_ssl: s.use_ssl.0,
                compression: false,
                max_replication_lag: s.max_replication_lag.0,
                max_latency_ms: s.max_latency_ms.0,
                too_slow: false,
                shunned_since: None,
                ssl_params: Vec::new(),
            });
    }
    hostgroups
}

/// Compiles validated rules; `Config::parse` already rejected any that do not compile.
fn compile_rules(
    rules: &[crate::config::QueryRule],
    fast: &[crate::config::FastRoute],
    iterations: u32,
) -> crate::query::RuleSet {
    let mut set = crate::query::RuleSet::compile(rules, fast).unwrap_or_else(|e| {
        tracing::error!("query rules could not be compiled and are not in effect: {e}");
        crate::query::RuleSet::default()
    });
    set.iterations = iterations;
    set
}

/// Shared handle to the current [`RuntimeConfig`]; cheap to clone and passed down explicitly.
///
/// What the data path reads is the configuration (`store`) with the monitor's verdicts
/// (`set_topology`) laid over it: a LOAD never undoes a failover the monitor made, and the
/// monitor never edits the configuration.
#[derive(Debug, Clone)]
pub struct ConfigHandle {
    current: Arc<ArcSwap<RuntimeConfig>>,
    base: Arc<ArcSwap<RuntimeConfig>>,
    topology: Arc<std::sync::Mutex<PerProtocol<Topology>>>,
    /// Told of every [`store`](Self::store), for tasks that sleep until the configuration
    /// gives them something to do.
    stored: Arc<tokio::sync::watch::Sender<()>>,
}

impl ConfigHandle {
    /// Wraps a first snapshot.
    pub fn new(rt: RuntimeConfig) -> Self {
        ConfigHandle {
            current: Arc::new(ArcSwap::from_pointee(rt.clone())),
            base: Arc::new(ArcSwap::from_pointee(rt)),
            topology: Arc::default(),
            stored: Arc::new(tokio::sync::watch::Sender::new(())),
        }
    }

    /// A receiver that sees each later [`store`](Self::store) (`changed().await`): a task
    /// idle under the current configuration parks on it instead of polling.
    pub fn stores(&self) -> tokio::sync::watch::Receiver<()> {
        self.stored.subscribe()
    }

    /// The current snapshot (configuration + monitor verdicts).
    pub fn load(&self) -> Arc<RuntimeConfig> {
        self.current.load_full()
    }

    /// The servers of `hostgroup` on the `protocol` side as the current snapshot has them
    /// (empty when the hostgroup has none).
    pub fn hostgroup_servers(&self, protocol: Protocol, hostgroup: u32) -> Vec<HostgroupServer> {
        let rt = self.load();
        let hostgroups = match protocol {
            Protocol::Mysql => &rt.mysql.hostgroups,
            Protocol::Pgsql => &rt.pgsql.hostgroups,
        };
        hostgroups.get(&hostgroup).cloned().unwrap_or_default()
    }

    /// The configuration as loaded, without the monitor's verdicts.
    pub fn load_base(&self) -> Arc<RuntimeConfig> {
        self.base.load_full()
    }

    /// Publishes a new configuration with one atomic store; readers see it at their next `load`.
    pub fn store(&self, rt: RuntimeConfig) {
        let t = crate::util::lock(&self.topology);
        self.base.store(Arc::new(rt));
        self.publish(&t);
        drop(t);
        self.stored.send_replace(());
    }

    /// Replaces the monitor's verdicts for one protocol and publishes the result.
    pub fn set_topology(&self, p: Protocol, topology: Topology) {
        let mut t = crate::util::lock(&self.topology);
        t[p] = topology;
        self.publish(&t);
    }

    fn publish(&self, topology: &PerProtocol<Topology>) {
        let base = self.base.load_full();
        let mut rt = (*base).clone();
        rt.mysql.hostgroups = apply(
            &base.mysql.hostgroups,
            &Clusters {
                replication: &base.mysql.replication,
                writer_is_also_reader: base.mysql.variables.monitor.writer_is_also_reader,
                group_replication: &base.mysql.group_replication,
                galera: &base.mysql.galera,
                default_max_latency_ms: base.mysql.variables.monitor.default_max_latency_ms,
            },
            &topology.mysql,
        );
        rt.pgsql.hostgroups = apply(
            &base.pgsql.hostgroups,
            &Clusters {
                replication: &base.pgsql.replication,
                writer_is_also_reader: base.pgsql.variables.monitor.writer_is_also_reader,
                group_replication: &[],
                galera: &[],
                default_max_latency_ms: base.pgsql.variables.monitor.default_max_latency_ms,
            },
            &topology.pgsql,
        );
        self.current.store(Arc::new(rt));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn snapshot_groups_servers_and_splits_users() {
        let cfg = Config::parse(
            "[[mysql_servers]]\nhostname=\"a\"\nport=1\n[[mysql_servers]]\nhostgroup_id=1\nhostname=\"b\"\nport=2\n\
             [[mysql_users]]\nusername=\"u\"\n[[mysql_users]]\nusername=\"svc\"\nfrontend=0\n",
        )
        .expect("config");
        let h = ConfigHandle::new(RuntimeConfig::build(&cfg));
        let rt = h.load();
        assert_eq!(rt.mysql.hostgroups[&0][0].key.to_string(), "a:1");
        assert_eq!(rt.mysql.hostgroups[&1][0].key.port, 2);
        assert!(rt.mysql.frontend_users.contains_key("u"));
        assert!(!rt.mysql.frontend_users.contains_key("svc"));
        assert!(rt.mysql.backend_users.contains_key("svc"));
        let mut next = (*rt).clone();
        next.mysql.hostgroups.clear();
        h.store(next);
        assert!(h.load().mysql.hostgroups.is_empty());
        assert_eq!(
            rt.mysql.hostgroups.len(),
            2,
            "old snapshot is unchanged for its holders"
        );
    }
}

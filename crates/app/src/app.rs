//! [`App`]: builds the admin store, the frontends and pools, and serves them until a stop.

use crate::Error;
use crate::live::Live;
use crate::ports::Listeners;
use crate::{stop, takeover};
use sluice_admin::{Admin, AdminOptions, StartupSource};
use sluice_core::config::Config;
use sluice_core::runtime::ServerKey;
use sluice_core::{ConfigHandle, RuntimeConfig};
use sluice_core::{PerProtocol, Protocol};
use sluice_monitor::{ConnectErrorHook, Monitor};
use sluice_mysql::MysqlFrontend;
use sluice_mysql_backend::MysqlPool;
use sluice_pgsql::PgFrontend;
use sluice_pgsql_backend::PgPool;
use std::future::Future;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tracing::{info, warn};

/// How to run: where state lives, how long a stop waits, takeovers.
#[derive(Debug, Default)]
pub struct Options {
    /// The data folder (admin database, generated TLS certificate, takeover socket).
    pub datadir: Option<PathBuf>,
    /// Start from the given configuration even when the datadir holds a saved one.
    pub initial: bool,
    /// How long sessions get to finish on a stop (`--shutdown-timeout`).
    pub shutdown_timeout: Duration,
    /// `--takeover`: take the listeners of the process running on the takeover socket.
    pub takeover: bool,
    /// `--takeover-socket` (default `<datadir>/takeover.sock`).
    pub takeover_socket: Option<PathBuf>,
    /// Start a successor (`<this program> --takeover`, same arguments) on SIGUSR2, as the
    /// `sluice` binary does for `systemctl reload`. Off for embedders: installing a signal
    /// handler is the host program's choice.
    pub upgrade_on_sigusr2: bool,
    /// More `stats_memory_metrics` rows (the binary's allocation counters).
    pub memory_rows: Option<MemoryRows>,
}

/// A source of extra `stats_memory_metrics` rows: (variable name, value).
pub type MemoryRows = fn() -> Vec<(&'static str, u64)>;

/// Sluice, built and listening: both data ports, the admin ports, the monitors, the MCP port,
/// the fleet sync. [`App::serve`] runs it until a stop and drains it.
pub struct App {
    admin: Arc<Admin>,
    mysql: Arc<MysqlFrontend>,
    pgsql: Arc<PgFrontend>,
    monitors: Monitors,
    servers: Vec<JoinHandle<()>>,
    /// Cancelled by `PROXYSQL SHUTDOWN`.
    stop_requested: CancellationToken,
    /// The admin, HTTP and MCP ports' accept loops.
    accepting: CancellationToken,
    /// Sessions close at their next boundary once it is cancelled.
    shutdown: CancellationToken,
    tasks: TaskTracker,
    takeover: Takeover,
    /// SIGUSR2, installed at the start of [`App::build`] (its default action would end the
    /// process) when [`Options::upgrade_on_sigusr2`].
    upgrade: crate::signals::UpgradeSignal,
    options: Options,
}

/// What the takeover needs once serving starts: this process's socket, the listeners received
/// from a predecessor (to confirm), and copies of ours to lend a successor.
struct Takeover {
    socket: Option<PathBuf>,
    inherited: Option<takeover::Inherited>,
    lent: Vec<(String, std::os::fd::OwnedFd)>,
}

impl App {
    /// Opens the admin store (the saved configuration, or `file` on a first start or with
    /// [`Options::initial`]), binds every port (or takes them from a predecessor with
    /// [`Options::takeover`]) and starts the frontends, monitors, MCP and fleet sync.
    /// Must run inside a multi-threaded tokio runtime.
    pub async fn build(file: Config, options: Options) -> Result<App, Error> {
        let upgrade = match options.upgrade_on_sigusr2 {
            true => crate::signals::upgrade_requested(),
            false => crate::signals::UpgradeSignal::none(),
        };
        let socket =
            takeover::socket_path(options.takeover_socket.clone(), options.datadir.as_deref());
        let mut inherited = match (&socket, options.takeover) {
            (Some(path), true) => Some(takeover::Inherited::receive(path)?),
            (None, true) => return Err(Error::TakeoverWithoutSocket),
            (_, false) => None,
        };
        let (admin, cfg) = open_admin(file, &options).await?;
        let config = ConfigHandle::new(RuntimeConfig::build(&cfg));
        let listeners = Listeners::bind(&cfg, inherited.as_mut()).await?;
        let lent = listeners.lend()?;
        let shutdown = CancellationToken::new();
        // Admin, HTTP and MCP ports stop accepting with it; the data ports with their frontends.
        let accepting = shutdown.child_token();
        let tasks = TaskTracker::new();
        let mcp_stats = Arc::new(sluice_mcp::McpStats::default());
        let mcp = sluice_mcp::McpServer::new(sluice_mcp::McpService::new(
            config.clone(),
            mcp_stats.clone(),
            admin.clone(),
            options.datadir.clone(),
        ));
        let (fe, pg_fe, pg_threads) = frontends(
            &cfg,
            &config,
            &options,
            (&shutdown, &tasks),
            mcp.ddl_watchers(),
        )?;
        mcp.service()
            .set_backend_tls(fe.pool().tls().cloned(), pg_fe.pool().tls().cloned());
        let monitors = start_monitors(&config, fe.pool(), pg_fe.pool());
        let stop_requested = CancellationToken::new();
        let live = Arc::new(Live {
            mysql: fe.clone(),
            pgsql: pg_fe.clone(),
            monitors: monitors.both.clone(),
            config: config.clone(),
            stop: stop_requested.clone(),
            started: std::time::Instant::now(),
            mcp: mcp.clone(),
            mcp_stats,
            memory_rows: options.memory_rows,
        });
        admin.attach(config.clone(), live.clone(), live);
        servers_mcp(&mcp, &accepting, &shutdown, &tasks);
        // RAG syncs read under their workload class, with the data path's gates.
        mcp.service().set_admission(fe.admission().clone());
        tokio::spawn(crate::guards::run(
            fe.admission().clone(),
            config.clone(),
            monitors.both.clone(),
            shutdown.clone(),
        ));
        let mut servers = listeners.serve(&fe, &pg_fe, &admin, (&accepting, &tasks));
        servers.push(fleet_sync(&admin, &cfg, &shutdown)?);
        info!(
            servers = cfg.mysql_servers.len(),
            users = cfg.mysql_users.len(),
            pgsql_threads = pg_threads,
            version = env!("CARGO_PKG_VERSION"),
            "sluice started"
        );
        Ok(App {
            admin,
            mysql: fe,
            pgsql: pg_fe,
            monitors,
            servers,
            stop_requested,
            accepting,
            shutdown,
            tasks,
            takeover: Takeover {
                socket,
                inherited,
                lent,
            },
            upgrade,
            options,
        })
    }

    /// The admin store: the configuration tables and `LOAD … TO RUNTIME`, as the admin ports
    /// see them.
    pub fn admin(&self) -> &Arc<Admin> {
        &self.admin
    }

    /// Serves until `stop` resolves (its value names the reason in the log, e.g. `"SIGTERM"`),
    /// `PROXYSQL SHUTDOWN`, or a successor takes the listeners; then stops accepting, gives
    /// sessions [`Options::shutdown_timeout`] to finish their statement (or, after a takeover,
    /// to leave), and returns.
    pub async fn serve(self, stop: impl Future<Output = &'static str>) -> Result<(), Error> {
        let Takeover {
            socket,
            inherited,
            lent,
        } = self.takeover;
        let handed_over =
            takeover::begin(socket.as_deref(), self.options.takeover, inherited, lent)?;
        let why = stop::wait(stop, &self.stop_requested, handed_over, self.upgrade).await;
        // Both protocols' sessions count when Sluice stops.
        let (my_sessions, pg_sessions) =
            (self.mysql.registry().clone(), self.pgsql.sessions().clone());
        let sessions = move || my_sessions.total() as usize + pg_sessions.len();
        let stopping = stop::Stopping {
            data_ports: PerProtocol::new(
                self.mysql.stop_accepting_token(),
                self.pgsql.stop_accepting_token(),
            ),
            accepting: self.accepting,
            shutdown: self.shutdown,
            tasks: self.tasks,
            limit: self.options.shutdown_timeout,
            takeover_socket: socket,
        };
        let monitors = self.monitors;
        stopping
            .run(why, &sessions, self.servers, || monitors.stop())
            .await;
        self.mysql.pool().close_idle().await;
        info!("sluice stopped");
        Ok(())
    }
}

/// Runs the MCP port's supervisor: it listens while `mcp-enabled` is on (until `accepting` is
/// cancelled), and follows every `LOAD MCP VARIABLES TO RUNTIME`; and the RAG sources'
/// scheduled syncs (until `shutdown`).
fn servers_mcp(
    mcp: &Arc<sluice_mcp::McpServer>,
    accepting: &CancellationToken,
    shutdown: &CancellationToken,
    tasks: &TaskTracker,
) {
    tokio::spawn(mcp.clone().run(accepting.clone(), tasks.clone()));
    tokio::spawn(mcp.service().clone().rag_schedule(shutdown.clone()));
}

/// Keeps this node in step with its fleet: through the configuration store when one is set,
/// else ProxySQL Cluster style with the `proxysql_servers` peers (idle until
/// `admin-cluster_username` is set).
fn fleet_sync(
    admin: &Arc<Admin>,
    cfg: &Config,
    shutdown: &CancellationToken,
) -> Result<tokio::task::JoinHandle<()>, Error> {
    let Some(url) = &cfg.config_store else {
        return Ok(tokio::spawn(sluice_cluster::run_peer_sync(
            admin.clone(),
            shutdown.clone(),
        )));
    };
    let address = sluice_cluster::StoreAddress::parse(url)?;
    let node = sluice_cluster::NodeIdentity::from_admin_ifaces(&cfg.admin_variables.mysql_ifaces);
    if cfg.admin_variables.cluster.enabled() && !cfg.proxysql_servers.is_empty() {
        warn!(
            "a configuration store is set: the proxysql_servers peers are not polled (one source of configuration per fleet)"
        );
    }
    admin.attach_config_store(Arc::new(sluice_cluster::EtcdStore::new(
        address.clone(),
        node.id.clone(),
    )));
    Ok(tokio::spawn(sluice_cluster::run_etcd_sync(
        admin.clone(),
        address,
        node,
        shutdown.clone(),
    )))
}

/// Opens the admin store (from disk, or from the config file with `--initial` or a new datadir)
/// and returns it with the configuration to start with.
async fn open_admin(file: Config, opts: &Options) -> Result<(Arc<Admin>, Config), Error> {
    for w in &file.warnings {
        warn!("config: {w}");
    }
    if let Some(dir) = &opts.datadir {
        std::fs::create_dir_all(dir).map_err(|source| Error::Datadir {
            path: dir.display().to_string(),
            source,
        })?;
    }
    let (admin, cfg, source) = Admin::open(AdminOptions {
        datadir: opts.datadir.clone(),
        initial: opts.initial,
        file,
    })
    .await?;
    for addr in cfg.admin_variables.default_credentials_exposed() {
        warn!(
            "admin listener {addr} is reachable from other hosts and the default admin:admin login is configured; Sluice accepts it from loopback only: set admin-admin_credentials"
        );
    }
    match source {
        StartupSource::Disk => info!(
            "configuration loaded from the admin database on disk (start with --initial to use the config file)"
        ),
        StartupSource::ConfigFile => info!("configuration loaded from the config file"),
    }
    Ok((Arc::new(admin), cfg))
}

/// The two data-port frontends with their pools and TLS, sharing one shutdown and one
/// `PROXYSQL PAUSE`, each with its DDL watcher for the MCP catalog; also the number of
/// PostgreSQL session threads started.
fn frontends(
    cfg: &Config,
    config: &ConfigHandle,
    opts: &Options,
    (shutdown, tasks): (&CancellationToken, &TaskTracker),
    ddl: PerProtocol<Arc<sluice_mcp::DdlWatcher>>,
) -> Result<(Arc<MysqlFrontend>, Arc<PgFrontend>, usize), Error> {
    let vars = &cfg.mysql_variables;
    let datadir = opts.datadir.as_deref();
    // One key log for every TLS session, both legs, both protocols (admin-ssl_keylog_file).
    let key_log: Option<Arc<dyn sluice_net::keylog::KeyLog>> = match cfg
        .admin_variables
        .ssl_keylog_file
        .as_str()
    {
        "" => None,
        path => {
            warn!(
                "TLS secrets are logged to {path} (admin-ssl_keylog_file): anyone who reads it can decrypt captured traffic"
            );
            Some(Arc::new(sluice_net::keylog::KeyLogFile::new(path)))
        }
    };
    let backend_tls = Arc::new(sluice_net::client_tls::TlsSource::new(
        "mysql",
        &vars.backend_tls,
        key_log.clone(),
    )?);
    let pg_backend_tls = Arc::new(sluice_net::client_tls::TlsSource::new(
        "pgsql",
        &cfg.pgsql_variables.backend_tls,
        key_log.clone(),
    )?);
    let cpus = std::thread::available_parallelism().map_or(1, usize::from);
    let my_threads = vars.session_threads(cpus);
    let my_workers =
        sluice_net::Workers::start(my_threads, "sluice-my").map_err(|source| Error::Threads {
            count: my_threads,
            protocol: "MySQL",
            source,
        })?;
    let mut fe = MysqlFrontend::builder(config.clone(), MysqlPool::new(Some(backend_tls.clone())))
        .shutdown(shutdown.clone(), tasks.clone())
        .workers(Arc::new(my_workers))
        .hook(ddl.mysql);
    if vars.have_ssl {
        let tls = sluice_net::tls::ReloadableAcceptor::new(
            "mysql",
            &vars.frontend_tls(),
            datadir,
            key_log.clone(),
        )?;
        fe = fe.tls(Arc::new(tls));
    }
    let fe = fe.build();
    // One set of workload-class gates for both data ports.
    let pg_vars = &cfg.pgsql_variables;
    let pg_threads = pg_vars.session_threads(cpus);
    let pg_workers =
        sluice_net::Workers::start(pg_threads, "sluice-pg").map_err(|source| Error::Threads {
            count: pg_threads,
            protocol: "PostgreSQL",
            source,
        })?;
    let mut pg_fe = PgFrontend::builder(config.clone(), PgPool::new(Some(pg_backend_tls)))
        .shutdown(shutdown.clone(), tasks.clone())
        .workers(Arc::new(pg_workers))
        // One PROXYSQL PAUSE for both data ports.
        .pause(fe.paused().clone())
        .admission(fe.admission().clone())
        .hook(ddl.pgsql);
    if pg_vars.have_ssl {
        let tls = sluice_net::tls::ReloadableAcceptor::new(
            "pgsql",
            &pg_vars.frontend_tls(),
            datadir,
            key_log,
        )?;
        pg_fe = pg_fe.tls(Arc::new(tls));
    }
    Ok((fe, pg_fe.build(), pg_threads))
}

/// The health monitors of both protocols and their tasks.
struct Monitors {
    both: PerProtocol<Arc<Monitor>>,
    tasks: PerProtocol<JoinHandle<()>>,
}

impl Monitors {
    fn stop(&self) {
        for (_, t) in self.tasks.iter() {
            t.abort();
        }
    }
}

/// Starts the monitors: health checks per protocol, publishing their verdicts through the config
/// handle; failed and successful connects of the pools count towards shunning, and a shunned
/// server's connections are killed and its idle ones closed at once.
fn start_monitors(config: &ConfigHandle, pool: &Arc<MysqlPool>, pg_pool: &Arc<PgPool>) -> Monitors {
    let my_monitor = Monitor::new(Protocol::Mysql);
    let pg_monitor = Monitor::new(Protocol::Pgsql);
    pool.on_connect_error(connect_hook(&my_monitor, config));
    pg_pool.on_connect_error(connect_hook(&pg_monitor, config));
    let my_pool = pool.clone();
    let my_task = tokio::spawn(my_monitor.clone().run(
        config.clone(),
        Arc::new(sluice_mysql_backend::monitor::MysqlChecker::with_tls(
            pool.tls().cloned(),
        )),
        Arc::new(move |shunned: &ServerKey| {
            my_pool.kill_server(shunned);
            my_pool.purge_idle(|_, s| s != shunned);
        }),
    ));
    let pg_pool = pg_pool.clone();
    let pg_task = tokio::spawn(pg_monitor.clone().run(
        config.clone(),
        Arc::new(sluice_pgsql_backend::monitor::PgChecker::with_tls(
            pg_pool.tls().cloned(),
        )),
        Arc::new(move |shunned: &ServerKey| {
            pg_pool.kill_server(shunned);
            pg_pool.purge_idle(shunned);
        }),
    ));
    Monitors {
        both: PerProtocol::new(my_monitor, pg_monitor),
        tasks: PerProtocol::new(my_task, pg_task),
    }
}

/// Reports a pool's connect outcomes to `monitor`.
fn connect_hook(monitor: &Arc<Monitor>, config: &ConfigHandle) -> ConnectErrorHook {
    let (m, c) = (monitor.clone(), config.clone());
    ConnectErrorHook(Arc::new(move |s: &ServerKey, ok: bool| {
        if ok {
            m.connect_ok(s, &c)
        } else {
            m.connect_error(s, &c)
        }
    }))
}

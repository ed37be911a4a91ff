//! Builds the admin store, the frontends and pools, and runs them until a stop signal.

use crate::live::Live;
use sluice_admin::{Admin, AdminOptions, StartupSource};
use sluice_core::admin::Protocol;
use sluice_core::config::Config;
use sluice_core::monitor::{ConnectErrorHook, Monitor};
use sluice_core::{ConfigHandle, RuntimeConfig};
use sluice_mysql::admin::{MysqlAdmin, serve_admin};
use sluice_mysql::registry::SessionRegistry;
use sluice_mysql::{MysqlFrontend, serve};
use sluice_mysql_backend::MysqlPool;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tracing::{info, warn};

/// Process options from the command line.
pub struct Options {
    pub datadir: Option<PathBuf>,
    pub initial: bool,
    pub shutdown_timeout: Duration,
}

use sluice_net::bind_all;

/// Runs Sluice until SIGTERM/SIGINT (or PROXYSQL SHUTDOWN); returns after a graceful stop.
pub async fn run(file: Config, opts: Options) -> Result<(), String> {
    for w in &file.warnings {
        warn!("config: {w}");
    }
    if let Some(dir) = &opts.datadir {
        std::fs::create_dir_all(dir).map_err(|e| format!("datadir {}: {e}", dir.display()))?;
    }
    let (admin, cfg, source) = Admin::open(AdminOptions {
        datadir: opts.datadir.clone(),
        initial: opts.initial,
        file,
    })
    .await
    .map_err(|e| e.to_string())?;
    match source {
        StartupSource::Disk => info!(
            "configuration loaded from the admin database on disk (start with --initial to use the config file)"
        ),
        StartupSource::ConfigFile => info!("configuration loaded from the config file"),
    }
    let admin = Arc::new(admin);
    let rt = RuntimeConfig::build(&cfg);
    let vars = rt.mysql.variables.clone();
    let config = ConfigHandle::new(rt);

    let listeners = bind_all(&vars.interfaces, "MySQL frontend (mysql-interfaces)")
        .await
        .map_err(|e| e.to_string())?;
    let admin_listeners = bind_all(
        &cfg.admin_variables.mysql_ifaces,
        "MySQL admin (admin-mysql_ifaces)",
    )
    .await
    .map_err(|e| e.to_string())?;
    let pg_listeners = bind_all(
        &cfg.pgsql_variables.interfaces,
        "PostgreSQL frontend (pgsql-interfaces)",
    )
    .await
    .map_err(|e| e.to_string())?;
    let pg_admin_listeners = bind_all(
        &cfg.admin_variables.pgsql_ifaces,
        "PostgreSQL admin (admin-pgsql_ifaces)",
    )
    .await
    .map_err(|e| e.to_string())?;
    let tls = if vars.have_ssl {
        Some(sluice_mysql::tls::acceptor(
            "mysql",
            &vars.ssl_cert,
            &vars.ssl_key,
            opts.datadir.as_deref(),
        )?)
    } else {
        None
    };
    let backend_tls = sluice_mysql_backend::tls::client_config(
        &vars.ssl_p2s_ca,
        &vars.ssl_p2s_cert,
        &vars.ssl_p2s_key,
    )?;
    let pool = MysqlPool::new(Some(backend_tls.clone()));
    let shutdown = CancellationToken::new();
    let tasks = TaskTracker::new();
    let fe = Arc::new(MysqlFrontend {
        config: config.clone(),
        pool: pool.clone(),
        tls,
        registry: SessionRegistry::new(),
        shutdown: shutdown.clone(),
        tasks: tasks.clone(),
        statements: sluice_mysql::stmt_registry::StmtRegistry::new(vars.max_stmts_cache as usize),
        counters: Default::default(),
        paused: Default::default(),
    });
    let pg_vars = &cfg.pgsql_variables;
    let pg_tls = if pg_vars.have_ssl {
        Some(sluice_mysql::tls::acceptor(
            "pgsql",
            &pg_vars.ssl_cert,
            &pg_vars.ssl_key,
            opts.datadir.as_deref(),
        )?)
    } else {
        None
    };
    let cpus = std::thread::available_parallelism().map_or(1, usize::from);
    let pg_threads = pg_vars.session_threads(cpus);
    let pg_workers = sluice_net::Workers::start(pg_threads, "sluice-pg")
        .map_err(|e| format!("cannot start {pg_threads} PostgreSQL session thread(s): {e}"))?;
    let pg_fe = Arc::new(sluice_pgsql::frontend::PgFrontend {
        config: config.clone(),
        tls: pg_tls,
        clients: Default::default(),
        // The same TLS client settings serve PostgreSQL servers with use_ssl=1.
        pool: sluice_pgsql_backend::pool::PgPool::new(Some(backend_tls.clone())),
        shutdown: shutdown.clone(),
        tasks: tasks.clone(),
        cancels: Default::default(),
        query: Default::default(),
        cache: Default::default(),
        commands: Default::default(),
        sessions: Default::default(),
        server_stats: Default::default(),
        workers: Some(Arc::new(pg_workers)),
        // One PROXYSQL PAUSE for both data ports.
        paused: fe.paused.clone(),
    });
    // The monitors: health checks per protocol, publishing their verdicts through the config
    // handle; a shunned server's idle connections are closed at once.
    let my_monitor = Monitor::new(Protocol::Mysql);
    let pg_monitor = Monitor::new(Protocol::Pgsql);
    {
        let (m, c) = (my_monitor.clone(), config.clone());
        pool.on_connect_error(ConnectErrorHook(Arc::new(
            move |s: &sluice_core::runtime::ServerKey, ok: bool| {
                if ok {
                    m.connect_ok(s, &c)
                } else {
                    m.connect_error(s, &c)
                }
            },
        )));
        let (m, c) = (pg_monitor.clone(), config.clone());
        pg_fe.pool.on_connect_error(ConnectErrorHook(Arc::new(
            move |s: &sluice_core::runtime::ServerKey, ok: bool| {
                if ok {
                    m.connect_ok(s, &c)
                } else {
                    m.connect_error(s, &c)
                }
            },
        )));
    }
    let my_pool = pool.clone();
    let my_monitor_task = tokio::spawn(my_monitor.clone().run(
        config.clone(),
        Arc::new(sluice_mysql_backend::monitor::MysqlChecker::new()),
        Arc::new(move |shunned: &sluice_core::runtime::ServerKey| {
            my_pool.kill_server(shunned);
            my_pool.purge_idle(|_, s| s != shunned);
        }),
    ));
    let pg_pool = pg_fe.pool.clone();
    let pg_monitor_task = tokio::spawn(pg_monitor.clone().run(
        config.clone(),
        Arc::new(sluice_pgsql_backend::monitor::PgChecker::new()),
        Arc::new(move |shunned: &sluice_core::runtime::ServerKey| {
            pg_pool.kill_server(shunned);
            pg_pool.purge_idle(shunned);
        }),
    ));
    let stop_requested = CancellationToken::new();
    admin.attach(
        config.clone(),
        Arc::new(Live {
            mysql: fe.clone(),
            pgsql: pg_fe.clone(),
            monitors: [my_monitor.clone(), pg_monitor.clone()],
            config: config.clone(),
            stop: stop_requested.clone(),
        }),
    );
    let server = tokio::spawn(serve(fe.clone(), listeners));
    let admin_server = tokio::spawn(serve_admin(
        Arc::new(MysqlAdmin {
            executor: admin.clone(),
            shutdown: shutdown.clone(),
            tasks: tasks.clone(),
        }),
        admin_listeners,
    ));
    let pg_admin = sluice_pgsql::PgAdmin {
        executor: admin.clone(),
        shutdown: shutdown.clone(),
        tasks: tasks.clone(),
    };
    // Both protocols' sessions count when Sluice stops.
    let pg_sessions = pg_fe.sessions.clone();
    let sessions = move || fe.registry.total() as usize + pg_sessions.len();
    let pg_server = tokio::spawn(sluice_pgsql::frontend::serve(pg_fe, pg_listeners));
    let pg_admin_server = tokio::spawn(sluice_pgsql::serve_admin(
        Arc::new(pg_admin),
        pg_admin_listeners,
    ));
    info!(
        servers = cfg.mysql_servers.len(),
        users = cfg.mysql_users.len(),
        pgsql_threads = pg_threads,
        version = env!("CARGO_PKG_VERSION"),
        "sluice started"
    );

    let why = tokio::select! {
        sig = crate::signals::stop_requested() => sig,
        _ = stop_requested.cancelled() => "PROXYSQL SHUTDOWN",
    };
    info!(
        "received {why}: no longer accepting connections; waiting up to {}s for {} session(s) to finish their current statement",
        opts.shutdown_timeout.as_secs(),
        sessions()
    );
    shutdown.cancel();
    my_monitor_task.abort();
    pg_monitor_task.abort();
    let _ = server.await;
    let _ = admin_server.await;
    let _ = pg_admin_server.await;
    let _ = pg_server.await;
    tasks.close();
    if tokio::time::timeout(opts.shutdown_timeout, tasks.wait())
        .await
        .is_err()
    {
        warn!(
            "{} session(s) still busy after {}s; closing them",
            sessions(),
            opts.shutdown_timeout.as_secs()
        );
    }
    pool.close_idle().await;
    info!("sluice stopped");
    Ok(())
}

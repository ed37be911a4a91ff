//! Builds the frontends and pools from the config and runs them until a stop signal.

use sluice_core::config::Config;
use sluice_core::{ConfigHandle, RuntimeConfig};
use sluice_mysql::registry::SessionRegistry;
use sluice_mysql::{MysqlFrontend, serve};
use sluice_mysql_backend::MysqlPool;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tracing::{info, warn};

/// Process options from the command line.
pub struct Options {
    pub datadir: Option<PathBuf>,
    pub initial: bool,
    pub shutdown_timeout: Duration,
}

/// Runs Sluice until SIGTERM/SIGINT; returns after a graceful stop.
pub async fn run(cfg: Config, opts: Options) -> Result<(), String> {
    for w in &cfg.warnings {
        warn!("config: {w}");
    }
    if opts.initial {
        info!("--initial: configuration taken from the config file");
    }
    if let Some(dir) = &opts.datadir {
        std::fs::create_dir_all(dir).map_err(|e| format!("datadir {}: {e}", dir.display()))?;
    }
    let rt = RuntimeConfig::build(&cfg);
    let vars = rt.mysql.variables.clone();
    let config = ConfigHandle::new(rt);

    let mut listeners = Vec::new();
    for addr in vars.interface_list() {
        let l = TcpListener::bind(&addr)
            .await
            .map_err(|e| format!("cannot listen on {addr} (mysql-interfaces): {e}"))?;
        info!("MySQL frontend listening on {addr}");
        listeners.push(l);
    }
    let tls = if vars.have_ssl {
        Some(sluice_mysql::tls::acceptor(
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
    let pool = MysqlPool::new(Some(backend_tls));
    let shutdown = CancellationToken::new();
    let tasks = TaskTracker::new();
    let fe = Arc::new(MysqlFrontend {
        config,
        pool: pool.clone(),
        tls,
        registry: SessionRegistry::new(),
        shutdown: shutdown.clone(),
        tasks: tasks.clone(),
        statements: sluice_mysql::stmt_registry::StmtRegistry::new(vars.max_stmts_cache as usize),
        counters: Default::default(),
    });
    let server = tokio::spawn(serve(fe.clone(), listeners));
    info!(
        servers = cfg.mysql_servers.len(),
        users = cfg.mysql_users.len(),
        version = env!("CARGO_PKG_VERSION"),
        "sluice started"
    );

    let sig = crate::signals::stop_requested().await;
    info!(
        "received {sig}: no longer accepting connections; waiting up to {}s for {} session(s) to finish their current statement",
        opts.shutdown_timeout.as_secs(),
        fe.registry.total()
    );
    shutdown.cancel();
    let _ = server.await;
    tasks.close();
    if tokio::time::timeout(opts.shutdown_timeout, tasks.wait())
        .await
        .is_err()
    {
        warn!(
            "{} session(s) still busy after {}s; closing them",
            fe.registry.total(),
            opts.shutdown_timeout.as_secs()
        );
    }
    pool.close_idle().await;
    info!("sluice stopped");
    Ok(())
}

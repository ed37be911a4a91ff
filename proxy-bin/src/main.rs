//! `sluice`: a SQL-aware proxy for MySQL/MariaDB and PostgreSQL. This file is wiring only:
//! parse the CLI, load the config, build the runtime, run until a signal.

#[cfg(feature = "count-allocations")]
mod alloc_count;
mod app;
mod guards;
mod live;
mod signals;

use clap::Parser;
use std::path::PathBuf;
use std::process::ExitCode;

/// Command line.
#[derive(Debug, Parser)]
#[command(
    name = "sluice",
    version,
    about = "SQL-aware proxy for MySQL/MariaDB and PostgreSQL"
)]
struct Cli {
    /// Config file (TOML; sections named like ProxySQL's tables).
    #[arg(long, short = 'c')]
    config: PathBuf,
    /// Data folder (generated TLS certificate; later the admin database). Overrides `datadir`.
    #[arg(long, short = 'D')]
    datadir: Option<PathBuf>,
    /// Initialise from the config file even if a saved admin database exists.
    #[arg(long)]
    initial: bool,
    /// The fleet's shared configuration store, `etcd://host:port[,host:port…]/prefix`
    /// (overrides `[cluster] config_store`).
    #[arg(long)]
    config_store: Option<String>,
    /// Seconds sessions get to finish their current statement on SIGTERM/SIGINT.
    #[arg(long, default_value_t = 30)]
    shutdown_timeout: u64,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .with_target(false)
        .init();
    let mut cfg = match sluice_core::config::Config::from_file(&cli.config) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("sluice: {e}");
            return ExitCode::from(64);
        }
    };
    if cli.config_store.is_some() {
        cfg.config_store = cli.config_store;
    }
    // Sessions of both protocols run on their own event-loop threads (`mysql-threads`,
    // `pgsql-threads`); this runtime accepts connections and runs the admin ports, the
    // monitors and the cluster sync.
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    {
        Ok(r) => r,
        Err(e) => {
            eprintln!("sluice: cannot start the runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    let opts = app::Options {
        datadir: cli
            .datadir
            .or_else(|| cfg.datadir.as_ref().map(PathBuf::from)),
        initial: cli.initial,
        shutdown_timeout: std::time::Duration::from_secs(cli.shutdown_timeout),
    };
    match runtime.block_on(app::run(cfg, opts)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            tracing::error!("{e}");
            ExitCode::FAILURE
        }
    }
}

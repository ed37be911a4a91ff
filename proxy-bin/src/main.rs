//! `sluice`: a SQL-aware proxy for MySQL/MariaDB and PostgreSQL. The proxy is `sluice-app`;
//! this is its command line: parse it, load the config, build the runtime, serve until a
//! signal.

#[cfg(feature = "count-allocations")]
mod alloc_count;
mod commands;
mod error;

use clap::Parser;
use std::path::PathBuf;
use std::process::ExitCode;

/// `0.1.0 (commit, profile)`.
const VERSION: &str = concat!(
    env!("CARGO_PKG_VERSION"),
    " (",
    env!("SLUICE_COMMIT"),
    ", ",
    env!("SLUICE_PROFILE"),
    ")"
);

/// Command line.
#[derive(Debug, Parser)]
#[command(
    name = "sluice",
    version = VERSION,
    about = "SQL-aware proxy for MySQL/MariaDB and PostgreSQL",
    subcommand_negates_reqs = true
)]
struct Cli {
    /// Config file: Sluice's TOML (sections named like ProxySQL's tables), or a proxysql.cnf or
    /// pgbouncer.ini, translated as `sluice import` does.
    #[arg(long, short = 'c', required = true)]
    config: Option<PathBuf>,
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
    /// Seconds sessions get to finish their current statement on SIGTERM/SIGINT; after a
    /// takeover, the seconds clients get to leave before each session closes at its next
    /// transaction boundary.
    #[arg(long, default_value_t = 30)]
    shutdown_timeout: u64,
    /// Take the listening sockets of the Sluice running on the takeover socket, then let it
    /// drain: an upgrade or restart that refuses no connection.
    #[arg(long)]
    takeover: bool,
    /// The Unix socket a running Sluice hands its listeners over on (default
    /// `<datadir>/takeover.sock`).
    #[arg(long)]
    takeover_socket: Option<PathBuf>,
    #[command(subcommand)]
    command: Option<Command>,
}

#[derive(Debug, clap::Subcommand)]
enum Command {
    /// Print the Sluice TOML equivalent of a proxysql.cnf or pgbouncer.ini; what does not carry
    /// over is reported on stderr with its line.
    Import {
        /// The proxysql.cnf or pgbouncer.ini.
        file: PathBuf,
        /// PgBouncer's userlist.txt (default: the ini's auth_file).
        #[arg(long)]
        auth_file: Option<PathBuf>,
    },
    /// Validate a config file without starting: exit 0 if Sluice would start with it, 64 if not.
    CheckConfig {
        /// The config file (any format `--config` takes).
        file: PathBuf,
    },
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .with_target(false)
        // Logs go to stderr (the journal under systemd), so stdout carries only what a
        // subcommand prints (`sluice import`'s TOML).
        .with_writer(std::io::stderr)
        .init();
    match &cli.command {
        Some(Command::Import { file, auth_file }) => {
            return commands::import(file, auth_file.as_deref());
        }
        Some(Command::CheckConfig { file }) => return commands::check_config(file),
        None => {}
    }
    let Some(config_path) = &cli.config else {
        eprintln!("sluice: --config is required");
        return ExitCode::from(commands::EXIT_CONFIG);
    };
    let mut cfg = match commands::load_config(config_path) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("sluice: {e}");
            return ExitCode::from(commands::EXIT_CONFIG);
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
    let options = sluice_app::Options {
        datadir: cli
            .datadir
            .or_else(|| cfg.datadir.as_ref().map(PathBuf::from)),
        initial: cli.initial,
        shutdown_timeout: std::time::Duration::from_secs(cli.shutdown_timeout),
        takeover: cli.takeover,
        takeover_socket: cli.takeover_socket,
        upgrade_on_sigusr2: true,
        memory_rows: memory_rows(),
    };
    let served = runtime.block_on(async {
        let app = sluice_app::App::build(cfg, options).await?;
        app.serve(sluice_app::stop_requested()).await
    });
    match served {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            tracing::error!("{e}");
            ExitCode::FAILURE
        }
    }
}

/// The counting allocator's rows in `stats_memory_metrics` (`--features count-allocations`).
fn memory_rows() -> Option<sluice_app::MemoryRows> {
    #[cfg(feature = "count-allocations")]
    return Some(|| alloc_count::rows().to_vec());
    #[cfg(not(feature = "count-allocations"))]
    None
}

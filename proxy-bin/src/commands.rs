//! The subcommands that do not run the proxy: `sluice import` and `sluice check-config`, and
//! reading a config file that may be another proxy's.

use crate::error::ConfigFileError;
use sluice_core::config::Config;
use sluice_import::{Format, Translation};
use std::path::Path;
use std::process::ExitCode;

/// Exit code for a configuration that cannot be read or is invalid (BSD's EX_USAGE, as before).
pub(crate) const EXIT_CONFIG: u8 = 64;

/// Reads `path`: Sluice's TOML, or a `proxysql.cnf` / `pgbouncer.ini` translated on the way
/// (logged, with each setting that did not carry over).
pub(crate) fn load_config(path: &Path) -> Result<Config, ConfigFileError> {
    let shown = || path.display().to_string();
    let translated = sluice_import::translate_file(path, None).map_err(|e| match e {
        sluice_import::ImportError::Read { path, source } => {
            ConfigFileError::Config(sluice_core::Error::ConfigRead { path, source })
        }
        source => ConfigFileError::Import {
            path: shown(),
            source,
        },
    })?;
    let Some((format, t)) = translated else {
        return Ok(Config::from_file(path)?);
    };
    tracing::info!(
        "{} is a {} file: translated to Sluice's configuration ({} settings did not carry over; \
         `sluice import {}` prints the translation)",
        path.display(),
        format_name(format),
        t.notes.len(),
        path.display()
    );
    for n in &t.notes {
        tracing::warn!("{}: {n}", path.display());
    }
    // `sluice import` may leave the users out (the operator adds --auth-file); a proxy started
    // that way would refuse every client.
    if let Some(n) = t.notes.iter().find(|n| n.setting == "auth_file") {
        return Err(ConfigFileError::UsersMissing {
            path: shown(),
            note: n.clone(),
        });
    }
    Config::parse(&t.toml).map_err(|source| ConfigFileError::TranslatedConfig {
        path: shown(),
        source,
    })
}

fn format_name(f: Format) -> &'static str {
    match f {
        Format::Proxysql => "ProxySQL proxysql.cnf",
        Format::Pgbouncer => "PgBouncer pgbouncer.ini",
        _ => "Sluice",
    }
}

/// `sluice import FILE [--auth-file F]`: the translation on stdout, notes on stderr.
pub(crate) fn import(file: &Path, auth_file: Option<&Path>) -> ExitCode {
    let result = match sluice_import::translate_file(file, auth_file) {
        Ok(Some((_, t))) => Ok(t),
        Ok(None) => {
            eprintln!(
                "sluice import: {} is already Sluice's TOML (expected a proxysql.cnf or a pgbouncer.ini)",
                file.display()
            );
            return ExitCode::from(EXIT_CONFIG);
        }
        Err(e) => Err(e),
    };
    match result {
        Ok(Translation { toml, notes }) => {
            for n in &notes {
                eprintln!("sluice import: {}: {n}", file.display());
            }
            print!("{toml}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            match e {
                // It names the file itself.
                sluice_import::ImportError::Read { .. } => eprintln!("sluice import: {e}"),
                e => eprintln!("sluice import: {}: {e}", file.display()),
            }
            ExitCode::from(EXIT_CONFIG)
        }
    }
}

/// `sluice check-config FILE`: validates without starting. Exit 0 when Sluice would start with
/// it (warnings on stderr), 64 when it would not.
pub(crate) fn check_config(file: &Path) -> ExitCode {
    match load_config(file) {
        Ok(cfg) => {
            for w in &cfg.warnings {
                eprintln!("sluice check-config: warning: {w}");
            }
            println!(
                "{}: OK ({} MySQL servers, {} MySQL users, {} PostgreSQL servers, {} PostgreSQL users, {} query rules)",
                file.display(),
                cfg.mysql_servers.len(),
                cfg.mysql_users.len(),
                cfg.pgsql_servers.len(),
                cfg.pgsql_users.len(),
                cfg.mysql_query_rules.len() + cfg.pgsql_query_rules.len(),
            );
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("sluice check-config: {e}");
            ExitCode::from(EXIT_CONFIG)
        }
    }
}

//! `sluice import`: other proxies' configuration files translated into Sluice's TOML.
//!
//! - [`from_proxysql`] reads a `proxysql.cnf` (libconfig; every section ProxySQL's loader reads)
//!   and keeps its tables and variables under the same names, which is what Sluice's TOML uses.
//! - [`from_pgbouncer`] reads a `pgbouncer.ini` and, optionally, its `auth_file`
//!   (`userlist.txt`): databases become servers, hostgroups and routing rules, settings their
//!   Sluice equivalents, and users keep their passwords as written (cleartext, `md5…` hashes,
//!   `SCRAM-SHA-256$…` verifiers).
//!
//! Nothing is dropped silently: a setting with no equivalent in Sluice becomes a [`Note`] with
//! its line (and a comment in the output); a value that cannot be translated is an
//! [`ImportError`] naming the line. The output is checked by Sluice's own config reader before it
//! is returned.
//!
//! ```
//! let cnf = r#"
//! mysql_variables = { threads = 2; interfaces = "0.0.0.0:6033"; }
//! mysql_servers = ( { address = "10.0.0.5", port = 3306, hostgroup = 0 } )
//! "#;
//! let t = sluice_import::from_proxysql(cnf).unwrap();
//! assert!(t.toml.contains("[[mysql_servers]]"));
//! assert!(t.toml.contains("hostname = \"10.0.0.5\""));
//! assert!(t.notes.is_empty());
//! ```

mod emit;
mod ini;
pub mod libconfig;
mod pgbouncer;
mod proxysql;

pub use pgbouncer::from_pgbouncer;
pub use proxysql::from_proxysql;

use std::fmt;
use std::path::Path;

/// A translated configuration.
#[derive(Debug, Clone)]
pub struct Translation {
    /// Sluice's TOML, accepted by `sluice_core::config::Config::parse`.
    pub toml: String,
    /// What did not carry over (or carried over approximately), in file order.
    pub notes: Vec<Note>,
}

/// A setting of the source file that has no exact equivalent in Sluice.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Note {
    /// Its line in the source file (1-based).
    pub line: usize,
    /// The setting, as written there (`mysql_variables.eventslog_filename`).
    pub setting: String,
    /// What Sluice does instead.
    pub reason: String,
}

impl fmt::Display for Note {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "line {}: {}: {}", self.line, self.setting, self.reason)
    }
}

/// Why a file could not be translated.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ImportError {
    /// The file is not well-formed.
    #[error("line {line}: {message}")]
    Syntax {
        /// Where.
        line: usize,
        /// What was expected.
        message: String,
    },
    /// A value that Sluice cannot take as it is.
    #[error("line {line}: {setting}: {message}")]
    Value {
        /// Where.
        line: usize,
        /// The setting.
        setting: String,
        /// Why.
        message: String,
    },
    /// The translated configuration was refused by Sluice's reader.
    #[error("line {line}: the translated configuration is refused: {message}")]
    Refused {
        /// The source line the refused part came from (0 when unknown).
        line: usize,
        /// Sluice's reason.
        message: String,
    },
    /// A file named by the configuration (`auth_file`) could not be read.
    #[error("cannot read {path}: {source}")]
    Read {
        /// The file.
        path: String,
        /// Why.
        #[source]
        source: std::io::Error,
    },
}

/// The formats [`translate_file`] recognises.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Format {
    /// Sluice's own TOML.
    Sluice,
    /// ProxySQL's libconfig `proxysql.cnf`.
    Proxysql,
    /// PgBouncer's `pgbouncer.ini`.
    Pgbouncer,
}

impl Format {
    /// Guesses the format of a configuration file from its name and text: `.cnf` or a libconfig
    /// group (`mysql_variables =` followed by `{`) is ProxySQL's, `.ini` or a `[pgbouncer]` /
    /// `[databases]` section PgBouncer's; anything else Sluice's TOML.
    pub fn detect(path: &Path, text: &str) -> Format {
        let ext = path.extension().and_then(|e| e.to_str()).unwrap_or("");
        if ext.eq_ignore_ascii_case("cnf") {
            return Format::Proxysql;
        }
        if ext.eq_ignore_ascii_case("ini") {
            return Format::Pgbouncer;
        }
        let lines = || text.lines().map(str::trim);
        if lines()
            .any(|l| l.eq_ignore_ascii_case("[pgbouncer]") || l.eq_ignore_ascii_case("[databases]"))
        {
            return Format::Pgbouncer;
        }
        let libconfig = text.contains('{')
            && lines().any(|l| {
                l.starts_with("admin_variables")
                    || l.starts_with("mysql_variables")
                    || l.starts_with("pgsql_variables")
            })
            && !lines()
                .any(|l| l.starts_with("[mysql_variables]") || l.starts_with("[admin_variables]"));
        if libconfig {
            Format::Proxysql
        } else {
            Format::Sluice
        }
    }
}

/// Reads `path` and translates it if it is a ProxySQL or PgBouncer file (a PgBouncer file's
/// `auth_file` is read from where it names, or from `auth_file` when given). Returns `None` for
/// Sluice's own TOML.
pub fn translate_file(
    path: &Path,
    auth_file: Option<&Path>,
) -> Result<Option<(Format, Translation)>, ImportError> {
    let text = read(path)?;
    match Format::detect(path, &text) {
        Format::Sluice => Ok(None),
        Format::Proxysql => Ok(Some((Format::Proxysql, from_proxysql(&text)?))),
        Format::Pgbouncer => {
            let base = path.parent().unwrap_or(Path::new("."));
            Ok(Some((
                Format::Pgbouncer,
                pgbouncer::from_pgbouncer_file(&text, base, auth_file)?,
            )))
        }
    }
}

fn read(path: &Path) -> Result<String, ImportError> {
    std::fs::read_to_string(path).map_err(|source| ImportError::Read {
        path: path.display().to_string(),
        source,
    })
}

//! The binary's error type: why Sluice could not start (or a subcommand could not finish),
//! with the crate errors it wraps as sources. `main` prints it once and picks the exit code.

use sluice_net::handover::HandoverError;
use std::io;

/// Why the process could not start or go on.
#[derive(Debug, thiserror::Error)]
pub enum AppError {
    /// The config file is unreadable or invalid (the error names the file).
    #[error(transparent)]
    Config(#[from] sluice_core::Error),
    /// The translation of a proxysql.cnf or pgbouncer.ini is invalid.
    #[error("{path}: {source}")]
    TranslatedConfig {
        path: String,
        #[source]
        source: sluice_core::Error,
    },
    /// A proxysql.cnf or pgbouncer.ini could not be translated.
    #[error("{path}: {source}")]
    Import {
        path: String,
        #[source]
        source: sluice_import::ImportError,
    },
    /// A pgbouncer.ini whose auth file cannot be read: Sluice would refuse every client.
    #[error("{path}: {note} (started this way, Sluice would refuse every client)")]
    UsersMissing {
        path: String,
        note: sluice_import::Note,
    },
    #[error(transparent)]
    Net(#[from] sluice_net::Error),
    #[error(transparent)]
    Admin(#[from] sluice_admin::Error),
    #[error(transparent)]
    Cluster(#[from] sluice_cluster::Error),
    #[error("datadir {path}: {source}")]
    Datadir {
        path: String,
        #[source]
        source: io::Error,
    },
    #[error("cannot start {count} {protocol} session thread(s): {source}")]
    Threads {
        count: usize,
        protocol: &'static str,
        #[source]
        source: io::Error,
    },
    /// A listener received from the predecessor cannot be used.
    #[error("{what} on {addr}: the socket handed over: {source}")]
    Inherited {
        what: String,
        addr: String,
        #[source]
        source: io::Error,
    },
    /// A listener cannot be duplicated for a successor.
    #[error("listener {name}: {source}")]
    Lend {
        name: String,
        #[source]
        source: io::Error,
    },
    #[error("--takeover needs --datadir or --takeover-socket")]
    TakeoverWithoutSocket,
    #[error("--takeover: no running Sluice answers on {path}: {source}")]
    NoPredecessor {
        path: String,
        #[source]
        source: io::Error,
    },
    #[error(transparent)]
    Handover(#[from] HandoverError),
    #[error("takeover socket {path}: {source}")]
    TakeoverSocket {
        path: String,
        #[source]
        source: io::Error,
    },
    /// The predecessor did not answer READY with BYE.
    #[error("--takeover: the running process did not confirm ({0})")]
    NotConfirmed(String),
    #[error("cannot start the successor {program}: {source}")]
    Successor {
        program: String,
        #[source]
        source: io::Error,
    },
}

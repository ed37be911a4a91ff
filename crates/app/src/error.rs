//! The crate's error type: why Sluice could not start or serve, with the crate errors it wraps
//! as sources.

use sluice_net::handover::HandoverError;
use std::io;

/// Why Sluice could not start or go on.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The configuration is invalid.
    #[error(transparent)]
    Config(#[from] sluice_core::Error),
    /// A port could not be bound, or TLS could not be set up.
    #[error(transparent)]
    Net(#[from] sluice_net::Error),
    /// The admin store could not be opened or initialised.
    #[error(transparent)]
    Admin(#[from] sluice_admin::Error),
    /// The configuration store's address is invalid.
    #[error(transparent)]
    Cluster(#[from] sluice_cluster::Error),
    /// The data folder cannot be created.
    #[error("datadir {path}: {source}")]
    Datadir {
        /// The folder.
        path: String,
        /// Why.
        #[source]
        source: io::Error,
    },
    /// The session threads could not be started.
    #[error("cannot start {count} {protocol} session thread(s): {source}")]
    Threads {
        /// How many were asked for.
        count: usize,
        /// `MySQL` or `PostgreSQL`.
        protocol: &'static str,
        /// Why.
        #[source]
        source: io::Error,
    },
    /// A listener received from the predecessor cannot be used.
    #[error("{what} on {addr}: the socket handed over: {source}")]
    Inherited {
        /// The port's role.
        what: String,
        /// Its address.
        addr: String,
        /// Why.
        #[source]
        source: io::Error,
    },
    /// A listener cannot be duplicated for a successor.
    #[error("listener {name}: {source}")]
    Lend {
        /// The listener.
        name: String,
        /// Why.
        #[source]
        source: io::Error,
    },
    /// [`crate::Options::takeover`] without a datadir or takeover socket.
    #[error("--takeover needs --datadir or --takeover-socket")]
    TakeoverWithoutSocket,
    /// No process answers on the takeover socket.
    #[error("--takeover: no running Sluice answers on {path}: {source}")]
    NoPredecessor {
        /// The socket.
        path: String,
        /// Why.
        #[source]
        source: io::Error,
    },
    /// The listeners could not be received from the predecessor.
    #[error(transparent)]
    Handover(#[from] HandoverError),
    /// The takeover socket cannot be served.
    #[error("takeover socket {path}: {source}")]
    TakeoverSocket {
        /// The socket.
        path: String,
        /// Why.
        #[source]
        source: io::Error,
    },
    /// The predecessor did not answer READY with BYE.
    #[error("--takeover: the running process did not confirm ({0})")]
    NotConfirmed(String),
    /// A successor process could not be started.
    #[error("cannot start the successor {program}: {source}")]
    Successor {
        /// The program.
        program: String,
        /// Why.
        #[source]
        source: io::Error,
    },
}

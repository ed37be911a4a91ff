//! What both protocols' connection pools are made of, written once: the options a checkout
//! runs under ([`PoolOptions`]), the idle connections per pool key with their take policy
//! ([`IdleLists`]), and the bookkeeping every pool keeps beside them ([`PoolShared`]: the
//! monitor's connect hook, the kill registry, the counters, and [`PoolShared::open`], the one
//! path a new server connection is opened on). The checkout loop is [`crate::checkout`].
//!
//! A protocol's pool supplies what differs: its key (server, user and what else makes two
//! connections interchangeable), how to dial and reset a connection, and how many may be open
//! at once (MySQL: a count per server and a queue of waiting sessions; PostgreSQL: each
//! server's `max_connections` split between the session threads).

mod idle;
mod shared;

pub use idle::{BorrowedKey, Headroom, IdleConnection, IdleLists};
pub use shared::{
    ConnectErrorHook, ConnectFailure, ConnectOutcomeFn, PoolShared, ServerConnection,
};

use crate::config::Priority;
use crate::runtime::ConfigHandle;
use std::time::Duration;

/// How a checkout runs, beside what it asks for (the request's identity: hostgroup, servers,
/// user and the protocol's own key fields).
#[derive(Debug, Clone, Copy)]
pub struct PoolOptions<'a> {
    /// Time allowed for one connect attempt (`*-connect_timeout_server`).
    pub connect_timeout: Duration,
    /// Time allowed for the whole checkout, waits and retries included
    /// (`*-connect_timeout_server_max`).
    pub connect_timeout_max: Duration,
    /// Pause between rounds over the hostgroup's servers when none could be used
    /// (`mysql-connect_retries_delay`; at least 10 ms).
    pub retry_delay: Duration,
    /// Where to re-read the hostgroup's servers between rounds: the monitor may move a new
    /// writer in meanwhile (failover). `None` keeps the servers the request was given.
    pub config: Option<&'a ConfigHandle>,
    /// The session thread asking (`*-threads`): connections opened on it are preferred, so
    /// their replies wake the thread that serves them. `None` off the session threads.
    pub worker: Option<usize>,
    /// The workload-class priority of the statement asking: when servers are at
    /// `max_connections`, waiting sessions are served by priority, then arrival (a waiter is
    /// overtaken a bounded number of times).
    pub priority: Priority,
}

impl PoolOptions<'_> {
    /// Options with the given timeouts, no failover re-read, no session thread, regular
    /// priority.
    pub fn with_timeouts(
        connect_timeout: Duration,
        connect_timeout_max: Duration,
        retry_delay: Duration,
    ) -> PoolOptions<'static> {
        PoolOptions {
            connect_timeout,
            connect_timeout_max,
            retry_delay,
            config: None,
            worker: None,
            priority: Priority::Regular,
        }
    }
}

//! sluice-core: the protocol-agnostic heart of Sluice. It knows no sockets and no wire bytes.
//!
//! - [`config`]: ProxySQL-shaped config model (tables and variables) and its validation — the
//!   `sluice-config` crate, re-exported.
//! - [`runtime`]: the immutable [`RuntimeConfig`] snapshot and the [`ConfigHandle`] that swaps it.
//! - [`hostgroup`]: server selection inside a hostgroup (weights, status, `max_connections`).
//! - [`login_throttle`]: failed logins per client address, and the spacing of their attempts.
//! - [`kill_registry`]: every open backend connection per server, to kill them when it is shunned.
//! - [`topology`]: the monitor's verdicts (shunned, read_only, lag, cluster members) and the pure
//!   function that lays them over the configured hostgroups; the `sluice-monitor` crate runs
//!   the checks that reach them.
//! - [`query`]: the query processor: digests, rules, hints, the query cache and its stats — the
//!   `sluice-query` crate, re-exported.
//! - [`live`]: the data path's live state as typed views ([`live::LiveStats`]) and the admin's
//!   commands on the running process ([`live::Control`]).
//! - [`advisory`]: a session's advisory locks per key (what pins a connection until released).
//! - [`Protocol`] and [`PerProtocol`]: the two sides, and one value kept for each.

pub mod admin;
pub mod admission;
pub mod advisory;
pub mod causal;
pub mod checkout;
pub use sluice_config as config;
pub mod error;
pub mod hostgroup;
pub mod kill_registry;
pub mod live;
pub mod login_throttle;
pub mod metrics;
pub mod pool;
mod protocol;
pub use sluice_query as query;
pub mod readiness;
pub mod runtime;
pub mod topology;
pub mod util;

pub use error::Error;
pub use protocol::{PerProtocol, Protocol};
pub use runtime::{ConfigHandle, RuntimeConfig};

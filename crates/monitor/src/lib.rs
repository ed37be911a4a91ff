//! sluice-monitor: the monitor, protocol-agnostic half. It schedules the health checks (connect,
//! ping, read_only, replication lag, Group Replication, Galera) that each backend crate
//! implements as a [`Checker`], keeps their bounded logs and counters ([`MonitorLog`], the
//! `monitor.*_log` tables), turns their outcomes into decisions — heartbeat and connect-error
//! shunning, lag shunning, read_only placement — and publishes them into the runtime snapshot
//! as a [`sluice_core::topology::Topology`], which `sluice-core` lays over the configured
//! hostgroups. It also runs the load probe workload guards read ([`Monitor::load_signal`]).
//!
//! It knows the core (runtime snapshot, topology, config model) and no wire bytes: the checks'
//! connections are the backend crates' ([`KeptConnections`] keeps one per server for them).
//!
//! ```
//! use sluice_core::Protocol;
//! use sluice_core::runtime::ServerKey;
//! use sluice_monitor::Monitor;
//!
//! let monitor = Monitor::new(Protocol::Mysql);
//! let db1 = ServerKey { hostname: "db1".into(), port: 3306 };
//! assert_eq!(monitor.replication_lag(&db1), None, "nothing measured yet");
//! assert_eq!(sluice_monitor::gtid_backlog("0-1-120", "0-1-100").ok(), Some(20));
//! ```
//!
//! A running proxy starts one per protocol with
//! `tokio::spawn(monitor.run(config_handle, checker, on_shun))`; `sluice-app` does that wiring.

mod check_run;
mod checker;
mod error;
mod health;
mod kept;
mod load;
mod log;
mod members;
mod scheduler;

pub use checker::{CheckFuture, CheckTarget, Checker, ConnectErrorHook, ConnectOutcomeFn, OnShun};
pub use error::{BackendError, CheckError};
pub use kept::{Checkout, Kept, KeptConnections, MonitorConnector, parse_number};
pub use load::{LOAD_PROBE_INTERVAL, ServerLoad, gtid_backlog};
pub use log::MonitorLog;
pub use scheduler::Monitor;
pub use sluice_core::topology::{CheckKind, CheckRow, GaleraStatus, MemberState};

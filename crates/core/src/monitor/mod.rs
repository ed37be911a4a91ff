//! The monitor, protocol-agnostic half: the check traits the backend crates implement, the
//! scheduler, the bounded check logs, and the pure decisions — heartbeat shunning, read_only
//! placement in replication hostgroups — laid over the configuration as a [`topology::Topology`].

mod check_run;
mod checker;
pub mod cluster;
mod error;
pub mod health;
mod kept;
pub mod load;
pub mod log;
mod members;
pub mod scheduler;
pub mod topology;

pub use checker::{CheckFuture, CheckTarget, Checker, ConnectErrorHook, ConnectOutcomeFn, OnShun};
pub use error::{BackendError, CheckError};
pub use kept::{Checkout, Kept, KeptConnections, MonitorConnector, parse_number};
pub use load::{LoadSignal, ServerLoad};
pub use log::{CheckKind, CheckRow};
pub use scheduler::Monitor;
pub use topology::Topology;

//! The monitor, protocol-agnostic half: the check traits the backend crates implement, the
//! scheduler, the bounded check logs, and the pure decisions — heartbeat shunning, read_only
//! placement in replication hostgroups — laid over the configuration as a [`topology::Topology`].

pub mod cluster;
pub mod health;
pub mod load;
pub mod log;
pub mod scheduler;
pub mod topology;

pub use load::{LoadSignal, ServerLoad};
pub use log::{CheckKind, CheckRow};
pub use scheduler::{
    CheckFuture, CheckTarget, Checker, ConnCache, ConnectErrorHook, Monitor, OnShun,
};
pub use topology::Topology;

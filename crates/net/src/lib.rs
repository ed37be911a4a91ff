//! sluice-net: the networking pieces both protocol stacks (MySQL and PostgreSQL, data ports and
//! admin ports) share, so each is written once:
//!
//! - [`listen`]: listeners with a deep accept queue;
//! - [`accept`]: the accept loop — `PROXYSQL PAUSE`, shutdown, backoff on accept errors, and
//!   dealing each session to an event-loop thread;
//! - [`workers`]: the event-loop threads (ProxySQL's worker model);
//! - [`kill`]: a duplicate of a backend socket that lets the monitor end a connection from
//!   outside the session that owns it.

pub mod accept;
pub mod kill;
pub mod listen;
pub mod workers;

pub use accept::{AcceptControl, serve};
pub use kill::{KillHandle, with_kill_handle};
pub use listen::{ListenError, bind_all, listen};
pub use workers::{Worker, Workers};

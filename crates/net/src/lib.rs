//! sluice-net: the networking pieces both protocol stacks (MySQL and PostgreSQL, data ports and
//! admin ports) share, so each is written once:
//!
//! - [`listen`](mod@listen): listeners with a deep accept queue;
//! - [`accept`]: the accept loop — `PROXYSQL PAUSE`, shutdown, backoff on accept errors, and
//!   dealing each session to an event-loop thread;
//! - [`workers`]: the event-loop threads (ProxySQL's worker model);
//! - [`kill`]: a duplicate of a backend socket that lets the monitor end a connection from
//!   outside the session that owns it;
//! - [`stream`]: a socket that is plain TCP or TLS, for clients and servers of both protocols;
//! - [`handover`]: listening sockets passed to a new process (`sluice --takeover`);
//! - [`tls`]: the frontends' TLS acceptor (configured certificate, or a generated one kept in
//!   the datadir); [`keylog`]: the TLS key log (`admin-ssl_keylog_file`);
//! - [`server_tls`]: [`ServerTls`], the client connections' TLS stream, which holds no buffer
//!   while its client is quiet (`ServerTls::accept(acceptor.config().clone(), tcp, &[])`);
//! - [`signals`]: a session's signals (shutdown, KILL) as one atomic word and one waker;
//! - [`step_block`]: the reused heap block a session runs its commands in.
//!
//! Errors are [`Error`]: a port that cannot be opened, a TLS file that cannot be used.
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), sluice_net::Error> {
//! // ProxySQL's `*-interfaces` format: `;`-separated host:port; port 0 picks a free one.
//! let listeners = sluice_net::bind_all("127.0.0.1:0", "example port").await?;
//! assert_eq!(listeners.len(), 1);
//! // A port already taken is an error naming the address and the port's purpose.
//! let taken = listeners[0].local_addr().map_err(|e| sluice_net::Error::Listen {
//!     addr: "?".into(),
//!     what: "local address".into(),
//!     source: e,
//! })?;
//! let err = sluice_net::bind_all(&taken.to_string(), "the same port").await.unwrap_err();
//! assert!(err.to_string().contains("the same port"));
//! # Ok(())
//! # }
//! ```

pub mod accept;
pub mod client_tls;
mod error;
mod graceful;
pub mod handover;
pub mod keylog;
pub mod kill;
pub mod listen;
pub mod server_tls;
pub mod signals;
pub mod step_block;
pub mod stream;
pub mod tls;
pub mod workers;

pub use accept::{AcceptControl, serve};
pub use error::Error;
pub use graceful::{Serve, with_shutdown_fanned_out};
pub use kill::{KillHandle, with_kill_handle};
pub use listen::{bind_all, listen};
pub use server_tls::ServerTls;
pub use signals::{SessionSignal, Signal};
pub use step_block::{StepBlock, StepRun};
pub use stream::MaybeTls;
pub use workers::{Worker, Workers};

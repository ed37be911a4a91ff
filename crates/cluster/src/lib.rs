//! sluice-cluster: keeping a fleet of Sluice nodes on one configuration.
//!
//! - **Peer sync** ([`run_peer_sync`]), compatible with ProxySQL Cluster: each node polls the
//!   admin port of every `proxysql_servers` peer with `admin-cluster_username`/`_password`,
//!   compares the peers' module checksums (`runtime_checksums_values`) with its own, and pulls a
//!   module a peer loaded more recently after `cluster_<module>_diffs_before_sync` differing
//!   checks in a row. A peer that never loaded the module since it started, or whose module is
//!   empty, is never a source.
//! - **A shared store** ([`run_etcd_sync`], [`EtcdStore`]) for larger fleets: the modules live
//!   in etcd; `SAVE <module> TO CLUSTER` writes one in a transaction, every node watches the
//!   prefix and applies each new revision; nodes announce themselves on leases.
//!
//! The admin store ([`sluice_admin::Admin`]) computes the checksums and applies a pulled module
//! with one runtime swap; this crate only talks to the other nodes.
//!
//! ```no_run
//! # async fn demo(admin: std::sync::Arc<sluice_admin::Admin>) {
//! let stop = tokio_util::sync::CancellationToken::new();
//! // Polls the peers named in proxysql_servers while admin-cluster_username is set.
//! tokio::spawn(sluice_cluster::run_peer_sync(admin, stop.clone()));
//! # }
//! ```

mod decide;
mod error;
mod etcd;
mod peers;

pub use error::Error;
pub use etcd::{EtcdStore, NodeIdentity, StoreAddress, run_etcd_sync};
pub use peers::run_peer_sync;

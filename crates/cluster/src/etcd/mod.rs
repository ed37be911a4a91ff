//! etcd as the fleet's configuration store (etcd 3.4+, over its gRPC API).

mod client;
mod store;
mod sync;

pub use store::{EtcdStore, StoreAddress};
pub use sync::{NodeIdentity, run_etcd_sync};

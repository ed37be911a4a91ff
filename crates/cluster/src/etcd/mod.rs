//! etcd as the fleet's configuration store (etcd 3.4+, through its JSON gateway).

mod client;
mod http;
mod store;
mod sync;

pub use store::{EtcdStore, StoreAddress};
pub use sync::{NodeIdentity, run_etcd_sync};

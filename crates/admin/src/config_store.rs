//! The link to a shared configuration store (etcd): `SAVE <module> TO CLUSTER` writes the
//! module's runtime rows there, `LOAD <module> FROM CLUSTER` applies the store's copy here. The
//! store itself lives in another crate (sluice-cluster) and is attached at start.

use crate::cluster::{ModuleRows, module_of, name_of};
use crate::command::Module;
use crate::engine::Admin;
use sluice_core::admin::{AdminError, AdminReply};
use sluice_core::util::lock;
use std::future::Future;
use std::pin::Pin;
use tracing::info;

/// The store implementation's own error (its crate's type), carried with its source chain.
pub type StoreError = Box<dyn std::error::Error + Send + Sync + 'static>;

/// A future a [`ConfigStore`] returns.
pub type StoreFuture<'a, T> = Pin<Box<dyn Future<Output = Result<T, StoreError>> + Send + 'a>>;

/// A shared configuration store holding one copy of each cluster module.
pub trait ConfigStore: Send + Sync {
    /// Writes `rows` as module `module` in one transaction; returns the store's revision after
    /// it.
    fn save<'a>(&'a self, module: &'a str, rows: &'a ModuleRows) -> StoreFuture<'a, u64>;
    /// The store's copy of `module` and the revision that wrote it, `None` when it has none.
    fn load<'a>(&'a self, module: &'a str) -> StoreFuture<'a, Option<(u64, ModuleRows)>>;
}

/// What this node knows of its store connection (`stats_config_store`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StoreStatus {
    /// `etcd://host:port,…/prefix`.
    pub url: String,
    /// `connected` or `unreachable`.
    pub state: String,
    /// The store revision this node's configuration is at.
    pub revision: u64,
    /// Unix time (s) a module from the store was last applied (0: never).
    pub applied_at: u64,
    /// Why the store is unreachable (empty when connected).
    pub last_error: String,
}

impl Admin {
    /// Connects `SAVE/LOAD … TO/FROM CLUSTER` to a configuration store.
    pub fn attach_config_store(&self, store: std::sync::Arc<dyn ConfigStore>) {
        let _ = self.config_store.set(store);
    }

    /// Records the store connection's state for `stats_config_store`.
    pub fn set_store_status(&self, status: StoreStatus) {
        *lock(&self.store_status) = Some(status);
    }

    /// The store connection's state, when a store is configured.
    pub fn store_status(&self) -> Option<StoreStatus> {
        lock(&self.store_status).clone()
    }

    fn linked_store(&self) -> Result<&std::sync::Arc<dyn ConfigStore>, AdminError> {
        self.config_store.get().ok_or_else(|| {
            AdminError::new(
                "no configuration store: start Sluice with --config-store etcd://host:port/prefix (or [cluster] config_store)",
            )
        })
    }

    /// `SAVE <module> TO CLUSTER`.
    pub(crate) async fn save_to_cluster(&self, m: Module) -> Result<AdminReply, AdminError> {
        let store = self.linked_store()?;
        let name = cluster_name(m)?;
        let rows = self
            .module_rows(name)
            .ok_or_else(|| AdminError::new(format!("{name} is not a cluster module")))?;
        let revision = store
            .save(name, &rows)
            .await
            .map_err(|e| AdminError::new(format!("SAVE TO CLUSTER failed: {e}")))?;
        info!(
            "config store: saved {name} (checksum {}) at revision {revision}",
            rows.checksum()
        );
        Ok(AdminReply::Done {
            affected: 1,
            message: Some(format!("{name} saved at revision {revision}")),
        })
    }

    /// `LOAD <module> FROM CLUSTER`.
    pub(crate) async fn load_from_cluster(&self, m: Module) -> Result<AdminReply, AdminError> {
        let store = self.linked_store()?;
        let name = cluster_name(m)?;
        let Some((revision, rows)) = store
            .load(name)
            .await
            .map_err(|e| AdminError::new(format!("LOAD FROM CLUSTER failed: {e}")))?
        else {
            return Err(AdminError::new(format!(
                "the configuration store has no {name}: SAVE it TO CLUSTER on a node first"
            )));
        };
        let save = self
            .running_config()
            .admin_variables
            .cluster
            .module(name)
            .save_to_disk;
        let (before, after) = self.apply_module(name, &rows, save).await?;
        crate::cluster::log_sync(
            name,
            &format!("the configuration store (revision {revision})"),
            &before,
            &after,
        );
        Ok(AdminReply::Done {
            affected: 1,
            message: None,
        })
    }
}

fn cluster_name(m: Module) -> Result<&'static str, AdminError> {
    name_of(m)
        .filter(|n| module_of(n).is_some())
        .ok_or_else(|| AdminError::new(format!("{m:?} is not kept in the configuration store")))
}

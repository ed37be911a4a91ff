//! A node on the etcd store: at connect it applies every stored module that differs from its
//! own, then watches the config prefix and applies each new revision with one runtime swap. It
//! announces itself under `<prefix>nodes/` on a lease (so the list of live nodes is the list of
//! keys) and reads the other nodes from there. When no member answers it keeps serving its last
//! configuration, says so in the log, `stats_config_store` and `/readyz`, and catches up when the
//! store is back.

use super::client::{EtcdClient, Event, WatchMessage};
use super::store::{StoreAddress, decode_module};
use crate::Error;
use serde_json::{Value, json};
use sluice_admin::{Admin, StoreStatus, log_sync};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;
use tracing::{info, warn};

/// The node lease's time to live: a node that stops renewing disappears after it.
const LEASE_TTL_S: u64 = 5;
/// Lease renewal, membership refresh and announcement rhythm.
const TICK: Duration = Duration::from_millis(1500);
/// Wait between attempts while no member answers.
const RETRY: Duration = Duration::from_secs(1);
/// Pause before reconnecting after a connected session ended (a member stopped).
const RECONNECT_PAUSE: Duration = Duration::from_millis(200);
/// The readiness note's key.
const NOTE: &str = "config_store";

/// Who this node is in the store: `host:port` of its MySQL admin listener.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeIdentity {
    /// The node's key under `<prefix>nodes/`.
    pub id: String,
    /// Its admin host, as other nodes' `stats_proxysql_servers_*` show it.
    pub hostname: String,
    /// Its admin port.
    pub port: u16,
}

impl NodeIdentity {
    /// The identity of a node whose MySQL admin listens on `ifaces` (the first address).
    pub fn from_admin_ifaces(ifaces: &str) -> NodeIdentity {
        let first = ifaces.split(';').next().unwrap_or("").trim();
        let (host, port) = first.rsplit_once(':').unwrap_or((first, "6032"));
        let port = port.parse().unwrap_or(6032);
        NodeIdentity {
            id: format!("{host}:{port}"),
            hostname: host.to_string(),
            port,
        }
    }
}

fn now_s() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

/// Runs the node's side of the store until `shutdown`.
pub async fn run_etcd_sync(
    admin: Arc<Admin>,
    address: StoreAddress,
    node: NodeIdentity,
    shutdown: CancellationToken,
) {
    let client = Arc::new(address.client());
    let mut sync = EtcdSync {
        admin,
        client,
        address,
        node,
        revision: 0,
        applied_at: 0,
        lease: None,
        announced: String::new(),
        outage: None,
    };
    info!(
        "config store: {} as node {}",
        sync.address.url(),
        sync.node.id
    );
    loop {
        let ended = tokio::select! {
            _ = shutdown.cancelled() => break,
            r = sync.session() => r,
        };
        let Err(why) = ended else { break };
        if sync.outage.is_none() && sync.lease.is_some() {
            // Connected until now (e.g. its member was stopped): try the others at once.
            info!("config store: {why}; reconnecting");
            sync.lease = None;
            tokio::select! {
                _ = shutdown.cancelled() => break,
                _ = tokio::time::sleep(RECONNECT_PAUSE) => {}
            }
            continue;
        }
        sync.unreachable(&why);
        tokio::select! {
            _ = shutdown.cancelled() => break,
            _ = tokio::time::sleep(RETRY) => {}
        }
    }
    if let Some(lease) = sync.lease {
        let _ = tokio::time::timeout(Duration::from_secs(1), sync.client.revoke(lease)).await;
    }
}

/// One node's connection to the store.
struct EtcdSync {
    admin: Arc<Admin>,
    client: Arc<EtcdClient>,
    address: StoreAddress,
    node: NodeIdentity,
    /// The store revision this node's configuration is at.
    revision: u64,
    applied_at: u64,
    lease: Option<i64>,
    /// The last announcement written (re-written only when it changes).
    announced: String,
    /// Since when, and why, no member answers.
    outage: Option<(u64, String)>,
}

impl EtcdSync {
    /// Connects, catches up, and follows the store until a request fails.
    async fn session(&mut self) -> Result<(), Error> {
        self.lease = None;
        let lease = self.client.grant(LEASE_TTL_S).await?;
        self.lease = Some(lease);
        self.announced.clear();
        let (revision, kvs) = self
            .client
            .range_prefix(&self.address.config_prefix())
            .await?;
        for kv in kvs {
            self.apply(&kv.key, &kv.value, kv.mod_revision).await;
        }
        self.revision = self.revision.max(revision);
        self.connected();
        self.announce().await?;
        self.refresh_members().await?;
        let mut watch = self
            .client
            .watch(&self.address.config_prefix(), revision + 1)
            .await?;
        let (tx, mut rx) = mpsc::channel::<Result<Option<WatchMessage>, Error>>(16);
        // The reader owns the stream; the loop below stays cancel-safe on the channel.
        let reader = tokio::spawn(async move {
            loop {
                let next = watch.next().await;
                let stop = !matches!(next, Ok(Some(_)));
                if tx.send(next).await.is_err() || stop {
                    return;
                }
            }
        });
        let result = self.follow(&mut rx, lease).await;
        reader.abort();
        result
    }

    /// Applies watched changes, renews the lease and refreshes membership until one fails.
    async fn follow(
        &mut self,
        rx: &mut mpsc::Receiver<Result<Option<WatchMessage>, Error>>,
        lease: i64,
    ) -> Result<(), Error> {
        let mut tick = tokio::time::interval(TICK);
        tick.tick().await;
        loop {
            tokio::select! {
                msg = rx.recv() => {
                    let msg = match msg {
                        Some(Ok(Some(m))) => m,
                        Some(Err(e)) => return Err(e),
                        Some(Ok(None)) | None => {
                            return Err(Error::Unreachable("the watch stream ended".into()))
                        }
                    };
                    if msg.canceled {
                        return Err(Error::Unreachable("the member cancelled the watch".into()));
                    }
                    for e in msg.events {
                        match e {
                            Event::Put(kv) => self.apply(&kv.key, &kv.value, kv.mod_revision).await,
                            Event::Delete(key) => warn!(
                                "config store: {key} was deleted; nodes keep the module they run"
                            ),
                        }
                    }
                    self.revision = self.revision.max(msg.revision);
                    self.publish_status();
                    self.announce().await?;
                }
                _ = tick.tick() => {
                    if self.client.keepalive(lease).await? == 0 {
                        return Err(Error::Unreachable("the node's lease expired".into()));
                    }
                    self.announce().await?;
                    self.refresh_members().await?;
                }
            }
        }
    }

    /// Applies a stored module when it differs from what this node runs.
    async fn apply(&mut self, key: &str, value: &[u8], revision: u64) {
        let (module, rows) = match decode_module(key, value) {
            Ok(m) => m,
            Err(e) => {
                warn!("config store: {e}; not applied");
                return;
            }
        };
        let local = self.admin.module_rows(&module);
        if local.as_ref().map(|l| l.checksum()) == Some(rows.checksum()) {
            return;
        }
        let save = self
            .admin
            .running_config()
            .admin_variables
            .cluster
            .module(&module)
            .save_to_disk;
        match self.admin.apply_module(&module, &rows, save).await {
            Ok((before, after)) => {
                self.applied_at = now_s();
                log_sync(
                    &module,
                    &format!("the configuration store (revision {revision})"),
                    &before,
                    &after,
                );
            }
            Err(e) => warn!(
                "config store: {module} of revision {revision} not applied: {}",
                e.message
            ),
        }
    }

    /// Writes this node's entry (revision and module checksums) when it changed.
    async fn announce(&mut self) -> Result<(), Error> {
        let Some(lease) = self.lease else {
            return Ok(());
        };
        let checksums: BTreeMap<&str, Value> = self
            .admin
            .checksums()
            .into_iter()
            .map(|c| (c.name, json!([c.version, c.epoch, c.checksum])))
            .collect();
        let doc = json!({
            "hostname": self.node.hostname,
            "port": self.node.port,
            "revision": self.revision,
            "checksums": checksums,
        })
        .to_string();
        if doc == self.announced {
            return Ok(());
        }
        let key = format!("{}{}", self.address.nodes_prefix(), self.node.id);
        self.client.put_leased(&key, doc.as_bytes(), lease).await?;
        self.announced = doc;
        Ok(())
    }

    /// Reads the live nodes into `stats_proxysql_servers_*`.
    async fn refresh_members(&mut self) -> Result<(), Error> {
        let (_, kvs) = self
            .client
            .range_prefix(&self.address.nodes_prefix())
            .await?;
        let board = self.admin.cluster_board();
        let now = now_s();
        let mut live = Vec::new();
        for kv in kvs {
            let Ok(v) = serde_json::from_slice::<Value>(&kv.value) else {
                continue;
            };
            let host = v
                .get("hostname")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string();
            let port = v.get("port").and_then(Value::as_u64).unwrap_or(0) as u16;
            let revision = v.get("revision").and_then(Value::as_u64).unwrap_or(0);
            board.update(&host, port, |r| {
                r.checks_ok += 1;
                r.last_check_ms = now * 1000;
                r.global_version = revision;
                r.comment = format!("etcd node, revision {revision}");
                for (name, c) in v
                    .get("checksums")
                    .and_then(Value::as_object)
                    .into_iter()
                    .flatten()
                {
                    let field = |i: usize| c.get(i).cloned().unwrap_or(Value::Null);
                    let version = field(0).as_u64().unwrap_or(0);
                    let epoch = field(1).as_u64().unwrap_or(0);
                    r.observe(name, (version, epoch, field(2).as_str().unwrap_or("")), now);
                }
            });
            live.push((host, port));
        }
        board.retain(|h, p| live.iter().any(|(lh, lp)| lh == h && *lp == p));
        Ok(())
    }

    fn connected(&mut self) {
        if let Some((since, _)) = self.outage.take() {
            info!(
                "config store: {} answers again after {}s; caught up to revision {}",
                self.address.url(),
                now_s().saturating_sub(since),
                self.revision
            );
        } else {
            info!(
                "config store: connected to {}, at revision {}",
                self.address.url(),
                self.revision
            );
        }
        self.admin.cluster_board().set_note(NOTE, None);
        self.publish_status();
    }

    fn unreachable(&mut self, why: &Error) {
        let since = match &self.outage {
            Some((since, _)) => *since,
            None => {
                warn!(
                    "config store: {} unreachable ({why}); this node keeps serving its configuration of revision {} and retries every {}s",
                    self.address.url(),
                    self.revision,
                    RETRY.as_secs()
                );
                now_s()
            }
        };
        self.outage = Some((since, why.to_string()));
        self.admin.cluster_board().set_note(
            NOTE,
            Some(format!(
                "the configuration store {} has been unreachable for {}s ({why}); serving the configuration of revision {}",
                self.address.url(),
                now_s().saturating_sub(since),
                self.revision
            )),
        );
        self.publish_status();
    }

    fn publish_status(&self) {
        let (state, last_error) = match &self.outage {
            Some((_, why)) => ("unreachable", why.clone()),
            None => ("connected", String::new()),
        };
        self.admin.set_store_status(StoreStatus {
            url: self.address.url(),
            state: state.into(),
            revision: self.revision,
            applied_at: self.applied_at,
            last_error,
        });
    }
}

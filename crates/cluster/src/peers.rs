//! ProxySQL Cluster compatible sync: every `proxysql_servers` peer is polled over its MySQL admin
//! port with `admin-cluster_username`/`_password`; a module a peer holds newer is pulled with
//! `PROXY_SELECT * FROM runtime_<table>` and applied here with one runtime swap.

use crate::Error;
use crate::decide::{Decision, decide};
use sluice_admin::{Admin, ModuleChecksum, ModuleRows, log_sync};
use sluice_core::admin::AdminRows;
use sluice_core::config::ClusterVariables;
use sluice_mysql_backend::{BackendConn, BackendSecret, ConnectParams};
use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};
use tokio_util::sync::CancellationToken;
use tracing::{info, warn};

/// Connect and login to a peer (ProxySQL's cluster connect timeout).
const CONNECT_TIMEOUT: Duration = Duration::from_secs(1);
/// A peer's answer to one query.
const QUERY_TIMEOUT: Duration = Duration::from_secs(5);
/// How often the peer list is compared with `proxysql_servers`.
const RECONCILE_EVERY: Duration = Duration::from_millis(500);
/// Largest reply packet read from a peer (a module's rows).
const MAX_PACKET: usize = 64 << 20;
/// utf8mb4_general_ci.
const COLLATION: u8 = 45;

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

/// Runs peer sync until `shutdown`: one poller per `proxysql_servers` row of the running
/// configuration while `admin-cluster_username` is set, started and stopped as they change.
pub async fn run_peer_sync(admin: Arc<Admin>, shutdown: CancellationToken) {
    let mut pollers: HashMap<(String, u16), CancellationToken> = HashMap::new();
    loop {
        let cfg = admin.running_config();
        let enabled = cfg.admin_variables.cluster.enabled();
        let wanted: HashSet<(String, u16)> = if enabled {
            cfg.proxysql_servers
                .iter()
                .map(|p| (p.hostname.clone(), p.port))
                .collect()
        } else {
            HashSet::new()
        };
        pollers.retain(|peer, stop| {
            let keep = wanted.contains(peer);
            if !keep {
                info!("cluster: stopped polling peer {}:{}", peer.0, peer.1);
                stop.cancel();
            }
            keep
        });
        admin
            .cluster_board()
            .retain(|h, p| wanted.contains(&(h.to_string(), p)));
        for p in &cfg.proxysql_servers {
            let key = (p.hostname.clone(), p.port);
            if !wanted.contains(&key) {
                continue;
            }
            admin.cluster_board().update(&p.hostname, p.port, |r| {
                r.weight = p.weight;
                r.comment = p.comment.clone();
            });
            if pollers.contains_key(&key) {
                continue;
            }
            info!("cluster: polling peer {}:{}", p.hostname, p.port);
            let stop = shutdown.child_token();
            let poller = PeerPoller {
                admin: admin.clone(),
                host: p.hostname.clone(),
                port: p.port,
                conn: None,
                checks: 0,
                reachable: None,
            };
            tokio::spawn(poller.run(stop.clone()));
            pollers.insert(key, stop);
        }
        tokio::select! {
            _ = shutdown.cancelled() => return,
            _ = tokio::time::sleep(RECONCILE_EVERY) => {}
        }
    }
}

/// One peer's poller: its admin connection and how many checks it made.
struct PeerPoller {
    admin: Arc<Admin>,
    host: String,
    port: u16,
    conn: Option<BackendConn>,
    checks: u64,
    /// Last known reachability, to log changes once.
    reachable: Option<bool>,
}

/// A module whose peer copy is to be pulled, with the checksum it must have.
struct Pull {
    module: String,
    checksum: String,
}

impl PeerPoller {
    async fn run(mut self, stop: CancellationToken) {
        loop {
            let settings = self.admin.running_config().admin_variables.cluster;
            let interval = Duration::from_millis(u64::from(settings.check_interval_ms));
            // A check runs to its end (its steps are bounded in time): a pull is never left
            // half applied.
            self.check(&settings).await;
            tokio::select! {
                _ = stop.cancelled() => break,
                _ = tokio::time::sleep(interval) => {}
            }
        }
        if let Some(c) = self.conn.take() {
            c.quit().await;
        }
    }

    fn peer(&self) -> String {
        format!("{}:{}", self.host, self.port)
    }

    /// One check: the peer's checksums, the sync decisions, the pulls; every
    /// `check_status_frequency` checks its counters too.
    async fn check(&mut self, s: &ClusterVariables) {
        let started = Instant::now();
        let reported = match self
            .query(
                "SELECT name, version, epoch, checksum FROM runtime_checksums_values ORDER BY name",
                s,
            )
            .await
        {
            Ok(rows) => rows,
            Err(why) => return self.unreachable(s, &why),
        };
        if self.reachable != Some(true) {
            info!("cluster: peer {} answers", self.peer());
            self.reachable = Some(true);
        }
        let ping_us = started.elapsed().as_micros() as u64;
        let (pulls, conflicts) = self.record(s, &reported, ping_us);
        for (module, epoch) in conflicts {
            warn!(
                "cluster: {module}: this node and peer {} loaded different configurations in the same second (epoch {epoch}); neither is taken: LOAD {} TO RUNTIME again on the node that is right",
                self.peer(),
                module.replace('_', " ").to_uppercase()
            );
        }
        for p in pulls {
            if let Err(why) = self.pull(&p, s).await {
                warn!(
                    "cluster: {} not synced from peer {}: {why}; the next check retries",
                    p.module,
                    self.peer()
                );
            }
        }
        if s.check_status_frequency > 0
            && self
                .checks
                .is_multiple_of(u64::from(s.check_status_frequency))
        {
            self.read_metrics(s).await;
        }
        self.checks += 1;
    }

    fn unreachable(&mut self, s: &ClusterVariables, why: &Error) {
        self.conn = None;
        self.admin
            .cluster_board()
            .update(&self.host, self.port, |r| {
                r.checks_err += 1;
                r.last_check_ms = now_ms();
            });
        if self.reachable != Some(false) {
            warn!(
                "cluster: peer {} cannot be checked ({why}); this node keeps its configuration and retries every {} ms",
                self.peer(),
                s.check_interval_ms
            );
            self.reachable = Some(false);
        }
    }

    /// Stores what the peer reported and decides per module; returns the pulls to make and the
    /// conflicts worth a log line (every `diffs_before_sync × 10` checks, as ProxySQL logs them).
    fn record(
        &mut self,
        s: &ClusterVariables,
        reported: &AdminRows,
        ping_us: u64,
    ) -> (Vec<Pull>, Vec<(String, u64)>) {
        let local: BTreeMap<&str, ModuleChecksum> = self
            .admin
            .checksums()
            .into_iter()
            .map(|c| (c.name, c))
            .collect();
        let now_s = now_ms() / 1000;
        let (mut pulls, mut conflicts) = (Vec::new(), Vec::new());
        self.admin
            .cluster_board()
            .update(&self.host, self.port, |rec| {
                rec.checks_ok += 1;
                rec.last_check_ms = now_ms();
                rec.ping_time_us = ping_us;
                for row in &reported.rows {
                    let cell = |i: usize| row.get(i).cloned().flatten().unwrap_or_default();
                    let (name, checksum) = (cell(0), cell(3));
                    let num = |i: usize| cell(i).parse::<u64>().unwrap_or(0);
                    let entry = rec.observe(&name, (num(1), num(2), &checksum), now_s);
                    let Some(mine) = local.get(name.as_str()) else {
                        continue;
                    };
                    let diffs = s.module(&name).diffs_before_sync;
                    match decide(mine, entry, diffs) {
                        Decision::Wait => {}
                        Decision::Pull => pulls.push(Pull {
                            module: name,
                            checksum,
                        }),
                        Decision::Conflict => {
                            if entry.diff_check % (u64::from(diffs) * 10) == u64::from(diffs) {
                                conflicts.push((name, entry.epoch));
                            }
                        }
                    }
                }
                rec.global_version = rec.checksums.values().map(|c| c.version).max().unwrap_or(0);
            });
        (pulls, conflicts)
    }

    /// Reads the module's tables from the peer, checks they are what it announced, and applies
    /// them.
    async fn pull(&mut self, p: &Pull, s: &ClusterVariables) -> Result<(), Error> {
        let local = self
            .admin
            .module_rows(&p.module)
            .ok_or_else(|| Error::UnknownModule(p.module.clone()))?;
        if local.checksum() == p.checksum {
            return Ok(()); // another peer's poller took it already
        }
        let mut pulled = ModuleRows::default();
        for (table, _) in &local.tables {
            let mut rows = self
                .query(&format!("PROXY_SELECT * FROM runtime_{table}"), s)
                .await?;
            if let Some(prefix) = p.module.strip_suffix("_variables") {
                let prefix = format!("{prefix}-");
                rows.rows.retain(|r| {
                    r.first()
                        .cloned()
                        .flatten()
                        .is_some_and(|n| n.starts_with(&prefix))
                });
                rows.rows.sort();
            }
            pulled.tables.push((table.clone(), rows));
        }
        let got = pulled.checksum();
        if got != p.checksum {
            return Err(Error::ChecksumChanged {
                got: got.to_string(),
                announced: p.checksum.to_string(),
            });
        }
        let save = s.module(&p.module).save_to_disk;
        let (before, after) = self
            .admin
            .apply_module(&p.module, &pulled, save)
            .await
            .map_err(|e| Error::Apply(e.message))?;
        log_sync(&p.module, &format!("peer {}", self.peer()), &before, &after);
        if after != p.checksum {
            warn!(
                "cluster: {} from peer {} loads here with checksum {after}, not {}: the nodes may run different Sluice versions",
                p.module,
                self.peer(),
                p.checksum
            );
        }
        Ok(())
    }

    /// Every `check_status_frequency` checks: the peer's uptime, queries and clients.
    async fn read_metrics(&mut self, s: &ClusterVariables) {
        let started = Instant::now();
        let Ok(rows) = self
            .query(
                "SELECT Variable_Name, Variable_Value FROM stats_mysql_global",
                s,
            )
            .await
        else {
            return;
        };
        let value = |name: &str| {
            rows.rows
                .iter()
                .find(|r| r.first().cloned().flatten().as_deref() == Some(name))
                .and_then(|r| r.get(1).cloned().flatten())
                .and_then(|v| v.parse::<u64>().ok())
                .unwrap_or(0)
        };
        self.admin
            .cluster_board()
            .update(&self.host, self.port, |r| {
                r.metrics.response_time_ms = started.elapsed().as_millis() as u64;
                r.metrics.uptime_s = value("ProxySQL_Uptime");
                r.metrics.queries = value("Questions");
                r.metrics.client_connections_connected = value("Client_Connections_connected");
                r.metrics.client_connections_created = value("Client_Connections_created");
            });
    }

    /// Runs `sql` on the peer's admin, connecting first when needed.
    async fn query(&mut self, sql: &str, s: &ClusterVariables) -> Result<AdminRows, Error> {
        let conn = match self.conn.take() {
            Some(conn) => conn,
            None => {
                let params = ConnectParams {
                    host: self.host.clone(),
                    port: self.port,
                    user: s.username.clone(),
                    secret: BackendSecret::Clear(s.password.clone()),
                    schema: None,
                    charset: COLLATION,
                    client_caps: 0,
                    tls: None,
                    compress: false,
                    timeout: CONNECT_TIMEOUT,
                    max_packet: MAX_PACKET,
                    multi_statements: true,
                    track_gtid: false,
                };
                BackendConn::connect(&params).await?
            }
        };
        let conn = self.conn.insert(conn);
        let answer = tokio::time::timeout(QUERY_TIMEOUT, conn.query_table(sql)).await;
        match answer {
            Ok(Ok(Ok((columns, rows)))) => Ok(AdminRows { columns, rows }),
            Ok(Ok(Err(server_err))) => {
                self.conn = None;
                let why = sluice_mysql_proto::packets::parse_err(&server_err)
                    .map(|e| format!("{} ({})", e.message, e.code))
                    .unwrap_or_else(|_| "a malformed error".into());
                Err(Error::PeerRefused {
                    sql: sql.to_string(),
                    why,
                })
            }
            Ok(Err(e)) => {
                self.conn = None;
                Err(e.into())
            }
            Err(_) => {
                self.conn = None;
                Err(Error::PeerSilent(QUERY_TIMEOUT.as_secs()))
            }
        }
    }
}

//! Accepting MySQL clients: one task per connection, the global connection cap, graceful stop.

use crate::handshake::connection_phase;
use crate::registry::SessionRegistry;
use crate::session::Session;
use sluice_core::ConfigHandle;
use sluice_mysql_backend::MysqlPool;
use sluice_mysql_proto::framing::packet;
use sluice_mysql_proto::packets::err_payload;
use std::sync::Arc;
use std::time::Duration;
use tokio::io::AsyncWriteExt;
use tokio::net::{TcpListener, TcpStream};
use tokio_rustls::TlsAcceptor;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tracing::{debug, info, warn};

/// Everything the MySQL frontend's sessions share.
pub struct MysqlFrontend {
    /// The runtime config.
    pub config: ConfigHandle,
    /// Backend connection pools.
    pub pool: Arc<MysqlPool>,
    /// TLS for clients that ask for it (`mysql-have_ssl`).
    pub tls: Option<TlsAcceptor>,
    /// Connected clients.
    pub registry: Arc<SessionRegistry>,
    /// Cancelled when Sluice stops: listeners stop accepting, idle sessions close.
    pub shutdown: CancellationToken,
    /// Every session task, so shutdown can wait for them.
    pub tasks: TaskTracker,
    /// The global prepared-statement registry.
    pub statements: Arc<crate::stmt_registry::StmtRegistry>,
    /// Counters for the admin views.
    pub counters: Arc<FrontendCounters>,
    /// Set by the admin's `PROXYSQL PAUSE`: new connections wait until `RESUME`.
    pub paused: Arc<std::sync::atomic::AtomicBool>,
}

/// Counters kept by the MySQL frontend.
#[derive(Debug, Default)]
pub struct FrontendCounters {
    /// SET statements Sluice could not parse (each pinned its session).
    pub unparsed_set: std::sync::atomic::AtomicU64,
    /// Per-command counts and latencies, backend errors.
    pub commands: crate::counters::CommandCounters,
    /// Digests, rule hits and query-processor counters.
    pub query: sluice_core::query::QueryProcessorStats,
    /// The query cache.
    pub cache: sluice_core::query::QueryCache,
    /// Mirror copies running now (bounded).
    pub mirrors_in_flight: std::sync::atomic::AtomicUsize,
    /// Commands forwarded per (hostgroup, server): `stats_mysql_connection_pool.Queries`.
    pub server_queries:
        std::sync::Mutex<std::collections::HashMap<(u32, sluice_core::runtime::ServerKey), u64>>,
}

impl FrontendCounters {
    /// Counts one command forwarded to `server` in `hostgroup`.
    pub fn count_server_query(&self, hostgroup: u32, server: &sluice_core::runtime::ServerKey) {
        let mut g = self
            .server_queries
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        match g.get_mut(&(hostgroup, server.clone())) {
            Some(n) => *n += 1,
            None => {
                g.insert((hostgroup, server.clone()), 1);
            }
        }
    }

    /// Commands forwarded to `server` in `hostgroup` so far.
    pub fn server_queries(&self, hostgroup: u32, server: &sluice_core::runtime::ServerKey) -> u64 {
        self.server_queries
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(&(hostgroup, server.clone()))
            .copied()
            .unwrap_or(0)
    }
}

/// Accepts clients on `listeners` until shutdown; new connections wait while `PROXYSQL PAUSE` is
/// in force.
pub async fn serve(fe: Arc<MysqlFrontend>, listeners: Vec<TcpListener>) {
    let ctl = sluice_net::AcceptControl {
        name: "MySQL",
        shutdown: fe.shutdown.clone(),
        paused: Some(fe.paused.clone()),
        tasks: fe.tasks.clone(),
        workers: None,
    };
    sluice_net::serve(listeners, ctl, move |tcp, peer, _| {
        handle(fe.clone(), tcp, peer)
    })
    .await;
}

async fn handle(fe: Arc<MysqlFrontend>, mut tcp: TcpStream, peer: std::net::SocketAddr) {
    let rt = fe.config.load();
    let vars = &rt.mysql.variables;
    let id = fe.registry.next_id();
    let Some(mut slot) = fe
        .registry
        .enter(vars.max_connections, id, &peer.to_string())
    else {
        warn!(client = %peer, max = vars.max_connections, "refusing client: mysql-max_connections reached");
        let _ = tcp
            .write_all(&packet(
                0,
                &err_payload(1040, "08004", "Too many connections"),
            ))
            .await;
        return;
    };
    let timeout = Duration::from_millis(vars.connect_timeout_client);
    let phase = tokio::time::timeout(
        timeout,
        connection_phase(tcp, peer, &rt, fe.tls.as_ref(), id, &mut slot),
    )
    .await;
    let (io, login) = match phase {
        Ok(Ok(v)) => v,
        Ok(Err(crate::Error::Protocol(sluice_mysql_proto::Error::Closed))) => {
            // TCP health checks connect and close without a word; not worth a warning.
            debug!(session = id, client = %peer, "client closed the connection before logging in");
            return;
        }
        Ok(Err(e)) => {
            warn!(session = id, client = %peer, "client login failed: {e}");
            return;
        }
        Err(_) => {
            warn!(session = id, client = %peer, "client did not complete the handshake within mysql-connect_timeout_client ({}ms)", timeout.as_millis());
            return;
        }
    };
    info!(session = id, user = %login.user.username, client = %peer, tls = io.stream.get_ref().is_tls(), compressed = io.stream.is_compressed(), schema = %login.schema, "client logged in");
    drop(rt);
    Session::new(id, io, login, fe, slot).run().await;
}

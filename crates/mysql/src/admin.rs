//! The admin interface over the MySQL protocol (port 6032): the same handshake and
//! authentication as the data port, against the admin credentials, then each COM_QUERY goes to
//! the [`AdminExecutor`] and its answer is encoded as a result set, an OK or an ERR packet.

use crate::handshake::connection_phase;
use crate::registry::SessionRegistry;
use crate::sql::lexer::split_statements;
use sluice_core::admin::{AdminError, AdminExecutor, AdminReply, AdminRole};
use sluice_core::config::{Flag, HostgroupId, MysqlUser, UserMaxConnections};
use sluice_core::login_throttle::Admission;
use sluice_core::runtime::RuntimeConfig;
use sluice_mysql_proto::consts::{com, status};
use sluice_mysql_proto::packets::{err_payload, ok_payload};
use sluice_mysql_proto::resultset::{ColType, ResultShape, text_result};
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;
use tokio::io::AsyncWriteExt;
use tokio::net::{TcpListener, TcpStream};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tracing::{debug, info, warn};

/// What the MySQL admin listener needs.
pub struct MysqlAdmin {
    /// Runs the statements.
    pub executor: Arc<dyn AdminExecutor>,
    /// Cancelled when Sluice stops.
    pub shutdown: CancellationToken,
    /// Admin session tasks.
    pub tasks: TaskTracker,
    /// Failed logins per client address, shared with the MySQL data port
    /// ([`MysqlFrontend::login_gate`](crate::MysqlFrontend::login_gate)); `None`: not counted.
    pub login: Option<sluice_core::login_throttle::LoginGate>,
}

/// The default credential ProxySQL ships with; like ProxySQL, Sluice takes it only from loopback.
const DEFAULT_ADMIN: (&str, &str) = ("admin", "admin");

/// Accepts admin clients on `listeners` until shutdown.
pub async fn serve_admin(admin: Arc<MysqlAdmin>, listeners: Vec<TcpListener>) {
    let ctl = sluice_net::AcceptControl {
        name: "MySQL admin",
        shutdown: admin.shutdown.clone(),
        paused: None,
        tasks: admin.tasks.clone(),
        workers: None,
    };
    sluice_net::serve(listeners, ctl, move |tcp, peer, _| {
        admin_session(admin.clone(), tcp, peer)
    })
    .await;
}

/// A runtime view holding only the admin logins, so the data port's connection phase serves.
fn admin_runtime(admin: &MysqlAdmin, peer: &SocketAddr) -> RuntimeConfig {
    let mut rt = RuntimeConfig::default();
    rt.mysql.variables.server_version =
        format!("8.0.36-sluice-admin-{}", env!("CARGO_PKG_VERSION"));
    rt.mysql.variables.default_schema = "main".into();
    for c in admin.executor.credentials() {
        if (c.user.as_str(), c.password.as_str()) == DEFAULT_ADMIN && !peer.ip().is_loopback() {
            continue;
        }
        let user = MysqlUser {
            username: c.user.clone(),
            password: c.password.clone(),
            active: Flag(true),
            use_ssl: Flag(false),
            default_hostgroup: HostgroupId(0),
            default_schema: None,
            schema_locked: Flag(false),
            transaction_persistent: Flag(true),
            fast_forward: Flag(false),
            backend: Flag(false),
            frontend: Flag(true),
            max_connections: UserMaxConnections(10_000),
            attributes: String::new(),
            comment: String::new(),
        };
        rt.mysql
            .frontend_users
            .entry(c.user.clone())
            .or_insert_with(|| Arc::new(user));
    }
    rt
}

async fn admin_session(admin: Arc<MysqlAdmin>, tcp: TcpStream, peer: SocketAddr) {
    if let Some(gate) = &admin.login {
        match gate.admit(peer.ip()) {
            Admission::Now => {}
            Admission::After(wait) => tokio::time::sleep(wait).await,
            Admission::Refused => return,
        }
    }
    let rt = admin_runtime(&admin, &peer);
    let registry = SessionRegistry::new();
    let Some(mut slot) = registry.enter(u32::MAX, 0, &peer.to_string()) else {
        return;
    };
    let phase = tokio::time::timeout(
        Duration::from_secs(10),
        connection_phase(tcp, peer, &rt, None, 0, &mut slot),
    )
    .await;
    let (mut io, login) = match phase {
        Ok(Ok(v)) => {
            if let Some(gate) = &admin.login {
                gate.succeeded(peer.ip());
            }
            v
        }
        Ok(Err(e)) if crate::listener::left_silently(&e) => {
            // Health checks connect and close (or reset) without a word.
            debug!(client = %peer, "admin client closed the connection before logging in");
            return;
        }
        Ok(Err(e)) => {
            match (&admin.login, &e) {
                (Some(gate), crate::Error::AccessDenied { .. }) => {
                    gate.failed(peer.ip(), "MySQL admin", &e);
                }
                _ => warn!(client = %peer, "admin login failed: {e}"),
            }
            return;
        }
        Err(_) => return,
    };
    let role = admin
        .executor
        .credentials()
        .into_iter()
        .find(|c| c.user == login.user.username)
        .map(|c| c.role)
        .unwrap_or(AdminRole::Stats);
    info!(user = %login.user.username, client = %peer, ?role, "admin login");
    let shape = login.shape();
    loop {
        let read = tokio::select! {
            _ = admin.shutdown.cancelled() => break,
            r = io.read() => r,
        };
        let Ok(pk) = read else { break };
        let seq = pk.seq.wrapping_add(1);
        let reply = match pk.payload.first() {
            Some(&com::QUIT) | None => break,
            Some(&com::PING) | Some(&com::INIT_DB) => ok_payload(0, 0, status::AUTOCOMMIT, 0),
            Some(&com::QUERY) => {
                let sql = String::from_utf8_lossy(&pk.payload[1..]).into_owned();
                let bytes = run_query(&admin, role, &sql, seq, shape).await;
                if io.stream.write_all(&bytes).await.is_err() {
                    break;
                }
                continue;
            }
            Some(other) => err_payload(
                1047,
                "08S01",
                &format!("Unknown command {other:#04x} on the admin interface"),
            ),
        };
        if io.write(seq, &reply).await.is_err() {
            break;
        }
    }
    debug!(client = %peer, "admin session ended");
    drop(slot);
}

/// Runs every statement of `sql`; the reply of the last one (or the first error) is sent.
async fn run_query(
    admin: &MysqlAdmin,
    role: AdminRole,
    sql: &str,
    seq: u8,
    shape: ResultShape,
) -> Vec<u8> {
    let mut last: Result<AdminReply, AdminError> = Ok(AdminReply::Done {
        affected: 0,
        message: None,
    });
    for stmt in split_statements(sql) {
        last = admin.executor.execute(role, stmt.trim()).await;
        if let Err(e) = &last {
            debug!("admin statement failed: {e}");
            break;
        }
    }
    let mut out = Vec::new();
    let mut s = seq;
    match last {
        Ok(AdminReply::Rows(r)) => {
            let cols: Vec<(&str, ColType)> = r
                .columns
                .iter()
                .map(|c| (c.as_str(), ColType::Text))
                .collect();
            return text_result(seq, shape, status::AUTOCOMMIT, &cols, &r.rows);
        }
        Ok(AdminReply::Done { affected, message }) => {
            let mut p = ok_payload(affected, 0, status::AUTOCOMMIT, 0);
            if let Some(m) = message {
                // The info string, length-encoded as MariaDB sends it (libmariadb reads it so).
                sluice_mysql_proto::lenenc::put_lenenc_bytes(&mut p, m.as_bytes());
            }
            sluice_mysql_proto::framing::put_packet(&mut out, &mut s, &p);
        }
        Err(e) => sluice_mysql_proto::framing::put_packet(
            &mut out,
            &mut s,
            &err_payload(e.code, e.sqlstate, &e.message),
        ),
    }
    out
}

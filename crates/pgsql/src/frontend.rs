//! The PostgreSQL data port (6133): startup, SCRAM-SHA-256 authentication against `pgsql_users`,
//! and transaction pooling — a session holds a server connection from its first message until
//! the server reports ReadyForQuery "idle" with nothing outstanding, then gives it back. Client and
//! server messages are forwarded as raw frames, pipelined in both directions.

use sluice_core::ConfigHandle;
use sluice_pgsql_backend::Error as PgError;
use sluice_pgsql_backend::frame::{
    Reader, auth, complete_len, error_response, message, parameter_status, parse_pairs, ready,
};
use sluice_pgsql_backend::pool::{PgCheckout, PgPool, PgPooled};
use sluice_pgsql_backend::scram;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;
use tokio::io::AsyncWriteExt;
use tokio::net::{TcpListener, TcpStream};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tracing::{debug, info, warn};

/// What the PostgreSQL frontend's sessions share.
pub struct PgFrontend {
    /// Runtime configuration.
    pub config: ConfigHandle,
    /// Server connection pools.
    pub pool: Arc<PgPool>,
    /// Cancelled when Sluice stops.
    pub shutdown: CancellationToken,
    /// Session tasks.
    pub tasks: TaskTracker,
    /// Client cancel keys → the server connection the session is using now.
    pub cancels: CancelMap,
}

/// Where a cancel request for a session must go: (server address, server pid, server secret).
pub type CancelTarget = Arc<std::sync::Mutex<Option<(String, u32, u32)>>>;

/// Cancel keys Sluice handed to clients.
pub type CancelMap = Arc<std::sync::Mutex<std::collections::HashMap<(u32, u32), CancelTarget>>>;

fn set_target(t: &CancelTarget, v: Option<(String, u32, u32)>) {
    *t.lock().unwrap_or_else(|p| p.into_inner()) = v;
}

/// Forwards a client's CancelRequest to the server running its query (no-op otherwise).
async fn cancel(fe: &PgFrontend, pid: u32, secret: u32) {
    let target = {
        let map = fe.cancels.lock().unwrap_or_else(|p| p.into_inner());
        map.get(&(pid, secret))
            .and_then(|t| t.lock().unwrap_or_else(|p| p.into_inner()).clone())
    };
    let Some((server, bpid, bsecret)) = target else {
        return;
    };
    let mut pkt = 16u32.to_be_bytes().to_vec();
    pkt.extend_from_slice(&80_877_102u32.to_be_bytes());
    pkt.extend_from_slice(&bpid.to_be_bytes());
    pkt.extend_from_slice(&bsecret.to_be_bytes());
    match TcpStream::connect(server.as_str()).await {
        Ok(mut s) => {
            let _ = s.write_all(&pkt).await;
            info!(server = %server, "forwarded a client's cancel request");
        }
        Err(e) => warn!(server = %server, "cannot forward cancel request: {e}"),
    }
}

/// Accepts PostgreSQL clients until shutdown.
pub async fn serve(fe: Arc<PgFrontend>, listeners: Vec<TcpListener>) {
    let mut loops = Vec::new();
    for l in listeners {
        let fe = fe.clone();
        loops.push(tokio::spawn(async move {
            loop {
                let accepted = tokio::select! {
                    _ = fe.shutdown.cancelled() => break,
                    a = l.accept() => a,
                };
                match accepted {
                    Ok((tcp, peer)) => {
                        let _ = tcp.set_nodelay(true);
                        let f = fe.clone();
                        fe.tasks.spawn(async move { session(f, tcp, peer).await });
                    }
                    Err(e) => {
                        warn!("pgsql accept failed: {e}");
                        tokio::time::sleep(Duration::from_millis(50)).await;
                    }
                }
            }
        }));
    }
    for l in loops {
        let _ = l.await;
    }
}

struct Login {
    user: Arc<sluice_core::config::PgsqlUser>,
    database: String,
    options: Vec<(String, String)>,
}

async fn fail(tcp: &mut TcpStream, code: &str, msg: &str) {
    let _ = tcp.write_all(&error_response("FATAL", code, msg)).await;
}

/// Startup and authentication; on success the client has received AuthenticationOk.
async fn login(
    fe: &PgFrontend,
    tcp: &mut TcpStream,
    reader: &mut Reader,
    peer: SocketAddr,
) -> Result<Login, String> {
    let params = loop {
        let pkt = reader.startup(tcp).await.map_err(|e| e.to_string())?;
        let code = u32::from_be_bytes([pkt[4], pkt[5], pkt[6], pkt[7]]);
        match code {
            80_877_103 | 80_877_104 => {
                // SSLRequest / GSSENCRequest: not on this port yet; the client goes on in plaintext.
                tcp.write_all(b"N").await.map_err(|e| e.to_string())?;
            }
            80_877_102 if pkt.len() >= 16 => {
                let pid = u32::from_be_bytes([pkt[8], pkt[9], pkt[10], pkt[11]]);
                let secret = u32::from_be_bytes([pkt[12], pkt[13], pkt[14], pkt[15]]);
                cancel(fe, pid, secret).await;
                return Err("cancel request handled".into());
            }
            196_608 => break parse_pairs(&pkt[8..]),
            other => {
                fail(
                    tcp,
                    "08P01",
                    &format!(
                        "unsupported frontend protocol {}.{}",
                        other >> 16,
                        other & 0xffff
                    ),
                )
                .await;
                return Err("unsupported protocol version".into());
            }
        }
    };
    let get = |k: &str| params.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone());
    let username = get("user").unwrap_or_default();
    let database = get("database").unwrap_or_else(|| username.clone());
    let rt = fe.config.load();
    let user = rt.pgsql.frontend_users.get(&username).cloned();
    // SCRAM against the user's password; unknown users run the exchange too, against a random one.
    let password = user
        .as_ref()
        .map(|u| u.password.clone())
        .unwrap_or_else(|| format!("{:x}", sluice_core::hostgroup::random_u64()));
    tcp.write_all(&auth(10, b"SCRAM-SHA-256\0\0"))
        .await
        .map_err(|e| e.to_string())?;
    let first = reader.message(tcp).await.map_err(|e| e.to_string())?;
    let body = &first[5..];
    let mech_end = body
        .iter()
        .position(|b| *b == 0)
        .ok_or("malformed SASLInitialResponse")?;
    let client_first =
        String::from_utf8_lossy(body.get(mech_end + 5..).unwrap_or_default()).into_owned();
    let denied =
        |why: &str| format!("password authentication failed for user \"{username}\" ({why})");
    let (server, server_first) =
        scram::Server::new(&password, &client_first).map_err(|e| denied(&e))?;
    tcp.write_all(&auth(11, server_first.as_bytes()))
        .await
        .map_err(|e| e.to_string())?;
    let fin = reader.message(tcp).await.map_err(|e| e.to_string())?;
    let verdict = server.finish(&String::from_utf8_lossy(&fin[5..]));
    let user = match (verdict, user) {
        (Ok(v), Some(u)) if u.active.0 => {
            tcp.write_all(&auth(12, v.as_bytes()))
                .await
                .map_err(|e| e.to_string())?;
            u
        }
        _ => {
            let msg = format!("password authentication failed for user \"{username}\"");
            fail(tcp, "28P01", &msg).await;
            return Err(msg);
        }
    };
    if user.use_ssl.0 {
        let msg = format!("user \"{username}\" must connect with SSL");
        fail(tcp, "28000", &msg).await;
        return Err(msg);
    }
    tcp.write_all(&auth(0, b""))
        .await
        .map_err(|e| e.to_string())?;
    let options = params
        .into_iter()
        .filter(|(k, _)| !matches!(k.as_str(), "user" | "database"))
        .collect();
    debug!(client = %peer, user = %username, "pgsql login");
    Ok(Login {
        user,
        database,
        options,
    })
}

/// Gets a server connection for the session.
async fn checkout(fe: &PgFrontend, l: &Login) -> Result<PgPooled, PgError> {
    let rt = fe.config.load();
    let hg = l.user.default_hostgroup.0;
    let servers = rt
        .pgsql
        .hostgroups
        .get(&hg)
        .map(Vec::as_slice)
        .unwrap_or(&[]);
    let v = &rt.pgsql.variables;
    let req = PgCheckout {
        hostgroup: hg,
        servers,
        user: &l.user.username,
        password: &l.user.password,
        database: &l.database,
        options: &l.options,
        connect_timeout: Duration::from_millis(v.connect_timeout_server),
        connect_timeout_max: Duration::from_millis(v.connect_timeout_server_max),
    };
    fe.pool.checkout(&req).await
}

fn error_for(e: &PgError) -> Vec<u8> {
    match e {
        PgError::Server { code, message } => error_response("FATAL", code, message),
        PgError::ConnectTimeout { .. } => error_response("ERROR", "08001", &e.to_string()),
        other => error_response(
            "ERROR",
            "08006",
            &format!("backend connection failed: {other}"),
        ),
    }
}

async fn session(fe: Arc<PgFrontend>, mut tcp: TcpStream, peer: SocketAddr) {
    let mut reader = Reader::default();
    let l = match login(&fe, &mut tcp, &mut reader, peer).await {
        Ok(l) => l,
        Err(e) => {
            debug!(client = %peer, "pgsql login ended: {e}");
            return;
        }
    };
    // ParameterStatus values come from a real server connection, so clients see the server's.
    let mut first = match checkout(&fe, &l).await {
        Ok(c) => c,
        Err(e) => {
            warn!(client = %peer, user = %l.user.username, "no PostgreSQL backend for the login: {e}");
            let _ = tcp.write_all(&error_for(&e)).await;
            return;
        }
    };
    let mut hello = Vec::new();
    for (k, v) in &first.conn().params {
        hello.extend(parameter_status(k, v));
    }
    let key = sluice_core::hostgroup::random_u64();
    let cancel_key = ((key >> 32) as u32, key as u32);
    let target: CancelTarget = Arc::default();
    fe.cancels
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .insert(cancel_key, target.clone());
    hello.extend(message(b'K', &key.to_be_bytes()));
    hello.extend(ready(b'I'));
    first.release_clean();
    if tcp.write_all(&hello).await.is_err() {
        return;
    }
    info!(client = %peer, user = %l.user.username, database = %l.database, "pgsql client logged in");
    if let Err(e) = pump(&fe, &l, &mut tcp, &mut reader, &target).await {
        debug!(client = %peer, "pgsql session ended: {e}");
    }
    fe.cancels
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .remove(&cancel_key);
}

/// Why the session keeps its server connection even when idle.
fn pins(msg: &[u8], pinned: &mut Option<&'static str>) {
    match msg.first() {
        // A named prepared statement lives on one server connection.
        Some(b'P') if msg.get(5).is_some_and(|b| *b != 0) => {
            *pinned = Some("named prepared statement")
        }
        Some(b'Q') => {
            let q = String::from_utf8_lossy(&msg[5..]).to_ascii_lowercase();
            let q = q.trim_start();
            if q.starts_with("listen") {
                *pinned = Some("LISTEN");
            } else if q.starts_with("prepare") {
                *pinned = Some("SQL PREPARE");
            } else if (q.starts_with("set ")
                && !q.starts_with("set local")
                && !q.starts_with("set transaction"))
                || q.starts_with("reset")
                || q.contains("temp table")
                || q.contains("temporary table")
                || q.contains("pg_advisory_lock")
                || q.contains("with hold")
            {
                *pinned = Some("session state");
            }
        }
        _ => {}
    }
}

/// Forwards client messages and server replies until the client leaves.
async fn pump(
    fe: &PgFrontend,
    l: &Login,
    tcp: &mut TcpStream,
    reader: &mut Reader,
    target: &CancelTarget,
) -> Result<(), PgError> {
    let mut backend: Option<PgPooled> = None;
    let mut outstanding: u32 = 0; // Query/Sync messages whose ReadyForQuery has not come back
    let mut pinned: Option<&'static str> = if l.user.fast_forward.0 {
        Some("session pooling")
    } else {
        None
    };
    let mut last_status = b'I';
    loop {
        let Some(b) = backend.as_mut() else {
            // Idle between transactions: wait for the client only.
            let m = tokio::select! {
                _ = fe.shutdown.cancelled() => return Ok(()),
                m = reader.message(tcp) => m?,
            };
            if m[0] == b'X' {
                return Ok(());
            }
            match checkout(fe, l).await {
                Ok(mut c) => {
                    let conn = c.conn();
                    set_target(target, Some((conn.server.clone(), conn.key.0, conn.key.1)));
                    conn.stream.write_all(&m).await?;
                    pins(&m, &mut pinned);
                    if matches!(m[0], b'Q' | b'S') {
                        outstanding += 1;
                    }
                    backend = Some(c);
                }
                Err(e) => {
                    warn!(user = %l.user.username, "pgsql: {e}");
                    let mut out = error_for(&e);
                    if matches!(m[0], b'Q' | b'S') {
                        out.extend(ready(b'I'));
                    }
                    tcp.write_all(&out).await?;
                }
            }
            continue;
        };
        let ev = {
            let conn = b.conn();
            tokio::select! {
                m = reader.message(tcp) => Ev::Client(m),
                r = conn.reader.fill(&mut conn.stream) => Ev::Server(r),
            }
        };
        match ev {
            Ev::Client(Err(e)) => {
                // The client went away with the connection mid-use: it is closed (dropped).
                drop(backend.take());
                return Err(e);
            }
            Ev::Client(Ok(m)) => {
                if m[0] == b'X' {
                    if let Some(b) = backend.take() {
                        if pinned.is_some() || last_status != b'I' || outstanding > 0 {
                            b.release_discard();
                        } else {
                            b.release_clean();
                        }
                    }
                    return Ok(());
                }
                pins(&m, &mut pinned);
                if matches!(m[0], b'Q' | b'S') {
                    outstanding += 1;
                }
                if let Some(b) = backend.as_mut() {
                    b.conn().stream.write_all(&m).await?;
                }
            }
            Ev::Server(Err(e)) => {
                backend = None;
                set_target(target, None);
                let mut out = error_response(
                    "ERROR",
                    "08006",
                    &format!("the server connection was lost: {e}"),
                );
                out.extend(ready(b'I'));
                outstanding = 0;
                last_status = b'I';
                tcp.write_all(&out).await?;
            }
            Ev::Server(Ok(())) => {
                let Some(b) = backend.as_mut() else { continue };
                let conn = b.conn();
                // Forward every complete frame; note ReadyForQuery to know when the connection
                // can go back to the pool.
                let mut pos = 0;
                let buf = &conn.reader.buf;
                while let Some(n) = complete_len(&buf[pos..])? {
                    if buf[pos] == b'Z' {
                        outstanding = outstanding.saturating_sub(1);
                        last_status = buf.get(pos + 5).copied().unwrap_or(b'I');
                    }
                    pos += n;
                }
                if pos > 0 {
                    let chunk = conn.reader.buf.split_to(pos);
                    tcp.write_all(&chunk).await?;
                }
                let drained = conn.reader.buf.is_empty();
                if outstanding == 0
                    && last_status == b'I'
                    && pinned.is_none()
                    && drained
                    && let Some(b) = backend.take()
                {
                    set_target(target, None);
                    b.release_clean();
                }
            }
        }
    }
}

enum Ev {
    Client(Result<bytes::Bytes, PgError>),
    Server(Result<(), PgError>),
}

//! The PostgreSQL data port (6133): accepting clients (startup and authentication are in
//! `login.rs`) and transaction pooling — a session holds a server connection from its first
//! message until the server reports ReadyForQuery "idle" with nothing outstanding, then gives it
//! back. Client and server messages are forwarded as raw frames, pipelined in both directions.

use crate::forward::{Flow, SessionIo, forward};
use crate::handoff::HandoffReplies;
use crate::login::{Login, Opening, fail, login, opening};
use crate::pins::PinSet;
use crate::processor::{Identity, SessionProcessor};
use crate::session_sets::{Change, Effect, SessionVars, apply, classify};
use crate::signals::CancelTarget;
use crate::start::{CacheFill, Forward, Start};
use crate::statements::{Reply, SessionStatements};
use crate::workers::spawn_session;
use sluice_core::ConfigHandle;
use sluice_pgsql_backend::Error as PgError;
use sluice_pgsql_backend::frame::{
    Reader, complete_len, error_response, message, parameter_status, ready,
};
use sluice_pgsql_backend::pool::{PgCheckout, PgPool, PgPooled};
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio_rustls::TlsAcceptor;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tracing::{debug, info, warn};

/// What the PostgreSQL frontend's sessions share.
pub struct PgFrontend {
    /// Runtime configuration.
    pub config: ConfigHandle,
    /// Server connection pools.
    pub pool: Arc<PgPool>,
    /// Logged-in clients, for `max_connections` caps.
    pub clients: Arc<crate::limits::ClientCounts>,
    /// Answers SSLRequest with TLS when set (`pgsql-have_ssl`).
    pub tls: Option<TlsAcceptor>,
    /// Cancelled when Sluice stops.
    pub shutdown: CancellationToken,
    /// Session tasks.
    pub tasks: TaskTracker,
    /// Logged-in sessions by the pid Sluice gave them: cancel requests, `pg_cancel_backend` /
    /// `pg_terminate_backend` with those pids, the notifying session's pid in notifications.
    pub cancels: Arc<crate::signals::SessionSignals>,
    /// Digests, rule hits and query-processor counters.
    pub query: Arc<sluice_core::query::QueryProcessorStats>,
    /// The query cache (simple-protocol SELECTs).
    pub cache: sluice_core::query::QueryCache,
    /// `stats_pgsql_commands_counters`.
    pub commands: sluice_core::query::commands::CommandCounters,
    /// Logged-in sessions (`stats_pgsql_processlist`).
    pub sessions: Arc<crate::sessions::PgSessions>,
    /// Statements per (hostgroup, server) and the servers' errors (`stats_pgsql_errors`).
    pub server_stats: crate::sessions::ServerStats,
    /// The session threads (`pgsql-threads`); `None` runs sessions on the caller's runtime.
    pub workers: Option<crate::workers::PgWorkers>,
}

fn set_target(t: &CancelTarget, v: Option<(Arc<str>, u32, u32)>) {
    *t.lock().unwrap_or_else(|p| p.into_inner()) = v;
}

/// Forwards a client's CancelRequest to the server running its query (no-op otherwise).
pub(crate) async fn cancel(fe: &PgFrontend, pid: u32, secret: u32) {
    let Some((server, bpid, bsecret)) = fe.cancels.cancel_target(pid, secret) else {
        return;
    };
    if send_cancel(&server, bpid, bsecret).await {
        info!(server = %server, "forwarded a client's cancel request");
    }
}

/// Sends a CancelRequest for server process `pid` to `server`; false (logged) when it could not.
pub(crate) async fn send_cancel(server: &str, pid: u32, secret: u32) -> bool {
    let mut pkt = 16u32.to_be_bytes().to_vec();
    pkt.extend_from_slice(&80_877_102u32.to_be_bytes());
    pkt.extend_from_slice(&pid.to_be_bytes());
    pkt.extend_from_slice(&secret.to_be_bytes());
    match TcpStream::connect(server).await {
        Ok(mut s) => s.write_all(&pkt).await.is_ok(),
        Err(e) => {
            warn!(server = %server, "cannot send a cancel request: {e}");
            false
        }
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
                        match &fe.workers {
                            Some(w) => {
                                let worker = w.next();
                                let index = Some(worker.index);
                                spawn_session(&fe.tasks, worker, tcp, move |tcp| {
                                    session(f, tcp, peer, index)
                                });
                            }
                            None => {
                                fe.tasks
                                    .spawn(async move { session(f, tcp, peer, None).await });
                            }
                        }
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

/// Gets a server connection for the session.
async fn checkout(
    fe: &PgFrontend,
    rt: &sluice_core::runtime::RuntimeConfig,
    l: &Login,
    hg: u32,
    session: u64,
) -> Result<PgPooled, PgError> {
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
        session: Some(session),
        worker: l.worker,
        connect_timeout: Duration::from_millis(v.connect_timeout_server),
        connect_timeout_max: Duration::from_millis(v.connect_timeout_server_max),
        config: Some(&fe.config),
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

/// One client connection, from its first bytes to its close; `worker` is the session thread
/// serving it, if any.
async fn session(fe: Arc<PgFrontend>, tcp: TcpStream, peer: SocketAddr, worker: Option<usize>) {
    let mut reader = Reader::default();
    let local = tcp.local_addr().unwrap_or(peer);
    let ends = (peer, local);
    match opening(&fe, tcp, &mut reader).await {
        Opening::Startup(tcp, startup) => run(fe, tcp, reader, &startup, false, ends, worker).await,
        Opening::Tls(mut tls) => {
            let mut reader = Reader::default();
            match reader.startup(&mut tls).await {
                Ok(p) if p.len() >= 8 && p[4..8] == 196_608u32.to_be_bytes() => {
                    run(fe, *tls, reader, &p, true, ends, worker).await
                }
                Ok(_) => fail(&mut tls, "08P01", "expected a StartupMessage after TLS").await,
                Err(e) => debug!(client = %peer, "pgsql session ended during startup: {e}"),
            }
        }
        Opening::Done => {}
    }
}

/// A logged-in session: announce the server's parameters, then pump messages until the end.
async fn run<S: AsyncRead + AsyncWrite + Unpin>(
    fe: Arc<PgFrontend>,
    mut io: S,
    mut reader: Reader,
    startup: &[u8],
    tls: bool,
    (peer, local): (SocketAddr, SocketAddr),
    worker: Option<usize>,
) {
    let l = match login(&fe, &mut io, &mut reader, startup, tls, peer).await {
        Ok(mut l) => {
            l.worker = worker;
            l
        }
        Err(e) => {
            debug!(client = %peer, "pgsql login ended: {e}");
            return;
        }
    };
    // The cancel key doubles as the session's identity towards the pool (connection owner).
    let (pid, secret, handle) = fe.cancels.register(&l.user.username);
    let key = (u64::from(pid) << 32) | u64::from(secret);
    let vars = SessionVars::new(&l.settings);
    // ParameterStatus values come from a real server connection with the session's startup
    // settings applied, so clients see what a direct connection would show.
    let rt = fe.config.load();
    let mut first = match checkout(&fe, &rt, &l, l.user.default_hostgroup.0, key).await {
        Ok(c) => c,
        Err(e) => {
            warn!(client = %peer, user = %l.user.username, "no PostgreSQL backend for the login: {e}");
            let _ = io.write_all(&error_for(&e)).await;
            return;
        }
    };
    let reported = match crate::handoff::at_login(first.conn(), key, vars.want(), &fe.cancels).await
    {
        Ok(r) => r,
        Err(e) => {
            // The server refused a startup parameter: the client gets the server's error at
            // login, as from a direct connection. The connection is closed (state unknown).
            info!(client = %peer, user = %l.user.username, "pgsql login refused: a startup parameter failed on the server: {e}");
            let out = match &e {
                PgError::Server { code, message } => error_response("FATAL", code, message),
                other => error_for(other),
            };
            let _ = io.write_all(&out).await;
            fe.cancels.remove(pid);
            return;
        }
    };
    let mut hello = Vec::new();
    for (k, v) in crate::handoff::login_parameters(&first.conn().params, reported) {
        hello.extend(parameter_status(&k, &v));
    }
    hello.extend(message(b'K', &key.to_be_bytes()));
    hello.extend(ready(b'I'));
    first.release_clean();
    if io.write_all(&hello).await.is_ok() {
        info!(client = %peer, user = %l.user.username, database = %l.database, tls, "pgsql client logged in");
        let mut stmts = SessionStatements::new(key);
        let mut qp = SessionProcessor::new(Identity {
            user: l.user.username.clone(),
            database: l.database.clone(),
            client_ip: peer.ip().to_string(),
            local_ip: local.ip().to_string(),
            local_port: local.port(),
        });
        let entry = fe.sessions.enter(crate::sessions::PgSessionInfo {
            id: 0,
            user: l.user.username.clone(),
            database: l.database.clone(),
            client: peer.to_string(),
            hostgroup: l.user.default_hostgroup.0,
            pin_reason: None,
        });
        let mut s = SessionIo {
            stmts: &mut stmts,
            qp: &mut qp,
            entry: &entry,
            out: Vec::new(),
        };
        match pump(&fe, &l, &mut io, &mut reader, &handle, &mut s, vars).await {
            Ok(()) => {}
            Err(e @ (PgError::Malformed(_) | PgError::TooLarge(_))) => {
                // A protocol violation costs this session only: the client is told why.
                warn!(client = %peer, user = %l.user.username, "closing client session: {e}");
                let msg = format!("invalid message from the client: {e}");
                let _ = io.write_all(&error_response("FATAL", "08P01", &msg)).await;
            }
            Err(e) => debug!(client = %peer, "pgsql session ended: {e}"),
        }
    }
    fe.cancels.remove(pid);
}

/// Notes what a client message does to session state: a pin (the reason kept for admins) or a
/// `SET`/`RESET` to confirm at the end of its transaction.
pub(crate) fn note(msg: &[u8], pins: &mut PinSet, pending: &mut Vec<Change>) {
    // A Query runs once; so does, in practice, an unnamed Parse (drivers such as pgjdbc send
    // `SET application_name` that way and execute it in the same batch). A named statement may
    // run any number of times later, so its SETs pin instead.
    let (sql, trackable) = match msg[0] {
        b'Q' => (&msg[5..], true),
        // Parse: the statement name, then the query.
        b'P' => match msg[5..].iter().position(|b| *b == 0) {
            Some(end) => {
                // The query ends at its NUL; parameter types follow.
                let rest = &msg[5 + end + 1..];
                let len = rest.iter().position(|b| *b == 0).unwrap_or(rest.len());
                (&rest[..len], end == 0)
            }
            None => return,
        },
        _ => return,
    };
    let text = String::from_utf8_lossy(sql.strip_suffix(&[0]).unwrap_or(sql));
    pins.apply(&text);
    match classify(sql, trackable) {
        Effect::None => {}
        Effect::Pin(why) => pins.sticky = Some(why),
        Effect::Track(change) => pending.push(change),
    }
}

/// Forwards client messages and server replies until the client leaves.
async fn pump<S: AsyncRead + AsyncWrite + Unpin>(
    fe: &PgFrontend,
    l: &Login,
    tcp: &mut S,
    reader: &mut Reader,
    handle: &crate::signals::SessionHandle,
    s: &mut SessionIo<'_>,
    mut vars: SessionVars,
) -> Result<(), PgError> {
    let mut backend: Option<PgPooled> = None;
    // An extended batch whose statement a rule blocked: its messages are dropped until Sync.
    let mut skip_until_sync = false;
    // The reply being copied into the query cache, and the statement timeout's timer.
    let mut fill: Option<CacheFill> = None;
    let mut timer: Option<tokio::task::JoinHandle<()>> = None;
    // An extended-protocol batch runs until its Sync: the connection stays with the session.
    let mut batch_open = false;
    // Session variables: `vars` confirmed (startup settings and committed SETs), `pending`
    // changed in the current transaction (kept when it commits).
    let mut pending: Vec<Change> = Vec::new();
    let mut pending_outcome = PendingOutcome::default();
    let mut outstanding: u32 = 0; // Query/Sync/FunctionCall messages whose ReadyForQuery has not come back
    let mut pinned = PinSet::with_sticky(l.user.fast_forward.0.then_some("session pooling"));
    let mut last_status = b'I';
    let mut published: Option<&'static str> = None;
    let mut counted = crate::sessions::StatementCounter::default();
    // Replies to the messages that handed the connection to this session, cut out.
    let mut handoff = HandoffReplies::default();
    let owner = s.stmts.session_key();
    let target = &handle.target;
    let terminated = handle.terminate.cancelled();
    tokio::pin!(terminated);
    // One registration for the session's life, not one per transaction.
    let shutdown = fe.shutdown.cancelled();
    tokio::pin!(shutdown);
    loop {
        let reason = pinned
            .reason()
            .or((last_status != b'I').then_some("transaction"));
        if reason != published {
            s.entry.set_pin(reason);
            published = reason;
        }
        let Some(b) = backend.as_mut() else {
            // Idle between transactions: wait for the client only.
            let m = tokio::select! {
                _ = &mut shutdown => return Ok(()),
                _ = &mut terminated => return terminate(tcp).await,
                m = reader.message(tcp) => m?,
            };
            if m[0] == b'X' {
                return Ok(());
            }
            if skip_until_sync {
                if m[0] == b'S' {
                    skip_until_sync = false;
                    tcp.write_all(&ready(b'I')).await?;
                }
                continue;
            }
            // Answered without a server connection (see `SessionStatements::define_locally`):
            // with no connection held there is no transaction and nothing outstanding, so the
            // replies are in order.
            if s.stmts.define_locally(&m) {
                tcp.write_all(&message(b'1', b"")).await?;
                continue;
            }
            match m[0] {
                b'S' => {
                    tcp.write_all(&ready(b'I')).await?;
                    continue;
                }
                b'H' => continue,
                _ => {}
            }
            if m[0] == b'Q'
                && let Some(sig) = crate::signals::parse(&m[5..])
                && let crate::signals::Outcome::Reply(reply) =
                    crate::signals::carry_out(&fe.cancels, &l.user.username, sig).await
            {
                tcp.write_all(&reply).await?;
                continue;
            }
            // One snapshot for the whole start of the transaction.
            let rt = fe.config.load();
            let f = match crate::start::start(fe, &rt, (&l.user, &l.database), s, vars.want(), m)
                .await
            {
                Start::Answered {
                    reply,
                    skip_until_sync: skip,
                } => {
                    skip_until_sync = skip;
                    tcp.write_all(&reply).await?;
                    continue;
                }
                Start::Forward(f) => *f,
            };
            let Forward {
                message: m,
                hostgroup,
                digest: decided,
                timeout,
                fill: new_fill,
                pin,
            } = f;
            fill = new_fill;
            match pin {
                Some(true) => pinned.sticky = Some(RULE_PIN),
                Some(false) if pinned.sticky == Some(RULE_PIN) => pinned.sticky = None,
                _ => {}
            }
            s.qp.hostgroup = i64::from(hostgroup);
            match checkout(fe, &rt, l, hostgroup, owner).await {
                Ok(mut c) => {
                    let conn = c.conn();
                    // Staged ahead of the client's messages, in the same write.
                    s.out.clear();
                    let staged =
                        crate::handoff::stage(conn, owner, vars.want(), &fe.cancels, &mut s.out);
                    handoff.expect(staged);
                    set_target(target, Some((conn.server.clone(), conn.key.0, conn.key.1)));
                    if let Some(after) = timeout {
                        timer = Some(crate::start::arm_timeout(
                            fe,
                            conn.server.to_string(),
                            conn.key,
                            after,
                        ));
                    }
                    let flow = Flow {
                        batch_open: &mut batch_open,
                        pinned: &mut pinned,
                        pending: &mut pending,
                        outstanding: &mut outstanding,
                    };
                    forward(fe, &rt, conn, s, reader, &m, decided, flow).await?;
                    backend = Some(c);
                }
                Err(e) => {
                    warn!(user = %l.user.username, "pgsql: {e}");
                    let mut out = error_for(&e);
                    if matches!(m[0], b'Q' | b'S' | b'F') {
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
                _ = &mut terminated => Ev::Terminated,
            }
        };
        match ev {
            Ev::Terminated => {
                // The statement was cancelled by the terminator; the connection is closed.
                set_target(target, None);
                drop(backend.take());
                return terminate(tcp).await;
            }
            Ev::Client(Err(e)) => {
                // The client went away with the connection mid-use: it is closed (dropped).
                drop(backend.take());
                return Err(e);
            }
            Ev::Client(Ok(m)) => {
                if m[0] == b'X' {
                    if let Some(b) = backend.take() {
                        if pinned.reason().is_some()
                            || last_status != b'I'
                            || outstanding > 0
                            || handoff.pending()
                        {
                            b.release_discard();
                        } else {
                            b.release_clean();
                        }
                    }
                    return Ok(());
                }
                if let Some(b) = backend.as_mut() {
                    let flow = Flow {
                        batch_open: &mut batch_open,
                        pinned: &mut pinned,
                        pending: &mut pending,
                        outstanding: &mut outstanding,
                    };
                    let rt = fe.config.load();
                    forward(fe, &rt, b.conn(), s, reader, &m, None, flow).await?;
                }
            }
            Ev::Server(Err(e)) => {
                backend = None;
                handoff.clear();
                set_target(target, None);
                s.stmts.reset_inflight();
                s.qp.reset();
                fill = None;
                if let Some(t) = timer.take() {
                    t.abort();
                }
                batch_open = false;
                pending.clear();
                pending_outcome = PendingOutcome::default();
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
                // Replies to Parse/Close that Sluice sent on its own are cut out.
                let mut swallowed: Vec<std::ops::Range<usize>> = Vec::new();
                let buf = &conn.reader.buf;
                let rt = fe.config.load();
                let now = std::time::Instant::now();
                let mut saw_ready = false;
                let mut handoff_failure = None;
                // NotificationResponses, whose server pid becomes the notifier's Sluice pid.
                let mut notifications: Vec<usize> = Vec::new();
                while let Some(n) = complete_len(&buf[pos..])? {
                    let kind = buf[pos];
                    if handoff.pending() {
                        let (mine, failed) = handoff.frame(kind, &buf[pos + 5..pos + n]);
                        if failed.is_some() {
                            handoff_failure = failed;
                            break;
                        }
                        if mine {
                            swallowed.push(pos..pos + n);
                            pos += n;
                            continue;
                        }
                    }
                    if matches!(kind, b'C' | b'Z') {
                        let frame = (kind, &buf[pos + 5..pos + n]);
                        s.qp.received(&rt, (&fe.query, &fe.commands), frame, now);
                    }
                    if kind == b'E' {
                        if let Some(f) = fill.as_mut() {
                            f.failed();
                        }
                        let (code, message) =
                            sluice_pgsql_backend::frame::parse_error(&buf[pos + 5..pos + n]);
                        fe.server_stats.error(
                            (s.qp.hostgroup, &conn.server, &l.user.username, &l.database),
                            s.qp.client_ip(),
                            &code,
                            &message,
                        );
                    }
                    if kind == b'Z' {
                        counted.count(&fe.server_stats, s.qp.hostgroup, &conn.server);
                    }
                    if kind == b'A' {
                        notifications.push(pos);
                    }
                    saw_ready |= kind == b'Z';
                    if kind == b'Z' {
                        outstanding = outstanding.saturating_sub(1);
                        last_status = buf.get(pos + 5).copied().unwrap_or(b'I');
                    }
                    if !pending.is_empty() {
                        let body = &buf[pos + 5..pos + n];
                        match (kind, body.first()) {
                            (b'E', _) => pending_outcome.error = true,
                            (b'C', _) if body.starts_with(b"ROLLBACK") => {
                                pending_outcome.rolled_back = true
                            }
                            (b'Z', Some(b'T' | b'E')) => pending_outcome.in_transaction = true,
                            (b'Z', _) => {
                                let o = std::mem::take(&mut pending_outcome);
                                if o.error && o.in_transaction && !o.rolled_back {
                                    // Committed after an error (savepoints): which SETs
                                    // survived is unclear, so the session keeps this connection.
                                    pinned.sticky = Some("session state");
                                } else if !o.error && !o.rolled_back {
                                    for c in &pending {
                                        vars.apply(c);
                                        apply(&mut conn.session_vars, c);
                                    }
                                }
                                pending.clear();
                            }
                            _ => {}
                        }
                    }
                    if matches!(kind, b'1' | b'3' | b'Z')
                        && s.stmts.incoming(kind, &mut conn.prepared) == Reply::Swallow
                    {
                        swallowed.push(pos..pos + n);
                    }
                    pos += n;
                }
                if let Some((code, message)) = handoff_failure {
                    // The session's statements may run without its settings: end it rather
                    // than answer under the server's defaults. Every frame before the failure
                    // was the handoff's own.
                    crate::handoff::log_failure(&l.user.username, &conn.server, &code, &message);
                    set_target(target, None);
                    drop(backend.take());
                    let msg = format!(
                        "Sluice could not apply this session's settings on a server connection: {message}"
                    );
                    tcp.write_all(&error_response("FATAL", &code, &msg)).await?;
                    return Ok(());
                }
                for at in notifications {
                    crate::signals::rewrite_notify_pid(
                        &fe.cancels,
                        &conn.server,
                        &mut conn.reader.buf[at..],
                    );
                }
                if pos > 0 {
                    let chunk = conn.reader.buf.split_to(pos);
                    if swallowed.is_empty() {
                        if let Some(f) = fill.as_mut() {
                            f.copy(&chunk);
                        }
                        tcp.write_all(&chunk).await?;
                    } else {
                        let mut kept = Vec::with_capacity(chunk.len());
                        let mut from = 0;
                        for r in swallowed {
                            kept.extend_from_slice(&chunk[from..r.start]);
                            from = r.end;
                        }
                        kept.extend_from_slice(&chunk[from..]);
                        if let Some(f) = fill.as_mut() {
                            f.copy(&kept);
                        }
                        tcp.write_all(&kept).await?;
                    }
                }
                if saw_ready && outstanding == 0 {
                    if let Some(t) = timer.take() {
                        t.abort();
                    }
                    if let Some(f) = fill.take() {
                        let max =
                            rt.pgsql.variables.query.query_cache_size_mb as usize * 1024 * 1024;
                        f.store(&fe.cache, &l.user.username, &l.database, max);
                    }
                    if let Some((tables, complete)) = s.qp.take_writes() {
                        fe.cache.invalidate(&tables, complete);
                    }
                }
                let drained = conn.reader.buf.is_empty();
                if outstanding == 0
                    && !handoff.pending()
                    && last_status == b'I'
                    && pinned.reason().is_none()
                    && !batch_open
                    && s.stmts.settled()
                    && drained
                    && let Some(b) = backend.take()
                {
                    set_target(target, None);
                    b.release_clean_at(now);
                }
            }
        }
    }
}

/// The pin reason a query rule with `multiplex=0` / `sticky_conn=1` gives a session.
pub(crate) const RULE_PIN: &str = "query rule (multiplex=0)";

/// How the transaction holding uncommitted `SET`s went.
#[derive(Default)]
struct PendingOutcome {
    error: bool,
    rolled_back: bool,
    in_transaction: bool,
}

enum Ev {
    Client(Result<bytes::Bytes, PgError>),
    Server(Result<(), PgError>),
    /// `pg_terminate_backend` from another session.
    Terminated,
}

/// Ends a session terminated with `pg_terminate_backend`, as PostgreSQL does.
async fn terminate<S: AsyncWrite + Unpin>(tcp: &mut S) -> Result<(), PgError> {
    let msg = "terminating connection due to administrator command";
    tcp.write_all(&error_response("FATAL", "57P01", msg))
        .await?;
    info!("pgsql session ended by pg_terminate_backend()");
    Ok(())
}

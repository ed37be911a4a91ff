//! The PostgreSQL data port's accept side: each client from its first bytes (SSLRequest or
//! StartupMessage, `login/`) through the server greeting to its session (`session/`) and close.

use crate::error::error_for;
use crate::frontend::PgFrontend;
use crate::login::{Login, Opening, fail, login, opening};
use crate::session::PgSession;
use crate::session::checkout::checkout;
use crate::session::forward::SessionIo;
use crate::session::pins::PinSet;
use crate::session::processor::{Identity, SessionProcessor};
use crate::session::sets::SessionVars;
use crate::session::statements::SessionStatements;
use sluice_core::config::Priority;
use sluice_core::login_throttle::Admission;
use sluice_pgsql_backend::Error as PgError;
use sluice_pgsql_proto::frame::{Reader, error_response, message, parameter_status, ready};
use sluice_pgsql_proto::tag::{server, status};
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::Ordering::Relaxed;
use std::time::Duration;
use tokio::io::{AsyncWrite, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tracing::{debug, info, warn};

/// Accepts PostgreSQL clients on `listeners`, each session on the session thread it is dealt
/// to; new connections wait while `PROXYSQL PAUSE` is in force. Awaited, it serves until the
/// frontend's shutdown; `.with_graceful_shutdown(signal)` also stops on `signal` and waits for
/// the sessions to end (see [`sluice_net::Serve`]).
pub fn serve(
    fe: Arc<PgFrontend>,
    listeners: Vec<TcpListener>,
) -> sluice_net::Serve<impl Future<Output = ()> + Send + 'static> {
    let ctl = sluice_net::AcceptControl {
        name: "PostgreSQL",
        shutdown: fe.accepting.clone(),
        paused: Some(fe.paused.clone()),
        tasks: fe.tasks.clone(),
        workers: fe.workers.clone(),
    };
    let (shutdown, tasks) = (fe.shutdown.clone(), fe.tasks.clone());
    let sessions = fe.cancels.clone();
    let accepting = sluice_net::serve(listeners, ctl, move |tcp, peer, worker| {
        session(fe.clone(), tcp, peer, worker)
    });
    let serving = sluice_net::with_shutdown_fanned_out(accepting, (&shutdown, &tasks), move || {
        sessions.shut_down_all()
    });
    sluice_net::Serve::new(serving, shutdown, tasks)
}

/// One client connection, from its first bytes to its close; `worker` is the session thread
/// serving it, if any. Its future is the task every connected client holds, idle or not, so it
/// is kept small: an `async` block rather than an `async fn` (whose future keeps its arguments
/// twice: as they were passed and as the locals they are moved to), and what only the opening
/// or the login needs lives in their own futures.
#[allow(clippy::manual_async_fn)] // the point: see above
fn session(
    fe: Arc<PgFrontend>,
    tcp: TcpStream,
    peer: SocketAddr,
    worker: Option<usize>,
) -> impl Future<Output = ()> {
    async move {
        let mut reader = Reader::default();
        let local = tcp.local_addr().unwrap_or(peer);
        // The whole login runs against one deadline (`pgsql-connect_timeout_client`), as
        // MySQL's connection phase does: a client that connects and stalls holds a task and a
        // socket.
        let limit = Duration::from_millis(fe.config.load().pgsql.variables.connect_timeout_client);
        let login_by = LoginDeadline(tokio::time::Instant::now() + limit, limit);
        let Some((io, startup)) = client_socket(&fe, tcp, &mut reader, login_by, peer).await else {
            return;
        };
        let tls = io.is_tls();
        run(
            fe,
            io,
            reader,
            startup,
            (tls, login_by),
            (peer, local),
            worker,
        )
        .await
    }
}

/// The client's socket — plain, or TLS once its handshake completed — and its StartupMessage,
/// as a copy of its own (a slice would keep the reader's whole first buffer alive for the
/// session, so an idle session could not give it back). `None` when the opening ended the
/// connection: a CancelRequest, a refusal, a broken or late client.
async fn client_socket(
    fe: &PgFrontend,
    tcp: TcpStream,
    reader: &mut Reader,
    login_by: LoginDeadline,
    peer: SocketAddr,
) -> Option<(ClientSocket, bytes::Bytes)> {
    // Boxed: the opening's state (and its timer) lives only while it runs.
    let Ok(opened) = login_by.bound(Box::pin(opening(fe, tcp, reader))).await else {
        login_by.ran_out(fe, peer);
        return None;
    };
    match opened {
        Opening::Startup(tcp, slice) => Some((
            ClientSocket::Plain(tcp),
            bytes::Bytes::copy_from_slice(&slice),
        )),
        Opening::Tls(mut tls) => {
            // The SSLRequest's reader emptied, not a second one beside it: that kept its
            // 16 KiB buffer for the whole session (dhat: an idle TLS client's largest).
            *reader = Reader::default();
            let Ok(read) = login_by.bound(reader.startup(&mut tls)).await else {
                login_by.ran_out(fe, peer);
                return None;
            };
            match read {
                Ok(slice) if slice.len() >= 8 && slice[4..8] == 196_608u32.to_be_bytes() => {
                    // The same session as a plain client's: only the stream differs, and the
                    // TLS stream's state is boxed in it.
                    let startup = bytes::Bytes::copy_from_slice(&slice);
                    Some((ClientSocket::Tls(tls), startup))
                }
                Ok(_) => {
                    fail(&mut tls, "08P01", "expected a StartupMessage after TLS").await;
                    None
                }
                Err(e) => {
                    debug!(client = %peer, "pgsql session ended during startup: {e}");
                    None
                }
            }
        }
        Opening::Done => None,
    }
}

/// When a client's login must be complete (`pgsql-connect_timeout_client`), and the limit.
#[derive(Debug, Clone, Copy)]
struct LoginDeadline(tokio::time::Instant, Duration);

impl LoginDeadline {
    /// `step` of the login, given until the deadline.
    async fn bound<F: Future>(&self, step: F) -> Result<F::Output, tokio::time::error::Elapsed> {
        tokio::time::timeout_at(self.0, step).await
    }

    /// The deadline moved by `waited`: Sluice's own wait (failed-login throttling) is not the
    /// client's time.
    fn after(self, waited: Duration) -> Self {
        LoginDeadline(self.0 + waited, self.1)
    }

    /// The client ran out of time: counted and logged; the caller drops the connection.
    fn ran_out(&self, fe: &PgFrontend, peer: SocketAddr) {
        fe.stats.client_connections_aborted.fetch_add(1, Relaxed);
        warn!(client = %peer, "closing a PostgreSQL client that did not complete its login within pgsql-connect_timeout_client ({}ms)", self.1.as_millis());
    }
}

/// Counts a login that did not complete, by its reason (`Access_Denied_*`).
fn count_refusal(stats: &sluice_core::metrics::FrontendStats, e: &crate::Error) {
    use std::sync::atomic::Ordering::Relaxed;
    stats.client_connections_aborted.fetch_add(1, Relaxed);
    let crate::Error::LoginRefused { sqlstate, message } = e else {
        return;
    };
    let counter = match *sqlstate {
        "28P01" => &stats.access_denied_wrong_password,
        "53300" if message.starts_with("too many connections for role") => {
            &stats.access_denied_max_user_connections
        }
        "53300" => &stats.access_denied_max_connections,
        _ => return,
    };
    counter.fetch_add(1, Relaxed);
}

/// Waits the client address's turn when its failed logins throttle it; false (and the client
/// told why) when its queue is full.
async fn admitted<S: AsyncWrite + Unpin>(fe: &PgFrontend, io: &mut S, peer: SocketAddr) -> bool {
    match fe.login.admit(peer.ip()) {
        Admission::Now => true,
        Admission::After(wait) => {
            tokio::time::sleep(wait).await;
            true
        }
        Admission::Refused => {
            fe.stats.client_connections_aborted.fetch_add(1, Relaxed);
            let msg = format!("too many failed logins from {}; retry later", peer.ip());
            fail(io, "28000", &msg).await;
            false
        }
    }
}

/// Counts a login that did not complete; a wrong password also counts against the address
/// (failed-login throttling).
fn login_failed(fe: &PgFrontend, peer: SocketAddr, e: &crate::Error) {
    if matches!(
        e,
        crate::Error::LoginRefused {
            sqlstate: "28P01",
            ..
        }
    ) {
        fe.login.failed(peer.ip(), "PostgreSQL client", e);
    }
    count_refusal(&fe.stats, e);
    debug!(client = %peer, "pgsql login ended: {e}");
}

/// A client's socket: plain TCP or TLS ([`sluice_net::ServerTls`], boxed: an idle client's
/// TLS holds no buffer). One type for both, so plain and TLS clients run one session.
pub(crate) type ClientSocket = sluice_net::MaybeTls<sluice_net::ServerTls<TcpStream>>;

/// A client from its StartupMessage: its login, the server's parameters announced, then its
/// session until the end. An `async` block, as [`session`]'s, and the login's and the
/// greeting's state in futures of their own: nothing of them stays in the task.
#[allow(clippy::manual_async_fn)] // the point: see above
fn run(
    fe: Arc<PgFrontend>,
    mut io: ClientSocket,
    mut reader: Reader,
    startup: bytes::Bytes,
    (tls, login_by): (bool, LoginDeadline),
    (peer, local): (SocketAddr, SocketAddr),
    worker: Option<usize>,
) -> impl Future<Output = ()> {
    async move {
        let login = (&startup[..], tls, login_by);
        let Some(l) = logged_in(&fe, &mut io, &mut reader, login, peer, worker).await else {
            return;
        };
        drop(startup);
        fe.stats
            .client_connections_created
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        // The cancel key doubles as the session's identity towards the pool (connection owner).
        let (pid, secret, handle) = fe.cancels.register(&l.user.username);
        let key = (u64::from(pid) << 32) | u64::from(secret);
        let (vars, greeted) = {
            let vars = SessionVars::new(&l.settings);
            let greeted = Box::pin(greet(&fe, &l, key, &vars, peer, &mut io)).await;
            (vars, greeted)
        };
        if greeted {
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
                pinned_since: None,
                waiting: None,
                thread: l.worker,
                listening: Vec::new(),
            });
            let s = SessionIo {
                stmts: &mut stmts,
                qp: &mut qp,
                entry: &entry,
                pinned: PinSet::with_sticky(l.user.fast_forward.0.then_some("session pooling")),
                pending: Vec::new(),
                out: Vec::new(),
            };
            let session = Box::new(PgSession::new(
                (&fe, &l, &handle),
                &mut io,
                &mut reader,
                s,
                vars,
            ));
            match &session.run().await {
                Ok(()) => {}
                Err(
                    e @ crate::Error::Client(
                        p @ (sluice_pgsql_proto::Error::Malformed(_)
                        | sluice_pgsql_proto::Error::TooLarge(_)),
                    ),
                ) => {
                    // A protocol violation costs this session only: the client is told why.
                    warn!(client = %peer, user = %l.user.username, "closing client session: {p}");
                    let msg = format!("invalid message from the client: {p}");
                    let _ = io
                        .write_all(&error_response("FATAL", e.sqlstate(), &msg))
                        .await;
                }
                Err(e) => debug!(client = %peer, "pgsql session ended: {e}"),
            }
        }
        fe.cancels.remove(pid);
    }
}

/// The client's login, after its address's turn (failed-login throttling): its `Login`, or
/// `None` when it was refused, failed or ran out of time (counted and logged).
async fn logged_in(
    fe: &PgFrontend,
    io: &mut ClientSocket,
    reader: &mut Reader,
    (startup, tls, login_by): (&[u8], bool, LoginDeadline),
    peer: SocketAddr,
    worker: Option<usize>,
) -> Option<Login> {
    let throttled = std::time::Instant::now();
    if !admitted(fe, io, peer).await {
        return None;
    }
    let login_by = login_by.after(throttled.elapsed());
    // Boxed: the login's state lives only while it runs.
    let Ok(logged_in) = login_by
        .bound(Box::pin(login(fe, io, reader, startup, tls, peer)))
        .await
    else {
        login_by.ran_out(fe, peer);
        return None;
    };
    match logged_in {
        Ok(mut l) => {
            fe.login.succeeded(peer.ip());
            l.worker = worker;
            Some(l)
        }
        Err(e) => {
            login_failed(fe, peer, &e);
            None
        }
    }
}

/// Sends the client its greeting (see [`server_hello`]); false when it could not be sent or
/// the client was told why not.
async fn greet(
    fe: &PgFrontend,
    l: &Login,
    key: u64,
    vars: &SessionVars,
    peer: SocketAddr,
    io: &mut ClientSocket,
) -> bool {
    match server_hello(fe, l, key, vars, peer, io).await {
        Some(hello) => io.write_all(&hello).await.is_ok(),
        None => false,
    }
}

/// Checks out a server connection with the login's startup settings applied and returns the
/// client's greeting: the server's ParameterStatus values (so clients see what a direct
/// connection shows), BackendKeyData and ReadyForQuery. `None` when the client has been told why
/// not (no server, or the server refused a startup parameter).
async fn server_hello<S: AsyncWrite + Unpin>(
    fe: &PgFrontend,
    l: &Login,
    key: u64,
    vars: &SessionVars,
    peer: SocketAddr,
    io: &mut S,
) -> Option<Vec<u8>> {
    let rt = fe.config.load();
    let mut first = match Box::pin(checkout(
        fe,
        &rt,
        l,
        l.user.default_hostgroup.0,
        key,
        Priority::Regular,
    ))
    .await
    {
        Ok(c) => c,
        Err(e) => {
            warn!(client = %peer, user = %l.user.username, "no PostgreSQL backend for the login: {e}");
            let _ = io.write_all(&error_for(&e)).await;
            return None;
        }
    };
    let reported = match Box::pin(crate::session::handoff::at_login(
        first.conn(),
        key,
        vars.want(),
        &fe.cancels,
    ))
    .await
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
            return None;
        }
    };
    let mut hello = Vec::new();
    for (k, v) in crate::session::handoff::login_parameters(&first.conn().params, reported) {
        hello.extend(parameter_status(&k, &v));
    }
    hello.extend(message(server::BACKEND_KEY_DATA, &key.to_be_bytes()));
    hello.extend(ready(status::IDLE));
    first.release_clean();
    Some(hello)
}

#[cfg(test)]
mod task_size {
    use super::*;
    use sluice_core::config::Config;
    use sluice_core::{ConfigHandle, RuntimeConfig};

    /// Every client holds its session task for as long as it is connected, idle or not: the
    /// task is the size of its largest state, so the login, each message's handling and the
    /// TLS stream are boxed and live only while they run, the session runs boxed, and the
    /// opening's and login's locals live in futures of their own. Was 10.4 KiB before; in a
    /// debug build 3,816 bytes before the session was boxed by its caller, 3,152 before the
    /// login moved out of the session's future.
    #[tokio::test]
    async fn an_idle_session_task_stays_small() {
        let cfg = Config::parse("").expect("an empty config is valid");
        let fe = PgFrontend::builder(
            ConfigHandle::new(RuntimeConfig::build(&cfg)),
            sluice_pgsql_backend::PgPool::new(None),
        )
        .build();
        let l = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = l.local_addr().expect("addr");
        let tcp = TcpStream::connect(addr).await.expect("connect");
        let task = session(fe, tcp, addr, None);
        let size = std::mem::size_of_val(&task);
        assert!(size <= 2816, "a PostgreSQL session task takes {size} bytes");
    }
}

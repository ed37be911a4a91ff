//! The connection phase: greeting, optional TLS upgrade, authentication against `mysql_users`,
//! and the checks that follow it (active, `use_ssl`, `max_connections`).

use crate::auth::{self, Verdict};
use crate::error::Error;
use crate::registry::SessionSlot;
use crate::stream::{ClientSocket, ClientStream};
use sluice_core::config::MysqlUser;
use sluice_core::runtime::RuntimeConfig;
use sluice_mysql_backend::BackendSecret;
use sluice_mysql_proto::consts::{MAX_CHUNK, cap, mariadb_cap, status};
use sluice_mysql_proto::framing::{Packet, PacketReader, packet};
use sluice_mysql_proto::handshake::{Greeting, HandshakeResponse, is_ssl_request};
use sluice_mysql_proto::packets::{auth_switch_payload, ok_payload};
use sluice_mysql_proto::resultset::ResultShape;
use sluice_mysql_proto::scramble::{CACHING_SHA2, NATIVE};
use std::net::SocketAddr;
use std::sync::Arc;
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;
use tokio_rustls::TlsAcceptor;

/// Largest packet accepted before authentication completes.
const HANDSHAKE_PACKET_LIMIT: usize = 64 * 1024;

/// Collation announced in the greeting: utf8mb4_general_ci (known to MySQL and MariaDB).
pub(crate) const GREETING_COLLATION: u8 = 45;

/// Capabilities Sluice offers clients (compression; no session tracking; LOCAL INFILE when
/// `mysql-enable_load_data_local_infile` is on).
pub(crate) fn server_capabilities(tls: bool, local_infile: bool) -> u32 {
    let mut c = cap::LONG_PASSWORD
        | cap::FOUND_ROWS
        | cap::LONG_FLAG
        | cap::CONNECT_WITH_DB
        | cap::IGNORE_SPACE
        | cap::PROTOCOL_41
        | cap::INTERACTIVE
        | cap::TRANSACTIONS
        | cap::SECURE_CONNECTION
        | cap::MULTI_STATEMENTS
        | cap::MULTI_RESULTS
        | cap::PS_MULTI_RESULTS
        | cap::PLUGIN_AUTH
        | cap::CONNECT_ATTRS
        | cap::PLUGIN_AUTH_LENENC_CLIENT_DATA
        | cap::DEPRECATE_EOF
        | cap::COMPRESS;
    if tls {
        c |= cap::SSL;
    }
    if local_infile {
        c |= cap::LOCAL_FILES;
    }
    c
}

/// MariaDB's extended capabilities Sluice offers when `mysql-server_version` names a MariaDB
/// version: extended column metadata, whose column definitions the pool keeps apart (a client
/// gets connections opened with the same choice, so result sets are relayed as they come).
pub(crate) const MARIADB_CAPABILITIES: u32 = mariadb_cap::EXTENDED_METADATA;

/// A client socket with its packet reader.
#[derive(Debug)]
pub(crate) struct ClientIo {
    /// The socket.
    pub stream: ClientStream,
    /// Buffered reader.
    pub reader: PacketReader,
    /// Client address.
    pub peer: SocketAddr,
    /// The Sluice address the client connected to (`proxy_addr`/`proxy_port` in rules).
    pub local: SocketAddr,
}

impl ClientIo {
    /// Reads one packet.
    pub(crate) async fn read(&mut self) -> Result<Packet, Error> {
        let mut pk = self.reader.read(&mut self.stream).await?;
        if self.stream.is_compressed() && pk.raw.len() > MAX_CHUNK + 4 {
            pk.raw = renumber_chunks(&pk.raw, pk.seq);
        }
        Ok(pk)
    }

    /// Writes one payload as a packet with sequence id `seq`.
    pub(crate) async fn write(&mut self, seq: u8, payload: &[u8]) -> Result<(), Error> {
        self.stream
            .write_all(&packet(seq, payload))
            .await
            .map_err(|e| Error::Protocol(e.into()))?;
        Ok(())
    }
}

/// The frames of one packet of 16 MiB or more, numbered `first`, `first + 1`, … Compressed
/// clients (libmariadb) number every frame of a command 0, as the compressed protocol ignores
/// those ids; an uncompressed backend leg checks them.
fn renumber_chunks(raw: &[u8], first: u8) -> bytes::Bytes {
    let mut out = raw.to_vec();
    let mut pos = 0;
    let mut seq = first;
    while pos + 4 <= out.len() {
        let len = usize::from(out[pos])
            | (usize::from(out[pos + 1]) << 8)
            | (usize::from(out[pos + 2]) << 16);
        out[pos + 3] = seq;
        seq = seq.wrapping_add(1);
        pos += 4 + len;
    }
    out.into()
}

/// A logged-in client.
#[derive(Debug)]
pub(crate) struct LoggedIn {
    /// The user row.
    pub user: Arc<MysqlUser>,
    /// What Sluice knows to log in to backends as this user.
    pub secret: BackendSecret,
    /// Effective capabilities (client ∩ Sluice).
    pub capabilities: u32,
    /// Effective MariaDB extended capabilities (client ∩ Sluice; see [`server_capabilities`]).
    pub mariadb_capabilities: u32,
    /// Client collation id.
    pub charset: u8,
    /// Initial schema.
    pub schema: String,
    /// The auth nonce of the connection (COM_CHANGE_USER scrambles use it).
    pub nonce: Vec<u8>,
    /// The session thread (`mysql-threads`) the session runs on, `None` off the worker threads:
    /// its checkouts prefer server connections registered with that thread's poll.
    pub worker: Option<usize>,
}

impl LoggedIn {
    /// Both capability sets as the pools take them ([`sluice_mysql_backend::client_caps`]).
    pub(crate) fn client_caps(&self) -> u64 {
        sluice_mysql_backend::client_caps(self.capabilities, self.mariadb_capabilities)
    }

    /// How Sluice's own result sets for this client are shaped.
    pub(crate) fn shape(&self) -> ResultShape {
        ResultShape::of(self.capabilities, self.mariadb_capabilities)
    }
}

fn denied(user: &str, peer: &SocketAddr, response: &[u8], extra: &str) -> Error {
    Error::AccessDenied {
        user: user.to_string(),
        host: peer.ip().to_string(),
        using_password: if response.is_empty() { "NO" } else { "YES" },
        extra: extra.to_string(),
    }
}

/// A client's first auth response and what to check it against.
#[derive(Debug, Clone, Copy)]
pub(crate) struct AuthAttempt<'a> {
    /// The `mysql_users` row, when the user exists.
    pub user: Option<&'a MysqlUser>,
    /// The name the client sent.
    pub username: &'a str,
    /// Plugin the client computed its response with.
    pub client_plugin: &'a str,
    /// Nonce the response was computed over.
    pub nonce: &'a [u8],
    /// The response.
    pub response: &'a [u8],
    /// `mysql-default_authentication_plugin`, for an AuthSwitchRequest.
    pub default_plugin: &'a str,
}

/// Runs the auth-plugin exchange after the client's first auth response. `seq` is the next
/// sequence id Sluice sends. Returns the backend secret, or the access-denied error.
pub(crate) async fn exchange(
    io: &mut ClientIo,
    attempt: AuthAttempt<'_>,
    seq: &mut u8,
) -> Result<BackendSecret, Error> {
    let AuthAttempt {
        user,
        username,
        client_plugin,
        nonce,
        response,
        default_plugin,
    } = attempt;
    let (mut plugin, mut nonce, mut response) =
        (client_plugin.to_string(), nonce.to_vec(), response.to_vec());
    tracing::debug!(user = username, plugin = %plugin, response_len = response.len(), "client auth response");
    let supported = plugin == NATIVE || plugin == CACHING_SHA2;
    // libmariadb sends an empty response when its plugin differs from the announced one and
    // waits for an AuthSwitchRequest carrying a nonce for its own plugin.
    let wants_switch = supported && plugin != default_plugin && response.is_empty();
    if !supported || wants_switch {
        nonce = auth::nonce();
        if !supported {
            plugin = default_plugin.to_string();
        }
        io.write(*seq, &auth_switch_payload(&plugin, &nonce))
            .await?;
        let pk = io.read().await?;
        *seq = pk.seq.wrapping_add(1);
        response = pk.payload.to_vec();
    }
    // Unknown users are checked against a random password so both paths cost the same.
    let password = match user {
        Some(u) => u.password.clone(),
        None => String::from_utf8_lossy(&auth::nonce()).into_owned(),
    };
    let verdict = match auth::verify(&plugin, &nonce, &response, &password) {
        Verdict::NeedFullAuth => {
            io.write(*seq, &[0x01, 0x04]).await?;
            let pk = io.read().await?;
            *seq = pk.seq.wrapping_add(1);
            if !io.stream.get_ref().is_tls() {
                return Err(denied(
                    username,
                    &io.peer,
                    &response,
                    ". caching_sha2_password full authentication requires a TLS connection",
                ));
            }
            auth::verify_cleartext(&pk.payload, &password)
        }
        v => {
            if matches!(v, Verdict::Accept(_)) && plugin == CACHING_SHA2 && !response.is_empty() {
                io.write(*seq, &[0x01, 0x03]).await?;
                *seq = seq.wrapping_add(1);
            }
            v
        }
    };
    match (verdict, user) {
        (Verdict::Accept(secret), Some(_)) => Ok(secret),
        _ => Err(denied(username, &io.peer, &response, "")),
    }
}

/// The client sent SSLRequest: the TLS handshake, with the bytes it pipelined behind the request
/// (its ClientHello) replayed into the TLS layer.
async fn upgrade_to_tls(mut io: ClientIo, tls: Option<&TlsAcceptor>) -> Result<ClientIo, Error> {
    let Some(acceptor) = tls else {
        return Err(Error::Unsupported(
            "client asked for TLS, which is not enabled".into(),
        ));
    };
    let ClientSocket::Plain(tcp) = io.stream.into_inner() else {
        return Err(Error::Unsupported("TLS requested twice".into()));
    };
    // Clients may send the ClientHello right behind the SSLRequest: those bytes sit in the
    // packet buffer and start the handshake.
    let early = io.reader.take_buffered();
    let tls_stream = sluice_net::ServerTls::accept(acceptor.config().clone(), tcp, &early)
        .await
        .map_err(|e| Error::Protocol(e.into()))?;
    io.stream = ClientStream::new(ClientSocket::Tls(Box::new(tls_stream)));
    Ok(io)
}

/// The server's greeting: its version, capabilities (MariaDB's extended ones when it speaks as
/// MariaDB) and the scramble.
fn greeting(
    vars: &sluice_core::config::MysqlVariables,
    tls: bool,
    connection_id: u32,
    nonce: &[u8],
) -> Greeting {
    let ours = server_capabilities(tls, vars.enable_load_data_local_infile);
    let (ours, ours_mariadb) = match vars.server_version.contains("MariaDB") {
        // Spoken as MariaDB: "not MySQL", so clients send their extended capabilities.
        true => (ours & !cap::LONG_PASSWORD, MARIADB_CAPABILITIES),
        false => (ours, 0),
    };
    Greeting {
        server_version: vars.server_version.clone(),
        connection_id,
        nonce: nonce.to_vec(),
        capabilities: ours,
        mariadb_capabilities: ours_mariadb,
        charset: GREETING_COLLATION,
        status: status::AUTOCOMMIT,
        auth_plugin: vars.default_authentication_plugin.clone(),
    }
}

/// The login's final OK; compression from there on when negotiated, and the session's packet
/// limit in place of the handshake's.
async fn logged_in_ok(
    io: &mut ClientIo,
    seq: u8,
    capabilities: u32,
    max_allowed_packet: u32,
) -> Result<(), Error> {
    io.write(seq, &ok_payload(0, 0, status::AUTOCOMMIT, 0))
        .await?;
    if capabilities & cap::COMPRESS != 0 {
        // Everything after the handshake's last OK is compressed, both ways.
        io.stream
            .flush()
            .await
            .map_err(|e| Error::Protocol(e.into()))?;
        io.stream.start_compression();
    }
    io.reader.set_limit(max_allowed_packet as usize);
    Ok(())
}

/// Runs the whole connection phase on a fresh socket. On failure the client has been sent the
/// error packet (when the socket still works) and the error is returned for logging.
pub(crate) async fn connection_phase(
    tcp: TcpStream,
    peer: SocketAddr,
    rt: &RuntimeConfig,
    tls: Option<&TlsAcceptor>,
    connection_id: u32,
    slot: &mut SessionSlot,
) -> Result<(ClientIo, LoggedIn), Error> {
    let vars = &rt.mysql.variables;
    let nonce = auth::nonce();
    let greeting = greeting(vars, tls.is_some(), connection_id, &nonce);
    let (ours, ours_mariadb) = (greeting.capabilities, greeting.mariadb_capabilities);
    let local = tcp.local_addr().unwrap_or(peer);
    let mut io = ClientIo {
        stream: ClientStream::new(ClientSocket::Plain(tcp)),
        reader: PacketReader::new(HANDSHAKE_PACKET_LIMIT),
        peer,
        local,
    };
    io.write(0, &greeting.encode()).await?;
    let mut pk = io.read().await?;
    if is_ssl_request(&pk.payload) {
        io = upgrade_to_tls(io, tls).await?;
        pk = io.read().await?;
    }
    let mut seq = pk.seq.wrapping_add(1);
    let resp = match HandshakeResponse::decode(&pk.payload) {
        Ok(r) => r,
        Err(e) => return fail(&mut io, seq, e.into()).await,
    };
    let capabilities = resp.capabilities & ours;
    let mariadb_capabilities = resp.mariadb_capabilities & ours_mariadb;
    let user = rt.mysql.frontend_users.get(&resp.username).cloned();
    let plugin = resp
        .auth_plugin
        .clone()
        .unwrap_or_else(|| NATIVE.to_string());
    let attempt = AuthAttempt {
        user: user.as_deref(),
        username: &resp.username,
        client_plugin: &plugin,
        nonce: &nonce,
        response: &resp.auth_response,
        default_plugin: &vars.default_authentication_plugin,
    };
    let secret = match exchange(&mut io, attempt, &mut seq).await {
        Ok(s) => s,
        Err(e @ Error::AccessDenied { .. }) => return fail(&mut io, seq, e).await,
        Err(e) => return Err(e),
    };
    let user = match admissible(user, &resp, &peer, io.stream.get_ref().is_tls()) {
        Ok(user) => user,
        Err(e) => return fail(&mut io, seq, e).await,
    };
    if !slot.assign_user(&user.username, user.max_connections.0) {
        return fail(&mut io, seq, Error::TooManyConnections).await;
    }
    let schema = resp
        .database
        .clone()
        .or_else(|| user.default_schema.clone().filter(|s| !s.is_empty()))
        .unwrap_or_else(|| vars.default_schema.clone());
    logged_in_ok(&mut io, seq, capabilities, vars.max_allowed_packet).await?;
    Ok((
        io,
        LoggedIn {
            user,
            secret,
            capabilities,
            mariadb_capabilities,
            charset: resp.charset,
            schema,
            nonce,
            worker: None,
        },
    ))
}

/// The user a client proved it is, if it may log in: known, active, and over TLS when its row
/// says `use_ssl=1`; else the access-denied error MySQL gives.
fn admissible(
    user: Option<Arc<MysqlUser>>,
    resp: &HandshakeResponse,
    peer: &SocketAddr,
    over_tls: bool,
) -> Result<Arc<MysqlUser>, Error> {
    let refuse = |why: &str| denied(&resp.username, peer, &resp.auth_response, why);
    let Some(user) = user else {
        return Err(refuse(""));
    };
    if !user.active.0 {
        return Err(refuse(". The user is not active"));
    }
    if user.use_ssl.0 && !over_tls {
        return Err(refuse(". SSL is required"));
    }
    Ok(user)
}

/// Sends `e` to the client as an ERR packet (best effort) and returns it.
pub(crate) async fn fail<T>(io: &mut ClientIo, seq: u8, e: Error) -> Result<T, Error> {
    let _ = io.write(seq, &e.to_err_payload()).await;
    let _ = io.stream.flush().await;
    Err(e)
}

//! One authenticated connection to a MySQL/MariaDB server.

use crate::error::Error;
use crate::state::SessionState;
use crate::stmt_cache::StmtCache;
use crate::stream::{BackendSocket, BackendStream};
use bytes::BytesMut;
use sluice_mysql_proto::consts::{MAX_CHUNK, cap, com, mariadb_cap};
use sluice_mysql_proto::framing::{PacketReader, packet};
use sluice_mysql_proto::handshake::{Greeting, HandshakeResponse};
use sluice_mysql_proto::packets::{parse_auth_switch, parse_err};
use sluice_mysql_proto::reply::{ReplyKind, ReplyTracker};
use sluice_mysql_proto::scramble;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;

/// What Sluice knows of a user's password, enough to log in to backends.
#[derive(Clone, PartialEq, Eq)]
pub enum BackendSecret {
    /// The cleartext password.
    Clear(String),
    /// SHA1(password), recovered from a client's native scramble when only the hash is configured.
    NativeStage1([u8; 20]),
}

impl std::fmt::Debug for BackendSecret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            BackendSecret::Clear(_) => "Clear(..)",
            BackendSecret::NativeStage1(_) => "NativeStage1(..)",
        })
    }
}

/// Capability bits that change the bytes of replies; a connection only serves clients with the
/// same bits, so replies can be forwarded without rewriting. The low 32 bits are `CLIENT_*`, the
/// high ones MariaDB's extended capabilities (`MARIADB_CLIENT_*`, as MariaDB numbers them):
/// see [`client_caps`].
pub(crate) const REPLY_SHAPING_CAPS: u64 =
    (cap::DEPRECATE_EOF | cap::FOUND_ROWS | cap::IGNORE_SPACE) as u64
        | (mariadb_cap::EXTENDED_METADATA as u64) << 32;

/// A client's capabilities as one value: `CLIENT_*` flags in the low 32 bits, MariaDB's extended
/// ones above them (how [`ConnectParams::client_caps`] and the pools take them).
pub fn client_caps(capabilities: u32, mariadb_capabilities: u32) -> u64 {
    u64::from(capabilities) | u64::from(mariadb_capabilities) << 32
}

/// How to open a backend connection.
#[derive(Debug, Clone)]
pub struct ConnectParams {
    /// Host name or IP.
    pub host: String,
    /// The server's TCP port.
    pub port: u16,
    /// The account Sluice logs in to the server as (a `mysql_users` row with `backend=1`).
    pub user: String,
    /// Backend password material.
    pub secret: BackendSecret,
    /// Schema selected at login (the handshake's database field); `None` selects none.
    pub schema: Option<String>,
    /// Collation id to connect with (the client's).
    pub charset: u8,
    /// The client's reply-shaping capability bits (only the bits that shape replies, e.g.
    /// `CLIENT_DEPRECATE_EOF`, matter), MariaDB's extended ones included ([`client_caps`]).
    pub client_caps: u64,
    /// TLS client config when the server row has `use_ssl=1`.
    pub tls: Option<Arc<rustls::ClientConfig>>,
    /// Ask for the compressed protocol (the server row has `compression=1`); used when the
    /// server offers it.
    pub compress: bool,
    /// Per-attempt timeout for connect + handshake.
    pub timeout: Duration,
    /// Largest reply packet accepted.
    pub max_packet: usize,
    /// Negotiate `CLIENT_MULTI_STATEMENTS` (clients' connections do; the MCP endpoint's never,
    /// so the server itself refuses a second statement in one COM_QUERY).
    pub multi_statements: bool,
    /// Ask a MariaDB server to report each committed GTID in OK packets (the pools' data
    /// connections, for read-your-writes; a monitor's check needs none).
    pub track_gtid: bool,
}

/// An authenticated backend connection.
#[derive(Debug)]
pub struct BackendConn {
    pub(crate) stream: BackendStream,
    pub(crate) reader: PacketReader,
    /// Capabilities in effect (ours ∩ server's).
    pub capabilities: u32,
    /// The server's thread id (for KILL).
    pub thread_id: u32,
    /// Server version string.
    pub server_version: String,
    /// The session state the connection has now (schema, character set, variables).
    pub state: SessionState,
    /// Prepared statements held on the server for this connection.
    pub stmts: StmtCache,
    /// `host:port`, for logs.
    pub server: String,
    /// When it was opened.
    pub created: Instant,
    /// Since when it waits in the pool.
    pub idle_since: Option<Instant>,
    /// Its socket's duplicate, to kill it from outside (a shunned server).
    pub kill_handle: std::sync::Arc<crate::stream::KillHandle>,
    /// The server reports committed GTIDs in OK packets (see [`Self::connect`]).
    pub tracks_gtid: bool,
    /// The server's statement and byte counters (the pool hands them over at connect).
    pub traffic: std::sync::Arc<sluice_core::metrics::ServerTraffic>,
    /// The session thread (`mysql-threads`) whose poll its socket is registered with: the one
    /// it was opened on. `None` when opened off the worker threads.
    pub home: Option<usize>,
}

/// What a MariaDB connection asks the server to track so that each write's OK packet carries
/// its GTID (read-your-writes tokens without a round trip): the `last_gtid` variable and nothing
/// else (Sluice follows the session state itself). MySQL servers are not asked: causal reads
/// are MariaDB's (`MASTER_GTID_WAIT`) in this version.
const GTID_TRACKING_SQL: &str =
    "SET SESSION session_track_system_variables = 'last_gtid', session_track_schema = OFF";

/// `caps` for a client that negotiated MariaDB's `extended` capabilities with Sluice: refused
/// when the server lacks one (the client's column definitions would lack what it expects);
/// otherwise without `CLIENT_MYSQL`, as MariaDB reads extended capabilities only then.
fn with_extended(
    caps: u32,
    extended: u32,
    greeting: &Greeting,
    server: &str,
) -> Result<u32, Error> {
    let missing = extended & !greeting.mariadb_capabilities;
    if missing != 0 {
        return Err(Error::AuthUnsupported {
            server: server.to_string(),
            why: format!(
                "the client negotiated MariaDB extended capabilities {missing:#x} the server does not offer (set mysql-server_version to a MySQL version to offer none)"
            ),
        });
    }
    Ok(match extended {
        0 => caps,
        _ => caps & !cap::LONG_PASSWORD,
    })
}

fn base_caps() -> u32 {
    // LOCAL_FILES: the server may ask for a client's file; Sluice relays the request only to
    // clients that may answer it (mysql-enable_load_data_local_infile and their own flag).
    cap::LOCAL_FILES
        | cap::LONG_PASSWORD
        | cap::LONG_FLAG
        | cap::PROTOCOL_41
        | cap::TRANSACTIONS
        | cap::SECURE_CONNECTION
        | cap::MULTI_STATEMENTS
        | cap::MULTI_RESULTS
        | cap::PS_MULTI_RESULTS
        | cap::PLUGIN_AUTH
        | cap::PLUGIN_AUTH_LENENC_CLIENT_DATA
}

impl BackendConn {
    /// Connects, negotiates TLS when asked, and authenticates, all within `p.timeout`.
    pub async fn connect(p: &ConnectParams) -> Result<BackendConn, Error> {
        let server = format!("{}:{}", p.host, p.port);
        match tokio::time::timeout(p.timeout, Self::connect_inner(p, server.clone())).await {
            Ok(r) => r,
            Err(_) => Err(Error::Connect {
                server,
                why: format!("timed out after {}ms", p.timeout.as_millis()),
            }),
        }
    }

    async fn connect_inner(p: &ConnectParams, server: String) -> Result<BackendConn, Error> {
        let tcp = TcpStream::connect((p.host.as_str(), p.port))
            .await
            .map_err(|e| Error::Connect {
                server: server.clone(),
                why: e.to_string(),
            })?;
        let _ = tcp.set_nodelay(true);
        let (tcp, kill_handle) =
            crate::stream::with_kill_handle(tcp).map_err(|e| Error::Connect {
                server: server.clone(),
                why: e.to_string(),
            })?;
        let proto = |source| Error::Protocol {
            server: server.clone(),
            source,
        };
        let mut reader = PacketReader::new(p.max_packet.max(MAX_CHUNK));
        let mut stream = BackendSocket::Plain(tcp);
        let first = reader.read(&mut stream).await.map_err(proto)?;
        if first.payload.first() == Some(&0xff) {
            let info = parse_err(&first.payload).map_err(proto)?;
            return Err(Error::Connect {
                server,
                why: format!("server refused: {} {}", info.code, info.message),
            });
        }
        let greeting = Greeting::decode(&first.payload).map_err(proto)?;
        let (caps, extended) = negotiate_capabilities(p, &greeting, &server)?;
        let mut seq = first.seq.wrapping_add(1);
        let mut resp = HandshakeResponse {
            capabilities: caps,
            mariadb_capabilities: extended,
            max_packet: 1 << 30,
            charset: p.charset,
            username: p.user.clone(),
            auth_response: Vec::new(),
            database: p.schema.clone(),
            auth_plugin: Some(greeting.auth_plugin.clone()),
        };
        if let Some(tls) = &p.tls {
            stream
                .write_all(&packet(seq, &resp.encode_ssl_request()))
                .await
                .map_err(|e| proto(e.into()))?;
            seq = seq.wrapping_add(1);
            stream = upgrade_to_tls(stream, tls, &p.host, &server).await?;
        }
        let plugin = greeting.auth_plugin.clone();
        resp.auth_response = auth_data(&plugin, &greeting.nonce, &p.secret, &server)?;
        stream
            .write_all(&packet(seq, &resp.encode()))
            .await
            .map_err(|e| proto(e.into()))?;
        finish_auth(&mut stream, &mut reader, p, &server, plugin).await?;
        let mut stream = BackendStream::new(stream);
        if caps & cap::COMPRESS != 0 {
            // Everything after the handshake's last OK is compressed, both ways.
            stream.start_compression();
        }
        let mut conn = BackendConn {
            stream,
            reader,
            capabilities: caps,
            thread_id: greeting.connection_id,
            server_version: greeting.server_version,
            state: SessionState {
                schema: p.schema.clone(),
                ..SessionState::default()
            },
            stmts: StmtCache::default(),
            server,
            created: Instant::now(),
            idle_since: None,
            kill_handle: std::sync::Arc::new(kill_handle),
            traffic: Default::default(),
            home: None,
            tracks_gtid: false,
        };
        conn.track_gtids().await?;
        Ok(conn)
    }

    /// Asks the server to report each committed GTID in OK packets, when session tracking was
    /// agreed (MariaDB); a server that refuses leaves the connection without tokens (logged).
    async fn track_gtids(&mut self) -> Result<(), Error> {
        self.tracks_gtid = false;
        if self.capabilities & cap::SESSION_TRACK == 0 {
            return Ok(());
        }
        match self.run_sql(GTID_TRACKING_SQL).await? {
            Ok(()) => self.tracks_gtid = true,
            Err(err) => {
                let why = sluice_mysql_proto::packets::parse_err(&err)
                    .map_or_else(|_| "a malformed error".to_string(), |e| e.message);
                tracing::warn!(server = %self.server,
                    "the server refused GTID tracking ({why}); reads after writes on this connection get no causal-read token");
            }
        }
        Ok(())
    }

    /// True when the connection speaks CLIENT_DEPRECATE_EOF.
    pub fn deprecate_eof(&self) -> bool {
        self.capabilities & cap::DEPRECATE_EOF != 0
    }

    /// True when an idle connection was closed by the server (or has unexpected bytes pending).
    /// Peeks at the TCP socket without consuming anything, so TLS connections are checked too.
    pub fn looks_dead(&self) -> bool {
        let tcp = match self.stream.get_ref() {
            BackendSocket::Plain(t) => t,
            BackendSocket::Tls(t) => t.get_ref().0,
        };
        let mut byte = [0u8; 1];
        let mut buf = tokio::io::ReadBuf::new(&mut byte);
        let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
        match tcp.poll_peek(&mut cx, &mut buf) {
            std::task::Poll::Pending => self.reader.buffered() > 0,
            // EOF, an error, or bytes nobody asked for (an idle server sends nothing unless it is
            // closing: an error packet or a TLS close_notify).
            std::task::Poll::Ready(_) => true,
        }
    }

    pub(crate) fn proto_err(&self, source: sluice_mysql_proto::Error) -> Error {
        Error::Protocol {
            server: self.server.clone(),
            source,
        }
    }

    /// Writes raw, already framed bytes of a new command (a client's, or Sluice's own) to the
    /// server.
    pub async fn send_raw(&mut self, raw: &[u8]) -> Result<(), Error> {
        // A compressed connection numbers each command's compressed packets from 0.
        self.stream.start_command();
        self.send_more(raw).await
    }

    /// Writes raw, already framed bytes that continue the current command (the packets of a
    /// LOCAL INFILE file).
    pub async fn send_more(&mut self, raw: &[u8]) -> Result<(), Error> {
        self.traffic.sent(raw.len());
        self.stream
            .write_all(raw)
            .await
            .map_err(|e| self.proto_err(e.into()))
    }

    /// Sends a command Sluice builds itself and returns the tracker and the first reply packet.
    pub async fn command(
        &mut self,
        payload: &[u8],
        kind: ReplyKind,
    ) -> Result<(ReplyTracker, BytesMut), Error> {
        let (t, packets) = self.command_collect(payload, kind).await?;
        let first = packets
            .first()
            .map(|p| BytesMut::from(&p[..]))
            .unwrap_or_default();
        Ok((t, first))
    }

    /// Selects `schema` with COM_INIT_DB; a server error is returned as the ERR payload.
    pub async fn init_db(&mut self, schema: &str) -> Result<Result<(), BytesMut>, Error> {
        let mut p = vec![com::INIT_DB];
        p.extend_from_slice(schema.as_bytes());
        let (t, first) = self.command(&p, ReplyKind::Single).await?;
        if t.error {
            return Ok(Err(first));
        }
        self.state.schema = Some(schema.to_string());
        Ok(Ok(()))
    }

    /// COM_RESET_CONNECTION: drops session state (transactions, temp tables, variables,
    /// prepared statements) so the connection can serve another client.
    pub async fn reset(&mut self) -> Result<bool, Error> {
        let (t, _) = self
            .command(&[com::RESET_CONNECTION], ReplyKind::Single)
            .await?;
        if !t.error {
            // The server forgot the prepared statements and the session variables (it keeps
            // the schema): so does Sluice's record of the connection, or the next session would
            // run a statement id that no longer exists, or skip SETs it believes are in place.
            self.stmts.clear();
            self.state = self.state.reset_keep_schema();
            // The reset also forgot what the server tracks.
            self.track_gtids().await?;
        }
        Ok(!t.error)
    }

    /// Sends COM_QUIT and closes.
    pub async fn quit(mut self) {
        self.stream.start_command();
        let _ = self.stream.write_all(&packet(0, &[com::QUIT])).await;
        let _ = self.stream.shutdown().await;
    }
}

/// Answers the server after the handshake response — an auth switch, caching_sha2's fast or
/// full authentication — until its OK (or the error that refuses the login).
async fn finish_auth(
    stream: &mut BackendSocket,
    reader: &mut PacketReader,
    p: &ConnectParams,
    server: &str,
    mut plugin: String,
) -> Result<(), Error> {
    let proto = |source| Error::Protocol {
        server: server.to_string(),
        source,
    };
    loop {
        let pk = reader.read(stream).await.map_err(proto)?;
        let reply_seq = pk.seq.wrapping_add(1);
        match pk.payload.first() {
            Some(0x00) => break,
            Some(0xff) => {
                let info = parse_err(&pk.payload).map_err(proto)?;
                return Err(Error::Auth {
                    server: server.to_string(),
                    user: p.user.clone(),
                    info,
                });
            }
            Some(0xfe) => {
                let (new_plugin, nonce) = parse_auth_switch(&pk.payload).map_err(proto)?;
                plugin = new_plugin;
                let data = if plugin == "mysql_clear_password" && stream.is_tls() {
                    clear_password(&p.secret, server)?
                } else {
                    auth_data(&plugin, &nonce, &p.secret, server)?
                };
                stream
                    .write_all(&packet(reply_seq, &data))
                    .await
                    .map_err(|e| proto(e.into()))?;
            }
            Some(0x01) if plugin == scramble::CACHING_SHA2 => match pk.payload.get(1) {
                Some(0x03) => {}
                Some(0x04) if stream.is_tls() => {
                    let data = clear_password(&p.secret, server)?;
                    stream
                        .write_all(&packet(reply_seq, &data))
                        .await
                        .map_err(|e| proto(e.into()))?;
                }
                _ => {
                    return Err(Error::AuthUnsupported {
                        server: server.to_string(),
                        why: "caching_sha2_password full authentication needs TLS: set use_ssl=1 for this server"
                            .into(),
                    });
                }
            },
            _ => {
                return Err(Error::UnexpectedReply {
                    server: server.to_string(),
                    why: "unknown packet during authentication",
                });
            }
        }
    }
    Ok(())
}

fn auth_data(
    plugin: &str,
    nonce: &[u8],
    secret: &BackendSecret,
    server: &str,
) -> Result<Vec<u8>, Error> {
    match (plugin, secret) {
        (scramble::NATIVE, BackendSecret::Clear(pw)) => Ok(scramble::native(nonce, pw.as_bytes())),
        (scramble::NATIVE, BackendSecret::NativeStage1(s1)) => Ok(scramble::native_from_stage1(nonce, s1).to_vec()),
        (scramble::CACHING_SHA2, BackendSecret::Clear(pw)) => Ok(scramble::caching_sha2(nonce, pw.as_bytes())),
        (scramble::CACHING_SHA2, BackendSecret::NativeStage1(_)) => Err(Error::AuthUnsupported {
            server: server.to_string(),
            why: "the server wants caching_sha2_password but mysql_users holds only a native hash; configure the cleartext password".into(),
        }),
        (other, _) => Err(Error::AuthUnsupported {
            server: server.to_string(),
            why: format!("auth plugin {other:?} is not supported towards backends"),
        }),
    }
}

fn clear_password(secret: &BackendSecret, server: &str) -> Result<Vec<u8>, Error> {
    match secret {
        BackendSecret::Clear(pw) => {
            let mut v = pw.as_bytes().to_vec();
            v.push(0);
            Ok(v)
        }
        BackendSecret::NativeStage1(_) => Err(Error::AuthUnsupported {
            server: server.to_string(),
            why: "the server wants the cleartext password but mysql_users holds only a hash".into(),
        }),
    }
}

/// The capabilities Sluice asks for on a new server connection, against what the server's
/// greeting offers: the client's reply-shaping ones, the connection's options, and MariaDB's
/// extended capabilities; TLS, 4.1 protocol and DEPRECATE_EOF the server must offer.
fn negotiate_capabilities(
    p: &ConnectParams,
    greeting: &Greeting,
    server: &str,
) -> Result<(u32, u32), Error> {
    let shaping = p.client_caps & REPLY_SHAPING_CAPS;
    let mut caps = base_caps() | shaping as u32;
    let extended = (shaping >> 32) as u32;
    if !p.multi_statements {
        caps &= !cap::MULTI_STATEMENTS;
    }
    if p.schema.is_some() {
        caps |= cap::CONNECT_WITH_DB;
    }
    if p.tls.is_some() {
        caps |= cap::SSL;
    }
    if p.compress {
        caps |= cap::COMPRESS;
    }
    if p.track_gtid && greeting.server_version.contains("MariaDB") {
        caps |= cap::SESSION_TRACK;
    }
    let missing =
        caps & !greeting.capabilities & (cap::SSL | cap::DEPRECATE_EOF | cap::PROTOCOL_41);
    if missing & cap::SSL != 0 {
        return Err(Error::Tls {
            server: server.to_string(),
            why: "server does not offer TLS but use_ssl=1".into(),
        });
    }
    if missing != 0 {
        return Err(Error::AuthUnsupported {
            server: server.to_string(),
            why: format!("server lacks required capabilities {missing:#x}"),
        });
    }
    caps &= greeting.capabilities;
    let caps = with_extended(caps, extended, greeting, server)?;
    Ok((caps, extended))
}

/// The TLS handshake on a plain socket, after the SSL request was sent.
async fn upgrade_to_tls(
    stream: BackendSocket,
    tls: &Arc<rustls::ClientConfig>,
    host: &str,
    server: &str,
) -> Result<BackendSocket, Error> {
    let tls_error = |why: String| Error::Tls {
        server: server.to_string(),
        why,
    };
    let BackendSocket::Plain(tcp) = stream else {
        return Err(tls_error("already TLS".into()));
    };
    let name = rustls::pki_types::ServerName::try_from(host.to_string())
        .map_err(|e| tls_error(e.to_string()))?;
    let tls_stream = tokio_rustls::TlsConnector::from(tls.clone())
        .connect(name, tcp)
        .await
        .map_err(|e| tls_error(e.to_string()))?;
    Ok(BackendSocket::Tls(Box::new(tls_stream)))
}

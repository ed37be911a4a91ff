//! One authenticated connection to a PostgreSQL server.

use crate::Error;
use crate::frame::{Reader, message, parse_error};
use crate::scram;
use sluice_pgsql_proto::message as pgmsg;
use sluice_pgsql_proto::tag::{client, server};
use std::time::Duration;
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;

/// The cleartext password for a server asking for `method`; a user stored as a SCRAM verifier
/// has none to give.
fn cleartext<'a>(secret: &'a scram::ClientSecret, method: &str) -> Result<&'a str, Error> {
    match secret {
        scram::ClientSecret::Password(p) => Ok(p),
        scram::ClientSecret::Keys { .. } => Err(Error::Auth(format!(
            "the server asks for {method} authentication, but the user is stored in pgsql_users \
             as a SCRAM verifier: the server must use scram-sha-256"
        ))),
    }
}

/// How to open a server connection.
#[derive(Debug, Clone)]
pub struct ConnectParams {
    /// The server's host name or address.
    pub host: String,
    /// The server's TCP port.
    pub port: u16,
    /// The role to log in as.
    pub user: String,
    /// Its password, or the SCRAM keys a client revealed (for users stored as a verifier).
    pub secret: scram::ClientSecret,
    /// The database to connect to.
    pub database: String,
    /// Other startup parameters (application_name, client_encoding, ...).
    pub options: Vec<(String, String)>,
    /// Connect + authenticate timeout.
    pub timeout: Duration,
    /// TLS towards the server (its row has `use_ssl=1`).
    pub tls: Option<std::sync::Arc<rustls::ClientConfig>>,
}

/// An authenticated server connection, ready for queries.
#[derive(Debug)]
pub struct PgConn {
    /// The socket to the server, plain or TLS.
    pub stream: crate::stream::PgStream,
    /// Reads the server's messages, bounded in size, keeping what arrived past the last one.
    pub reader: Reader,
    /// ParameterStatus values the server reported at login.
    pub params: Vec<(String, String)>,
    /// `host:port` (shared: a session notes it for cancel requests at every checkout).
    pub server: std::sync::Arc<str>,
    /// BackendKeyData (pid, secret), for cancel requests.
    pub key: (u32, u32),
    /// Protocol-level prepared statements Sluice created here.
    pub prepared: crate::prepared::PreparedSet,
    /// Session variables set on this connection since it was opened with neutral startup
    /// parameters (name → the statement that set it).
    pub session_vars: std::collections::BTreeMap<String, String>,
    /// SQL-level prepared statements on this connection (name → its `PREPARE` statement), so
    /// the next session's are prepared and the others deallocated before it runs anything.
    pub sql_prepared: std::collections::BTreeMap<String, String>,
    /// The session (its cancel key) that last used it; `None` when it is fresh or was reset
    /// with `DISCARD ALL`. Another owner means state the last one changed without a visible
    /// `SET` (functions, `DO` blocks, `set_config`) must be cleared before reuse.
    pub owner: Option<u64>,
    /// When it last went back to the pool.
    pub idle_since: std::time::Instant,
    /// Its socket's duplicate, to kill it from outside (a shunned server).
    pub kill_handle: std::sync::Arc<crate::stream::KillHandle>,
    /// The session thread whose poll the socket is registered with (`None`: the shared runtime).
    pub home: Option<usize>,
    /// The server's statement and byte counters (the pool hands them over at connect).
    pub traffic: std::sync::Arc<sluice_core::metrics::ServerTraffic>,
}

fn startup_message(p: &ConnectParams) -> Vec<u8> {
    let mut body = 196_608u32.to_be_bytes().to_vec();
    let mut kv = vec![
        ("user".to_string(), p.user.clone()),
        ("database".to_string(), p.database.clone()),
    ];
    kv.extend(p.options.iter().cloned());
    for (k, v) in kv {
        body.extend_from_slice(k.as_bytes());
        body.push(0);
        body.extend_from_slice(v.as_bytes());
        body.push(0);
    }
    body.push(0);
    let mut out = ((body.len() + 4) as u32).to_be_bytes().to_vec();
    out.extend(body);
    out
}

fn sasl_initial(first: &str) -> Vec<u8> {
    let mut b = b"SCRAM-SHA-256\0".to_vec();
    b.extend_from_slice(&(first.len() as u32).to_be_bytes());
    b.extend_from_slice(first.as_bytes());
    message(client::PASSWORD, &b)
}

impl PgConn {
    /// Connects and authenticates (cleartext, MD5 or SCRAM-SHA-256) within `p.timeout`.
    pub async fn connect(p: &ConnectParams) -> Result<PgConn, Error> {
        match tokio::time::timeout(p.timeout, Self::connect_inner(p)).await {
            Ok(r) => r,
            // A slow server (or a busy Sluice) is worth another attempt within
            // `connect_timeout_server_max`: a wire error, unlike a refused login.
            Err(_) => Err(Error::from(std::io::Error::new(
                std::io::ErrorKind::TimedOut,
                format!(
                    "connecting to {}:{} timed out after {}ms",
                    p.host,
                    p.port,
                    p.timeout.as_millis()
                ),
            ))),
        }
    }

    async fn connect_inner(p: &ConnectParams) -> Result<PgConn, Error> {
        let tcp = TcpStream::connect((p.host.as_str(), p.port)).await?;
        let _ = tcp.set_nodelay(true);
        let (tcp, kill_handle) = crate::stream::with_kill_handle(tcp)?;
        let mut stream = match &p.tls {
            Some(tls) => crate::stream::upgrade(tcp, tls.clone(), &p.host).await?,
            None => crate::stream::PgStream::Plain(tcp),
        };
        stream.write_all(&startup_message(p)).await?;
        let mut reader = Reader::default();
        let mut scram: Option<scram::Client> = None;
        let mut params = Vec::new();
        let mut key = (0, 0);
        loop {
            let m = reader.message(&mut stream).await?;
            let body = pgmsg::body(&m);
            match m[0] {
                server::AUTHENTICATION => {
                    answer_authentication(&mut stream, p, &mut scram, body).await?
                }
                server::PARAMETER_STATUS => {
                    let parts: Vec<&[u8]> = body.split(|b| *b == 0).collect();
                    if parts.len() >= 2 {
                        params.push((
                            String::from_utf8_lossy(parts[0]).into_owned(),
                            String::from_utf8_lossy(parts[1]).into_owned(),
                        ));
                    }
                }
                server::BACKEND_KEY_DATA if body.len() >= 8 => {
                    key = (
                        u32::from_be_bytes([body[0], body[1], body[2], body[3]]),
                        u32::from_be_bytes([body[4], body[5], body[6], body[7]]),
                    );
                }
                server::READY_FOR_QUERY => break,
                server::ERROR_RESPONSE => {
                    let (code, message) = parse_error(body);
                    return Err(Error::Server { code, message });
                }
                _ => {}
            }
        }
        Ok(PgConn {
            stream,
            reader,
            params,
            server: format!("{}:{}", p.host, p.port).into(),
            key,
            prepared: Default::default(),
            session_vars: Default::default(),
            sql_prepared: Default::default(),
            owner: None,
            idle_since: std::time::Instant::now(),
            kill_handle: std::sync::Arc::new(kill_handle),
            home: None,
            traffic: Default::default(),
        })
    }

    /// This connection with its socket registered with the poll of the runtime running the
    /// caller, session thread `home`: served by the thread that uses it, its replies wake no
    /// other thread. A TLS connection stays where it was opened (correct, one wake-up dearer).
    /// An error leaves a socket that cannot be used: the caller drops the connection.
    pub fn rehomed(mut self: Box<Self>, home: usize) -> std::io::Result<Box<PgConn>> {
        if !self.stream.is_tls() {
            self.stream = self.stream.reregistered()?;
            self.home = Some(home);
        }
        Ok(self)
    }

    /// True when an idle connection was closed by the server (or has unexpected bytes pending).
    pub fn looks_dead(&self) -> bool {
        let mut byte = [0u8; 1];
        let mut buf = tokio::io::ReadBuf::new(&mut byte);
        let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
        !self.reader.buf.is_empty() || self.stream.poll_peek(&mut cx, &mut buf).is_ready()
    }

    /// Runs `sql` (one Query message) and reads to its ReadyForQuery, discarding the replies; the
    /// first error is returned.
    pub async fn run_quietly(&mut self, sql: &str) -> Result<(), Error> {
        let mut wire = Vec::new();
        query_message(sql, &mut wire);
        self.run_messages(&wire, 1).await.map(drop)
    }

    /// Sends `wire` (complete messages, e.g. from [`query_message`]) and reads replies up to the
    /// `replies`-th ReadyForQuery. Returns the ParameterStatus values the server reported on
    /// the way (settings that changed); the first error is returned instead.
    pub async fn run_messages(
        &mut self,
        wire: &[u8],
        replies: usize,
    ) -> Result<Vec<(String, String)>, Error> {
        self.stream.write_all(wire).await?;
        let mut failure = None;
        let mut reported = Vec::new();
        let mut left = replies;
        while left > 0 {
            let m = self.reader.message(&mut self.stream).await?;
            match m[0] {
                server::READY_FOR_QUERY => left -= 1,
                server::ERROR_RESPONSE if failure.is_none() => {
                    let (code, message) = parse_error(pgmsg::body(&m));
                    failure = Some(Error::Server { code, message });
                }
                server::PARAMETER_STATUS => {
                    reported.extend(crate::frame::parse_pairs(pgmsg::body(&m)))
                }
                _ => {}
            }
        }
        failure.map_or(Ok(reported), Err)
    }

    /// Runs `sql` and returns the first column of its first row as text (`None` for NULL or no
    /// row); the first error is returned.
    pub async fn query_value(&mut self, sql: &str) -> Result<Option<String>, Error> {
        let mut body = sql.as_bytes().to_vec();
        body.push(0);
        self.stream
            .write_all(&message(client::QUERY, &body))
            .await?;
        let mut failure = None;
        let mut value: Option<Option<String>> = None;
        loop {
            let m = self.reader.message(&mut self.stream).await?;
            match m[0] {
                server::READY_FOR_QUERY => return failure.map_or(Ok(value.flatten()), Err),
                server::ERROR_RESPONSE if failure.is_none() => {
                    let (code, message) = parse_error(pgmsg::body(&m));
                    failure = Some(Error::Server { code, message });
                }
                server::DATA_ROW if value.is_none() => value = Some(first_column(pgmsg::body(&m))),
                _ => {}
            }
        }
    }

    /// Runs `DISCARD ALL` so the connection can serve another client; false on failure.
    pub async fn discard_all(&mut self) -> bool {
        self.prepared.clear();
        self.session_vars.clear();
        self.sql_prepared.clear();
        self.owner = None;
        if self
            .stream
            .write_all(&message(client::QUERY, b"DISCARD ALL\0"))
            .await
            .is_err()
        {
            return false;
        }
        let mut ok = true;
        loop {
            match self.reader.message(&mut self.stream).await {
                Ok(m) if m[0] == server::READY_FOR_QUERY => return ok,
                Ok(m) if m[0] == server::ERROR_RESPONSE => ok = false,
                Ok(_) => {}
                Err(_) => return false,
            }
        }
    }
}

/// Sends a CancelRequest for server process `pid` to `server`; false (logged) when it could not.
pub async fn send_cancel(server: &str, pid: u32, secret: u32) -> bool {
    let mut pkt = 16u32.to_be_bytes().to_vec();
    pkt.extend_from_slice(&80_877_102u32.to_be_bytes());
    pkt.extend_from_slice(&pid.to_be_bytes());
    pkt.extend_from_slice(&secret.to_be_bytes());
    match TcpStream::connect(server).await {
        Ok(mut s) => s.write_all(&pkt).await.is_ok(),
        Err(e) => {
            tracing::warn!(server = %server, "cannot send a cancel request: {e}");
            false
        }
    }
}

/// Appends a simple-protocol Query message running `sql` to `out`.
pub fn query_message(sql: &str, out: &mut Vec<u8>) {
    out.push(client::QUERY);
    out.extend_from_slice(&((sql.len() + 5) as u32).to_be_bytes());
    out.extend_from_slice(sql.as_bytes());
    out.push(0);
}

/// The first column of a DataRow body as text; `None` for NULL or a malformed row.
fn first_column(body: &[u8]) -> Option<String> {
    let n = u16::from_be_bytes([*body.first()?, *body.get(1)?]);
    if n == 0 {
        return None;
    }
    let len = i32::from_be_bytes(body.get(2..6)?.try_into().ok()?);
    let len = usize::try_from(len).ok()?;
    let v = body.get(6..6 + len)?;
    Some(String::from_utf8_lossy(v).into_owned())
}

/// Answers one Authentication request of the server's login: cleartext, MD5 or SCRAM-SHA-256
/// (the exchange's state kept in `exchange`); 0 (`AuthenticationOk`) needs no answer.
async fn answer_authentication(
    stream: &mut crate::stream::PgStream,
    p: &ConnectParams,
    exchange: &mut Option<scram::Client>,
    body: &[u8],
) -> Result<(), Error> {
    let code = body
        .get(..4)
        .map_or(u32::MAX, |c| u32::from_be_bytes([c[0], c[1], c[2], c[3]]));
    let data = &body[4.min(body.len())..];
    match code {
        0 => {}
        3 => {
            let mut pw = cleartext(&p.secret, "password")?.as_bytes().to_vec();
            pw.push(0);
            stream.write_all(&message(client::PASSWORD, &pw)).await?;
        }
        5 => {
            let salt = data.get(..4).ok_or(Error::malformed("MD5 salt"))?;
            let clear = cleartext(&p.secret, "md5")?;
            let mut pw = crate::md5auth::response(&p.user, clear, salt).into_bytes();
            pw.push(0);
            stream.write_all(&message(client::PASSWORD, &pw)).await?;
        }
        10 => {
            if !data.windows(13).any(|w| w == b"SCRAM-SHA-256") {
                return Err(Error::Auth("server offers no SCRAM-SHA-256".into()));
            }
            let (c, first) = scram::Client::with_secret(p.secret.clone());
            *exchange = Some(c);
            stream.write_all(&sasl_initial(&first)).await?;
        }
        11 => {
            let c = exchange
                .as_mut()
                .ok_or(Error::malformed("SASL continue without start"))?;
            let fin = c
                .finish(&String::from_utf8_lossy(data))
                .map_err(|e| Error::Auth(e.to_string()))?;
            stream
                .write_all(&message(client::PASSWORD, fin.as_bytes()))
                .await?;
        }
        12 => {
            let c = exchange
                .as_ref()
                .ok_or(Error::malformed("SASL final without start"))?;
            c.verify(&String::from_utf8_lossy(data))
                .map_err(|e| Error::Auth(e.to_string()))?;
        }
        other => {
            return Err(Error::Auth(format!(
                "authentication method {other} is not supported towards servers"
            )));
        }
    }
    Ok(())
}

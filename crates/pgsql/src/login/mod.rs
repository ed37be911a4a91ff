//! Before a PostgreSQL session is logged in: SSLRequest (TLS), GSSENCRequest (refused),
//! CancelRequest, the StartupMessage and the password exchange against `pgsql_users`
//! (SCRAM-SHA-256, MD5 or cleartext per `pgsql-authentication_method` or the user's attributes).

pub(crate) mod limits;
pub(crate) mod startup;

use crate::Error;
use crate::frontend::PgFrontend;
use crate::pids::forward_cancel;
use bytes::Bytes;
use sluice_net::ServerTls;
use sluice_pgsql_proto::Error as ProtoError;
use sluice_pgsql_proto::frame::{Reader, auth, error_response, parse_pairs};
use sluice_pgsql_proto::md5auth;
use sluice_pgsql_proto::message;
use sluice_pgsql_proto::scram::{self, ClientSecret};
use sluice_pgsql_proto::tag::client;
use std::net::SocketAddr;
use std::sync::Arc;
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;
use tracing::{debug, warn};

/// A client that logged in: its user row, database and startup settings.
pub(crate) struct Login {
    /// Held for the session's life.
    _slot: crate::login::limits::ClientSlot,
    /// The `pgsql_users` row.
    pub(crate) user: Arc<sluice_core::config::PgsqlUser>,
    /// What server connections are opened with: the password, or the SCRAM keys the client's
    /// proof revealed when the user is stored as a verifier.
    pub(crate) secret: ClientSecret,
    /// The database asked for.
    pub(crate) database: String,
    /// The settings its startup parameters asked for (lower-cased GUC names, raw values):
    /// applied to every server connection that serves the session, never used to open one.
    pub(crate) settings: std::collections::BTreeMap<String, String>,
    /// The session thread serving the client (server connections prefer ones opened there).
    pub(crate) worker: Option<usize>,
}

/// Ends a session before login with a FATAL ErrorResponse.
pub(crate) async fn fail<S: AsyncWrite + Unpin>(io: &mut S, code: &str, msg: &str) {
    let _ = io.write_all(&error_response("FATAL", code, msg)).await;
}

/// What the first packets on a new connection asked for.
pub(crate) enum Opening {
    /// A StartupMessage in plaintext.
    Startup(TcpStream, Bytes),
    /// The client asked for TLS and the handshake completed.
    Tls(Box<ServerTls<TcpStream>>),
    /// A CancelRequest (handled) or a refused opening: nothing more to do.
    Done,
}

/// Reads SSLRequest / GSSENCRequest / CancelRequest / StartupMessage until the session's course
/// is clear.
pub(crate) async fn opening(fe: &PgFrontend, mut tcp: TcpStream, reader: &mut Reader) -> Opening {
    loop {
        let Ok(pkt) = reader.startup(&mut tcp).await else {
            return Opening::Done;
        };
        match u32::from_be_bytes([pkt[4], pkt[5], pkt[6], pkt[7]]) {
            80_877_103 => {
                // The acceptor of this moment: a TLS reload affects later handshakes only.
                let Some(acceptor) = fe.tls.as_ref().map(|t| t.current()) else {
                    if tcp.write_all(b"N").await.is_err() {
                        return Opening::Done;
                    }
                    continue;
                };
                // Bytes sent after SSLRequest but before the handshake would be read as if they
                // came over TLS (the CVE-2021-23222 class of bug): refuse them.
                if !reader.buf.is_empty() {
                    fail(&mut tcp, "08P01", "unexpected data after SSLRequest").await;
                    return Opening::Done;
                }
                if tcp.write_all(b"S").await.is_err() {
                    return Opening::Done;
                }
                return match ServerTls::accept(acceptor.config().clone(), tcp, &[]).await {
                    Ok(s) => Opening::Tls(Box::new(s)),
                    Err(e) => {
                        debug!("pgsql TLS handshake failed: {e}");
                        Opening::Done
                    }
                };
            }
            // GSSAPI encryption is not offered; libpq then tries TLS or plaintext.
            80_877_104 => {
                if tcp.write_all(b"N").await.is_err() {
                    return Opening::Done;
                }
            }
            80_877_102 if pkt.len() >= 16 => {
                let pid = u32::from_be_bytes([pkt[8], pkt[9], pkt[10], pkt[11]]);
                let secret = u32::from_be_bytes([pkt[12], pkt[13], pkt[14], pkt[15]]);
                forward_cancel(&fe.cancels, pid, secret).await;
                return Opening::Done;
            }
            196_608 => return Opening::Startup(tcp, pkt),
            other => {
                let msg = format!(
                    "unsupported frontend protocol {}.{}",
                    other >> 16,
                    other & 0xffff
                );
                fail(&mut tcp, "08P01", &msg).await;
                return Opening::Done;
            }
        }
    }
}

/// Sends the client a FATAL ErrorResponse and returns the matching error.
async fn refuse<S: AsyncWrite + Unpin>(
    io: &mut S,
    sqlstate: &'static str,
    message: String,
) -> Error {
    fail(io, sqlstate, &message).await;
    Error::LoginRefused { sqlstate, message }
}

/// Startup parameters and authentication; on success the client has received AuthenticationOk.
pub(crate) async fn login<S: AsyncRead + AsyncWrite + Unpin>(
    fe: &PgFrontend,
    io: &mut S,
    reader: &mut Reader,
    startup: &[u8],
    tls: bool,
    peer: SocketAddr,
) -> Result<Login, Error> {
    let pairs = parse_pairs(startup.get(8..).unwrap_or_default());
    let rt = fe.config.load();
    let params =
        match crate::login::startup::parse(&pairs, &rt.pgsql.variables.ignore_startup_parameters) {
            Ok(p) => p,
            Err(why) => return Err(refuse(io, "08P01", why.to_string()).await),
        };
    let crate::login::startup::StartupParams {
        user: username,
        database,
        settings,
    } = params;
    let user = rt.pgsql.frontend_users.get(&username).cloned();
    // Unknown users go through the exchange too, against a random password, so a client cannot
    // tell unknown users from wrong passwords.
    let password = user
        .as_ref()
        .map(|u| u.password.clone())
        .unwrap_or_else(|| format!("{:x}", sluice_core::hostgroup::random_u64()));
    // A user's `attributes` may pick its own method ({"authentication_method": 1|2|3}).
    let method = user
        .as_ref()
        .and_then(|u| u.authentication_method_attribute())
        .unwrap_or(rt.pgsql.variables.authentication_method);
    let verified = authenticate(io, reader, method, &username, &password).await?;
    let (secret, user) = match (verified, user) {
        (Some(secret), Some(u)) if u.active.0 => (secret, u),
        _ => {
            let msg = format!("password authentication failed for user \"{username}\"");
            return Err(refuse(io, "28P01", msg).await);
        }
    };
    if user.use_ssl.0 && !tls {
        let msg = format!("user \"{username}\" must connect with SSL (use_ssl=1)");
        return Err(refuse(io, "28000", msg).await);
    }
    let slot = match fe.clients.admit(
        &username,
        user.max_connections.0,
        rt.pgsql.variables.max_connections,
    ) {
        Ok(slot) => slot,
        Err(why) => {
            warn!(client = %peer, user = %username, "pgsql client refused: {why}");
            return Err(refuse(io, "53300", why.to_string()).await);
        }
    };
    io.write_all(&auth(0, b"")).await?;
    debug!(client = %peer, user = %username, tls, "pgsql login");
    Ok(Login {
        _slot: slot,
        secret,
        user,
        database,
        settings,
        worker: None,
    })
}

/// Largest message accepted before authentication (PostgreSQL's own bound for auth tokens).
const MAX_AUTH_MESSAGE: usize = 65_535;

/// Runs the password exchange of `pgsql-authentication_method` (1 cleartext, 2 MD5, 3 SCRAM)
/// against `password` — cleartext, a stored SCRAM verifier (`SCRAM-SHA-256$…`), which MD5
/// cannot use, or a stored MD5 hash (`md5…`), which SCRAM cannot use. When the client proved it knows the password, returns what Sluice logs in to
/// servers with: the password, or the SCRAM keys the client's proof revealed. Only
/// SCRAM-SHA-256 is offered, never -PLUS.
async fn authenticate<S: AsyncRead + AsyncWrite + Unpin>(
    io: &mut S,
    reader: &mut Reader,
    method: u32,
    username: &str,
    password: &str,
) -> Result<Option<ClientSecret>, Error> {
    let password_message = |m: Bytes| -> Result<String, Error> {
        if m[0] != client::PASSWORD {
            return Err(Error::Client(ProtoError::Malformed(
                "expected a password message",
            )));
        }
        let body = message::body(&m);
        let end = body.iter().position(|b| *b == 0).unwrap_or(body.len());
        Ok(String::from_utf8_lossy(&body[..end]).into_owned())
    };
    let verifier = scram::Verifier::parse(password);
    match (method, verifier) {
        (1, verifier) => {
            io.write_all(&auth(3, b"")).await?;
            let m = reader.message_within(io, MAX_AUTH_MESSAGE).await?;
            let given = password_message(m)?;
            let ok = match verifier {
                Some(v) => v.matches(&given),
                None if md5auth::is_stored_hash(password) => {
                    md5auth::hash_of_cleartext(username, &given).eq_ignore_ascii_case(password)
                }
                None => given == password,
            };
            Ok(ok.then_some(ClientSecret::Password(given)))
        }
        (2, Some(_)) => {
            let msg = format!(
                "user \"{username}\" is stored as a SCRAM verifier: MD5 authentication cannot \
                 check it (set pgsql-authentication_method to 3)"
            );
            Err(refuse(io, "28000", msg).await)
        }
        (2, None) => {
            let salt = (sluice_core::hostgroup::random_u64() as u32).to_be_bytes();
            io.write_all(&auth(5, &salt)).await?;
            let m = reader.message_within(io, MAX_AUTH_MESSAGE).await?;
            let expected = md5auth::response(username, password, &salt);
            let ok = password_message(m)? == expected;
            Ok(ok.then(|| ClientSecret::Password(password.to_string())))
        }
        (_, None) if md5auth::is_stored_hash(password) => {
            let msg = format!(
                "user \"{username}\" is stored as an MD5 hash: SCRAM authentication cannot check \
                 it (set pgsql-authentication_method to 2, or store a SCRAM verifier)"
            );
            Err(refuse(io, "28000", msg).await)
        }
        (_, verifier) => {
            io.write_all(&auth(10, b"SCRAM-SHA-256\0\0")).await?;
            let first = reader.message_within(io, MAX_AUTH_MESSAGE).await?;
            let body = message::body(&first);
            let mech_end =
                body.iter()
                    .position(|b| *b == 0)
                    .ok_or(Error::Client(ProtoError::Malformed(
                        "malformed SASLInitialResponse",
                    )))?;
            if &body[..mech_end] != b"SCRAM-SHA-256" {
                return Err(Error::Client(ProtoError::Malformed(
                    "client chose a SASL mechanism that was not offered",
                )));
            }
            let client_first =
                String::from_utf8_lossy(body.get(mech_end + 5..).unwrap_or_default()).into_owned();
            let started = match &verifier {
                Some(v) => scram::Server::with_verifier(v.clone(), &client_first),
                None => scram::Server::new(password, &client_first),
            };
            let Ok((server, server_first)) = started else {
                return Ok(None);
            };
            io.write_all(&auth(11, server_first.as_bytes())).await?;
            let fin = reader.message_within(io, MAX_AUTH_MESSAGE).await?;
            match server.finish_with_key(&String::from_utf8_lossy(message::body(&fin))) {
                Ok((v, client_key)) => {
                    io.write_all(&auth(12, v.as_bytes())).await?;
                    Ok(Some(match verifier {
                        Some(verifier) => ClientSecret::Keys {
                            verifier,
                            client_key,
                        },
                        None => ClientSecret::Password(password.to_string()),
                    }))
                }
                Err(_) => Ok(None),
            }
        }
    }
}

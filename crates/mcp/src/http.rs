//! The one HTTP server of the project (hyper, with axum routers): accepts through
//! `sluice_net::serve`, with TLS when given one, headers bounded in size (431) and time, and a
//! graceful end at shutdown. The metrics and probes port and the MCP port both run on it.

use axum::Router;
use axum::body::Body;
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper_util::rt::{TokioIo, TokioTimer};
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;
use tokio::net::{TcpListener, TcpStream};
use tokio_rustls::TlsAcceptor;
use tokio_util::sync::CancellationToken;
use tower::ServiceExt;
use tracing::debug;

/// The client's address, in every request's extensions.
#[derive(Debug, Clone, Copy)]
pub struct ClientAddr(pub SocketAddr);

/// Bounds of every connection.
#[derive(Debug, Clone, Copy)]
pub struct HttpLimits {
    /// Time to complete the TLS handshake and each request's head.
    pub head_timeout: Duration,
    /// Largest request head (request line and headers); larger gets 431.
    pub max_head_bytes: usize,
}

impl Default for HttpLimits {
    fn default() -> Self {
        HttpLimits {
            head_timeout: Duration::from_secs(10),
            max_head_bytes: 16 * 1024,
        }
    }
}

/// Serves `router` on `listeners` until `ctl.shutdown`; `tls` makes it HTTPS.
pub async fn serve(
    listeners: Vec<TcpListener>,
    ctl: sluice_net::AcceptControl,
    tls: Option<Arc<TlsAcceptor>>,
    router: Router,
    limits: HttpLimits,
) {
    let shutdown = ctl.shutdown.clone();
    sluice_net::serve(listeners, ctl, move |tcp, peer, _| {
        connection(
            tcp,
            peer,
            tls.clone(),
            router.clone(),
            limits,
            shutdown.clone(),
        )
    })
    .await;
}

async fn connection(
    tcp: TcpStream,
    peer: SocketAddr,
    tls: Option<Arc<TlsAcceptor>>,
    router: Router,
    limits: HttpLimits,
    shutdown: CancellationToken,
) {
    let _ = tcp.set_nodelay(true);
    match tls {
        None => http(TokioIo::new(tcp), peer, router, limits, shutdown).await,
        Some(acceptor) => {
            match tokio::time::timeout(limits.head_timeout, acceptor.accept(tcp)).await {
                Ok(Ok(stream)) => http(TokioIo::new(stream), peer, router, limits, shutdown).await,
                Ok(Err(e)) => debug!(client = %peer, "HTTPS handshake failed: {e}"),
                Err(_) => debug!(client = %peer, "HTTPS handshake not completed in time"),
            }
        }
    }
}

async fn http<I>(
    io: TokioIo<I>,
    peer: SocketAddr,
    router: Router,
    limits: HttpLimits,
    shutdown: CancellationToken,
) where
    I: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let service = hyper::service::service_fn(move |req: hyper::Request<Incoming>| {
        let mut req = req.map(Body::new);
        req.extensions_mut().insert(ClientAddr(peer));
        router.clone().oneshot(req)
    });
    let conn = http1::Builder::new()
        .timer(TokioTimer::new())
        .header_read_timeout(limits.head_timeout)
        .max_buf_size(limits.max_head_bytes.max(8192))
        .serve_connection(io, service);
    tokio::pin!(conn);
    let ended = tokio::select! {
        r = conn.as_mut() => r,
        _ = shutdown.cancelled() => {
            conn.as_mut().graceful_shutdown();
            conn.await
        }
    };
    if let Err(e) = ended {
        debug!(client = %peer, "HTTP connection ended: {e}");
    }
}

//! The HTTP port (`admin-restapi_port`, ProxySQL's REST API port): `GET /metrics` (Prometheus
//! text), `GET /healthz` (the process answers) and `GET /readyz` (200 when Sluice can take
//! clients, 503 with the reason when it cannot). One request per connection; requests are
//! bounded in size and time, so a slow or hostile client costs one task and nothing else.

use crate::Admin;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tracing::debug;

/// Largest request head accepted (request line and headers).
const MAX_REQUEST: usize = 8 * 1024;
/// Time a client has to send its request head.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);

/// Serves the HTTP endpoints on `listeners` until `shutdown` is cancelled.
pub async fn serve_http(
    admin: Arc<Admin>,
    listeners: Vec<TcpListener>,
    shutdown: CancellationToken,
    tasks: TaskTracker,
) {
    let ctl = sluice_net::AcceptControl {
        name: "HTTP (admin-restapi_port)",
        shutdown,
        paused: None,
        tasks,
        workers: None,
    };
    sluice_net::serve(listeners, ctl, move |tcp, peer, _| {
        answer(admin.clone(), tcp, peer)
    })
    .await;
}

async fn answer(admin: Arc<Admin>, mut tcp: TcpStream, peer: SocketAddr) {
    let head = match tokio::time::timeout(REQUEST_TIMEOUT, read_head(&mut tcp)).await {
        Ok(Some(head)) => head,
        Ok(None) => {
            let _ = tcp
                .write_all(&response(400, "text/plain", "bad request\n", false))
                .await;
            return;
        }
        Err(_) => {
            debug!(client = %peer, "HTTP client sent no request in time");
            return;
        }
    };
    let mut words = head.split_whitespace();
    let (method, target) = (words.next().unwrap_or(""), words.next().unwrap_or(""));
    let path = target.split('?').next().unwrap_or("");
    let head_only = method == "HEAD";
    let reply = match (method, path) {
        ("GET" | "HEAD", "/metrics") => response(
            200,
            "text/plain; version=0.0.4; charset=utf-8",
            &admin.prometheus_metrics(),
            head_only,
        ),
        ("GET" | "HEAD", "/healthz") => response(200, "text/plain", "ok\n", head_only),
        ("GET" | "HEAD", "/readyz") => match admin.not_ready() {
            // Ready; fleet notes (e.g. the configuration store is unreachable) follow as detail.
            None => {
                let mut body = "ready\n".to_string();
                for note in admin.cluster_board().notes() {
                    body.push_str(&format!("note: {note}\n"));
                }
                response(200, "text/plain", &body, head_only)
            }
            Some(why) => response(503, "text/plain", &format!("not ready: {why}\n"), head_only),
        },
        ("GET" | "HEAD", _) => response(404, "text/plain", "not found\n", head_only),
        _ => response(405, "text/plain", "only GET and HEAD\n", head_only),
    };
    let _ = tcp.write_all(&reply).await;
    let _ = tcp.shutdown().await;
}

/// Reads up to the end of the request head; `None` when it is over the bound or the client
/// closed first.
async fn read_head(tcp: &mut TcpStream) -> Option<String> {
    let mut buf = Vec::with_capacity(512);
    let mut chunk = [0u8; 1024];
    loop {
        let n = tcp.read(&mut chunk).await.ok()?;
        if n == 0 {
            return None;
        }
        buf.extend_from_slice(&chunk[..n]);
        if let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            return String::from_utf8(buf[..end].to_vec()).ok();
        }
        if buf.len() > MAX_REQUEST {
            return None;
        }
    }
}

fn response(status: u16, content_type: &str, body: &str, head_only: bool) -> Vec<u8> {
    let reason = match status {
        200 => "OK",
        400 => "Bad Request",
        404 => "Not Found",
        405 => "Method Not Allowed",
        _ => "Service Unavailable",
    };
    let mut out = format!(
        "HTTP/1.1 {status} {reason}\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    )
    .into_bytes();
    if !head_only {
        out.extend_from_slice(body.as_bytes());
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn responses_carry_length_and_no_body_for_head() {
        let r =
            String::from_utf8(response(503, "text/plain", "not ready: x\n", false)).expect("utf8");
        assert!(r.starts_with("HTTP/1.1 503 Service Unavailable\r\n"), "{r}");
        assert!(r.contains("Content-Length: 13\r\n"), "{r}");
        assert!(r.ends_with("\r\n\r\nnot ready: x\n"), "{r}");
        let head = String::from_utf8(response(200, "text/plain", "ok\n", true)).expect("utf8");
        assert!(
            head.ends_with("Content-Length: 3\r\nConnection: close\r\n\r\n"),
            "{head}"
        );
    }
}

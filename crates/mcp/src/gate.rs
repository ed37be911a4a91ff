//! What a request to an MCP endpoint passes before rmcp sees it: no token in the URL, a known
//! `MCP-Protocol-Version`, a JSON content type, a body read within the size and time bounds
//! that parses as one JSON-RPC message (no batches), and a bearer token that belongs to
//! someone — failed tokens throttled per client address like failed logins. Each refusal is an
//! HTTP status with a JSON-RPC error body that says why; nothing of the token is logged.

use crate::auth::{self, Endpoint};
use crate::handler::{Handler, PROTOCOL_VERSIONS};
use crate::http::ClientAddr;
use crate::service::McpService;
use axum::body::Body;
use axum::http::{HeaderMap, Method, Request, StatusCode, header};
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use http_body_util::{BodyExt, Full, Limited};
use rmcp::transport::streamable_http_server::StreamableHttpService;
use rmcp::transport::streamable_http_server::session::never::NeverSessionManager;
use serde_json::{Value, json};
use sluice_core::login_throttle::{Admission, LoginGate};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;
use tracing::debug;

/// The state the gate needs.
pub(crate) struct Gate {
    pub svc: Arc<McpService>,
    pub logins: LoginGate,
    pub query: StreamableHttpService<Handler, NeverSessionManager>,
    pub stats: StreamableHttpService<Handler, NeverSessionManager>,
    pub config: StreamableHttpService<Handler, NeverSessionManager>,
    /// `/mcp/rag`'s transport.
    pub rag: StreamableHttpService<Handler, NeverSessionManager>,
}

/// A refusal: HTTP status and a JSON-RPC error.
fn refuse(status: StatusCode, code: i64, message: impl Into<String>) -> Response {
    refuse_with(status, code, message, Value::Null, None)
}

/// A refusal answering request `id`, with error `data` when given.
fn refuse_with(
    status: StatusCode,
    code: i64,
    message: impl Into<String>,
    id: Value,
    data: Option<Value>,
) -> Response {
    let mut error = json!({"code": code, "message": message.into()});
    if let Some(d) = data {
        error["data"] = d;
    }
    let body = json!({
        "jsonrpc": "2.0",
        "id": id,
        "error": error,
    });
    // The connection closes after a refusal: the request's body may not have been read (or
    // even arrived) yet, and a client must not reuse a connection the server has to drop.
    let mut r = (
        status,
        [
            (header::CONTENT_TYPE, "application/json"),
            (header::CONNECTION, "close"),
        ],
        body.to_string(),
    )
        .into_response();
    if status == StatusCode::UNAUTHORIZED {
        r.headers_mut().insert(
            header::WWW_AUTHENTICATE,
            header::HeaderValue::from_static("Bearer realm=\"sluice-mcp\""),
        );
    }
    r
}

/// [`refuse`], boxed for a `Result`'s error side.
fn refused(status: StatusCode, code: i64, message: impl Into<String>) -> Box<Response> {
    Box::new(refuse(status, code, message))
}

fn header_str<'a>(h: &'a HeaderMap, name: &str) -> Option<&'a str> {
    h.get(name).and_then(|v| v.to_str().ok())
}

/// Checks done before the body is read; `Err` is the answer.
fn check_head(req: &Request<Body>) -> Result<(), Box<Response>> {
    let query = req.uri().query().unwrap_or("");
    if query.split('&').any(|kv| {
        kv.split('=').next().is_some_and(|k| {
            k.eq_ignore_ascii_case("token") || k.eq_ignore_ascii_case("access_token")
        })
    }) {
        return Err(refused(
            StatusCode::BAD_REQUEST,
            -32600,
            "tokens are accepted in the Authorization header only, never in the URL (they end up in logs and histories)",
        ));
    }
    if req.method() == Method::POST {
        let ct = header_str(req.headers(), "content-type").unwrap_or("");
        if !ct
            .split(';')
            .next()
            .is_some_and(|m| m.trim().eq_ignore_ascii_case("application/json"))
        {
            return Err(refused(
                StatusCode::UNSUPPORTED_MEDIA_TYPE,
                -32600,
                format!("Content-Type must be application/json, not {ct:?}"),
            ));
        }
    }
    Ok(())
}

/// An `MCP-Protocol-Version` this server does not speak: -32022 with the versions it does
/// (the request's id echoed).
fn check_version(headers: &HeaderMap, body: &[u8]) -> Result<(), Box<Response>> {
    let Some(v) = header_str(headers, "mcp-protocol-version") else {
        return Ok(());
    };
    if PROTOCOL_VERSIONS.iter().any(|p| p.as_str() == v) {
        return Ok(());
    }
    let known: Vec<&str> = PROTOCOL_VERSIONS.iter().map(|p| p.as_str()).collect();
    let id = serde_json::from_slice::<Value>(body)
        .ok()
        .and_then(|b| b.get("id").cloned())
        .unwrap_or(Value::Null);
    Err(Box::new(refuse_with(
        StatusCode::BAD_REQUEST,
        -32022,
        format!(
            "unsupported MCP-Protocol-Version {v:?}; this server speaks {}",
            known.join(", ")
        ),
        id,
        Some(json!({"supported": known, "requested": v})),
    )))
}

/// Reads the body within the bounds and checks it is one JSON-RPC message.
async fn read_body(body: Body, max: usize, timeout: Duration) -> Result<Bytes, Box<Response>> {
    let collected = tokio::time::timeout(timeout, Limited::new(body, max).collect()).await;
    let bytes = match collected {
        Err(_) => {
            return Err(refused(
                StatusCode::REQUEST_TIMEOUT,
                -32600,
                format!(
                    "the request body did not arrive within {} ms (mcp-request_timeout_ms)",
                    timeout.as_millis()
                ),
            ));
        }
        Ok(Err(e)) if e.is::<http_body_util::LengthLimitError>() => {
            return Err(refused(
                StatusCode::PAYLOAD_TOO_LARGE,
                -32600,
                format!("the request body is over {max} bytes (mcp-max_request_bytes)"),
            ));
        }
        Ok(Err(e)) => {
            return Err(refused(
                StatusCode::BAD_REQUEST,
                -32600,
                format!("the request body could not be read: {e}"),
            ));
        }
        Ok(Ok(c)) => c.to_bytes(),
    };
    match serde_json::from_slice::<Value>(&bytes) {
        Err(e) => Err(refused(
            StatusCode::BAD_REQUEST,
            -32700,
            format!("parse error: the body is not JSON ({e})"),
        )),
        Ok(Value::Array(_)) => Err(refused(
            StatusCode::BAD_REQUEST,
            -32600,
            "JSON-RPC batches are not supported (MCP 2025-06-18 removed them): send one message per request",
        )),
        Ok(Value::Object(m)) if m.get("jsonrpc").and_then(Value::as_str) == Some("2.0") => {
            Ok(bytes)
        }
        Ok(_) => Err(refused(
            StatusCode::BAD_REQUEST,
            -32600,
            "invalid request: not a JSON-RPC 2.0 message object",
        )),
    }
}

impl Gate {
    /// Answers one request to an MCP path.
    pub(crate) async fn answer(self: Arc<Self>, req: Request<Body>) -> Response {
        let Some(endpoint) = Endpoint::of_path(req.uri().path()) else {
            return refuse(
                StatusCode::NOT_FOUND,
                -32601,
                "no such MCP endpoint: /mcp/query, /mcp/stats, /mcp/config",
            );
        };
        let response = self.checked(endpoint, req).await;
        if !response.status().is_success() && response.status() != StatusCode::ACCEPTED {
            self.svc
                .stats
                .refused_requests
                .fetch_add(1, Ordering::Relaxed);
        }
        response
    }

    async fn checked(&self, endpoint: Endpoint, req: Request<Body>) -> Response {
        let peer = req
            .extensions()
            .get::<ClientAddr>()
            .map(|c| c.0.ip())
            .unwrap_or(std::net::IpAddr::from([0, 0, 0, 0]));
        if let Err(r) = check_head(&req) {
            return *r;
        }
        // A throttled address is told when its next turn is (429 with Retry-After) rather than
        // held: a request kept waiting would hold its connection past the head timer.
        let wait = match self.logins.admit(peer) {
            Admission::Now => None,
            Admission::After(wait) if wait.is_zero() => None,
            Admission::After(wait) => Some(wait),
            Admission::Refused => Some(Duration::from_secs(60)),
        };
        if let Some(wait) = wait {
            let secs = wait.as_secs_f64().ceil().max(1.0) as u64;
            let mut r = refuse(
                StatusCode::TOO_MANY_REQUESTS,
                -32001,
                format!("too many failed tokens from this address; try again in {secs} s"),
            );
            if let Ok(v) = header::HeaderValue::from_str(&secs.to_string()) {
                r.headers_mut().insert(header::RETRY_AFTER, v);
            }
            return r;
        }
        let rt = self.svc.config.load();
        let token = auth::bearer(header_str(req.headers(), "authorization"));
        let caller = match auth::authenticate(&rt.mcp, endpoint, token, peer) {
            Ok(c) => {
                self.logins.succeeded(peer);
                c
            }
            Err(why) => {
                self.logins.failed(peer, "MCP", &why);
                return refuse(
                    StatusCode::UNAUTHORIZED,
                    -32001,
                    format!("unauthorized: {why}"),
                );
            }
        };
        let (mut parts, body) = req.into_parts();
        let body = if parts.method == Method::POST {
            let v = &rt.mcp.variables;
            match read_body(
                body,
                v.max_request_bytes as usize,
                Duration::from_millis(v.request_timeout_ms),
            )
            .await
            {
                Ok(b) => b,
                Err(r) => return *r,
            }
        } else {
            Bytes::new()
        };
        if let Err(r) = check_version(&parts.headers, &body) {
            return *r;
        }
        debug!(mcp_user = %caller.name, endpoint = endpoint.name(), "MCP request");
        parts.extensions.insert(caller);
        let req = Request::from_parts(parts, Full::new(body));
        let svc = match endpoint {
            Endpoint::Query => &self.query,
            Endpoint::Stats => &self.stats,
            Endpoint::Config => &self.config,
            Endpoint::Rag => &self.rag,
        };
        let r = svc.handle(req).await;
        if r.status().is_client_error() {
            debug!(
                endpoint = endpoint.name(),
                status = r.status().as_u16(),
                "MCP request refused by the transport"
            );
        }
        r.map(Body::new)
    }
}

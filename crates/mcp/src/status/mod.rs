//! The status page on the HTTP port (ProxySQL's web UI, `admin-web_enabled`): `GET /status` is
//! one HTML page with no external assets — servers with status, lag and latency, pools,
//! clients, top digests, workload classes and guards, rendered by the server — and two small
//! live charts (questions/s and p99 latency per protocol) that its script draws from
//! `GET /status.json` every two seconds. Both ask for the admin or stats credentials (HTTP
//! Basic); the default `admin:admin` only from loopback, as on the admin ports.

mod html;
mod tables;

use crate::http::ClientAddr;
use axum::extract::{Request, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use base64::Engine;
use sluice_admin::Admin;
use sluice_core::Protocol;
use sluice_core::admin::AdminExecutor;
use std::sync::Arc;

/// `GET /status`: the page.
pub(crate) async fn page(State(admin): State<Arc<Admin>>, req: Request) -> Response {
    if !authorized(&admin, &req) {
        return refused();
    }
    let t = tables::gather(&admin).await;
    let body = html::page(&t, env!("CARGO_PKG_VERSION"));
    (
        StatusCode::OK,
        [
            (header::CONTENT_TYPE, "text/html; charset=utf-8"),
            (header::CACHE_CONTROL, "no-store"),
        ],
        body,
    )
        .into_response()
}

/// `GET /status.json`: what the charts need — questions so far and the latency histogram of
/// each protocol, and the uptime.
pub(crate) async fn json(State(admin): State<Arc<Admin>>, req: Request) -> Response {
    if !authorized(&admin, &req) {
        return refused();
    }
    let (uptime_s, questions) = tables::counters(&admin).await;
    let proto = |p: Protocol, questions: u64| {
        let h = admin.statement_latency(p);
        serde_json::json!({
            "questions": questions,
            "latency_bounds_s": sluice_core::metrics::LATENCY_BUCKETS_S,
            "latency_buckets": h.buckets,
            "latency_count": h.count,
        })
    };
    let body = serde_json::json!({
        "uptime_s": uptime_s,
        "mysql": proto(Protocol::Mysql, questions.mysql),
        "pgsql": proto(Protocol::Pgsql, questions.pgsql),
    });
    (
        StatusCode::OK,
        [
            (header::CONTENT_TYPE, "application/json"),
            (header::CACHE_CONTROL, "no-store"),
        ],
        format!("{body}\n"),
    )
        .into_response()
}

/// The request's Basic credentials must be an admin or stats login; `admin:admin` counts
/// only from a loopback address.
fn authorized(admin: &Admin, req: &Request) -> bool {
    let given = req
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Basic "))
        .and_then(|b| {
            base64::engine::general_purpose::STANDARD
                .decode(b.trim())
                .ok()
        })
        .and_then(|raw| String::from_utf8(raw).ok());
    let loopback = req
        .extensions()
        .get::<ClientAddr>()
        .is_some_and(|a| a.0.ip().is_loopback());
    given
        .as_deref()
        .and_then(|g| g.split_once(':'))
        .is_some_and(|(user, password)| {
            let default = user == "admin" && password == "admin";
            admin
                .credentials()
                .iter()
                .any(|c| c.user == user && c.password == password)
                && (!default || loopback)
        })
}

/// 401 with the Basic challenge.
fn refused() -> Response {
    (
        StatusCode::UNAUTHORIZED,
        [
            (header::WWW_AUTHENTICATE, "Basic realm=\"Sluice status\""),
            (header::CONTENT_TYPE, "text/plain"),
        ],
        "the status page needs an admin or stats login (admin-admin_credentials, admin-stats_credentials)\n",
    )
        .into_response()
}

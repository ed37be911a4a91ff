//! The HTTP port (`admin-restapi_port`, ProxySQL's REST API port): `GET /metrics` (Prometheus
//! text), `GET /healthz` (the process answers) and `GET /readyz` (200 when Sluice can take
//! clients, 503 with the reason when it cannot), `GET /status` (the status page, behind the
//! admin credentials: see `status`), on the shared HTTP server.

use axum::Router;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use sluice_admin::Admin;
use std::sync::Arc;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

fn text(status: StatusCode, content_type: &'static str, body: String) -> Response {
    (status, [(header::CONTENT_TYPE, content_type)], body).into_response()
}

async fn metrics(State(admin): State<Arc<Admin>>) -> Response {
    text(
        StatusCode::OK,
        "text/plain; version=0.0.4; charset=utf-8",
        admin.prometheus_metrics(),
    )
}

async fn healthz() -> Response {
    text(StatusCode::OK, "text/plain", "ok\n".into())
}

async fn readyz(State(admin): State<Arc<Admin>>) -> Response {
    match admin.not_ready() {
        // Ready; fleet notes (e.g. the configuration store is unreachable) follow as detail.
        None => {
            let mut body = "ready\n".to_string();
            for note in admin.cluster_board().notes() {
                body.push_str(&format!("note: {note}\n"));
            }
            text(StatusCode::OK, "text/plain", body)
        }
        Some(why) => text(
            StatusCode::SERVICE_UNAVAILABLE,
            "text/plain",
            format!("not ready: {why}\n"),
        ),
    }
}

/// `GET|HEAD /throttler/check?app=NAME`, freno's and Vitess's check: 200 (go on) or 429 (back
/// off), with the signal and threshold as JSON, so gh-ost's `--throttle-http` and batch jobs
/// ask Sluice before they write.
async fn throttler_check(
    State(admin): State<Arc<Admin>>,
    axum::extract::RawQuery(query): axum::extract::RawQuery,
) -> Response {
    let app = query
        .as_deref()
        .and_then(|q| form_urlencoded::parse(q.as_bytes()).find(|(k, _)| k == "app"))
        .map(|(_, v)| v.into_owned())
        .unwrap_or_default();
    let a = admin.throttler_check(&app);
    let status = StatusCode::from_u16(a.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let body = serde_json::json!({
        "StatusCode": a.status,
        "Value": a.value,
        "Threshold": a.threshold,
        "Message": a.message,
        "App": app,
    });
    text(status, "application/json", format!("{body}\n"))
}

async fn not_found() -> Response {
    text(StatusCode::NOT_FOUND, "text/plain", "not found\n".into())
}

/// The probes' router (GET and HEAD; other methods get 405).
pub fn router(admin: Arc<Admin>) -> Router {
    Router::new()
        .route("/metrics", get(metrics))
        .route("/healthz", get(healthz))
        .route("/readyz", get(readyz))
        .route("/throttler/check", get(throttler_check))
        .route("/status", get(crate::status::page))
        .route("/status.json", get(crate::status::json))
        .fallback(not_found)
        .with_state(admin)
}

/// Serves the metrics and probes on `listeners` until `shutdown` is cancelled.
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
    crate::http::serve(
        listeners,
        ctl,
        None,
        router(admin),
        crate::http::HttpLimits::default(),
    )
    .await;
}

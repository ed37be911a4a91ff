//! The MCP port: started, moved or stopped whenever `LOAD MCP VARIABLES TO RUNTIME` changes
//! `mcp-enabled`, `mcp-port`, `mcp-interface` or `mcp-use_ssl`; HTTPS with the MySQL
//! frontend's certificate (the generated pair in the datadir by default); plaintext only on a
//! loopback interface.

use crate::auth::Endpoint;
use crate::catalog::DdlWatcher;
use crate::gate::Gate;
use crate::handler::Handler;
use crate::service::McpService;
use axum::Router;
use axum::body::Body;
use axum::extract::State;
use axum::http::Request;
use rmcp::transport::streamable_http_server::session::never::NeverSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use sluice_core::config::McpVariables;
use sluice_core::login_throttle::{LoginGate, LoginThrottle};
use std::sync::Arc;
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tracing::{debug, error, info};

/// Why the MCP endpoint could not start on its port (it tries again every second).
#[derive(Debug, thiserror::Error)]
enum StartError {
    /// Plain HTTP on an interface other than loopback.
    #[error(
        "mcp-use_ssl=false is refused on {0} (not loopback): bearer tokens would cross the network in clear; set mcp-use_ssl=true or mcp-interface=127.0.0.1"
    )]
    ClearOffLoopback(String),
    /// The HTTPS certificate or key cannot be loaded.
    #[error("HTTPS: {0}")]
    Tls(#[source] sluice_net::Error),
    /// The port cannot be bound.
    #[error(transparent)]
    Bind(sluice_net::Error),
}

/// What decides how the port listens.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Listen {
    interface: String,
    port: u16,
    tls: bool,
    allowed_hosts: String,
    allowed_origins: String,
}

impl Listen {
    fn of(v: &McpVariables) -> Option<Listen> {
        v.enabled.then(|| Listen {
            interface: v.interface.clone(),
            port: v.port,
            tls: v.use_ssl,
            allowed_hosts: v.allowed_hosts.clone(),
            allowed_origins: v.allowed_origins.clone(),
        })
    }

    fn loopback(&self) -> bool {
        let h = self.interface.trim_start_matches('[').trim_end_matches(']');
        h == "localhost"
            || h.parse::<std::net::IpAddr>()
                .is_ok_and(|ip| ip.is_loopback())
    }

    fn address(&self) -> String {
        if self.interface.contains(':') && !self.interface.starts_with('[') {
            format!("[{}]:{}", self.interface, self.port)
        } else {
            format!("{}:{}", self.interface, self.port)
        }
    }

    fn url(&self) -> String {
        format!(
            "{}://{}",
            if self.tls { "https" } else { "http" },
            self.address()
        )
    }
}

/// The MCP port's supervisor: call [`McpServer::reconfigure`] after every runtime change.
pub struct McpServer {
    svc: Arc<McpService>,
    changed: Notify,
    logins: LoginGate,
    watchers: sluice_core::PerProtocol<Arc<DdlWatcher>>,
    ddl: std::sync::Mutex<Option<tokio::sync::mpsc::Receiver<crate::catalog::DdlEvent>>>,
}

impl McpServer {
    /// A supervisor for `svc` (TLS material is looked up in its datadir).
    pub fn new(svc: Arc<McpService>) -> Arc<McpServer> {
        let logins = LoginGate::new(
            Arc::new(LoginThrottle::new()),
            svc.config.clone(),
            sluice_core::Protocol::Mysql,
        );
        let (mysql, pgsql, ddl) = DdlWatcher::pair();
        Arc::new(McpServer {
            svc,
            changed: Notify::new(),
            logins,
            watchers: sluice_core::PerProtocol::new(mysql, pgsql),
            ddl: std::sync::Mutex::new(Some(ddl)),
        })
    }

    /// The statement hooks of the MySQL and PostgreSQL frontends that keep the discovery
    /// catalog fresh (see [`DdlWatcher`]); they never change what a statement does.
    pub fn ddl_watchers(&self) -> sluice_core::PerProtocol<Arc<DdlWatcher>> {
        self.watchers.clone()
    }

    /// The service behind the port.
    pub fn service(&self) -> &Arc<McpService> {
        &self.svc
    }

    /// The runtime changed: the port follows the `mcp-*` variables.
    pub fn reconfigure(&self) {
        self.changed.notify_one();
    }

    /// Keeps the port as the variables say until `shutdown`.
    pub async fn run(self: Arc<Self>, shutdown: CancellationToken, tasks: TaskTracker) {
        let ddl = self.ddl.lock().unwrap_or_else(|p| p.into_inner()).take();
        if let Some(rx) = ddl {
            tasks.spawn(crate::catalog::refresh(
                self.svc.clone(),
                rx,
                shutdown.clone(),
            ));
        }
        let mut current: Option<(Listen, CancellationToken)> = None;
        // A port that could not be bound is tried again every second (e.g. while the process
        // this one took over from still holds it); the first failure is logged.
        let mut failing = false;
        loop {
            let wanted = Listen::of(&self.svc.config.load().mcp.variables);
            if current.as_ref().map(|c| &c.0) != wanted.as_ref() {
                if let Some((old, stop)) = current.take() {
                    stop.cancel();
                    info!("MCP endpoint on {} stopped", old.url());
                }
                if let Some(listen) = wanted {
                    let stop = shutdown.child_token();
                    match self.start(&listen, stop.clone(), tasks.clone()).await {
                        Ok(()) => {
                            current = Some((listen, stop));
                            failing = false;
                        }
                        Err(why) if !failing => {
                            error!("MCP endpoint not started: {why}; trying again every second");
                            failing = true;
                        }
                        Err(why) => debug!("MCP endpoint still not started: {why}"),
                    }
                } else {
                    failing = false;
                }
            }
            tokio::select! {
                _ = self.changed.notified() => {}
                _ = tokio::time::sleep(std::time::Duration::from_secs(1)), if failing => {}
                _ = shutdown.cancelled() => return,
            }
        }
    }

    async fn start(
        &self,
        listen: &Listen,
        stop: CancellationToken,
        tasks: TaskTracker,
    ) -> Result<(), StartError> {
        if !listen.tls && !listen.loopback() {
            return Err(StartError::ClearOffLoopback(listen.interface.clone()));
        }
        let tls = if listen.tls {
            let rt = self.svc.config.load();
            let acceptor = sluice_net::tls::acceptor(
                "mysql",
                &rt.mysql.variables.frontend_tls(),
                self.svc.datadir.as_deref(),
                None,
            )
            .map_err(StartError::Tls)?;
            Some(Arc::new(acceptor))
        } else {
            None
        };
        let listeners = sluice_net::bind_all(&listen.address(), "MCP (mcp-port)")
            .await
            .map_err(StartError::Bind)?;
        let router = self.router(listen, stop.clone());
        let ctl = sluice_net::AcceptControl {
            name: "MCP (mcp-port)",
            shutdown: stop,
            paused: None,
            tasks: tasks.clone(),
            workers: None,
        };
        let v = self.svc.config.load().mcp.variables.clone();
        let limits = crate::http::HttpLimits {
            head_timeout: std::time::Duration::from_millis(v.request_timeout_ms),
            ..crate::http::HttpLimits::default()
        };
        tasks.spawn(crate::http::serve(listeners, ctl, tls, router, limits));
        info!(
            "MCP endpoint listening on {} (/mcp/query, /mcp/stats, /mcp/config)",
            listen.url()
        );
        Ok(())
    }

    fn transport(
        &self,
        listen: &Listen,
        endpoint: Endpoint,
        stop: &CancellationToken,
    ) -> StreamableHttpService<Handler, NeverSessionManager> {
        let mut hosts: Vec<String> = vec!["localhost".into(), "127.0.0.1".into(), "::1".into()];
        hosts.push(listen.interface.clone());
        hosts.extend(
            listen
                .allowed_hosts
                .split(',')
                .map(str::trim)
                .filter(|h| !h.is_empty())
                .map(str::to_string),
        );
        // Pages served from this machine may call it; any other origin must be listed.
        let mut origins: Vec<String> = [
            "http://localhost:*",
            "https://localhost:*",
            "http://127.0.0.1:*",
            "https://127.0.0.1:*",
            "http://[::1]:*",
            "https://[::1]:*",
        ]
        .map(String::from)
        .to_vec();
        origins.extend(
            listen
                .allowed_origins
                .split(',')
                .map(str::trim)
                .filter(|o| !o.is_empty())
                .map(str::to_string),
        );
        let config = StreamableHttpServerConfig::default()
            .with_legacy_session_mode(false)
            .with_json_response(true)
            .with_sse_keep_alive(None)
            .with_allowed_hosts(hosts)
            .with_allowed_origins(origins)
            .enforce_origin_validation()
            .with_cancellation_token(stop.clone());
        let svc = self.svc.clone();
        StreamableHttpService::new(
            move || {
                Ok(Handler {
                    svc: svc.clone(),
                    endpoint,
                })
            },
            Arc::new(NeverSessionManager::default()),
            config,
        )
    }

    fn router(&self, listen: &Listen, stop: CancellationToken) -> Router {
        let gate = Arc::new(Gate {
            svc: self.svc.clone(),
            logins: self.logins.clone(),
            query: self.transport(listen, Endpoint::Query, &stop),
            stats: self.transport(listen, Endpoint::Stats, &stop),
            config: self.transport(listen, Endpoint::Config, &stop),
            rag: self.transport(listen, Endpoint::Rag, &stop),
        });
        async fn mcp(
            State(gate): State<Arc<Gate>>,
            req: Request<Body>,
        ) -> axum::response::Response {
            gate.answer(req).await
        }
        Router::new()
            .route("/mcp/{*rest}", axum::routing::any(mcp))
            .fallback(|| async {
                (
                    axum::http::StatusCode::NOT_FOUND,
                    "not found: the MCP endpoints are /mcp/query, /mcp/stats, /mcp/config and /mcp/rag\n",
                )
            })
            .with_state(gate)
    }
}

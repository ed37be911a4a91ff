//! The admin port over the PostgreSQL protocol (pgwire): psql reaches the same admin store as
//! the MySQL-protocol admin port, with results as text columns and PgBouncer's `SHOW DATABASES`.

use async_trait::async_trait;
use futures::stream;
use pgwire::api::auth::cleartext::CleartextPasswordAuthStartupHandler;
use pgwire::api::auth::{
    AuthSource, DefaultServerParameterProvider, LoginInfo, Password, StartupHandler,
};
use pgwire::api::query::SimpleQueryHandler;
use pgwire::api::results::{DataRowEncoder, FieldFormat, FieldInfo, QueryResponse, Response, Tag};
use pgwire::api::{ClientInfo, PgWireServerHandlers, Type};
use pgwire::error::{ErrorInfo, PgWireError, PgWireResult};
use sluice_core::admin::{AdminError, AdminExecutor, AdminReply, AdminRole};
use sluice_core::login_throttle::Admission;
use sluice_core::query::lexer::{Syntax, split_statements};
use std::sync::Arc;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tracing::debug;

/// What the PostgreSQL admin listener needs.
pub struct PgAdmin {
    /// Runs the statements.
    pub executor: Arc<dyn AdminExecutor>,
    /// Cancelled when Sluice stops.
    pub shutdown: CancellationToken,
    /// Admin session tasks.
    pub tasks: TaskTracker,
    /// Failed logins per client address, shared with the PostgreSQL data port
    /// ([`PgFrontend::login_gate`](crate::PgFrontend::login_gate)); `None`: not counted.
    pub login: Option<sluice_core::login_throttle::LoginGate>,
}

/// Checks admin logins against `admin-admin_credentials` / `admin-stats_credentials`; the
/// default `admin:admin` only from loopback. Failures count towards the client's throttling.
struct AdminAuth(
    Arc<dyn AdminExecutor>,
    Option<sluice_core::login_throttle::LoginGate>,
);

/// Equal contents, in time independent of where they differ.
fn same_secret(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

impl std::fmt::Debug for AdminAuth {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("AdminAuth")
    }
}

#[async_trait]
impl AuthSource for AdminAuth {
    async fn get_password(&self, login: &LoginInfo) -> PgWireResult<Password> {
        let user = login.user().unwrap_or_default();
        let loopback = login
            .host()
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback());
        let cred = self.0.credentials().into_iter().find(|c| {
            c.user == user
                && (loopback || (c.user.as_str(), c.password.as_str()) != ("admin", "admin"))
        });
        match cred {
            Some(c) => Ok(Password::new(None, c.password.into_bytes())),
            None => Err(auth_failed(user)),
        }
    }

    async fn verify_password(
        &self,
        login: &LoginInfo,
        presented: &[u8],
    ) -> PgWireResult<Option<()>> {
        let user = login.user().unwrap_or_default();
        let ip = login.host().parse::<std::net::IpAddr>().ok();
        let ok = match self.get_password(login).await {
            Ok(expected) => same_secret(expected.password(), presented),
            Err(_) => false,
        };
        if let (Some(gate), Some(ip)) = (&self.1, ip) {
            if ok {
                gate.succeeded(ip);
            } else {
                let why = format!("password authentication failed for user \"{user}\"");
                gate.failed(ip, "PostgreSQL admin", &why);
            }
        }
        if ok { Ok(None) } else { Err(auth_failed(user)) }
    }
}

fn auth_failed(user: &str) -> PgWireError {
    PgWireError::UserError(Box::new(ErrorInfo::new(
        "FATAL".into(),
        "28P01".into(),
        format!("password authentication failed for user \"{user}\""),
    )))
}

/// Runs admin statements for psql.
struct AdminQuery(Arc<dyn AdminExecutor>);

/// The admin error with the SQLSTATE PostgreSQL gives the same failure.
fn to_pg_error(e: AdminError) -> PgWireError {
    let code = match e.code {
        1045 => "42501",
        1064 => "42601",
        _ => "XX000",
    };
    PgWireError::UserError(Box::new(ErrorInfo::new(
        "ERROR".into(),
        code.into(),
        e.message,
    )))
}

/// The type a `SHOW` result's column is sent as: `int8` when every value is a whole number (as
/// PgBouncer's console types its counters), else `text`.
fn column_type(sql: &str, rows: &[Vec<Option<String>>], i: usize) -> Type {
    let is_show = sql
        .trim_start()
        .get(..4)
        .is_some_and(|w| w.eq_ignore_ascii_case("SHOW"));
    let numeric = !rows.is_empty()
        && rows.iter().all(|r| {
            r.get(i)
                .and_then(|c| c.as_deref())
                .is_some_and(|v| v.parse::<i64>().is_ok())
        });
    if is_show && numeric {
        Type::INT8
    } else {
        Type::TEXT
    }
}

/// PgBouncer's `SHOW DATABASES` on this port (the MySQL admin port keeps ProxySQL's, which lists
/// the admin schemas).
fn pgbouncer_dialect(stmt: &str) -> &str {
    let words: Vec<&str> = stmt
        .trim()
        .trim_end_matches(';')
        .split_whitespace()
        .collect();
    match words.as_slice() {
        [show, dbs]
            if show.eq_ignore_ascii_case("SHOW") && dbs.eq_ignore_ascii_case("DATABASES") =>
        {
            "SHOW PGBOUNCER DATABASES"
        }
        _ => stmt,
    }
}

fn reply_to_response(sql: &str, reply: AdminReply) -> PgWireResult<Response> {
    match reply {
        AdminReply::Rows(r) => {
            let fields: Vec<FieldInfo> = r
                .columns
                .iter()
                .enumerate()
                .map(|(i, c)| {
                    let ty = column_type(sql, &r.rows, i);
                    FieldInfo::new(c.clone(), None, None, ty, FieldFormat::Text)
                })
                .collect();
            let schema = Arc::new(fields);
            let mut rows = Vec::with_capacity(r.rows.len());
            for row in r.rows {
                let mut enc = DataRowEncoder::new(schema.clone());
                for cell in row {
                    enc.encode_field(&cell)?;
                }
                rows.push(Ok(enc.take_row()));
            }
            Ok(Response::Query(QueryResponse::new(
                schema,
                stream::iter(rows),
            )))
        }
        AdminReply::Done { affected, .. } => {
            let verb = sql
                .split_whitespace()
                .next()
                .unwrap_or("OK")
                .to_ascii_uppercase();
            let tag = match verb.as_str() {
                "INSERT" => Tag::new("INSERT").with_oid(0).with_rows(affected as usize),
                "UPDATE" | "DELETE" | "REPLACE" => Tag::new(&verb).with_rows(affected as usize),
                other => Tag::new(other),
            };
            Ok(Response::Execution(tag))
        }
    }
}

#[async_trait]
impl SimpleQueryHandler for AdminQuery {
    async fn do_query<C>(&self, client: &mut C, query: &str) -> PgWireResult<Vec<Response>>
    where
        C: ClientInfo + Unpin + Send + Sync,
    {
        let user = client.metadata().get("user").cloned().unwrap_or_default();
        let role = self
            .0
            .credentials()
            .into_iter()
            .find(|c| c.user == user)
            .map_or(AdminRole::Stats, |c| c.role);
        let mut out = Vec::new();
        for stmt in split_statements(query, Syntax::Pgsql) {
            let stmt = pgbouncer_dialect(stmt);
            let reply = self.0.execute(role, stmt).await.map_err(to_pg_error)?;
            out.push(reply_to_response(stmt, reply)?);
        }
        if out.is_empty() {
            out.push(Response::EmptyQuery);
        }
        Ok(out)
    }
}

struct Handlers {
    startup: Arc<CleartextPasswordAuthStartupHandler<AdminAuth, DefaultServerParameterProvider>>,
    query: Arc<AdminQuery>,
}

impl PgWireServerHandlers for Handlers {
    fn simple_query_handler(&self) -> Arc<impl SimpleQueryHandler> {
        self.query.clone()
    }

    fn startup_handler(&self) -> Arc<impl StartupHandler> {
        self.startup.clone()
    }
}

/// Accepts psql clients on `listeners` until shutdown.
pub async fn serve_admin(admin: Arc<PgAdmin>, listeners: Vec<TcpListener>) {
    let mut params = DefaultServerParameterProvider::default();
    params.server_version = "15.0 (Sluice admin)".into();
    let handlers = Arc::new(Handlers {
        startup: Arc::new(CleartextPasswordAuthStartupHandler::new(
            AdminAuth(admin.executor.clone(), admin.login.clone()),
            params,
        )),
        query: Arc::new(AdminQuery(admin.executor.clone())),
    });
    let ctl = sluice_net::AcceptControl {
        name: "PostgreSQL admin",
        shutdown: admin.shutdown.clone(),
        paused: None,
        tasks: admin.tasks.clone(),
        workers: None,
    };
    sluice_net::serve(listeners, ctl, move |mut tcp, peer, _| {
        let h = handlers.clone();
        let gate = admin.login.clone();
        async move {
            match gate.map(|g| g.admit(peer.ip())) {
                None | Some(Admission::Now) => {}
                Some(Admission::After(wait)) => tokio::time::sleep(wait).await,
                Some(Admission::Refused) => {
                    let msg = format!("too many failed logins from {}; retry later", peer.ip());
                    let refusal = sluice_pgsql_proto::frame::error_response("FATAL", "28000", &msg);
                    let _ = tokio::io::AsyncWriteExt::write_all(&mut tcp, &refusal).await;
                    return;
                }
            }
            if let Err(e) = pgwire::tokio::process_socket(tcp, None, h).await {
                debug!(client = %peer, "pgsql admin session ended: {e}");
            }
        }
    })
    .await;
}

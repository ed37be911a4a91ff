//! The listening ports: bound (or taken over from the running process) before anything serves,
//! so a taken port fails the start; started with their accept loops; and lent to a successor.

use crate::Error;
use crate::takeover::Inherited;
use sluice_admin::Admin;
use sluice_core::config::Config;
use sluice_mysql::MysqlFrontend;
use sluice_mysql::admin::{MysqlAdmin, serve_admin};
use sluice_pgsql::PgFrontend;
use std::os::fd::{AsFd, OwnedFd};
use std::sync::Arc;
use tokio::net::TcpListener;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tracing::info;

/// A port's listeners, with the names they are handed over under (`mysql 127.0.0.1:6033`).
pub(crate) type Named = Vec<(String, TcpListener)>;

/// Every port Sluice listens on at start (the MCP port follows its variables on its own).
pub(crate) struct Listeners {
    pub mysql: Named,
    pub mysql_admin: Named,
    pub pgsql: Named,
    pub pgsql_admin: Named,
    /// `admin-restapi_port` when `admin-restapi_enabled` is on, `admin-web_port` when
    /// `admin-web_enabled` is.
    pub http: Named,
}

impl Listeners {
    /// Binds every configured address, or takes it from `inherited` (a takeover).
    pub(crate) async fn bind(
        cfg: &Config,
        mut inherited: Option<&mut Inherited>,
    ) -> Result<Listeners, Error> {
        let v = &cfg.admin_variables;
        let on_interface = |port: u16| {
            if v.restapi_interface.contains(':') && !v.restapi_interface.starts_with('[') {
                format!("[{}]:{}", v.restapi_interface, port)
            } else {
                format!("{}:{}", v.restapi_interface, port)
            }
        };
        let mut http = Vec::new();
        if v.restapi_enabled {
            http.push(on_interface(v.restapi_port));
        }
        if v.web_enabled && !(v.restapi_enabled && v.web_port == v.restapi_port) {
            http.push(on_interface(v.web_port));
        }
        let http = http.join(";");
        let mut bind = async |role: &str, list: &str, what: &str| {
            bind_role(role, list, what, inherited.as_deref_mut()).await
        };
        Ok(Listeners {
            mysql: bind(
                "mysql",
                &cfg.mysql_variables.interfaces,
                "MySQL frontend (mysql-interfaces)",
            )
            .await?,
            mysql_admin: bind(
                "mysql_admin",
                &v.mysql_ifaces,
                "MySQL admin (admin-mysql_ifaces)",
            )
            .await?,
            pgsql: bind(
                "pgsql",
                &cfg.pgsql_variables.interfaces,
                "PostgreSQL frontend (pgsql-interfaces)",
            )
            .await?,
            pgsql_admin: bind(
                "pgsql_admin",
                &v.pgsql_ifaces,
                "PostgreSQL admin (admin-pgsql_ifaces)",
            )
            .await?,
            http: bind(
                "http",
                &http,
                "HTTP metrics, probes and status page (admin-restapi_port, admin-web_port)",
            )
            .await?,
        })
    }

    /// Duplicates of every listening socket with its name, for a successor's takeover.
    pub(crate) fn lend(&self) -> Result<Vec<(String, OwnedFd)>, Error> {
        [
            &self.mysql,
            &self.mysql_admin,
            &self.pgsql,
            &self.pgsql_admin,
            &self.http,
        ]
        .into_iter()
        .flatten()
        .map(|(name, l)| {
            let fd = l
                .as_fd()
                .try_clone_to_owned()
                .map_err(|source| Error::Lend {
                    name: name.clone(),
                    source,
                })?;
            Ok((name.clone(), fd))
        })
        .collect()
    }

    /// Starts accepting on every port; each accept loop ends when `accepting` is cancelled (the
    /// data ports: when their frontend stops accepting).
    pub(crate) fn serve(
        self,
        fe: &Arc<MysqlFrontend>,
        pg_fe: &Arc<PgFrontend>,
        admin: &Arc<Admin>,
        (accepting, tasks): (&CancellationToken, &TaskTracker),
    ) -> Vec<JoinHandle<()>> {
        let plain = |named: Named| named.into_iter().map(|(_, l)| l).collect::<Vec<_>>();
        // Each admin port shares its protocol's failed-login table with the data port.
        let my_admin = Arc::new(MysqlAdmin {
            executor: admin.clone(),
            shutdown: accepting.clone(),
            tasks: tasks.clone(),
            login: Some(fe.login_gate().clone()),
        });
        let pg_admin = Arc::new(sluice_pgsql::PgAdmin {
            executor: admin.clone(),
            shutdown: accepting.clone(),
            tasks: tasks.clone(),
            login: Some(pg_fe.login_gate().clone()),
        });
        let mut servers = vec![
            tokio::spawn(sluice_mysql::serve(fe.clone(), plain(self.mysql)).into_future()),
            tokio::spawn(serve_admin(my_admin, plain(self.mysql_admin))),
            tokio::spawn(sluice_pgsql::serve(pg_fe.clone(), plain(self.pgsql)).into_future()),
            tokio::spawn(sluice_pgsql::serve_admin(pg_admin, plain(self.pgsql_admin))),
        ];
        if !self.http.is_empty() {
            servers.push(tokio::spawn(sluice_mcp::probes::serve_http(
                admin.clone(),
                plain(self.http),
                accepting.clone(),
                tasks.clone(),
            )));
        }
        servers
    }
}

/// The listeners of one port: every `;`-separated address of `list`, taken from `inherited`
/// when the running process handed it over, else bound.
async fn bind_role(
    role: &str,
    list: &str,
    what: &str,
    mut inherited: Option<&mut Inherited>,
) -> Result<Named, Error> {
    let mut out = Vec::new();
    for addr in list.split(';').map(str::trim).filter(|s| !s.is_empty()) {
        let name = format!("{role} {addr}");
        let taken = inherited.as_deref_mut().and_then(|i| i.take(&name));
        let listener = match taken {
            Some(std) => {
                let l = std
                    .set_nonblocking(true)
                    .and_then(|()| TcpListener::from_std(std))
                    .map_err(|source| Error::Inherited {
                        what: what.to_string(),
                        addr: addr.to_string(),
                        source,
                    })?;
                info!("{what} listening on {addr} (taken over from the running process)");
                l
            }
            None => {
                let l =
                    sluice_net::listen(addr)
                        .await
                        .map_err(|source| sluice_net::Error::Listen {
                            addr: addr.to_string(),
                            what: what.to_string(),
                            source,
                        })?;
                info!("{what} listening on {addr}");
                l
            }
        };
        out.push((name, listener));
    }
    Ok(out)
}

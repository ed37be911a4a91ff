//! What monitoring reads from the admin: the Prometheus text (`/metrics`, `SHOW PROMETHEUS
//! METRICS`) and readiness (`/readyz`).

use crate::command::{Command, Direction, Module};
use crate::{Admin, stats};
use sluice_core::admin::{AdminError, AdminReply};
use sluice_core::metrics::{Exposition, write_process};

impl Admin {
    /// The Prometheus text exposition of the whole process: both protocol sides (clients,
    /// statements, pools, servers, query processor, monitor) and the process itself.
    pub fn prometheus_metrics(&self) -> String {
        let mut out = Exposition::new();
        write_process(
            &mut out,
            self.started.elapsed().as_secs(),
            env!("CARGO_PKG_VERSION"),
        );
        if let Ok(live) = self.live() {
            live.write_metrics(&mut out);
        }
        out.finish()
    }

    /// Every statement's latency on protocol `p` so far (empty while starting).
    pub fn statement_latency(
        &self,
        p: sluice_core::Protocol,
    ) -> sluice_core::metrics::HistogramSnapshot {
        self.live()
            .map(|live| live.statement_latency(p))
            .unwrap_or_default()
    }

    /// `GET /throttler/check?app=NAME`: the workload guards' answer for `app`.
    pub fn throttler_check(&self, app: &str) -> sluice_core::admission::ThrottleAnswer {
        match self.live() {
            Ok(live) => live.throttler_check(app),
            Err(_) => sluice_core::admission::ThrottleAnswer {
                status: 503,
                value: 0.0,
                threshold: 0.0,
                message: "starting".into(),
            },
        }
    }

    /// Why Sluice should not get new clients now (shutting down, paused, a writer hostgroup
    /// without an ONLINE server), or `None` when it is ready.
    pub fn not_ready(&self) -> Option<String> {
        match self.live() {
            Ok(live) => live.not_ready(),
            Err(_) => Some("starting".into()),
        }
    }

    /// The monitoring commands: `SHOW PROMETHEUS METRICS`, `SHOW MYSQL|PGSQL STATUS`, and
    /// PgBouncer's console.
    pub(crate) async fn monitoring_command(&self, c: Command) -> Result<AdminReply, AdminError> {
        match c {
            Command::ShowPrometheusMetrics => Ok(AdminReply::Rows(sluice_core::admin::AdminRows {
                columns: vec!["metrics".into()],
                rows: vec![vec![Some(self.prometheus_metrics())]],
            })),
            Command::ShowStatus(proto) => {
                stats::refresh(&self.store, self.live()?.as_ref(), &self.running_config()).await?;
                let sql = format!(
                    "SELECT Variable_Name AS Variable_name, Variable_Value AS Value FROM stats.stats_{proto}_global ORDER BY Variable_Name"
                );
                Ok(AdminReply::Rows(self.store.query(&sql).await?))
            }
            Command::PgBouncer(c) => {
                let rt = self.runtime_handle()?.load();
                crate::pgbouncer::answer(c, self.live()?.as_ref(), &rt)
            }
            Command::PgBouncerReload => {
                for m in [
                    Module::PgsqlUsers,
                    Module::PgsqlServers,
                    Module::PgsqlVariables,
                    Module::PgsqlQueryRules,
                ] {
                    self.move_module(m, Direction::MemoryToRuntime).await?;
                }
                Ok(AdminReply::Done {
                    affected: 0,
                    message: None,
                })
            }
            Command::Unsupported(msg) => Err(AdminError::new(msg)),
            other => Err(AdminError::new(format!(
                "not a monitoring command: {other:?}"
            ))),
        }
    }
}

//! What monitoring reads from the admin: the Prometheus text (`/metrics`, `SHOW PROMETHEUS
//! METRICS`) and readiness (`/readyz`).

use crate::Admin;
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

    /// Why Sluice should not get new clients now (shutting down, paused, a writer hostgroup
    /// without an ONLINE server), or `None` when it is ready.
    pub fn not_ready(&self) -> Option<String> {
        match self.live() {
            Ok(live) => live.not_ready(),
            Err(_) => Some("starting".into()),
        }
    }
}

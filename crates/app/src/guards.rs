//! Runs the workload guards: every [`TICK`] each guard reads its signal (the monitors'
//! replication lag and load probes, a class's p99) and admission control applies what follows.

use sluice_core::ConfigHandle;
use sluice_core::admission::LoadSignal;
use sluice_core::admission::{Admission, GuardSignals};
use sluice_core::{PerProtocol, Protocol};
use sluice_monitor::Monitor;
use std::sync::Arc;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// How often guards read their signals: well under the monitor's fastest lag check.
const TICK: Duration = Duration::from_millis(100);

/// The monitors' view of the servers, as guards read it.
struct MonitorSignals {
    config: ConfigHandle,
    /// MySQL, PostgreSQL.
    monitors: PerProtocol<Arc<Monitor>>,
}

impl GuardSignals for MonitorSignals {
    fn replica_lag_s(&self, protocol: Protocol, hostgroup: u32) -> Option<f64> {
        let monitor = &self.monitors[protocol];
        self.config
            .hostgroup_servers(protocol, hostgroup)
            .iter()
            .filter_map(|s| monitor.replication_lag(&s.key))
            .max()
            .map(|lag| lag as f64)
    }

    fn server_load(&self, protocol: Protocol, hostgroup: u32, signal: LoadSignal) -> Option<f64> {
        let monitor = &self.monitors[protocol];
        let servers = self.config.hostgroup_servers(protocol, hostgroup);
        if servers.is_empty() {
            return None;
        }
        let keys: Vec<_> = servers.iter().map(|s| s.key.clone()).collect();
        monitor
            .load_signal(&keys, signal, std::time::Instant::now())
            .map(|v| v as f64)
    }
}

/// Evaluates the guards every [`TICK`] and at every stored configuration, until `shutdown`.
/// While the configuration has no class and no guard the runner has nothing to do and parks
/// until the next configuration is stored.
pub(crate) async fn run(
    admission: Arc<Admission>,
    config: ConfigHandle,
    monitors: PerProtocol<Arc<Monitor>>,
    shutdown: CancellationToken,
) {
    let signals = MonitorSignals {
        config: config.clone(),
        monitors,
    };
    let mut stores = config.stores();
    let mut tick = tokio::time::interval(TICK);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = shutdown.cancelled() => return,
            _ = tick.tick() => {}
            // A LOAD is applied at once, not at the next tick: a guard deactivated stops
            // shedding (and a new one starts) within the store, not 100 ms later.
            changed = stores.changed() => if changed.is_err() { return },
        }
        // Seen before the look: a store after this point wakes the wait below.
        stores.mark_unchanged();
        let rt = config.load();
        if rt.workload_guards.is_empty() && rt.workload_classes.is_empty() {
            drop(rt);
            tokio::select! {
                _ = shutdown.cancelled() => return,
                _ = stores.changed() => {}
            }
            tick.reset();
            continue;
        }
        admission.evaluate_guards(
            &rt.workload_classes,
            &rt.workload_guards,
            &signals,
            std::time::Instant::now(),
        );
    }
}

//! Admission control: statements of a workload class take a slot before they take a backend
//! connection, wait in a bounded queue when every slot is taken, and are refused with a clear
//! error when the queue is full, the wait too long or the class's rate cap reached. Both
//! protocols' sessions ask one [`Admission`]; it follows the runtime's `workload_classes`
//! without a reload hook, by noticing a new snapshot's list.
//!
//! ```
//! use sluice_core::admission::Admission;
//! use sluice_core::config::WorkloadClass;
//! use std::sync::Arc;
//!
//! # #[tokio::main(flavor = "current_thread")] async fn main() {
//! let mut vector = WorkloadClass::new("vector");
//! vector.max_concurrency = 1;
//! vector.max_queue = 0;
//! let classes = Arc::new(vec![vector]);
//! let admission = Admission::default();
//! let gate = admission.gate(&classes, "vector").expect("a configured class");
//! let first = gate.admit().await.expect("a free slot");
//! let refused = gate.admit().await.expect_err("no slot, no queue");
//! assert_eq!(refused.mysql_errno(), 9100);
//! drop(first);
//! assert!(gate.admit().await.is_ok());
//! assert!(admission.gate(&classes, "oltp").is_none(), "unconfigured: unlimited");
//! # }
//! ```

mod board;
pub mod by_priority;
mod gate;
mod guard;
mod refusal;
mod report;
mod statement;

pub use board::{GUARD_COLUMNS, ThrottleAnswer};
pub use gate::{ClassGate, Permit};
pub use guard::{GuardLive, GuardSignals, GuardState, LoadSignal};
pub use refusal::{
    ERR_GUARD_OPEN, ERR_QUEUE_FULL, ERR_QUEUE_TIMEOUT, Refusal, SQLSTATE_REFUSED, ShedReason,
};
pub use report::STATS_COLUMNS;
pub use statement::{governs, never_waits};

use crate::config::WorkloadClass;
use crate::util::lock;
use arc_swap::ArcSwap;
use gate::Limits;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

/// The gates of the classes in one `workload_classes` list.
#[derive(Debug, Default)]
struct Gates {
    /// The list they were built from (compared by pointer with the runtime's).
    source: Arc<Vec<WorkloadClass>>,
    /// By name; a few classes, so a scan beats hashing the name.
    by_name: Vec<(String, Arc<ClassGate>)>,
}

impl Gates {
    fn get(&self, name: &str) -> Option<Arc<ClassGate>> {
        self.by_name
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, g)| g.clone())
    }
}

/// Every class's gate, shared by the MySQL and PostgreSQL sessions.
#[derive(Debug, Default)]
pub struct Admission {
    gates: ArcSwap<Gates>,
    rebuilding: Mutex<()>,
    /// The guards' live state, by guard_id.
    guards: Mutex<HashMap<u32, GuardLive>>,
}

impl Admission {
    /// The gate of class `name` under the runtime's `classes`; `None` when the class has no
    /// row (unlimited and uncounted, as every class is when the table is empty).
    pub fn gate(&self, classes: &Arc<Vec<WorkloadClass>>, name: &str) -> Option<Arc<ClassGate>> {
        if classes.is_empty() {
            return None;
        }
        let gates = self.gates.load();
        if Arc::ptr_eq(&gates.source, classes) {
            return gates.get(name);
        }
        drop(gates);
        self.rebuild(classes).get(name)
    }

    /// Follows a new list: a class that stays keeps its gate (its counters, its waiters and
    /// the slots in use) with the new limits; a removed class's gate lives on only in the
    /// permits still held.
    fn rebuild(&self, classes: &Arc<Vec<WorkloadClass>>) -> Arc<Gates> {
        let _one = lock(&self.rebuilding);
        let old = self.gates.load_full();
        if Arc::ptr_eq(&old.source, classes) {
            return old;
        }
        let mut by_name = Vec::with_capacity(classes.len());
        for c in classes.iter() {
            let limits = Limits::of(c);
            let gate = match old.get(&c.name) {
                Some(g) => {
                    g.reconfigure(limits);
                    g
                }
                None => Arc::new(ClassGate::new(&c.name, limits)),
            };
            by_name.push((c.name.clone(), gate));
        }
        let gates = Arc::new(Gates {
            source: classes.clone(),
            by_name,
        });
        self.gates.store(gates.clone());
        gates
    }

    /// The gates of `classes` (the runtime's), by name, for stats and metrics.
    fn all(&self, classes: &Arc<Vec<WorkloadClass>>) -> Vec<Arc<ClassGate>> {
        let mut gates = self.gates.load_full();
        if !Arc::ptr_eq(&gates.source, classes) {
            gates = self.rebuild(classes);
        }
        let mut all: Vec<_> = gates.by_name.iter().map(|(_, g)| g.clone()).collect();
        all.sort_by(|a, b| a.name().cmp(b.name()));
        all
    }
}

#[cfg(test)]
mod tests;

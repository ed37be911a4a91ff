//! Admission control for the session's statements: a statement takes a slot in its workload
//! class before it takes a backend connection; the slot is held until the statement's reply
//! ends, or, when the statement opened a transaction, until the transaction ends. Inside a
//! transaction nothing waits or is shed.

use super::{Next, Session};
use sluice_core::admission::{Permit, Refusal, governs, never_waits};
use sluice_core::config::DEFAULT_CLASS;
use sluice_core::query::Decision;
use sluice_core::runtime::RuntimeConfig;
use sluice_mysql_proto::packets::err_payload;
use std::time::Duration;
use tracing::info;

impl Session {
    /// Whether the server said the session is inside a transaction.
    pub(super) fn in_server_transaction(&self) -> bool {
        self.pins.in_transaction()
    }

    /// Takes a slot for the statement `sql` (decided as `plan` under the statement's snapshot
    /// `rt`), waiting in its class's queue when needed. `Some(next)`: refused, and the client
    /// has its error.
    ///
    /// With no class configured this is a few loads and compares: the snapshot is the one the
    /// statement was planned with, and the waiting and refusing paths are boxed so they add
    /// nothing to the size of the session's statement future.
    pub(super) async fn admit(
        &mut self,
        rt: &RuntimeConfig,
        plan: Option<&Decision>,
        sql: &str,
        reply_seq: u8,
    ) -> Option<Next> {
        if rt.workload_classes.is_empty() {
            return None;
        }
        let class = plan
            .and_then(|d| d.action.workload_class.as_deref())
            .unwrap_or(DEFAULT_CLASS);
        if !governs(&rt.workload_classes, class)
            || self.admission.is_some()
            || self.in_server_transaction()
            || never_waits(sql)
        {
            // No such class (unlimited); admitted at the transaction's start, or a transaction
            // that began before the class existed (never queued or shed half-way); or COMMIT,
            // SET, ….
            return None;
        }
        let gate = self.fe.admission.gate(&rt.workload_classes, class)?;
        let admitted = match gate.try_admit() {
            Some(permit) => Ok(permit),
            None => {
                // The processlist shows the wait (a lock and an allocation: not on the fast path).
                self.slot.set_waiting(Some(class));
                let admitted = Box::pin(gate.admit()).await;
                self.slot.set_waiting(None);
                admitted
            }
        };
        match admitted {
            Ok(permit) => {
                if let Some(hg) = permit.reroute() {
                    // An open `reroute` guard: the statement goes to its fallback hostgroup.
                    self.route_hostgroup = hg;
                }
                self.admission = Some(permit);
                None
            }
            Err(refusal) => Some(Box::pin(self.refuse(&refusal, reply_seq)).await),
        }
    }

    async fn refuse(&mut self, r: &Refusal, reply_seq: u8) -> Next {
        info!(session = self.id, user = %self.login.user.username, client = %self.io.peer,
            class = %r.class, reason = r.reason.as_str(), "{r}; the statement was refused, the session stays open");
        let msg = r.to_string();
        match self
            .io
            .write(reply_seq, &err_payload(r.mysql_errno(), "HY000", &msg))
            .await
        {
            Ok(()) => Next::Continue,
            Err(_) => Next::Close,
        }
    }

    /// The class's statement time limit, when it is shorter than `timeout`.
    pub(super) fn class_timeout(&self, timeout: Option<Duration>) -> Option<Duration> {
        let class = self.admission.as_ref().and_then(Permit::max_execution);
        match (timeout, class) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// After the statement's reply: its latency since `started` counts for its class (the
    /// slot goes back in `after_command` unless a transaction holds it).
    pub(super) fn statement_done(&self, started: std::time::Instant) {
        if let Some(p) = &self.admission {
            let took = started.elapsed();
            p.observe_us(u64::try_from(took.as_micros()).unwrap_or(u64::MAX));
        }
    }
}

//! Admission control on the PostgreSQL side: the first statement of a transaction takes a slot
//! in its workload class before the session takes a server connection, and keeps it until the
//! transaction ends. A refusal is SQLSTATE 53000 with the numbers in DETAIL and when to retry
//! in HINT; the session stays open.

use crate::sessions::PgSessionEntry;
use sluice_core::admission::{Admission, Permit, Refusal, SQLSTATE_REFUSED};
use sluice_core::config::{DEFAULT_CLASS, WorkloadClass};
use sluice_pgsql_proto::frame::{error_response_with, ready};
use sluice_pgsql_proto::tag::status;
use std::sync::Arc;
use tracing::info;

/// What the query processor said about admission for a transaction's first message.
#[derive(Debug, Clone, Default)]
pub(crate) struct Admit {
    /// The statement's class (`None`: the default class).
    pub class: Option<Arc<str>>,
    /// False for statements that never wait (COMMIT, SET, …), for unprocessed traffic and
    /// when no class is configured.
    pub waits: bool,
}

/// Takes the slot `admit` needs under the runtime's `classes`: `Ok(None)` when the class is
/// unlimited and unconfigured.
pub(crate) async fn take(
    admission: &Admission,
    classes: &Arc<Vec<WorkloadClass>>,
    entry: &PgSessionEntry,
    admit: &Admit,
) -> Result<Option<Permit>, Refusal> {
    if !admit.waits || classes.is_empty() {
        return Ok(None);
    }
    let class = admit.class.as_deref().unwrap_or(DEFAULT_CLASS);
    let Some(gate) = admission.gate(classes, class) else {
        return Ok(None);
    };
    if let Some(permit) = gate.try_admit() {
        return Ok(Some(permit));
    }
    entry.set_waiting(Some(class));
    // Boxed: the wait adds nothing to the size of the session's step future.
    let admitted = Box::pin(gate.admit()).await;
    entry.set_waiting(None);
    admitted.map(Some)
}

/// The client's answer to a refusal: the error, and ReadyForQuery for a simple query (an
/// extended batch gets it at its Sync).
pub(crate) fn refusal_reply(r: &Refusal, user: &str, simple: bool) -> Vec<u8> {
    info!(user, class = %r.class, reason = r.reason.as_str(),
        "pgsql: {r}; the statement was refused, the session stays open");
    let detail = r.detail();
    let hint = r.hint();
    let mut out = error_response_with(
        "ERROR",
        SQLSTATE_REFUSED,
        &r.to_string(),
        &[(b'D', &detail), (b'H', &hint)],
    );
    if simple {
        out.extend(ready(status::IDLE));
    }
    out
}

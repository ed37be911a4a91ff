//! Why a statement was not admitted, in the words both protocols send to the client.

use std::fmt;
use std::sync::Arc;

/// MySQL error of a full queue.
pub const ERR_QUEUE_FULL: u16 = 9100;
/// MySQL error of a wait past `queue_timeout_ms`.
pub const ERR_QUEUE_TIMEOUT: u16 = 9101;
/// MySQL error of a statement shed by a guard.
pub const ERR_GUARD_OPEN: u16 = 9102;
/// PostgreSQL SQLSTATE of a refusal (insufficient_resources).
pub const SQLSTATE_REFUSED: &str = "53000";

/// What stopped the statement.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ShedReason {
    /// Every slot was taken and `max_queue` statements were already waiting.
    QueueFull {
        /// Statements of the class running.
        in_flight: u32,
        /// Statements waiting.
        queued: u32,
        /// The class's `max_queue`.
        max_queue: u32,
    },
    /// The statement waited `queue_timeout_ms` without a slot.
    QueueTimeout {
        /// How long it waited.
        waited_ms: u64,
        /// The class's `max_concurrency`.
        max_concurrency: u32,
    },
    /// A guard of the class is open.
    GuardOpen {
        /// The guard's id.
        guard_id: u32,
        /// Its signal against its threshold, e.g. `replica lag 14 s >= 10 s on hostgroup 30`.
        cause: String,
    },
    /// Under `max_qps`, its turn would come later than `queue_timeout_ms`.
    RateLimited {
        /// The class's `max_qps`.
        max_qps: u32,
        /// How long it would have had to wait.
        wait_ms: u64,
    },
}

impl ShedReason {
    /// The reason's name in `stats_workload_classes` and the `reason` metric label.
    pub fn as_str(&self) -> &'static str {
        match self {
            ShedReason::QueueFull { .. } => "queue_full",
            ShedReason::QueueTimeout { .. } => "queue_timeout",
            ShedReason::RateLimited { .. } => "rate",
            ShedReason::GuardOpen { .. } => "guard",
        }
    }
}

/// A statement admission control refused, with everything the client's error says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    /// The statement's class.
    pub class: Arc<str>,
    /// Why.
    pub reason: ShedReason,
    /// The class's `queue_timeout_ms`.
    pub queue_timeout_ms: u64,
    /// The class's `mysql_errno`, when set.
    pub errno_override: Option<u16>,
    /// When a retry has a fair chance (ms).
    pub retry_after_ms: u64,
}

impl Refusal {
    /// The MySQL error number: the class's own, else 9100 (queue full) or 9101 (waited too
    /// long).
    pub fn mysql_errno(&self) -> u16 {
        self.errno_override.unwrap_or(match self.reason {
            ShedReason::QueueFull { .. } => ERR_QUEUE_FULL,
            ShedReason::QueueTimeout { .. } | ShedReason::RateLimited { .. } => ERR_QUEUE_TIMEOUT,
            ShedReason::GuardOpen { .. } => ERR_GUARD_OPEN,
        })
    }

    /// The numbers behind the refusal (PostgreSQL's DETAIL).
    pub fn detail(&self) -> String {
        match &self.reason {
            ShedReason::QueueFull {
                in_flight,
                queued,
                max_queue,
            } => format!(
                "workload class '{}': {in_flight} statements in flight, {queued} waiting, max_queue {max_queue}",
                self.class
            ),
            ShedReason::QueueTimeout {
                waited_ms,
                max_concurrency,
            } => format!(
                "workload class '{}': waited {waited_ms} ms for one of {max_concurrency} slots (queue_timeout_ms {})",
                self.class, self.queue_timeout_ms
            ),
            ShedReason::RateLimited { max_qps, wait_ms } => format!(
                "workload class '{}': max_qps {max_qps}, the next turn is {wait_ms} ms away (queue_timeout_ms {})",
                self.class, self.queue_timeout_ms
            ),
            ShedReason::GuardOpen { guard_id, cause } => format!(
                "workload class '{}': workload_guards row {guard_id} is open ({cause})",
                self.class
            ),
        }
    }

    /// PostgreSQL's HINT.
    pub fn hint(&self) -> String {
        format!("retry after {} ms", self.retry_after_ms)
    }
}

impl fmt::Display for Refusal {
    /// `Sluice: workload 'vector' shed: queue full (4 in flight, 8 waiting, max_queue 8)`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Sluice: workload '{}' shed: ", self.class)?;
        match &self.reason {
            ShedReason::QueueFull {
                in_flight,
                queued,
                max_queue,
            } => write!(
                f,
                "queue full ({in_flight} in flight, {queued} waiting, max_queue {max_queue})"
            ),
            ShedReason::QueueTimeout { waited_ms, .. } => write!(
                f,
                "no slot after {waited_ms} ms in the queue (queue_timeout_ms {})",
                self.queue_timeout_ms
            ),
            ShedReason::RateLimited { max_qps, wait_ms } => write!(
                f,
                "max_qps {max_qps} reached, next turn in {wait_ms} ms > queue_timeout_ms {}",
                self.queue_timeout_ms
            ),
            ShedReason::GuardOpen { cause, .. } => f.write_str(cause),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_name_the_class_the_reason_and_the_numbers() {
        let r = Refusal {
            class: Arc::from("vector"),
            reason: ShedReason::QueueFull {
                in_flight: 4,
                queued: 8,
                max_queue: 8,
            },
            queue_timeout_ms: 1000,
            errno_override: None,
            retry_after_ms: 40,
        };
        assert_eq!(
            r.to_string(),
            "Sluice: workload 'vector' shed: queue full (4 in flight, 8 waiting, max_queue 8)"
        );
        assert_eq!(r.mysql_errno(), 9100);
        assert_eq!(r.hint(), "retry after 40 ms");
        let mapped = Refusal {
            errno_override: Some(1040),
            ..r
        };
        assert_eq!(mapped.mysql_errno(), 1040);
    }
}

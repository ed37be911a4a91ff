//! `workload_classes`: the kinds of traffic admission control tells apart (OLTP, vector
//! searches, ingest, batch jobs), each with its own limits. Query rules put a statement in a
//! class (`workload_class` column, or `attributes` JSON); unmatched traffic is class
//! [`DEFAULT_CLASS`], unlimited unless a row configures it.

use super::RowError;
use super::values::Flag;
use serde::{Deserialize, Serialize};

/// The class of statements no rule classified.
pub const DEFAULT_CLASS: &str = "oltp";

/// How much a class matters when backend connections are scarce.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Priority {
    /// Never waits behind another class.
    Critical,
    /// Ordinary application traffic.
    Regular,
    /// Work that may wait (vector searches, reports).
    Low,
    /// Work that may wait longest (ingest, batch jobs).
    Background,
}

impl Priority {
    /// The name as the admin table spells it.
    pub fn as_str(self) -> &'static str {
        match self {
            Priority::Critical => "critical",
            Priority::Regular => "regular",
            Priority::Low => "low",
            Priority::Background => "background",
        }
    }

    /// Reads a priority name (case-insensitive).
    pub fn parse(s: &str) -> Option<Priority> {
        match s.trim().to_ascii_lowercase().as_str() {
            "critical" => Some(Priority::Critical),
            "regular" => Some(Priority::Regular),
            "low" => Some(Priority::Low),
            "background" => Some(Priority::Background),
            _ => None,
        }
    }
}

/// One row of `workload_classes`. Limits are signed here so that a negative value is refused
/// with the column named rather than as a type error.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WorkloadClass {
    /// The class's name, as query rules and `workload=` hints give it.
    pub name: String,
    /// Limits apply when 1; an inactive class is unlimited (its statements are still counted).
    #[serde(default = "yes")]
    pub active: Flag,
    /// `critical`, `regular`, `low` or `background`.
    #[serde(default = "regular")]
    pub priority: String,
    /// Statements (or transactions) of the class in flight at once; 0 = unlimited.
    #[serde(default)]
    pub max_concurrency: i64,
    /// Statements waiting for a slot at once; more are refused (MySQL 9100, PostgreSQL 53000).
    #[serde(default = "max_queue")]
    pub max_queue: i64,
    /// How long a statement waits for a slot before it is refused (9101).
    #[serde(default = "queue_timeout_ms")]
    pub queue_timeout_ms: i64,
    /// A statement of the class running longer is cancelled on the server (0 = no limit;
    /// a rule's `timeout` that is shorter wins).
    #[serde(default)]
    pub max_execution_ms: i64,
    /// Statements admitted per second (NULL = no rate cap); the excess waits as in the queue.
    #[serde(default)]
    pub max_qps: Option<i64>,
    /// The MySQL error number every refusal of this class carries instead of 9100–9102.
    #[serde(default)]
    pub mysql_errno: Option<i64>,
    /// The operator's note.
    #[serde(default)]
    pub comment: String,
}

fn yes() -> Flag {
    Flag(true)
}
fn regular() -> String {
    "regular".into()
}
fn max_queue() -> i64 {
    100
}
fn queue_timeout_ms() -> i64 {
    1000
}

impl WorkloadClass {
    /// A class `name` with the table's defaults: active, regular, unlimited.
    pub fn new(name: &str) -> WorkloadClass {
        WorkloadClass {
            name: name.into(),
            active: yes(),
            priority: regular(),
            max_concurrency: 0,
            max_queue: max_queue(),
            queue_timeout_ms: queue_timeout_ms(),
            max_execution_ms: 0,
            max_qps: None,
            mysql_errno: None,
            comment: String::new(),
        }
    }

    /// The priority (a checked row always has a valid one).
    pub fn priority(&self) -> Priority {
        Priority::parse(&self.priority).unwrap_or(Priority::Regular)
    }

    /// Checks the row; the error names the column.
    pub fn check(&self) -> Result<(), RowError> {
        let name = self.name.trim();
        if name.is_empty() || name.len() > 64 {
            return Err(RowError::new("name", "must be 1 to 64 characters"));
        }
        if !name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
        {
            return Err(RowError::new(
                "name",
                format!("{name:?} may hold only letters, digits, '_' and '-'"),
            ));
        }
        if Priority::parse(&self.priority).is_none() {
            return Err(RowError::new(
                "priority",
                format!(
                    "{:?} is not critical, regular, low or background",
                    self.priority
                ),
            ));
        }
        for (column, v) in [
            ("max_concurrency", self.max_concurrency),
            ("max_queue", self.max_queue),
            ("queue_timeout_ms", self.queue_timeout_ms),
            ("max_execution_ms", self.max_execution_ms),
        ] {
            if !(0..=i64::from(u32::MAX)).contains(&v) {
                return Err(RowError::new(
                    column,
                    format!("{v} is not between 0 and 4294967295"),
                ));
            }
        }
        if let Some(q) = self.max_qps
            && !(1..=1_000_000).contains(&q)
        {
            return Err(RowError::new(
                "max_qps",
                format!("{q} is not between 1 and 1000000"),
            ));
        }
        if let Some(e) = self.mysql_errno
            && !(1000..=65535).contains(&e)
        {
            return Err(RowError::new(
                "mysql_errno",
                format!("{e} is not between 1000 and 65535"),
            ));
        }
        Ok(())
    }
}

/// The class a query rule puts statements in: its `workload_class` column, else
/// `attributes` JSON's `"workload_class"` (how a ProxySQL export carries it).
pub fn rule_class(column: Option<&str>, attributes: &str) -> Option<String> {
    if let Some(c) = column.map(str::trim).filter(|c| !c.is_empty()) {
        return Some(c.to_string());
    }
    if attributes.trim().is_empty() {
        return None;
    }
    let v: serde_json::Value = serde_json::from_str(attributes).ok()?;
    v.get("workload_class")?
        .as_str()
        .map(str::trim)
        .filter(|c| !c.is_empty())
        .map(str::to_string)
}

/// One row of `workload_guards`: a signal watched, and what its level does to the classes it
/// governs. The signal is in seconds (`replica_lag`), milliseconds (`class_p99`, `heartbeat_lag`), statements
/// (`threads_running`), or transactions / WAL bytes (`replica_backlog`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WorkloadGuard {
    /// The guard's id.
    pub guard_id: u32,
    /// Watched and applied when 1.
    #[serde(default = "yes")]
    pub active: Flag,
    /// The classes it governs, comma separated.
    pub classes: String,
    /// `replica_lag` (seconds, the monitor's, the worst server of `hostgroup`), `class_p99`
    /// (milliseconds, `watch_class`'s p99 over the last `window_s` seconds), `threads_running`
    /// (statements running on the busiest server of `hostgroup`) or `replica_backlog`
    /// (transactions received but not applied on MariaDB, WAL bytes received but not replayed
    /// on PostgreSQL: the worst server of `hostgroup`) or `heartbeat_lag` (milliseconds: the
    /// age of the heartbeat Sluice writes on the writer of `hostgroup`'s replication
    /// hostgroups, on the worst server of `hostgroup`), or `operator` (the operator's own
    /// hand: reads 1 while the row is active; `/throttler/check` answers 417 to its apps).
    pub signal: String,
    /// `mysql` or `pgsql`: whose hostgroup a server signal watches.
    #[serde(default = "mysql")]
    pub protocol: String,
    /// The hostgroup a server signal (`replica_lag`, `threads_running`, `replica_backlog`)
    /// watches.
    #[serde(default)]
    pub hostgroup: Option<u32>,
    /// The class whose p99 `class_p99` watches.
    #[serde(default)]
    pub watch_class: String,
    /// `class_p99`'s window (seconds, at most 60).
    #[serde(default = "window_s")]
    pub window_s: u32,
    /// Below this the guard does nothing.
    pub low: f64,
    /// At this the ramp is complete: the full delay, the smallest cap.
    pub high: f64,
    /// At or above this, statements of the governed classes are shed (`shed`) or rerouted
    /// (`reroute`); NULL: never.
    #[serde(default)]
    pub reject_above: Option<f64>,
    /// Over how much more signal the shed probability grows from its floor to 1 (0: everything
    /// is shed at once).
    #[serde(default)]
    pub reject_span: f64,
    /// The delay at the top of the ramp (ms), taken before a statement queues.
    #[serde(default)]
    pub max_delay_ms: u32,
    /// `shed`, `reduce` (ramp only, never shed) or `reroute` (to `fallback_hostgroup`).
    #[serde(default = "shed")]
    pub mode: String,
    /// Where `reroute` sends statements while the guard is open.
    #[serde(default)]
    pub fallback_hostgroup: Option<u32>,
    /// An open guard closes only when the signal is below `low` less this share (percent).
    #[serde(default = "hysteresis_pct")]
    pub hysteresis_pct: u32,
    /// An open guard stays open at least this long (ms).
    #[serde(default = "min_open_ms")]
    pub min_open_ms: u32,
    /// How long the level takes to fall from 1 to 0 when the signal gets better (ms); a rise
    /// is always taken at once. 0: the level follows the signal both ways.
    #[serde(default)]
    pub release_ms: u32,
    /// A signal unknown this long (ms) counts as over `reject_above` (or `high`).
    #[serde(default = "unknown_grace_ms")]
    pub unknown_grace_ms: u32,
    /// The apps `/throttler/check?app=` answers for from this guard (comma separated; `*`: all).
    #[serde(default = "all_apps")]
    pub apps: String,
    /// The operator's note.
    #[serde(default)]
    pub comment: String,
}

// Eq for `Config`'s sake: a checked row's numbers are finite, so equality is reflexive.
impl Eq for WorkloadGuard {}

fn mysql() -> String {
    "mysql".into()
}
fn window_s() -> u32 {
    10
}
fn shed() -> String {
    "shed".into()
}
fn hysteresis_pct() -> u32 {
    20
}
fn min_open_ms() -> u32 {
    1000
}
fn unknown_grace_ms() -> u32 {
    5000
}
fn all_apps() -> String {
    "*".into()
}

impl WorkloadGuard {
    /// The governed classes' names.
    pub fn class_names(&self) -> impl Iterator<Item = &str> {
        self.classes
            .split(',')
            .map(str::trim)
            .filter(|c| !c.is_empty())
    }

    /// Checks the row; the error names the column. `known` says whether a class exists.
    pub fn check(&self, known: impl Fn(&str) -> bool) -> Result<(), RowError> {
        // An operator guard may only deny apps at the check endpoint.
        if self.class_names().next().is_none() && self.signal != "operator" {
            return Err(RowError::new("classes", "name at least one workload class"));
        }
        if let Some(c) = self.class_names().find(|c| !known(c)) {
            return Err(RowError::new(
                "classes",
                format!("{c:?} is not in workload_classes"),
            ));
        }
        match self.signal.as_str() {
            "replica_lag" | "threads_running" | "replica_backlog" | "heartbeat_lag" => {
                if self.hostgroup.is_none() {
                    return Err(RowError::new(
                        "hostgroup",
                        format!("{} watches a hostgroup; set one", self.signal),
                    ));
                }
                if self.protocol != "mysql" && self.protocol != "pgsql" {
                    return Err(RowError::new(
                        "protocol",
                        format!("{:?} is not mysql or pgsql", self.protocol),
                    ));
                }
            }
            "class_p99" => {
                if !known(self.watch_class.trim()) {
                    return Err(RowError::new(
                        "watch_class",
                        format!("{:?} is not in workload_classes", self.watch_class),
                    ));
                }
                if !(1..=60).contains(&self.window_s) {
                    return Err(RowError::new(
                        "window_s",
                        format!("{} is not between 1 and 60", self.window_s),
                    ));
                }
            }
            "operator" => {}
            other => {
                return Err(RowError::new(
                    "signal",
                    format!(
                        "{other:?} is not replica_lag, heartbeat_lag, replica_backlog, threads_running, class_p99 or operator"
                    ),
                ));
            }
        }
        if !(self.low.is_finite() && self.high.is_finite()) || self.low < 0.0 {
            return Err(RowError::new("low, high", "must be numbers, low >= 0"));
        }
        if self.low > self.high {
            return Err(RowError::new(
                "low",
                format!("{} is above high {}", self.low, self.high),
            ));
        }
        if let Some(r) = self.reject_above
            && !(r.is_finite() && r >= self.low)
        {
            return Err(RowError::new(
                "reject_above",
                format!("{r} is below low {}", self.low),
            ));
        }
        if !(self.reject_span.is_finite() && self.reject_span >= 0.0) {
            return Err(RowError::new(
                "reject_span",
                format!("{} is negative", self.reject_span),
            ));
        }
        match self.mode.as_str() {
            "shed" | "reduce" => {}
            "reroute" if self.fallback_hostgroup.is_some() => {}
            "reroute" => {
                return Err(RowError::new(
                    "fallback_hostgroup",
                    "mode reroute needs one",
                ));
            }
            other => {
                return Err(RowError::new(
                    "mode",
                    format!("{other:?} is not shed, reduce or reroute"),
                ));
            }
        }
        if self.hysteresis_pct > 100 {
            return Err(RowError::new(
                "hysteresis_pct",
                format!("{} is over 100", self.hysteresis_pct),
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn checks_name_each_column() {
        assert!(WorkloadClass::new("vector").check().is_ok());
        let mut c = WorkloadClass::new("vector");
        c.max_concurrency = -1;
        assert_eq!(c.check().unwrap_err().column, "max_concurrency");
        let mut c = WorkloadClass::new("vector");
        c.priority = "urgent".into();
        assert_eq!(c.check().unwrap_err().column, "priority");
        let mut c = WorkloadClass::new("vector");
        c.max_qps = Some(0);
        assert_eq!(c.check().unwrap_err().column, "max_qps");
        assert!(WorkloadClass::new("a b").check().is_err());
        assert!(WorkloadClass::new("").check().is_err());
    }

    #[test]
    fn rule_class_reads_the_column_then_attributes() {
        assert_eq!(rule_class(Some("vector"), ""), Some("vector".into()));
        assert_eq!(
            rule_class(None, r#"{"workload_class":"ingest"}"#),
            Some("ingest".into())
        );
        assert_eq!(
            rule_class(Some("vector"), r#"{"workload_class":"ingest"}"#),
            Some("vector".into())
        );
        assert_eq!(rule_class(None, "not json"), None);
        assert_eq!(rule_class(Some(" "), ""), None);
    }
}

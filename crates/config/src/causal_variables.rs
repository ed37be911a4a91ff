//! Read-your-writes settings (`causal_reads*`), shared by the `mysql-` and `pgsql-` sides, each
//! under its own prefix. ProxySQL has no such variables (its `gtid_from_hostgroup` rule column
//! routes only); the names follow MaxScale's `causal_reads`.

use super::declared::{Int, OneOf, Words, variables};
use super::values::VariableError;

/// Whose writes a read routed away from the writer must see.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum CausalMode {
    /// No gate: a read may be answered by a replica that has not applied a write yet.
    #[default]
    None,
    /// The session's own writes.
    Local,
    /// Every write of the same user through the same writer hostgroup, from any of its
    /// sessions: the pooled application, whose write and read use different connections.
    User,
    /// Every write through the same writer hostgroup.
    Global,
}

impl CausalMode {
    /// Parses `none|local|user|global` (any case).
    pub fn parse(v: &str) -> Option<CausalMode> {
        CausalMode::from_word(v)
    }

    /// The name the variable and the rule column use.
    pub fn as_str(self) -> &'static str {
        self.word()
    }
}

/// What a gated read does when its replica did not reach the token within the timeout.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum CausalFallback {
    /// Run the read on the writer (always current).
    #[default]
    Primary,
    /// Fail the read with a retryable error naming the positions.
    Error,
}

impl Words for CausalMode {
    const WORDS: &'static [(&'static str, Self)] = &[
        ("none", CausalMode::None),
        ("local", CausalMode::Local),
        ("user", CausalMode::User),
        ("global", CausalMode::Global),
    ];
    const EXPECTED: &'static str = "none, local, user or global";
}

impl Words for CausalFallback {
    const WORDS: &'static [(&'static str, Self)] = &[
        ("primary", CausalFallback::Primary),
        ("error", CausalFallback::Error),
    ];
    const EXPECTED: &'static str = "primary or error";
}

variables! {
    /// `causal_reads`, `causal_reads_timeout_ms`, `causal_reads_on_timeout`.
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub struct CausalReadVariables for _prefix {
        /// Whose writes reads routed away from the writer must see (a rule's `causal_reads`
        /// column or a hint overrides it).
        mode: CausalMode = CausalMode::None => "causal_reads", OneOf;
        /// What a read does after the timeout: run on the writer, or fail.
        on_timeout: CausalFallback = CausalFallback::Primary => "causal_reads_on_timeout", OneOf;
        /// How long a read may wait on its replica for the token (ms); 0 = check without waiting.
        timeout_ms: u64 = 1_000 => "causal_reads_timeout_ms", Int(0, 3_600_000);
    }
}

impl Default for CausalReadVariables {
    fn default() -> Self {
        CausalReadVariables::defaults_for("")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn set_and_list_round_trip() {
        let mut c = CausalReadVariables::default();
        let mut set = |k: &str, v: &str| c.set_variable("mysql", k, v).expect("one of ours");
        assert!(set("causal_reads", "USER").is_ok());
        assert!(set("causal_reads_timeout_ms", "250").is_ok());
        assert!(set("causal_reads_on_timeout", "error").is_ok());
        assert!(set("causal_reads", "sometimes").is_err());
        assert!(set("causal_reads_on_timeout", "stale").is_err());
        assert!(set("causal_reads_timeout_ms", "-1").is_err());
        assert_eq!(c.mode, CausalMode::User);
        assert_eq!(c.timeout_ms, 250);
        assert_eq!(c.on_timeout, CausalFallback::Error);
        let mut again = CausalReadVariables::default();
        for (k, v) in c.variable_pairs("mysql") {
            again
                .set_variable("mysql", &k, &v)
                .expect("ours")
                .expect("valid");
        }
        assert_eq!(again, c);
        assert!(c.set_variable("mysql", "threads", "4").is_none());
    }
}

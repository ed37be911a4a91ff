//! Read-your-writes settings (`causal_reads*`), shared by the `mysql-` and `pgsql-` sides, each
//! under its own prefix. ProxySQL has no such variables (its `gtid_from_hostgroup` rule column
//! routes only); the names follow MaxScale's `causal_reads`.

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
        Some(match v.trim().to_ascii_lowercase().as_str() {
            "none" => CausalMode::None,
            "local" => CausalMode::Local,
            "user" => CausalMode::User,
            "global" => CausalMode::Global,
            _ => return None,
        })
    }

    /// The name the variable and the rule column use.
    pub fn as_str(self) -> &'static str {
        match self {
            CausalMode::None => "none",
            CausalMode::Local => "local",
            CausalMode::User => "user",
            CausalMode::Global => "global",
        }
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

impl CausalFallback {
    /// Parses `primary|error` (any case).
    pub fn parse(v: &str) -> Option<CausalFallback> {
        match v.trim().to_ascii_lowercase().as_str() {
            "primary" => Some(CausalFallback::Primary),
            "error" => Some(CausalFallback::Error),
            _ => None,
        }
    }

    /// The name the variable uses.
    pub fn as_str(self) -> &'static str {
        match self {
            CausalFallback::Primary => "primary",
            CausalFallback::Error => "error",
        }
    }
}

/// `causal_reads`, `causal_reads_timeout_ms`, `causal_reads_on_timeout`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CausalReadVariables {
    /// Whose writes reads must see (a rule's `causal_reads` column or a hint overrides it).
    pub mode: CausalMode,
    /// How long a read may wait on its replica for the token (ms); 0 = check without waiting.
    pub timeout_ms: u64,
    /// What a read does after the timeout.
    pub on_timeout: CausalFallback,
}

impl Default for CausalReadVariables {
    fn default() -> Self {
        CausalReadVariables {
            mode: CausalMode::None,
            timeout_ms: 1_000,
            on_timeout: CausalFallback::Primary,
        }
    }
}

impl CausalReadVariables {
    /// Sets `name` if it is one of these; `None` when it is not.
    pub fn set(&mut self, prefix: &str, name: &str, v: &str) -> Option<Result<(), VariableError>> {
        let r = match name {
            "causal_reads" => CausalMode::parse(v).map(|m| self.mode = m).ok_or_else(|| {
                VariableError::malformed(prefix, name, v, "none, local, user or global")
            }),
            "causal_reads_timeout_ms" => {
                super::values::parse_var_int(prefix, name, v, 0, 3_600_000)
                    .map(|n| self.timeout_ms = n)
            }
            "causal_reads_on_timeout" => CausalFallback::parse(v)
                .map(|f| self.on_timeout = f)
                .ok_or_else(|| VariableError::malformed(prefix, name, v, "primary or error")),
            _ => return None,
        };
        Some(r)
    }

    /// Every variable as (name, value).
    pub fn pairs(&self) -> Vec<(String, String)> {
        vec![
            ("causal_reads".into(), self.mode.as_str().into()),
            (
                "causal_reads_on_timeout".into(),
                self.on_timeout.as_str().into(),
            ),
            (
                "causal_reads_timeout_ms".into(),
                self.timeout_ms.to_string(),
            ),
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn set_and_list_round_trip() {
        let mut c = CausalReadVariables::default();
        let mut set = |k: &str, v: &str| c.set("mysql", k, v).expect("one of ours");
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
        for (k, v) in c.pairs() {
            again.set("mysql", &k, &v).expect("ours").expect("valid");
        }
        assert_eq!(again, c);
        assert!(c.set("mysql", "threads", "4").is_none());
    }
}

//! The configuration's errors: a file that cannot be read or does not validate, and query rules
//! that do not compile.

/// Why a configuration could not be loaded.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The config file could not be read.
    #[error("cannot read config file {path}: {source}")]
    ConfigRead {
        /// The file.
        path: String,
        /// Why.
        source: std::io::Error,
    },
    /// The config is malformed or a value is out of range; the message names key and line.
    #[error("invalid config: {0}")]
    ConfigInvalid(String),
}

/// Why a set of query rules does not compile; each names the rule and the column at fault.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RuleError {
    /// A `match_digest` / `match_pattern` that is not a valid regular expression.
    #[error("rule_id={rule_id}: {column} {pattern:?} is not a valid regular expression: {why}")]
    InvalidRegex {
        /// The rule.
        rule_id: u32,
        /// `match_digest` or `match_pattern`.
        column: &'static str,
        /// The expression as configured.
        pattern: String,
        /// The regex engine's reason, on one line.
        why: String,
    },
    /// A `digest` that is not a `0x…` hexadecimal value.
    #[error("rule_id={rule_id}: digest {digest:?} is not a 0x… hex value")]
    InvalidDigest {
        /// The rule.
        rule_id: u32,
        /// The value as configured.
        digest: String,
    },
    /// `replace_pattern` without the `match_pattern` it rewrites.
    #[error("rule_id={rule_id}: replace_pattern needs match_pattern")]
    ReplaceWithoutMatch {
        /// The rule.
        rule_id: u32,
    },
    /// `causal_reads` is not one of `none`, `local`, `user`, `global`.
    #[error("rule_id={rule_id}: causal_reads {value:?} is not none, local, user or global")]
    InvalidCausalReads {
        /// The rule.
        rule_id: u32,
        /// The value given.
        value: String,
    },
}

//! `mysql_query_rules` / `pgsql_query_rules` and their `_fast_routing` twins, with ProxySQL's
//! column names. NULL columns are `None` (the rule does not look at / does not set them).

use super::CausalMode;
use super::values::Flag;
use crate::error::RuleError;
use regex::{Regex, RegexBuilder};
use serde::{Deserialize, Serialize};

/// One query rule. `schemaname` is `database` in `pgsql_query_rules`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct QueryRule {
    /// Evaluation order (ascending).
    pub rule_id: u32,
    /// Only active rules are evaluated (ProxySQL's default is 0).
    #[serde(default)]
    pub active: Flag,
    /// Match only this user.
    #[serde(default)]
    pub username: Option<String>,
    /// Match only this schema (MySQL) / database (PostgreSQL).
    #[serde(default, alias = "database")]
    pub schemaname: Option<String>,
    /// The flag a query must carry for this rule to be evaluated.
    #[serde(default, rename = "flagIN")]
    pub flag_in: u32,
    /// Match only clients from this address (a trailing `%` matches a prefix).
    #[serde(default)]
    pub client_addr: Option<String>,
    /// Match only connections to this proxy address.
    #[serde(default)]
    pub proxy_addr: Option<String>,
    /// Match only connections to this proxy port.
    #[serde(default)]
    pub proxy_port: Option<u16>,
    /// Match this exact digest (`0x…` hex).
    #[serde(default)]
    pub digest: Option<String>,
    /// Regex on the digest text.
    #[serde(default)]
    pub match_digest: Option<String>,
    /// Regex on the query text.
    #[serde(default)]
    pub match_pattern: Option<String>,
    /// Match when `match_pattern` does not match.
    #[serde(default)]
    pub negate_match_pattern: Flag,
    /// `CASELESS`, `GLOBAL` (comma separated).
    #[serde(default = "caseless")]
    pub re_modifiers: Option<String>,
    /// Flag the query carries on after this rule (chains).
    #[serde(default, rename = "flagOUT")]
    pub flag_out: Option<u32>,
    /// Rewrite: replacement for `match_pattern` (`\1` / `$1` capture groups).
    #[serde(default)]
    pub replace_pattern: Option<String>,
    /// Route to this hostgroup.
    #[serde(default)]
    pub destination_hostgroup: Option<u32>,
    /// Cache the result this many ms.
    #[serde(default)]
    pub cache_ttl: Option<u64>,
    /// Cache empty results too (default: `query_cache_stores_empty_result`).
    #[serde(default)]
    pub cache_empty_result: Option<Flag>,
    /// Accepted for compatibility.
    #[serde(default)]
    pub cache_timeout: Option<u64>,
    /// Accepted for compatibility.
    #[serde(default)]
    pub reconnect: Option<Flag>,
    /// Kill the query on the server after this many ms.
    #[serde(default)]
    pub timeout: Option<u64>,
    /// Retries when the backend connection fails before the query ran.
    #[serde(default)]
    pub retries: Option<u32>,
    /// Hold the query this many ms (added to the global delay).
    #[serde(default)]
    pub delay: Option<u64>,
    /// The session's next query starts with this flag.
    #[serde(default, rename = "next_query_flagIN")]
    pub next_query_flag_in: Option<u32>,
    /// Mirror copies start the rules at this flag.
    #[serde(default, rename = "mirror_flagOUT")]
    pub mirror_flag_out: Option<u32>,
    /// Send a fire-and-forget copy to this hostgroup.
    #[serde(default)]
    pub mirror_hostgroup: Option<u32>,
    /// Block the query with this error.
    #[serde(default)]
    pub error_msg: Option<String>,
    /// Answer OK with this message without reaching a backend.
    #[serde(default, rename = "OK_msg")]
    pub ok_msg: Option<String>,
    /// Keep the session on its backend connection.
    #[serde(default)]
    pub sticky_conn: Option<Flag>,
    /// 0 = stop multiplexing the session, 1 = allow it again, 2 = this query never pins.
    #[serde(default)]
    pub multiplex: Option<u8>,
    /// ProxySQL's GTID causal reads: a matching read must see the session's writes. Sluice
    /// reads it as `causal_reads = 'local'` (the hostgroup number itself is not needed: the
    /// session's token remembers where its write went).
    #[serde(default)]
    pub gtid_from_hostgroup: Option<u32>,
    /// `none|local|user|global`: whose writes a matching read must see (overrides the
    /// `causal_reads` variable; NULL leaves it).
    #[serde(default)]
    pub causal_reads: Option<String>,
    /// Log matching queries.
    #[serde(default)]
    pub log: Option<Flag>,
    /// Stop evaluating rules after this one.
    #[serde(default)]
    pub apply: Flag,
    /// The workload class matching statements belong to (admission control); `None` leaves
    /// it to a later rule, `attributes`' `"workload_class"`, or the default class.
    #[serde(default)]
    pub workload_class: Option<String>,
    /// JSON attributes (kept; `"workload_class"` is read when the column is NULL).
    #[serde(default)]
    pub attributes: String,
    /// The operator's note; Sluice ignores it.
    #[serde(default)]
    pub comment: Option<String>,
}

fn caseless() -> Option<String> {
    Some("CASELESS".into())
}

impl Default for QueryRule {
    /// An inactive rule that matches everything and does nothing, with ProxySQL's column
    /// defaults (`re_modifiers = 'CASELESS'`); set what the rule is for on top of it.
    fn default() -> Self {
        QueryRule {
            rule_id: 0,
            active: Flag(false),
            username: None,
            schemaname: None,
            flag_in: 0,
            client_addr: None,
            proxy_addr: None,
            proxy_port: None,
            digest: None,
            match_digest: None,
            match_pattern: None,
            negate_match_pattern: Flag(false),
            re_modifiers: caseless(),
            flag_out: None,
            replace_pattern: None,
            destination_hostgroup: None,
            cache_ttl: None,
            cache_empty_result: None,
            cache_timeout: None,
            reconnect: None,
            timeout: None,
            retries: None,
            delay: None,
            next_query_flag_in: None,
            mirror_flag_out: None,
            mirror_hostgroup: None,
            error_msg: None,
            ok_msg: None,
            sticky_conn: None,
            multiplex: None,
            gtid_from_hostgroup: None,
            causal_reads: None,
            log: None,
            apply: Flag(false),
            workload_class: None,
            attributes: String::new(),
            comment: None,
        }
    }
}

impl QueryRule {
    /// An active rule `rule_id` that matches everything and does nothing yet: the start of a
    /// rule built in code, as `INSERT INTO mysql_query_rules (rule_id, active) VALUES (…, 1)`.
    ///
    /// ```
    /// use sluice_config::QueryRule;
    /// let rule = QueryRule::new(10)
    ///     .match_digest("^SELECT")
    ///     .destination_hostgroup(1)
    ///     .apply();
    /// assert_eq!(rule.destination_hostgroup, Some(1));
    /// assert!(rule.active.0 && rule.apply.0);
    /// ```
    pub fn new(rule_id: u32) -> Self {
        QueryRule {
            rule_id,
            active: Flag(true),
            ..QueryRule::default()
        }
    }

    /// Matches statements whose digest (normalised text) matches the regular expression.
    pub fn match_digest(mut self, re: &str) -> Self {
        self.match_digest = Some(re.to_string());
        self
    }

    /// Matches statements whose text matches the regular expression (and is the pattern
    /// [`QueryRule::replace_pattern`] rewrites).
    pub fn match_pattern(mut self, re: &str) -> Self {
        self.match_pattern = Some(re.to_string());
        self
    }

    /// Rewrites the matched text with this replacement (`\1` for groups).
    pub fn replace_pattern(mut self, replacement: &str) -> Self {
        self.replace_pattern = Some(replacement.to_string());
        self
    }

    /// Only for this user.
    pub fn username(mut self, user: &str) -> Self {
        self.username = Some(user.to_string());
        self
    }

    /// Routes matching statements to this hostgroup.
    pub fn destination_hostgroup(mut self, hostgroup: u32) -> Self {
        self.destination_hostgroup = Some(hostgroup);
        self
    }

    /// Caches results of matching statements this long (ms).
    pub fn cache_ttl(mut self, ms: u64) -> Self {
        self.cache_ttl = Some(ms);
        self
    }

    /// Answers matching statements with this error instead of running them.
    pub fn error_msg(mut self, message: &str) -> Self {
        self.error_msg = Some(message.to_string());
        self
    }

    /// Stops evaluating further rules when this one matches.
    pub fn apply(mut self) -> Self {
        self.apply = Flag(true);
        self
    }
}

/// One `*_query_rules_fast_routing` row: (user, schema, flagIN) → hostgroup.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FastRoute {
    /// The account the route applies to.
    pub username: String,
    /// Schema (MySQL) / database (PostgreSQL).
    #[serde(alias = "database")]
    pub schemaname: String,
    /// The rule chain's flag the route applies at (`flagIN`).
    #[serde(default, rename = "flagIN")]
    pub flag_in: u32,
    /// The hostgroup the matching statements go to.
    pub destination_hostgroup: u32,
    /// The operator's note; Sluice ignores it.
    #[serde(default)]
    pub comment: String,
}

/// What a rule's text columns compile to; a column that does not is the rule's error.
#[derive(Debug, Clone)]
pub struct RuleParts {
    /// `digest`, parsed from its hex form.
    pub digest: Option<u64>,
    /// `match_digest`, compiled with the rule's `re_modifiers`.
    pub match_digest: Option<Regex>,
    /// `match_pattern`, compiled with the rule's `re_modifiers`.
    pub match_pattern: Option<Regex>,
    /// `re_modifiers` has `GLOBAL`: `replace_pattern` replaces every match.
    pub global: bool,
    /// `causal_reads`, or `local` when only `gtid_from_hostgroup` is set.
    pub causal_reads: Option<CausalMode>,
}

impl QueryRule {
    /// Compiles the rule's patterns and parses its other text columns: what the query
    /// processor runs, and what a config load checks (inactive rules too).
    pub fn compile_parts(&self) -> Result<RuleParts, RuleError> {
        let mods = self
            .re_modifiers
            .as_deref()
            .unwrap_or("")
            .to_ascii_uppercase();
        let caseless = mods.contains("CASELESS");
        let build = |column: &'static str, p: &Option<String>| {
            p.as_deref()
                .map(|p| compile_pattern(self.rule_id, column, p, caseless))
                .transpose()
        };
        let digest = match &self.digest {
            Some(d) => Some(parse_digest(d).ok_or_else(|| RuleError::InvalidDigest {
                rule_id: self.rule_id,
                digest: d.clone(),
            })?),
            None => None,
        };
        if self.replace_pattern.is_some() && self.match_pattern.is_none() {
            return Err(RuleError::ReplaceWithoutMatch {
                rule_id: self.rule_id,
            });
        }
        let causal_reads = match self.causal_reads.as_deref() {
            Some(v) => Some(
                CausalMode::parse(v).ok_or_else(|| RuleError::InvalidCausalReads {
                    rule_id: self.rule_id,
                    value: v.to_string(),
                })?,
            ),
            None => self.gtid_from_hostgroup.map(|_| CausalMode::Local),
        };
        Ok(RuleParts {
            digest,
            match_digest: build("match_digest", &self.match_digest)?,
            match_pattern: build("match_pattern", &self.match_pattern)?,
            global: mods.contains("GLOBAL"),
            causal_reads,
        })
    }
}

/// A rule's pattern as a regex (bounded in size), or the error naming its rule and column.
fn compile_pattern(
    rule_id: u32,
    column: &'static str,
    pattern: &str,
    caseless: bool,
) -> Result<Regex, RuleError> {
    RegexBuilder::new(pattern)
        .case_insensitive(caseless)
        .size_limit(1 << 20)
        .build()
        .map_err(|e| {
            // The regex error spans lines (a caret diagram); one line reads better in an admin
            // error and a log.
            let text = e.to_string();
            let why = text
                .lines()
                .rfind(|l| !l.trim().is_empty())
                .unwrap_or(&text)
                .trim()
                .trim_start_matches("error: ");
            RuleError::InvalidRegex {
                rule_id,
                column,
                pattern: pattern.to_string(),
                why: why.to_string(),
            }
        })
}

/// A digest as ProxySQL shows it (`0x1A2B…`, or bare hex).
fn parse_digest(s: &str) -> Option<u64> {
    let t = s.trim();
    let hex = t
        .strip_prefix("0x")
        .or_else(|| t.strip_prefix("0X"))
        .unwrap_or(t);
    u64::from_str_radix(hex, 16).ok()
}

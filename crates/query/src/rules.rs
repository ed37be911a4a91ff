//! Query rules compiled once per LOAD and evaluated per query, with ProxySQL's semantics:
//! active rules in `rule_id` order whose `flagIN` equals the query's current flag; every match
//! applies the actions it sets (a later match overrides an earlier one), `flagOUT` moves the
//! query on to the rules of that flag, `apply=1` stops. `replace_pattern` rewrites the text the
//! following rules see. When no rule chose a hostgroup, `*_query_rules_fast_routing` is asked.

use super::digest::Digest;
use regex::Regex;
use sluice_config::RuleError;
use sluice_config::{CausalMode, FastRoute, QueryRule};
use std::collections::HashMap;
use std::sync::Arc;

/// Who sends a query, and where: what rules can match besides the text.
#[derive(Debug, Clone, Copy)]
pub struct QueryContext<'a> {
    /// The account the client logged in as.
    pub user: &'a str,
    /// Current schema (MySQL) / database (PostgreSQL).
    pub schema: &'a str,
    /// Client IP address.
    pub client_addr: &'a str,
    /// The proxy address the client connected to.
    pub proxy_addr: &'a str,
    /// The proxy port the client connected to.
    pub proxy_port: u16,
    /// The flag the query starts with (0, or the previous query's `next_query_flagIN`).
    pub flag_in: u32,
}

/// What the matching rules decided for one query. `None` = no rule set it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct QueryAction {
    /// The hostgroup the statement goes to; `None` keeps the user's default.
    pub destination_hostgroup: Option<u32>,
    /// The query after `replace_pattern` rewrites.
    pub rewritten: Option<String>,
    /// Cache the result this long (ms).
    pub cache_ttl_ms: Option<u64>,
    /// Cache empty results.
    pub cache_empty_result: Option<bool>,
    /// Kill the query on the server after this long (ms).
    pub timeout_ms: Option<u64>,
    /// Retries on a failed backend connection.
    pub retries: Option<u32>,
    /// Extra delay before forwarding (ms).
    pub delay_ms: Option<u64>,
    /// Block with this error.
    pub error_msg: Option<String>,
    /// Answer OK with this message.
    pub ok_msg: Option<String>,
    /// Mirror to this hostgroup.
    pub mirror_hostgroup: Option<u32>,
    /// Mirror copies start at this flag.
    pub mirror_flag_out: Option<u32>,
    /// The next query of the session starts with this flag.
    pub next_query_flag_in: Option<u32>,
    /// 0 / 1 / 2, see [`QueryRule::multiplex`].
    pub multiplex: Option<u8>,
    /// Keep the session on its connection.
    pub sticky_conn: Option<bool>,
    /// Log the query.
    pub log: bool,
    /// The workload class (admission control); `None`: the default class.
    pub workload_class: Option<Arc<str>>,
    /// Whose writes the statement must see when it is read away from the writer (a rule's
    /// `causal_reads` / `gtid_from_hostgroup`, or a hint); `None`: the variable decides.
    pub causal_reads: Option<CausalMode>,
    /// The position the statement must see (`min_gtid=` / `min_lsn=` hints), on top of any
    /// token the scope holds.
    pub min_position: Option<String>,
    /// Ids of the rules that matched, in order (for `stats_*_query_rules`).
    pub matched: Vec<u32>,
}

#[derive(Debug)]
struct CompiledRule {
    row: QueryRule,
    digest: Option<u64>,
    match_digest: Option<Regex>,
    match_pattern: Option<Regex>,
    /// `replace_pattern` in the regex crate's syntax (`\1` → `${1}`).
    replacement: Option<String>,
    global: bool,
    /// `workload_class`, or `attributes`' `"workload_class"`.
    workload_class: Option<Arc<str>>,
    /// `causal_reads`, or `local` for ProxySQL's `gtid_from_hostgroup`.
    causal_reads: Option<CausalMode>,
}

/// The compiled rules of one protocol.
#[derive(Debug, Default, Clone)]
pub struct RuleSet {
    rules: Arc<Vec<CompiledRule>>,
    fast: Arc<FastRoutes>,
    /// Extra passes from the top when a flagOUT points back (`query_processor_iterations`).
    pub iterations: u32,
    /// An active rule sets `causal_reads` to a scope (asked after every write transaction).
    sets_causal_reads: bool,
}

/// user → schema → flagIN → hostgroup, so a lookup needs no allocation.
type FastRoutes = HashMap<String, HashMap<String, HashMap<u32, u32>>>;

/// `\N` (PCRE/RE2 style, as ProxySQL users write it) → `${N}` for the regex crate; a literal
/// `$` is escaped so it is not read as a group reference.
fn replacement_syntax(p: &str) -> String {
    let mut out = String::with_capacity(p.len() + 8);
    let mut chars = p.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\\' if chars.peek().is_some_and(char::is_ascii_digit) => {
                out.push_str("${");
                while let Some(d) = chars.peek().copied().filter(char::is_ascii_digit) {
                    out.push(d);
                    chars.next();
                }
                out.push('}');
            }
            '$' if chars
                .peek()
                .is_some_and(|n| n.is_ascii_digit() || *n == '{') =>
            {
                out.push('$');
            }
            '$' => out.push_str("$$"),
            _ => out.push(c),
        }
    }
    out
}

impl RuleSet {
    /// Compiles `rows` (any order; inactive rows are dropped). Errors name the rule and column.
    pub fn compile(rows: &[QueryRule], fast: &[FastRoute]) -> Result<RuleSet, RuleError> {
        let mut rules = Vec::new();
        let mut sorted: Vec<&QueryRule> = rows.iter().filter(|r| r.active.0).collect();
        sorted.sort_by_key(|r| r.rule_id);
        for r in sorted {
            let parts = r.compile_parts()?;
            rules.push(CompiledRule {
                digest: parts.digest,
                match_digest: parts.match_digest,
                match_pattern: parts.match_pattern,
                replacement: r.replace_pattern.as_deref().map(replacement_syntax),
                global: parts.global,
                workload_class: sluice_config::rule_class(
                    r.workload_class.as_deref(),
                    &r.attributes,
                )
                .map(Arc::from),
                causal_reads: parts.causal_reads,
                row: r.clone(),
            });
        }
        let mut fast_routes = FastRoutes::new();
        for f in fast {
            fast_routes
                .entry(f.username.clone())
                .or_default()
                .entry(f.schemaname.clone())
                .or_default()
                .insert(f.flag_in, f.destination_hostgroup);
        }
        let sets_causal_reads = rules
            .iter()
            .any(|r| r.row.active.0 && r.causal_reads.is_some_and(|m| m != CausalMode::None));
        Ok(RuleSet {
            rules: Arc::new(rules),
            fast: Arc::new(fast_routes),
            iterations: 0,
            sets_causal_reads,
        })
    }

    /// True when an active rule sets `causal_reads` (or `gtid_from_hostgroup`) to a scope:
    /// writes must then leave a token even when the variable says `none`.
    pub fn sets_causal_reads(&self) -> bool {
        self.sets_causal_reads
    }

    /// True when there is nothing to evaluate.
    pub fn is_empty(&self) -> bool {
        self.rules.is_empty() && self.fast.is_empty()
    }

    /// Number of active rules.
    pub fn len(&self) -> usize {
        self.rules.len()
    }

    fn matches(rule: &CompiledRule, ctx: &QueryContext, text: &str, digest: &Digest) -> bool {
        let r = &rule.row;
        if r.username.as_deref().is_some_and(|u| u != ctx.user)
            || r.schemaname.as_deref().is_some_and(|s| s != ctx.schema)
            || r.client_addr
                .as_deref()
                .is_some_and(|a| !addr_matches(a, ctx.client_addr))
            || r.proxy_addr.as_deref().is_some_and(|a| a != ctx.proxy_addr)
            || r.proxy_port.is_some_and(|p| p != ctx.proxy_port)
            || rule.digest.is_some_and(|d| d != digest.hash)
        {
            return false;
        }
        if let Some(re) = &rule.match_digest
            && !re.is_match(&digest.text)
        {
            return false;
        }
        if let Some(re) = &rule.match_pattern
            && re.is_match(text) == r.negate_match_pattern.0
        {
            return false;
        }
        true
    }

    /// Evaluates the rules for one query. `text` is the query as sent; `digest` its digest.
    pub fn evaluate(&self, ctx: &QueryContext, text: &str, digest: &Digest) -> QueryAction {
        let mut a = QueryAction::default();
        let mut flag = ctx.flag_in;
        let mut rewritten: Option<String> = None;
        let mut passes = 0u32;
        let mut start = 0usize;
        'passes: loop {
            let mut restart = false;
            for rule in self.rules.iter().skip(start) {
                if rule.row.flag_in != flag {
                    continue;
                }
                let current = rewritten.as_deref().unwrap_or(text);
                if !Self::matches(rule, ctx, current, digest) {
                    continue;
                }
                let r = &rule.row;
                a.matched.push(r.rule_id);
                set(&mut a.destination_hostgroup, r.destination_hostgroup);
                set(&mut a.cache_ttl_ms, r.cache_ttl);
                set(&mut a.cache_empty_result, r.cache_empty_result.map(|f| f.0));
                set(&mut a.timeout_ms, r.timeout);
                set(&mut a.retries, r.retries);
                set(&mut a.delay_ms, r.delay);
                set(&mut a.mirror_hostgroup, r.mirror_hostgroup);
                set(&mut a.mirror_flag_out, r.mirror_flag_out);
                set(&mut a.next_query_flag_in, r.next_query_flag_in);
                set(&mut a.multiplex, r.multiplex);
                set(&mut a.sticky_conn, r.sticky_conn.map(|f| f.0));
                if rule.workload_class.is_some() {
                    a.workload_class.clone_from(&rule.workload_class);
                }
                set(&mut a.causal_reads, rule.causal_reads);
                if r.error_msg.is_some() {
                    a.error_msg = r.error_msg.clone();
                }
                if r.ok_msg.is_some() {
                    a.ok_msg = r.ok_msg.clone();
                }
                if r.log.is_some_and(|f| f.0) {
                    a.log = true;
                }
                if let (Some(re), Some(rep)) = (&rule.match_pattern, &rule.replacement) {
                    let out = if rule.global {
                        re.replace_all(current, rep.as_str())
                    } else {
                        re.replace(current, rep.as_str())
                    };
                    rewritten = Some(out.into_owned());
                }
                if r.apply.0 {
                    break 'passes;
                }
                if let Some(out) = r.flag_out
                    && out != flag
                {
                    flag = out;
                    // A chain continues with the rules after this one; with
                    // query_processor_iterations > 0 it may also start over from the top.
                    if passes < self.iterations {
                        passes += 1;
                        restart = true;
                        start = 0;
                        break;
                    }
                }
            }
            if !restart {
                break;
            }
        }
        a.rewritten = rewritten;
        if a.destination_hostgroup.is_none()
            && !self.fast.is_empty()
            && let Some(hg) = self
                .fast
                .get(ctx.user)
                .and_then(|m| m.get(ctx.schema))
                .and_then(|m| m.get(&flag))
        {
            a.destination_hostgroup = Some(*hg);
        }
        a
    }
}

fn set<T>(slot: &mut Option<T>, v: Option<T>) {
    if v.is_some() {
        *slot = v;
    }
}

/// `client_addr` matching: exact, or a prefix when the pattern ends with `%`.
fn addr_matches(pattern: &str, addr: &str) -> bool {
    match pattern.strip_suffix('%') {
        Some(prefix) => addr.starts_with(prefix),
        None => pattern == addr,
    }
}

#[cfg(test)]
mod tests;

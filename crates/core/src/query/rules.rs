//! Query rules compiled once per LOAD and evaluated per query, with ProxySQL's semantics:
//! active rules in `rule_id` order whose `flagIN` equals the query's current flag; every match
//! applies the actions it sets (a later match overrides an earlier one), `flagOUT` moves the
//! query on to the rules of that flag, `apply=1` stops. `replace_pattern` rewrites the text the
//! following rules see. When no rule chose a hostgroup, `*_query_rules_fast_routing` is asked.

use super::digest::Digest;
use crate::config::{CausalMode, FastRoute, QueryRule};
use crate::error::RuleError;
use regex::{Regex, RegexBuilder};
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

fn parse_digest(s: &str) -> Option<u64> {
    let t = s.trim();
    let hex = t
        .strip_prefix("0x")
        .or_else(|| t.strip_prefix("0X"))
        .unwrap_or(t);
    u64::from_str_radix(hex, 16).ok()
}

impl RuleSet {
    /// Compiles `rows` (any order; inactive rows are dropped). Errors name the rule and column.
    pub fn compile(rows: &[QueryRule], fast: &[FastRoute]) -> Result<RuleSet, RuleError> {
        let mut rules = Vec::new();
        let mut sorted: Vec<&QueryRule> = rows.iter().filter(|r| r.active.0).collect();
        sorted.sort_by_key(|r| r.rule_id);
        for r in sorted {
            let mods = r.re_modifiers.as_deref().unwrap_or("").to_ascii_uppercase();
            let caseless = mods.contains("CASELESS");
            let global = mods.contains("GLOBAL");
            let build =
                |col: &'static str, p: &Option<String>| -> Result<Option<Regex>, RuleError> {
                    p.as_deref()
                        .map(|p| {
                            RegexBuilder::new(p)
                                .case_insensitive(caseless)
                                .size_limit(1 << 20)
                                .build()
                                .map_err(|e| {
                                    // The regex error spans lines (a caret diagram); one line reads
                                    // better in an admin error and a log.
                                    let text = e.to_string();
                                    let why = text
                                        .lines()
                                        .rfind(|l| !l.trim().is_empty())
                                        .unwrap_or(&text)
                                        .trim()
                                        .trim_start_matches("error: ");
                                    RuleError::InvalidRegex {
                                        rule_id: r.rule_id,
                                        column: col,
                                        pattern: p.to_string(),
                                        why: why.to_string(),
                                    }
                                })
                        })
                        .transpose()
                };
            let digest = match &r.digest {
                Some(d) => Some(parse_digest(d).ok_or_else(|| RuleError::InvalidDigest {
                    rule_id: r.rule_id,
                    digest: d.clone(),
                })?),
                None => None,
            };
            if r.replace_pattern.is_some() && r.match_pattern.is_none() {
                return Err(RuleError::ReplaceWithoutMatch { rule_id: r.rule_id });
            }
            let causal_reads = match r.causal_reads.as_deref() {
                Some(v) => {
                    Some(
                        CausalMode::parse(v).ok_or_else(|| RuleError::InvalidCausalReads {
                            rule_id: r.rule_id,
                            value: v.to_string(),
                        })?,
                    )
                }
                None => r.gtid_from_hostgroup.map(|_| CausalMode::Local),
            };
            rules.push(CompiledRule {
                digest,
                match_digest: build("match_digest", &r.match_digest)?,
                match_pattern: build("match_pattern", &r.match_pattern)?,
                replacement: r.replace_pattern.as_deref().map(replacement_syntax),
                global,
                workload_class: crate::config::rule_class(
                    r.workload_class.as_deref(),
                    &r.attributes,
                )
                .map(Arc::from),
                causal_reads,
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
mod tests {
    use super::*;
    use crate::config::Config;
    use crate::query::{Dialect, digest::digest};

    fn rules(toml: &str) -> RuleSet {
        let cfg = Config::parse(toml).expect("config");
        RuleSet::compile(&cfg.mysql_query_rules, &cfg.mysql_query_rules_fast_routing)
            .expect("rules")
    }

    fn ctx(flag_in: u32) -> QueryContext<'static> {
        QueryContext {
            user: "app",
            schema: "shop",
            client_addr: "10.0.0.7",
            proxy_addr: "127.0.0.1",
            proxy_port: 6033,
            flag_in,
        }
    }

    fn eval(set: &RuleSet, sql: &str) -> QueryAction {
        set.evaluate(&ctx(0), sql, &digest(sql, Dialect::Mysql, 2048))
    }

    const SPLIT: &str = "[[mysql_query_rules]]\nrule_id=1\nactive=1\nmatch_digest='^SELECT.*FOR UPDATE'\ndestination_hostgroup=0\napply=1\n\
        [[mysql_query_rules]]\nrule_id=2\nactive=1\nmatch_digest='^SELECT'\ndestination_hostgroup=1\napply=1\n";

    #[test]
    fn causal_reads_columns_compile_and_apply() {
        let s = rules(
            "[[mysql_query_rules]]\nrule_id=1\nactive=1\nmatch_digest='^SELECT'\ncausal_reads='user'\n\
             [[mysql_query_rules]]\nrule_id=2\nactive=1\nmatch_digest='FROM orders'\ngtid_from_hostgroup=0\n",
        );
        assert!(s.sets_causal_reads());
        assert_eq!(eval(&s, "SELECT 1").causal_reads, Some(CausalMode::User));
        // ProxySQL's gtid_from_hostgroup reads as `local` (a later rule overrides).
        assert_eq!(
            eval(&s, "SELECT * FROM orders").causal_reads,
            Some(CausalMode::Local)
        );
        assert!(!rules(SPLIT).sets_causal_reads());
        let inactive = rules("[[mysql_query_rules]]\nrule_id=1\nactive=0\ncausal_reads='global'\n");
        assert!(!inactive.sets_causal_reads());
        // A bad value is refused when the file is read, naming the rule and the column.
        let err =
            Config::parse("[[mysql_query_rules]]\nrule_id=1\nactive=1\ncausal_reads='sometimes'\n")
                .expect_err("bad value");
        assert!(
            err.to_string()
                .contains("rule_id=1: causal_reads \"sometimes\""),
            "{err}"
        );
    }

    #[test]
    fn classic_split() {
        let s = rules(SPLIT);
        assert_eq!(
            eval(&s, "select * from t where id=1").destination_hostgroup,
            Some(1)
        );
        assert_eq!(
            eval(&s, "SELECT * FROM t WHERE id=1 FOR UPDATE").destination_hostgroup,
            Some(0)
        );
        assert_eq!(eval(&s, "UPDATE t SET a=1").destination_hostgroup, None);
        assert_eq!(eval(&s, "SELECT 1").matched, vec![2]);
        assert_eq!(
            eval(&s, "SELECT 1 FOR UPDATE").matched,
            vec![1],
            "apply stops at rule 1"
        );
    }

    #[test]
    fn inactive_rules_and_order_by_rule_id() {
        let s = rules(
            "[[mysql_query_rules]]\nrule_id=20\nactive=1\nmatch_pattern='x'\ndestination_hostgroup=2\n\
             [[mysql_query_rules]]\nrule_id=10\nactive=1\nmatch_pattern='x'\ndestination_hostgroup=1\n\
             [[mysql_query_rules]]\nrule_id=30\nmatch_pattern='x'\ndestination_hostgroup=3\n",
        );
        let a = eval(&s, "SELECT 'x'");
        assert_eq!(
            a.matched,
            vec![10, 20],
            "rule 30 is inactive (active defaults to 0)"
        );
        assert_eq!(a.destination_hostgroup, Some(2), "a later match overrides");
    }

    #[test]
    fn flag_chains_and_iterations() {
        let s = rules(
            "[[mysql_query_rules]]\nrule_id=1\nactive=1\nmatch_pattern='^SELECT'\nflagOUT=7\n\
             [[mysql_query_rules]]\nrule_id=2\nactive=1\nflagIN=7\nmatch_pattern='orders'\ndestination_hostgroup=5\napply=1\n\
             [[mysql_query_rules]]\nrule_id=3\nactive=1\nflagIN=7\ndestination_hostgroup=1\napply=1\n",
        );
        assert_eq!(
            eval(&s, "SELECT * FROM orders").destination_hostgroup,
            Some(5)
        );
        assert_eq!(
            eval(&s, "SELECT * FROM users").destination_hostgroup,
            Some(1)
        );
        assert_eq!(eval(&s, "SELECT * FROM users").matched, vec![1, 3]);
        assert_eq!(eval(&s, "DELETE FROM users").matched, Vec::<u32>::new());
        // A chain pointing back to an earlier rule needs query_processor_iterations.
        let back = "[[mysql_query_rules]]\nrule_id=1\nactive=1\nflagIN=3\ndestination_hostgroup=9\napply=1\n\
             [[mysql_query_rules]]\nrule_id=2\nactive=1\nmatch_pattern='.'\nflagOUT=3\n";
        let mut s = rules(back);
        assert_eq!(eval(&s, "SELECT 1").destination_hostgroup, None);
        s.iterations = 1;
        assert_eq!(eval(&s, "SELECT 1").destination_hostgroup, Some(9));
    }

    #[test]
    fn match_criteria() {
        let s = rules(
            "[[mysql_query_rules]]\nrule_id=1\nactive=1\nusername='other'\ndestination_hostgroup=1\n\
             [[mysql_query_rules]]\nrule_id=2\nactive=1\nschemaname='shop'\nclient_addr='10.0.0.%'\nproxy_port=6033\nmatch_pattern='^select'\nre_modifiers='CASELESS'\ndestination_hostgroup=2\n\
             [[mysql_query_rules]]\nrule_id=3\nactive=1\nmatch_pattern='^select'\nre_modifiers=''\ndestination_hostgroup=3\n\
             [[mysql_query_rules]]\nrule_id=4\nactive=1\nmatch_pattern='secret'\nnegate_match_pattern=1\nerror_msg='only secrets'\n\
             [[mysql_query_rules]]\nrule_id=5\nactive=1\nproxy_addr='10.9.9.9'\nOK_msg='never'\n",
        );
        let a = eval(&s, "SELECT 1");
        assert_eq!(a.matched, vec![2, 4]);
        assert_eq!(a.destination_hostgroup, Some(2));
        assert_eq!(a.error_msg.as_deref(), Some("only secrets"));
        assert_eq!(a.ok_msg, None);
        assert_eq!(eval(&s, "select secret").matched, vec![2, 3]);
        let d = digest("SELECT 1", Dialect::Mysql, 2048);
        let exact = rules(&format!(
            "[[mysql_query_rules]]\nrule_id=1\nactive=1\ndigest='{}'\ndestination_hostgroup=4\n",
            d.hex()
        ));
        assert_eq!(
            eval(&exact, "select 2").destination_hostgroup,
            Some(4),
            "same digest"
        );
        assert_eq!(eval(&exact, "select 2, 3").destination_hostgroup, None);
    }

    #[test]
    fn rewrite_with_capture_groups_and_global() {
        let s = rules(
            "[[mysql_query_rules]]\nrule_id=1\nactive=1\nmatch_pattern='FROM (\\w+)_old'\nreplace_pattern='FROM \\1_new'\n\
             [[mysql_query_rules]]\nrule_id=2\nactive=1\nmatch_pattern='_new'\ndestination_hostgroup=3\n\
             [[mysql_query_rules]]\nrule_id=3\nactive=1\nmatch_pattern='a'\nre_modifiers='CASELESS,GLOBAL'\nreplace_pattern='b$'\n",
        );
        let a = eval(&s, "SELECT x FROM t_old");
        assert_eq!(a.rewritten.as_deref(), Some("SELECT x FROM t_new"));
        assert_eq!(
            a.destination_hostgroup,
            Some(3),
            "later rules see the rewritten text"
        );
        let a = eval(&s, "aAa");
        assert_eq!(
            a.rewritten.as_deref(),
            Some("b$b$b$"),
            "GLOBAL replaces all; $ is literal"
        );
    }

    #[test]
    fn actions_and_fast_routing() {
        let s = rules(
            "[[mysql_query_rules]]\nrule_id=1\nactive=1\nmatch_pattern='^SELECT'\ncache_ttl=500\ncache_empty_result=0\ntimeout=100\nretries=2\ndelay=7\nnext_query_flagIN=4\nmirror_hostgroup=9\nmirror_flagOUT=2\nmultiplex=2\nsticky_conn=1\nlog=1\n\
             [[mysql_query_rules_fast_routing]]\nusername='app'\nschemaname='shop'\ndestination_hostgroup=8\ncomment=''\n",
        );
        let a = eval(&s, "SELECT 1");
        assert_eq!(
            (
                a.cache_ttl_ms,
                a.cache_empty_result,
                a.timeout_ms,
                a.retries,
                a.delay_ms
            ),
            (Some(500), Some(false), Some(100), Some(2), Some(7))
        );
        assert_eq!(
            (a.next_query_flag_in, a.mirror_hostgroup, a.mirror_flag_out),
            (Some(4), Some(9), Some(2))
        );
        assert_eq!(
            (a.multiplex, a.sticky_conn, a.log),
            (Some(2), Some(true), true)
        );
        assert_eq!(
            a.destination_hostgroup,
            Some(8),
            "fast routing when no rule chose a hostgroup"
        );
        let other = QueryContext {
            schema: "else",
            ..ctx(0)
        };
        let d = digest("UPDATE t SET a=1", Dialect::Mysql, 2048);
        assert_eq!(
            s.evaluate(&other, "UPDATE t SET a=1", &d)
                .destination_hostgroup,
            None
        );
    }

    #[test]
    fn bad_rules_are_reported_with_their_id() {
        let cfg = Config::parse("[[mysql_query_rules]]\nrule_id=4\nmatch_digest='(('\n");
        let e = cfg.expect_err("bad regex").to_string();
        assert!(
            e.contains("rule_id=4: match_digest \"((\" is not a valid regular expression"),
            "{e}"
        );
        let e = Config::parse("[[mysql_query_rules]]\nrule_id=5\nreplace_pattern='x'\n")
            .expect_err("replace without match")
            .to_string();
        assert!(
            e.contains("rule_id=5: replace_pattern needs match_pattern"),
            "{e}"
        );
        let e = Config::parse("[[mysql_query_rules]]\nrule_id=6\ndigest='zz'\n")
            .expect_err("bad digest")
            .to_string();
        assert!(e.contains("not a 0x"), "{e}");
    }
}

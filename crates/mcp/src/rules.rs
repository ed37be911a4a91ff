//! MCP query rules (ProxySQL 4.0's `mcp_query_rules`): matched in `rule_id` order on the MCP
//! user, the database login, the target, the schema, the tool and a regex on the SQL, chained
//! through flagIN/flagOUT; a match can rewrite the SQL, set the timeout, refuse the call or
//! answer it with a message. `apply = 1` ends the evaluation.

use regex::{Regex, RegexBuilder};
use sluice_core::config::McpQueryRule;
use std::sync::Arc;

/// Rules with their regexes compiled.
#[derive(Debug, Default)]
pub(crate) struct CompiledRules {
    rules: Vec<(McpQueryRule, Option<Regex>, bool)>,
}

/// What a call is, for matching.
#[derive(Debug, Clone, Copy)]
pub(crate) struct RuleInput<'a> {
    /// The MCP user.
    pub mcp_user: &'a str,
    /// The database login.
    pub db_user: &'a str,
    /// The target id.
    pub target: &'a str,
    /// The schema of the call ("" when none).
    pub schema: &'a str,
    /// The tool.
    pub tool: &'a str,
}

/// What the rules decided.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct RuleOutcome {
    /// The SQL, rewritten when a rule said so.
    pub sql: String,
    /// A rule's timeout.
    pub timeout_ms: Option<u64>,
    /// (rule_id, error_msg) of a rule that refuses the call.
    pub blocked: Option<(u32, String)>,
    /// A rule's answer in place of running the SQL.
    pub ok_msg: Option<String>,
    /// The rules that matched, in order.
    pub matched: Vec<u32>,
    /// A matching rule asked for the call to be logged.
    pub log: bool,
}

impl CompiledRules {
    /// Compiles active rules; one whose regex does not compile is skipped (the config reader
    /// already refused such rows).
    pub(crate) fn compile(rows: &[McpQueryRule]) -> Arc<CompiledRules> {
        let mut rules = Vec::new();
        for r in rows.iter().filter(|r| r.active.0) {
            let mods = r.re_modifiers.as_deref().unwrap_or("").to_ascii_uppercase();
            let regex = match &r.match_pattern {
                Some(p) => match RegexBuilder::new(p)
                    .case_insensitive(mods.contains("CASELESS"))
                    .size_limit(1 << 20)
                    .build()
                {
                    Ok(re) => Some(re),
                    Err(_) => continue,
                },
                None => None,
            };
            rules.push((r.clone(), regex, mods.contains("GLOBAL")));
        }
        Arc::new(CompiledRules { rules })
    }

    /// Evaluates the rules for `sql` in `input`.
    pub(crate) fn evaluate(&self, input: RuleInput<'_>, sql: &str) -> RuleOutcome {
        let mut out = RuleOutcome {
            sql: sql.to_string(),
            ..RuleOutcome::default()
        };
        let mut flag = 0u32;
        for (r, regex, global) in &self.rules {
            if r.flag_in != flag || !filters_match(r, input) {
                continue;
            }
            let hit = regex
                .as_ref()
                .is_none_or(|re| re.is_match(&out.sql) != r.negate_match_pattern.0);
            if !hit {
                continue;
            }
            out.matched.push(r.rule_id);
            if let (Some(re), Some(rep)) = (regex, &r.replace_pattern) {
                let rep = rep.replace("\\1", "${1}").replace("\\2", "${2}");
                out.sql = if *global {
                    re.replace_all(&out.sql, rep.as_str()).into_owned()
                } else {
                    re.replace(&out.sql, rep.as_str()).into_owned()
                };
            }
            if r.timeout_ms.is_some() {
                out.timeout_ms = r.timeout_ms;
            }
            if let Some(msg) = &r.error_msg {
                out.blocked = Some((r.rule_id, msg.clone()));
            }
            if r.ok_msg.is_some() {
                out.ok_msg = r.ok_msg.clone();
            }
            out.log |= r.log.is_some_and(|l| l.0);
            if let Some(f) = r.flag_out {
                flag = f;
            }
            if r.apply.0 {
                break;
            }
        }
        out
    }
}

fn filters_match(r: &McpQueryRule, i: RuleInput<'_>) -> bool {
    let eq = |want: &Option<String>, have: &str| want.as_deref().is_none_or(|w| w == have);
    eq(&r.mcp_username, i.mcp_user)
        && eq(&r.username, i.db_user)
        && eq(&r.target_id, i.target)
        && eq(&r.schemaname, i.schema)
        && eq(&r.tool_name, i.tool)
}

#[cfg(test)]
mod tests {
    use super::*;
    use sluice_core::config::Flag;

    fn rule(id: u32) -> McpQueryRule {
        McpQueryRule {
            rule_id: id,
            active: Flag(true),
            username: None,
            mcp_username: None,
            target_id: None,
            schemaname: None,
            tool_name: None,
            match_pattern: None,
            negate_match_pattern: Flag(false),
            re_modifiers: Some("CASELESS".into()),
            flag_in: 0,
            flag_out: None,
            replace_pattern: None,
            timeout_ms: None,
            error_msg: None,
            ok_msg: None,
            log: None,
            apply: Flag(true),
            comment: None,
        }
    }

    const INPUT: RuleInput<'static> = RuleInput {
        mcp_user: "analyst",
        db_user: "app",
        target: "t1",
        schema: "shop",
        tool: "run_sql_readonly",
    };

    #[test]
    fn block_rewrite_and_chains() {
        let mut block = rule(10);
        block.match_pattern = Some("salary".into());
        block.error_msg = Some("no salaries".into());
        let mut rewrite = rule(20);
        rewrite.match_pattern = Some("^select \\*".into());
        rewrite.replace_pattern = Some("SELECT id".into());
        rewrite.apply = Flag(false);
        rewrite.flag_out = Some(5);
        let mut timeout = rule(30);
        timeout.flag_in = 5;
        timeout.timeout_ms = Some(250);
        timeout.mcp_username = Some("analyst".into());
        let rules = CompiledRules::compile(&[block, rewrite, timeout]);
        let o = rules.evaluate(INPUT, "SELECT SALARY FROM emp");
        assert_eq!(o.blocked, Some((10, "no salaries".into())));
        let o = rules.evaluate(INPUT, "select * from t");
        assert_eq!(o.sql, "SELECT id from t");
        assert_eq!(o.timeout_ms, Some(250));
        assert_eq!(o.matched, [20, 30]);
        let other = RuleInput {
            mcp_user: "bot",
            ..INPUT
        };
        assert_eq!(rules.evaluate(other, "select * from t").matched, [20]);
    }
}

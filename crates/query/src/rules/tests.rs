//! Unit tests of the parent module.

use super::*;
use crate::{Dialect, digest::digest};
use sluice_config::Config;

fn rules(toml: &str) -> RuleSet {
    let cfg = Config::parse(toml).expect("config");
    RuleSet::compile(&cfg.mysql_query_rules, &cfg.mysql_query_rules_fast_routing).expect("rules")
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

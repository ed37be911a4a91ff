//! The query processor's cost per query: digests of typical sysbench and pgbench statements,
//! and rule evaluation with 10 and 100 rules (`cargo xtask bench core`; numbers in
//! docs/benchmarks.md).

use criterion::{Criterion, criterion_group, criterion_main};
use sluice_core::config::{QueryRule, QueryVariables};
use sluice_core::query::{Dialect, QueryContext, RuleSet, digest, process};
use std::hint::black_box;

const SYSBENCH: &[&str] = &[
    "SELECT c FROM sbtest1 WHERE id=4711",
    "SELECT c FROM sbtest3 WHERE id BETWEEN 4711 AND 4810",
    "SELECT DISTINCT c FROM sbtest2 WHERE id BETWEEN 100 AND 199 ORDER BY c",
    "UPDATE sbtest4 SET k=k+1 WHERE id=5001",
    "INSERT INTO sbtest1 (id, k, c, pad) VALUES (5001, 4990, '83868641912-28773972837-60736120486-75162659906-27563526494-20381887404-41576422241-93426793964-56405065102-33518432330', '67847967377-48000963322-62604785301-91415491898-96926520291')",
];

const PGBENCH: &[&str] = &[
    "SELECT abalance FROM pgbench_accounts WHERE aid = 48213;",
    "UPDATE pgbench_accounts SET abalance = abalance + -4007 WHERE aid = 48213;",
    "INSERT INTO pgbench_history (tid, bid, aid, delta, mtime) VALUES (7, 1, 48213, -4007, CURRENT_TIMESTAMP);",
];

/// `n` rules as users write them: regexes on the digest, the split pair last.
fn rules(n: usize) -> RuleSet {
    let mut rows = Vec::new();
    for i in 0..n.saturating_sub(2) {
        rows.push(rule(
            i as u32 + 1,
            &format!("^SELECT .* FROM audit_{i} "),
            2,
        ));
    }
    rows.push(rule(n as u32 - 1, "^SELECT.*FOR UPDATE", 0));
    rows.push(rule(n as u32, "^SELECT", 1));
    RuleSet::compile(&rows, &[]).expect("rules compile")
}

fn rule(id: u32, match_digest: &str, hg: u32) -> QueryRule {
    let text = format!(
        "rule_id = {id}\nactive = 1\nmatch_digest = '{match_digest}'\ndestination_hostgroup = {hg}\napply = 1\n"
    );
    toml::from_str(&text).expect("rule")
}

fn ctx() -> QueryContext<'static> {
    QueryContext {
        user: "app",
        schema: "sbtest",
        client_addr: "127.0.0.1",
        proxy_addr: "127.0.0.1",
        proxy_port: 6033,
        flag_in: 0,
    }
}

fn bench(c: &mut Criterion) {
    c.bench_function("digest/sysbench (5 statements)", |b| {
        b.iter(|| {
            for q in SYSBENCH {
                black_box(digest(black_box(q), Dialect::Mysql, 2048));
            }
        })
    });
    c.bench_function("digest/pgbench (3 statements)", |b| {
        b.iter(|| {
            for q in PGBENCH {
                black_box(digest(black_box(q), Dialect::Pgsql, 2048));
            }
        })
    });
    let vars = QueryVariables::default();
    for n in [10, 100] {
        let set = rules(n);
        c.bench_function(&format!("digest+rules/point select, {n} rules"), |b| {
            b.iter(|| {
                black_box(process(
                    &set,
                    &vars,
                    &ctx(),
                    black_box(SYSBENCH[0]),
                    Dialect::Mysql,
                ))
            })
        });
        c.bench_function(&format!("digest+rules/update (no match), {n} rules"), |b| {
            b.iter(|| {
                black_box(process(
                    &set,
                    &vars,
                    &ctx(),
                    black_box(SYSBENCH[3]),
                    Dialect::Mysql,
                ))
            })
        });
    }
}

criterion_group!(benches, bench);
criterion_main!(benches);

//! The crates' embedding examples (`crates/*/examples/`) run as a user would run them: the core
//! one on its own, the pool ones against the real test backends. `cargo xtask test` builds them
//! first (`cargo build --workspace --examples`).

use sluice_tests::*;
use std::process::Command;

/// Runs an example binary from `target/debug/examples` with `args`; its stdout.
fn example(name: &str, args: &[&str]) -> String {
    let bin = xtask::workspace_root()
        .join("target/debug/examples")
        .join(name);
    assert!(
        bin.exists(),
        "{} is not built: run `cargo build --workspace --examples` (cargo xtask test does)",
        bin.display()
    );
    ok_stdout(
        &Command::new(&bin)
            .args(args)
            .output()
            .expect("example runs"),
    )
}

#[test]
fn core_routes_statements_with_rules_built_in_code() {
    let out = example("route", &[]);
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), 6, "{out}");
    assert!(lines[0].ends_with("| SELECT balance FROM accounts WHERE id = ? | hostgroup 1"));
    assert!(lines[1].ends_with("FOR UPDATE | hostgroup 0"));
    assert!(lines[2].ends_with("| default hostgroup"));
    assert!(lines[3].ends_with("| refused: DELETE without WHERE is not allowed here"));
    assert_eq!(
        lines[5],
        "  rewritten: SELECT * FROM orders WHERE id IN (1, 2, 3)"
    );
}

#[test]
fn pgsql_pool_serves_a_service_from_one_pooled_connection() {
    if !backends_ready() {
        return;
    }
    let addr = format!("127.0.0.1:{}", ports::PG_PRIMARY);
    let out = example("pg_pooled_query", &[&addr, "app", "app", "app"]);
    assert!(out.contains("says 20 + 22 = 42"), "{out}");
    assert!(
        out.ends_with("one pooled connection served every checkout: true\n"),
        "{out}"
    );
}

#[test]
fn mysql_pool_serves_a_service_from_one_pooled_connection() {
    if !backends_ready() {
        return;
    }
    let addr = format!("127.0.0.1:{}", ports::MY_PRIMARY);
    let out = example("mysql_pooled_query", &[&addr, "app", "app"]);
    assert!(out.contains("says 20 + 22 = 42"), "{out}");
    assert!(
        out.ends_with("one pooled connection served every checkout: true\n"),
        "{out}"
    );
}

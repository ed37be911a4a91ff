//! `cargo xtask test`: lint, backends up, the whole test suite, backends down (always).

use std::process::Command;
use xtask::proc::{run_visible, step};

/// Runs the suite; extra args go to `cargo test` (e.g. a test name filter).
pub fn run(extra: &[&str]) -> xtask::Result<()> {
    let root = xtask::workspace_root();
    step("cargo fmt --check");
    run_visible(
        Command::new("cargo")
            .current_dir(&root)
            .args(["fmt", "--all", "--check"]),
    )?;
    step("cargo clippy --all-targets -- -D warnings");
    run_visible(Command::new("cargo").current_dir(&root).args([
        "clippy",
        "--workspace",
        "--all-targets",
        "--quiet",
        "--",
        "-D",
        "warnings",
    ]))?;
    xtask::packages::ensure_test_tools()?;
    xtask::backends_up()?;
    let mut result = build_and_test(&root, extra);
    if result.is_ok() && extra.is_empty() {
        // Short and bounded here; `cargo xtask soak` (30 min) is the long run.
        let minutes = crate::bench::env_num("SLUICE_SOAK_MINUTES", 3).to_string();
        step(&format!(
            "soak: {minutes} minutes of load, faults and the commit ledger"
        ));
        result = crate::soak::run(&["--minutes", &minutes]);
    }
    step("stopping backends");
    let down = xtask::backends_down();
    match (&result, &down) {
        (Ok(()), Ok(())) => step("all tests passed"),
        (Err(e), _) => step(&format!("tests FAILED: {e}")),
        (Ok(()), Err(e)) => step(&format!("tests passed but stopping backends failed: {e}")),
    }
    result.and(down)?;
    if !extra.is_empty() {
        return Ok(());
    }
    // Short and bounded here; `cargo xtask fuzz --time 1800` is the long run (docs/reliability.md).
    let secs = crate::bench::env_num("SLUICE_FUZZ_SECONDS", 5).to_string();
    crate::fuzz::run(&["--time", &secs])
}

fn build_and_test(root: &std::path::Path, extra: &[&str]) -> xtask::Result<()> {
    step("building sluice");
    run_visible(Command::new("cargo").current_dir(root).args([
        "build",
        "--quiet",
        "-p",
        "sluice-bin",
    ]))?;
    step("building the examples (each crate's embedding examples, run by tests/tests/examples.rs)");
    run_visible(Command::new("cargo").current_dir(root).args([
        "build",
        "--quiet",
        "--workspace",
        "--examples",
    ]))?;
    let bin = root.join("target").join("debug").join("sluice");
    step("running the test suite (unit + end-to-end against the real backends)");
    let mut cmd = Command::new("cargo");
    cmd.current_dir(root)
        .args(["test", "--workspace"])
        .env("SLUICE_BIN", &bin)
        .env("SLUICE_REQUIRE_BACKENDS", "1")
        .env("SLUICE_BACKENDS_DIR", xtask::state_dir());
    if !extra.is_empty() {
        cmd.arg("--").args(extra);
    }
    run_visible(&mut cmd)
}

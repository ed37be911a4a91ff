//! `cargo xtask fuzz [TARGET] [--time S] [--runs N] [--smoke]`: builds the coverage-guided fuzz targets in `fuzz/`
//! (libFuzzer through libfuzzer-sys on the stable toolchain, with the SanitizerCoverage
//! instrumentation cargo-fuzz would add; no nightly, no sanitizer runtime), replays every
//! regression input, then fuzzes each target for the given time from the committed seed corpus
//! (real traffic captured by `cargo xtask fuzz seed`) and prints executions, coverage and memory.

use std::path::{Path, PathBuf};
use std::process::Command;
use xtask::proc::{run_visible, step};

/// Every target in `fuzz/Cargo.toml`, in the order they run.
pub(crate) const TARGETS: &[&str] = &[
    "mysql_packets",
    "mysql_handshake",
    "mysql_reply",
    "mysql_execute",
    "mysql_sql",
    "pg_framing",
    "pg_startup",
    "pg_reply",
    "pg_scram",
    "pg_extended",
    "pg_sql",
    "digest",
    "admin_sql",
    "config",
];

/// The instrumentation cargo-fuzz uses for libFuzzer, all of it stable `-C` flags; `fuzzing`
/// turns on the crates' `fuzzing` entry points.
const RUSTFLAGS: &str = "--cfg fuzzing -Cpasses=sancov-module \
    -Cllvm-args=-sanitizer-coverage-level=4 \
    -Cllvm-args=-sanitizer-coverage-inline-8bit-counters \
    -Cllvm-args=-sanitizer-coverage-pc-table \
    -Cllvm-args=-sanitizer-coverage-trace-compares \
    -Cdebug-assertions -Coverflow-checks";

/// The target triple is passed explicitly so RUSTFLAGS reach only the fuzzed code, not build
/// scripts and proc macros.
const TRIPLE: &str = "x86_64-unknown-linux-gnu";

/// Memory bound per fuzzing process: a decoder that buffers without bound fails here.
const RSS_LIMIT_MB: u32 = 2048;

/// What one target's run reported.
struct RunStats {
    target: &'static str,
    executions: u64,
    seconds: u64,
    coverage: u64,
    corpus: usize,
    peak_rss_mb: u64,
    outcome: String,
}

/// Entry point: `args` are what follows `fuzz` on the command line.
pub(crate) fn run(args: &[&str]) -> xtask::Result<()> {
    if args.first() == Some(&"seed") {
        return crate::fuzz_seed::run();
    }
    let mut time = 60u64;
    let mut runs = None;
    let mut only = None;
    let mut profile = Profile::Release;
    let mut rest = args.iter();
    while let Some(a) = rest.next() {
        match *a {
            "--time" => {
                time = rest
                    .next()
                    .and_then(|s| s.parse().ok())
                    .ok_or("--time needs seconds")?;
            }
            "--runs" => {
                runs = Some(
                    rest.next()
                        .and_then(|s| s.parse::<u64>().ok())
                        .ok_or("--runs needs a count")?,
                );
            }
            "--smoke" => profile = Profile::Smoke,
            t if TARGETS.contains(&t) => only = Some(t),
            other => {
                return Err(format!(
                    "unknown fuzz argument {other:?}; targets: {}",
                    TARGETS.join(", ")
                ));
            }
        }
    }
    let bins = build(profile)?;
    let targets: Vec<&'static str> = TARGETS
        .iter()
        .copied()
        .filter(|t| only.is_none_or(|o| o == *t))
        .collect();
    let mut table = Vec::new();
    for t in &targets {
        replay_regressions(&bins, t)?;
    }
    for t in targets {
        step(&format!("fuzzing {t} for {time}s"));
        table.push(fuzz_one(&bins, t, time, runs)?);
    }
    print_table(&table);
    let failed: Vec<&str> = table
        .iter()
        .filter(|r| r.outcome != "ok")
        .map(|r| r.target)
        .collect();
    if failed.is_empty() {
        Ok(())
    } else {
        Err(format!(
            "fuzz targets failed: {} (inputs under target/fuzz-artifacts/)",
            failed.join(", ")
        ))
    }
}

fn fuzz_dir() -> PathBuf {
    xtask::workspace_root().join("fuzz")
}

/// Builds every target with instrumentation into `target/fuzz`; returns the binaries' folder.
/// How the targets are built: release for real fuzzing, the lighter `smoke` profile of
/// `fuzz/Cargo.toml` for CI's few seconds per target (same instrumentation and checks).
#[derive(Clone, Copy)]
enum Profile {
    Release,
    Smoke,
}

impl Profile {
    fn name(self) -> &'static str {
        match self {
            Profile::Release => "release",
            Profile::Smoke => "smoke",
        }
    }
}

fn build(profile: Profile) -> xtask::Result<PathBuf> {
    let target_dir = xtask::workspace_root().join("target").join("fuzz");
    let name = profile.name();
    step(&format!(
        "building the fuzz targets ({name} profile, SanitizerCoverage instrumentation)"
    ));
    run_visible(
        Command::new("cargo")
            .current_dir(fuzz_dir())
            .args(["build", "--profile", name, "--quiet", "--target", TRIPLE])
            .env("RUSTFLAGS", RUSTFLAGS)
            .env("CARGO_TARGET_DIR", &target_dir),
    )?;
    Ok(target_dir.join(TRIPLE).join(name))
}

/// Runs every committed input under `fuzz/regressions/<target>` once: each is a crash found
/// earlier, fixed since, and must stay fixed.
fn replay_regressions(bins: &Path, target: &str) -> xtask::Result<()> {
    let dir = fuzz_dir().join("regressions").join(target);
    let Ok(entries) = std::fs::read_dir(&dir) else {
        return Ok(());
    };
    let files: Vec<PathBuf> = entries.flatten().map(|e| e.path()).collect();
    if files.is_empty() {
        return Ok(());
    }
    step(&format!(
        "replaying {} regression input(s) of {target}",
        files.len()
    ));
    let out = Command::new(bins.join(target))
        .args(&files)
        .output()
        .map_err(|e| format!("cannot run {target}: {e}"))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "{target} fails on a regression input again:\n{}",
            xtask::proc::last_lines(&String::from_utf8_lossy(&out.stderr), 30)
        ))
    }
}

/// Fuzzes `target` for `seconds` (or `runs` executions, whichever ends first) from its seeds (read-only) into a working corpus under
/// `target/fuzz-corpus`, which later runs continue from.
fn fuzz_one(
    bins: &Path,
    target: &'static str,
    seconds: u64,
    runs: Option<u64>,
) -> xtask::Result<RunStats> {
    let root = xtask::workspace_root();
    let corpus = root.join("target").join("fuzz-corpus").join(target);
    let artifacts = root.join("target").join("fuzz-artifacts").join(target);
    let seeds = fuzz_dir().join("seeds").join(target);
    for d in [&corpus, &artifacts] {
        std::fs::create_dir_all(d).map_err(|e| format!("creating {}: {e}", d.display()))?;
    }
    let mut cmd = Command::new(bins.join(target));
    cmd.arg(&corpus);
    if seeds.is_dir() {
        cmd.arg(&seeds);
    }
    if let Some(n) = runs {
        cmd.arg(format!("-runs={n}"));
    }
    let started = std::time::Instant::now();
    cmd.arg(format!("-max_total_time={seconds}"))
        .arg(format!("-rss_limit_mb={RSS_LIMIT_MB}"))
        .arg("-timeout=10")
        .arg("-max_len=65536")
        .arg("-print_final_stats=1")
        .arg(format!("-artifact_prefix={}/", artifacts.display()));
    let out = cmd
        .output()
        .map_err(|e| format!("cannot run {target}: {e}"))?;
    let log = String::from_utf8_lossy(&out.stderr);
    let stat = |name: &str| -> u64 {
        log.lines()
            .find_map(|l| l.strip_prefix(&format!("stat::{name}:")))
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or(0)
    };
    let coverage = log
        .lines()
        .rev()
        .find_map(|l| l.split(" cov: ").nth(1))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    let outcome = if out.status.success() {
        "ok".to_string()
    } else {
        step(&format!(
            "{target} FAILED:\n{}",
            xtask::proc::last_lines(&log, 40)
        ));
        format!("FAILED ({})", out.status)
    };
    Ok(RunStats {
        target,
        executions: stat("number_of_executed_units"),
        seconds: started.elapsed().as_secs(),
        coverage,
        corpus: std::fs::read_dir(&corpus).map(|d| d.count()).unwrap_or(0),
        peak_rss_mb: stat("peak_rss_mb"),
        outcome,
    })
}

fn print_table(rows: &[RunStats]) {
    println!(
        "\n| target | executions | exec/s | coverage (edges) | corpus | peak RSS MB | result |"
    );
    println!("|---|---:|---:|---:|---:|---:|---|");
    for r in rows {
        println!(
            "| {} | {} | {} | {} | {} | {} | {} |",
            r.target,
            r.executions,
            r.executions / r.seconds.max(1),
            r.coverage,
            r.corpus,
            r.peak_rss_mb,
            r.outcome
        );
    }
}

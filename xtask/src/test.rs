//! `cargo xtask test`: lint, backends up, the whole test suite, backends down (always), then a
//! short soak and fuzz. Each phase's time is printed as it ends and again in a table at the end.
//!
//! `--repeat N` runs the suite N times against the same backends and build (no soak, no fuzz),
//! stopping at the first failing pass; `--cpu-hog` keeps one core busy meanwhile, as a noisy CI
//! machine does. Other arguments go to `cargo test` (e.g. a test name filter).

use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};
use xtask::proc::{run_visible, step};

/// How `cargo xtask test` was asked to run.
struct Options<'a> {
    /// Passes of the suite: `--repeat N`, else one.
    repeat: Option<u32>,
    /// Keep one core busy while the suite runs.
    cpu_hog: bool,
    /// Arguments for the test binaries (after `cargo test … --`).
    filter: Vec<&'a str>,
}

impl<'a> Options<'a> {
    fn parse(args: &[&'a str]) -> xtask::Result<Options<'a>> {
        let mut options = Options {
            repeat: None,
            cpu_hog: false,
            filter: Vec::new(),
        };
        let mut args = args.iter();
        while let Some(arg) = args.next() {
            match *arg {
                "--repeat" => {
                    let n = args.next().ok_or("--repeat needs a count")?;
                    options.repeat = Some(
                        n.parse()
                            .ok()
                            .filter(|n| *n > 0)
                            .ok_or_else(|| format!("--repeat {n}: not a count of passes"))?,
                    );
                }
                "--cpu-hog" => options.cpu_hog = true,
                other => options.filter.push(other),
            }
        }
        Ok(options)
    }

    /// The full run: the whole suite once, then the soak and the fuzz.
    fn is_full_run(&self) -> bool {
        self.repeat.is_none() && self.filter.is_empty()
    }

    fn passes(&self) -> u32 {
        self.repeat.unwrap_or(1)
    }
}

/// Each phase's name and how long it took, printed as a table when the run ends.
struct Phases {
    started: Instant,
    done: Vec<(String, Duration)>,
}

impl Phases {
    fn new() -> Phases {
        Phases {
            started: Instant::now(),
            done: Vec::new(),
        }
    }

    /// Runs one phase with a progress line before and its time after.
    fn run<T>(&mut self, name: &str, f: impl FnOnce() -> xtask::Result<T>) -> xtask::Result<T> {
        step(name);
        let start = Instant::now();
        let result = f();
        let took = start.elapsed();
        let outcome = if result.is_ok() { "done" } else { "FAILED" };
        step(&format!("{outcome} in {}: {name}", minutes(took)));
        self.done.push((name.to_string(), took));
        result
    }

    fn print(&self) {
        step("phase times:");
        for (name, took) in &self.done {
            eprintln!("  {:>9}  {name}", minutes(*took));
        }
        eprintln!("  {:>9}  total", minutes(self.started.elapsed()));
    }
}

fn minutes(d: Duration) -> String {
    let s = d.as_secs();
    format!("{}m{:02}s", s / 60, s % 60)
}

/// Runs the suite; see the module doc for the arguments.
pub(crate) fn run(args: &[&str]) -> xtask::Result<()> {
    let options = Options::parse(args)?;
    let mut phases = Phases::new();
    let result = run_phases(&options, &mut phases);
    phases.print();
    result
}

fn run_phases(options: &Options, phases: &mut Phases) -> xtask::Result<()> {
    let root = xtask::workspace_root();
    phases.run(
        "installing the build tools",
        xtask::packages::ensure_build_tools,
    )?;
    phases.run("cargo fmt --check", || {
        run_visible(
            Command::new("cargo")
                .current_dir(&root)
                .args(["fmt", "--all", "--check"]),
        )
    })?;
    phases.run("cargo clippy --all-targets -- -D warnings", || {
        run_visible(Command::new("cargo").current_dir(&root).args([
            "clippy",
            "--workspace",
            "--all-targets",
            "--quiet",
            "--",
            "-D",
            "warnings",
        ]))
    })?;
    phases.run("cargo xtask check-layers", xtask::layers::check)?;
    phases.run(
        "installing the test tools",
        xtask::packages::ensure_test_tools,
    )?;
    phases.run("starting the backends", xtask::backends_up)?;
    let mut result = build_and_test(&root, options, phases);
    if result.is_ok() && options.is_full_run() {
        // Short and bounded here; `cargo xtask soak` (30 min) is the long run.
        let minutes = crate::bench::env_num("SLUICE_SOAK_MINUTES", 3).to_string();
        result = phases.run(
            &format!("soak: {minutes} minutes of load, faults and the commit ledger"),
            || crate::soak::run(&["--minutes", &minutes]),
        );
    }
    let down = phases.run("stopping the backends", xtask::backends_down);
    match (&result, &down) {
        (Ok(()), Ok(())) => step("all tests passed"),
        (Err(e), _) => step(&format!("tests FAILED: {e}")),
        (Ok(()), Err(e)) => step(&format!("tests passed but stopping backends failed: {e}")),
    }
    result.and(down)?;
    if !options.is_full_run() {
        return Ok(());
    }
    // Short and bounded here; `cargo xtask fuzz --time 1800` is the long run (docs/reliability.md).
    let secs = crate::bench::env_num("SLUICE_FUZZ_SECONDS", 5).to_string();
    phases.run(&format!("fuzz: {secs} s per target"), || {
        crate::fuzz::run(&["--time", &secs, "--smoke"])
    })
}

fn build_and_test(
    root: &std::path::Path,
    options: &Options,
    phases: &mut Phases,
) -> xtask::Result<()> {
    phases.run("building sluice", || {
        run_visible(Command::new("cargo").current_dir(root).args([
            "build",
            "--quiet",
            "-p",
            "sluice-bin",
        ]))
    })?;
    phases.run(
        "building the examples (each crate's embedding examples, run by tests/tests/examples.rs)",
        || {
            run_visible(Command::new("cargo").current_dir(root).args([
                "build",
                "--quiet",
                "--workspace",
                "--examples",
            ]))
        },
    )?;
    phases.run("building the test binaries", || {
        run_visible(suite_command(root, options).arg("--no-run"))
    })?;
    let _hog = options.cpu_hog.then(CpuHog::start);
    let passes = options.passes();
    for pass in 1..=passes {
        let name = match options.repeat {
            None => "running the test suite (unit + end-to-end against the real backends)".into(),
            Some(_) => format!("test suite pass {pass} of {passes}"),
        };
        phases.run(&name, || {
            let mut cmd = suite_command(root, options);
            if !options.filter.is_empty() {
                cmd.arg("--").args(&options.filter);
            }
            run_visible(&mut cmd)
        })?;
    }
    Ok(())
}

/// `cargo test --workspace` with the environment the end-to-end suites read.
fn suite_command(root: &std::path::Path, options: &Options) -> Command {
    let bin = root.join("target").join("debug").join("sluice");
    let mut cmd = Command::new("cargo");
    cmd.current_dir(root)
        .args(["test", "--workspace"])
        .env("SLUICE_BIN", &bin)
        .env("SLUICE_BACKENDS_DIR", xtask::state_dir());
    if options.repeat.is_some() {
        cmd.arg("--quiet");
    }
    cmd
}

/// One thread spinning on a core until dropped: the suite under a noisy neighbour.
struct CpuHog {
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl CpuHog {
    fn start() -> CpuHog {
        step("--cpu-hog: one thread keeps a core busy while the suite runs");
        let stop = Arc::new(AtomicBool::new(false));
        let spinning = stop.clone();
        let thread = std::thread::spawn(move || {
            let mut x: u64 = 1;
            while !spinning.load(Ordering::Relaxed) {
                for _ in 0..100_000 {
                    x = std::hint::black_box(x.wrapping_mul(6364136223846793005).wrapping_add(1));
                }
            }
        });
        CpuHog {
            stop,
            thread: Some(thread),
        }
    }
}

impl Drop for CpuHog {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

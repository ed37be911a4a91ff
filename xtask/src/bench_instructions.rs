//! `cargo xtask bench instructions`: Sluice's user-space instructions per statement, counted by
//! valgrind's callgrind, for the workloads of `bench alloc`.
//!
//! Throughput on this shared two-core machine moves ±15 % from run to run, more than most
//! changes to the statement path; an instruction count moves by less than 1 %. Sluice runs under
//! callgrind (about fifty times slower, so the clients never wait on each other); each workload
//! runs twice with a different number of statements (`BENCH_INSTR_EVENTS`, default 5,000, and a
//! fifth of it), the counters dumped after each run, and the difference divided by the
//! difference in statements is the cost per statement (logins cancel out). Kernel time is not
//! counted, and `rep movsb` (large copies) counts one instruction per byte.
//! `BENCH_BASELINE_BIN=/path/to/sluice` measures that binary the same way in the same run.

use crate::bench::env_num;
use crate::bench_alloc::{MYSQL_PORT, PGSQL_PORT, WORKLOADS, config};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;
use xtask::proc::{self, run_capture, step};

/// One binary under callgrind.
struct Counted {
    child: Child,
    dir: PathBuf,
}

impl Counted {
    fn start(bin: &Path, dir: &Path, config: &str) -> xtask::Result<Counted> {
        let _ = std::fs::remove_dir_all(dir);
        std::fs::create_dir_all(dir).map_err(|e| e.to_string())?;
        let cfg = dir.join("sluice.toml");
        std::fs::write(&cfg, config).map_err(|e| e.to_string())?;
        let log = std::fs::File::create(dir.join("sluice.log")).map_err(|e| e.to_string())?;
        let child = Command::new("valgrind")
            .arg("--tool=callgrind")
            .arg(format!("--callgrind-out-file={}/cg.%p", dir.display()))
            .arg(bin)
            .arg("--config")
            .arg(&cfg)
            .arg("--initial")
            .arg("--datadir")
            .arg(dir.join("data"))
            .env("RUST_LOG", "warn")
            .env("NO_COLOR", "1")
            .stdout(log.try_clone().map_err(|e| e.to_string())?)
            .stderr(log)
            .spawn()
            .map_err(|e| format!("cannot start valgrind: {e}"))?;
        let up = proc::wait_until(Duration::from_secs(120), || {
            proc::port_open(MYSQL_PORT) && proc::port_open(PGSQL_PORT)
        });
        if !up {
            return Err(format!(
                "{} under callgrind did not open its ports in 120 s (log in {})",
                bin.display(),
                dir.display()
            ));
        }
        Ok(Counted {
            child,
            dir: dir.into(),
        })
    }

    /// Instructions since the last dump: dumps the counters and reads the new file's summary.
    fn dump(&self) -> xtask::Result<u64> {
        let before = self.dumps();
        run_capture(
            Command::new("callgrind_control")
                .arg("-d")
                .arg(self.child.id().to_string())
                .stdin(Stdio::null()),
        )?;
        let mut newest = None;
        proc::wait_until(Duration::from_secs(30), || {
            newest = self.dumps().into_iter().find(|p| !before.contains(p));
            newest.is_some()
        });
        let file = newest.ok_or("callgrind wrote no dump")?;
        // The file may still be being written: its summary line is near the top.
        let mut summary = None;
        proc::wait_until(Duration::from_secs(10), || {
            summary = std::fs::read_to_string(&file).ok().and_then(|t| {
                t.lines()
                    .find_map(|l| l.strip_prefix("summary: "))
                    .and_then(|v| v.trim().parse().ok())
            });
            summary.is_some()
        });
        summary.ok_or_else(|| format!("no summary in {}", file.display()))
    }

    fn dumps(&self) -> Vec<PathBuf> {
        std::fs::read_dir(&self.dir)
            .map(|d| {
                d.flatten()
                    .map(|e| e.path())
                    .filter(|p| {
                        p.file_name()
                            .is_some_and(|n| n.to_string_lossy().contains("cg."))
                    })
                    .collect()
            })
            .unwrap_or_default()
    }

    fn stop(mut self) {
        proc::signal(self.child.id(), "TERM");
        let _ = self.child.wait();
    }
}

/// Instructions per statement of every workload, through `bin` running `config`.
pub(crate) fn measure(
    bin: &Path,
    dir: &Path,
    (small, large): (u64, u64),
    config: &str,
) -> xtask::Result<Vec<f64>> {
    let counted = Counted::start(bin, dir, config)?;
    let mut per = Vec::new();
    let result = (|| {
        for w in &WORKLOADS {
            step(&format!(
                "{}: {small} then {large} statements under callgrind",
                w.name
            ));
            counted.dump()?;
            run_capture(&mut (w.run)(small))?;
            let a = counted.dump()?;
            run_capture(&mut (w.run)(large))?;
            let b = counted.dump()?;
            per.push((b as f64 - a as f64) / (large - small) as f64);
        }
        Ok(())
    })();
    counted.stop();
    result.map(|()| per)
}

/// Runs the instruction benchmark and prints the table (also written to
/// target/bench-instructions.md).
pub fn instructions() -> xtask::Result<()> {
    xtask::packages::ensure_valgrind()?;
    let state = crate::bench_alloc::prepare_workloads()?;
    crate::bench::build_release()?;
    let root = xtask::workspace_root();
    let large = env_num("BENCH_INSTR_EVENTS", 5_000);
    let small = (large / 5).max(4);
    let mut targets = vec![("sluice".to_string(), root.join("target/release/sluice"))];
    if let Some(b) = std::env::var_os("BENCH_BASELINE_BIN") {
        targets.push(("sluice-baseline".to_string(), PathBuf::from(b)));
    }
    let mut columns = Vec::new();
    for (name, bin) in &targets {
        let dir = state.join("bench-instructions").join(name);
        columns.push(measure(bin, &dir, (small, large), &config())?);
    }
    let names: Vec<&str> = targets.iter().map(|(n, _)| n.as_str()).collect();
    let mut t = format!(
        "Sluice's user-space instructions per statement (callgrind; 4 clients; runs of {small} and \
         {large} statements, the difference divided by {}; monitors off)\n\n| workload | {} |\n|---|{}\n",
        large - small,
        names.join(" | "),
        "---|".repeat(names.len()),
    );
    for (i, w) in WORKLOADS.iter().enumerate() {
        let cells: Vec<String> = columns.iter().map(|c| format!("{:.0}", c[i])).collect();
        t.push_str(&format!("| {} | {} |\n", w.name, cells.join(" | ")));
    }
    println!("\n{t}");
    let out = root.join("target/bench-instructions.md");
    std::fs::write(&out, &t).map_err(|e| e.to_string())?;
    step(&format!("table written to {}", out.display()));
    Ok(())
}

//! `cargo xtask demo`: backends up, sluice with docs/demo.toml, until Ctrl-C.

use std::process::Command;
use std::sync::mpsc;
use xtask::proc::{run_visible, step};

/// Runs the demo until Ctrl-C, then stops sluice and the backends.
pub(crate) fn run() -> xtask::Result<()> {
    let root = xtask::workspace_root();
    let (tx, rx) = mpsc::channel();
    ctrlc::set_handler(move || {
        let _ = tx.send(());
    })
    .map_err(|e| format!("cannot install the Ctrl-C handler: {e}"))?;
    xtask::backends_up()?;
    xtask::packages::ensure_build_tools()?;
    step("building sluice");
    run_visible(Command::new("cargo").current_dir(&root).args([
        "build",
        "--quiet",
        "-p",
        "sluice-bin",
    ]))?;
    let mut child = Command::new(root.join("target/debug/sluice"))
        .current_dir(&root)
        .args(["--config", "docs/demo.toml"])
        .spawn()
        .map_err(|e| format!("cannot start sluice: {e}"))?;
    let started = xtask::proc::wait_until(std::time::Duration::from_secs(10), || {
        xtask::proc::port_open(6033) || matches!(child.try_wait(), Ok(Some(_)))
    });
    if !started || matches!(child.try_wait(), Ok(Some(_))) {
        let _ = child.kill();
        xtask::backends_down()?;
        return Err("sluice did not start (see its error above); backends stopped".into());
    }
    println!();
    println!(
        "  Sluice is running (pid {}) in front of MariaDB :13306 (hostgroup 0) and :13307 (hostgroup 1).",
        child.id()
    );
    println!("  Connect:   mariadb -h127.0.0.1 -P6033 -uapp -papp");
    println!(
        "  Direct:    mariadb -h127.0.0.1 -P13306 -uapp -papp   (PostgreSQL: psql -h 127.0.0.1 -p 15432 -U app app)"
    );
    println!("  Config:    docs/demo.toml        Stop: Ctrl-C");
    println!();
    let _ = rx.recv();
    step("Ctrl-C: stopping sluice");
    xtask::proc::signal(child.id(), "TERM");
    let _ = child.wait();
    step("stopping backends");
    xtask::backends_down()
}

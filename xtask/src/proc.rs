//! Small process helpers: progress lines, running commands, pid liveness, waiting.

use crate::Result;
use std::io::Write;
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

/// Prints a progress line with a timestamp, so long steps show what they are doing.
pub fn step(msg: &str) {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    let (h, m, s) = ((secs / 3600) % 24, (secs / 60) % 60, secs % 60);
    let mut err = std::io::stderr().lock();
    let _ = writeln!(err, "[xtask {h:02}:{m:02}:{s:02}] {msg}");
}

/// True when running as root (uid 0).
pub fn is_root() -> bool {
    run_capture(Command::new("id").arg("-u"))
        .map(|s| s.trim() == "0")
        .unwrap_or(false)
}

/// Runs a command and returns its stdout; a non-zero exit is an error with stderr attached.
pub fn run_capture(cmd: &mut Command) -> Result<String> {
    let out = output(cmd)?;
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    } else {
        Err(format!(
            "{:?} failed ({}): {}{}",
            cmd,
            out.status,
            String::from_utf8_lossy(&out.stderr).trim(),
            String::from_utf8_lossy(&out.stdout).trim()
        ))
    }
}

/// Runs a command feeding `input` on stdin; non-zero exit is an error.
pub fn run_with_input(cmd: &mut Command, input: &str) -> Result<String> {
    let mut child = cmd
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("cannot start {cmd:?}: {e}"))?;
    if let Some(mut stdin) = child.stdin.take() {
        stdin
            .write_all(input.as_bytes())
            .map_err(|e| format!("writing to {cmd:?}: {e}"))?;
    }
    let out = child
        .wait_with_output()
        .map_err(|e| format!("waiting for {cmd:?}: {e}"))?;
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    } else {
        Err(format!(
            "{:?} failed ({}): {}",
            cmd,
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

/// Runs a command with inherited stdio; non-zero exit is an error.
pub fn run_visible(cmd: &mut Command) -> Result<()> {
    let status = cmd
        .status()
        .map_err(|e| format!("cannot start {cmd:?}: {e}"))?;
    if status.success() {
        Ok(())
    } else {
        Err(format!("{cmd:?} failed ({status})"))
    }
}

fn output(cmd: &mut Command) -> Result<Output> {
    cmd.stdin(Stdio::null())
        .output()
        .map_err(|e| format!("cannot start {cmd:?}: {e}"))
}

/// True while any thread of `pid` has not finished exiting (PID 1 here reaps orphans lazily).
///
/// The thread group leader alone is not enough: after SIGKILL a multi-threaded server's leader
/// can show `Z` while its other threads are still exiting and still hold the process's files,
/// its listening socket included (a clean-clone CI run found port 13310 busy just after the
/// leader had turned zombie).
pub fn alive(pid: u32) -> bool {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return false;
    };
    tasks.flatten().any(|task| {
        std::fs::read_to_string(task.path().join("stat")).is_ok_and(|stat| task_running(&stat))
    })
}

/// True when a `/proc/.../stat` line names a task that is neither a zombie nor dead.
fn task_running(stat: &str) -> bool {
    match stat.rfind(')') {
        Some(i) => !matches!(
            stat[i + 1..].trim_start().chars().next(),
            Some('Z' | 'X') | None
        ),
        None => false,
    }
}

/// Reads a pid file (first line, first token); None when missing or malformed.
pub fn read_pid(path: &Path) -> Option<u32> {
    let text = std::fs::read_to_string(path).ok()?;
    text.split_whitespace().next()?.parse().ok()
}

/// Sends `signal` ("TERM", "KILL", "INT", "STOP", "CONT") to `pid`.
pub fn signal(pid: u32, signal: &str) {
    use nix::sys::signal::Signal;
    let sig = match signal {
        "KILL" => Signal::SIGKILL,
        "INT" => Signal::SIGINT,
        "STOP" => Signal::SIGSTOP,
        "CONT" => Signal::SIGCONT,
        _ => Signal::SIGTERM,
    };
    if let Ok(pid) = i32::try_from(pid) {
        let _ = nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), sig);
    }
}

/// Stops `pid` with SIGTERM, then SIGKILL after `grace`; returns once it is gone.
pub fn stop_pid(pid: u32, grace: Duration) {
    if !alive(pid) {
        return;
    }
    signal(pid, "TERM");
    if !wait_until(grace, || !alive(pid)) {
        step(&format!(
            "pid {pid} still alive after {grace:?}, sending SIGKILL"
        ));
        signal(pid, "KILL");
        wait_until(Duration::from_secs(5), || !alive(pid));
    }
}

/// Polls `f` every 100 ms until it is true or `limit` passes; returns the last result.
pub fn wait_until(limit: Duration, mut f: impl FnMut() -> bool) -> bool {
    let start = Instant::now();
    loop {
        if f() {
            return true;
        }
        if start.elapsed() >= limit {
            return false;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// True when something accepts TCP connections on 127.0.0.1:`port`.
pub fn port_open(port: u16) -> bool {
    std::net::TcpStream::connect_timeout(
        &std::net::SocketAddr::from(([127, 0, 0, 1], port)),
        Duration::from_millis(300),
    )
    .is_ok()
}

/// Creates `dir` and makes it and its parents traversable (PostgreSQL runs as another user).
pub fn make_traversable(dir: &Path) -> Result<()> {
    std::fs::create_dir_all(dir).map_err(|e| format!("creating {}: {e}", dir.display()))?;
    if is_root() {
        let mut cur = Some(dir);
        while let Some(p) = cur {
            if p == Path::new("/") {
                break;
            }
            let _ = Command::new("chmod").arg("o+x").arg(p).status();
            cur = p.parent();
        }
    }
    Ok(())
}

/// Returns the last `n` lines of a log file, for error messages.
pub fn tail(path: &Path, n: usize) -> String {
    last_lines(&std::fs::read_to_string(path).unwrap_or_default(), n)
}

/// The last `n` lines of `text`.
pub fn last_lines(text: &str, n: usize) -> String {
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}

/// Resident memory of process `pid` in KiB (`VmRSS`), 0 when it cannot be read.
pub fn rss_kib(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("VmRSS:"))
                .and_then(|v| v.split_whitespace().next()?.parse().ok())
        })
        .unwrap_or(0)
}

/// A MariaDB server's own temporary directory, `dir/tmp`, world-writable like `/tmp`. Every
/// server the harness starts gets one: at startup MariaDB deletes every `#sql*` file in its
/// tmpdir as a leftover of its own earlier run, so servers sharing `/tmp` delete each other's
/// in-use temporary tables — a server starting while another ran a query on
/// `information_schema.PROCESSLIST` (an Aria temporary table) crashed the latter with SIGSEGV in
/// `ha_maria::drop_table` (clean-clone CI of 258c09a, the lifecycle suite).
pub fn mariadb_tmpdir(dir: &Path) -> Result<std::path::PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    let tmp = dir.join("tmp");
    std::fs::create_dir_all(&tmp).map_err(|e| format!("{}: {e}", tmp.display()))?;
    std::fs::set_permissions(&tmp, std::fs::Permissions::from_mode(0o1777))
        .map_err(|e| format!("{}: {e}", tmp.display()))?;
    Ok(tmp)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn task_states() {
        assert!(task_running("42 (mariadbd) S 1 42"));
        assert!(task_running("42 (a) b) R 1 42"));
        assert!(!task_running("42 (mariadbd) Z 1 42"));
        assert!(!task_running("42 (mariadbd) X 1 42"));
        assert!(!task_running("garbage"));
    }

    #[test]
    fn a_killed_unreaped_child_is_not_alive() {
        assert!(alive(std::process::id()));
        let mut child = Command::new("sleep").arg("30").spawn().expect("sleep");
        assert!(alive(child.id()));
        child.kill().expect("kill");
        assert!(wait_until(Duration::from_secs(10), || !alive(child.id())));
        // Still a zombie (not reaped yet), which `alive` must not count.
        assert!(std::path::Path::new(&format!("/proc/{}", child.id())).exists());
        child.wait().expect("reap");
    }
}

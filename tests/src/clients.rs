//! The database clients the tests drive: the `mariadb` CLI and `psql`, run as child processes
//! against a port (Sluice's or a server's).

use std::io::Write;
use std::process::{Command, Output, Stdio};

/// Runs the `mariadb` CLI against `port` with `args`, feeding `sql` on stdin; tab-separated
/// output without headers.
pub fn mariadb(port: u16, user: &str, password: &str, args: &[&str], sql: &str) -> Output {
    let mut child = Command::new("mariadb")
        .arg("--no-defaults")
        .arg("-h127.0.0.1")
        .arg(format!("-P{port}"))
        .arg(format!("-u{user}"))
        .arg(format!("-p{password}"))
        .args(["-N", "-B", "--connect-timeout=20"])
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("mariadb client installed");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(sql.as_bytes())
        .expect("write sql");
    child.wait_with_output().expect("mariadb client ran")
}

/// Runs `psql -c sql` as app/app (database `app`, no TLS) against `port`; unaligned, tuples only,
/// stops at the first error.
pub fn psql_app(port: u16, sql: &str) -> Output {
    psql_login(port, "app", "app", sql)
}

/// Runs `script` through `psql -f -` as `app` (database `app`, no TLS) against `port`: one
/// simple Query per statement, unaligned with headers and row counts, stops at the first error.
pub fn psql_script(port: u16, script: &str) -> Output {
    let mut child = Command::new("psql")
        .env("PGPASSWORD", "app")
        .env("PGSSLMODE", "disable")
        .args(["-h", "127.0.0.1", "-p", &port.to_string(), "-U", "app"])
        .args([
            "-d",
            "app",
            "-X",
            "-q",
            "-A",
            "-v",
            "ON_ERROR_STOP=1",
            "-f",
            "-",
        ])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("psql installed");
    if let Some(mut stdin) = child.stdin.take() {
        let _ = stdin.write_all(script.as_bytes());
    }
    child.wait_with_output().expect("psql ran")
}

/// Runs `psql -c sql` as `user` with `password` (database `app`, no TLS) against `port`;
/// unaligned, tuples only, stops at the first error.
pub fn psql_login(port: u16, user: &str, password: &str, sql: &str) -> Output {
    Command::new("psql")
        .env("PGPASSWORD", password)
        .env("PGSSLMODE", "disable")
        .args([
            "-h",
            "127.0.0.1",
            "-p",
            &port.to_string(),
            "-U",
            user,
            "-d",
            "app",
        ])
        .args(["-X", "-q", "-A", "-t", "-v", "ON_ERROR_STOP=1", "-c", sql])
        .output()
        .expect("psql installed")
}

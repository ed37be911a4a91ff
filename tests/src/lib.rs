//! Helpers for Sluice's end-to-end suites: start the real `sluice` binary with a config, run real
//! clients (mariadb CLI, PyMySQL, sysbench) against it, check the backends are there.
//!
//! The suites need the backends of `cargo xtask backends up`; each test names the servers it
//! uses ([`Servers`]) and fails, naming the command that starts them, when they are missing.
//! `SLUICE_SKIP_BACKENDS=1` turns that failure into a skip that the test prints.

mod backends;
mod clients;
pub mod fake_mysql;
pub mod mcp;
pub mod rag;

pub use clients::{mariadb, psql_app, psql_login, psql_script};

pub use backends::{Servers, backends_exclusive, backends_ready};

use std::io::{Read, Write};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Output, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

pub use xtask::ports;

/// The backend connection's own thread id, as the server sees it. (A lone
/// `SELECT CONNECTION_ID()` is answered by Sluice with the client's session id, the id of the
/// handshake; inside a larger statement the server evaluates it.)
pub const BACKEND_THREAD_ID: &str = "SELECT CONNECTION_ID() + 0";

/// The `sluice` binary: `SLUICE_BIN`, or `target/debug/sluice` of this workspace.
pub fn sluice_bin() -> PathBuf {
    match std::env::var_os("SLUICE_BIN") {
        Some(p) => PathBuf::from(p),
        None => xtask::workspace_root().join("target/debug/sluice"),
    }
}

/// A free TCP port on 127.0.0.1, below the kernel's ephemeral range (32768+) so that no
/// outgoing connection of a parallel test can take it between this probe and the bind.
pub fn free_port() -> u16 {
    static NEXT: AtomicU32 = AtomicU32::new(0);
    let base = 20_000 + (std::process::id() % 64) * 180;
    for _ in 0..2000 {
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let port = u16::try_from(base + n % 11_000).unwrap_or(20_000);
        if TcpListener::bind(("127.0.0.1", port)).is_ok() {
            return port;
        }
    }
    let l = TcpListener::bind("127.0.0.1:0").expect("bind port 0");
    l.local_addr().expect("local addr").port()
}

/// A fresh scratch folder under `target/sluice-tests/`.
pub fn scratch_dir(name: &str) -> PathBuf {
    static N: AtomicU32 = AtomicU32::new(0);
    let dir = xtask::workspace_root()
        .join("target/sluice-tests")
        .join(format!(
            "{name}-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        ));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("create scratch dir");
    dir
}

/// The standard config: hostgroup 0 = MariaDB primary, 1 = replica, user app/app.
/// `{port}` is replaced with Sluice's MySQL port; `extra_vars` go into `[mysql_variables]`.
pub fn standard_config(extra_vars: &str, extra_tables: &str) -> String {
    format!(
        r#"
[mysql_variables]
interfaces = "127.0.0.1:{{port}}"
server_version = "8.0.36"
{extra_vars}

[[mysql_servers]]
hostgroup_id = 0
hostname = "127.0.0.1"
port = {primary}

[[mysql_servers]]
hostgroup_id = 1
hostname = "127.0.0.1"
port = {replica}

[[mysql_users]]
username = "app"
password = "app"
default_hostgroup = 0

[[pgsql_servers]]
hostgroup_id = 0
hostname = "127.0.0.1"
port = {pg_primary}

[[pgsql_servers]]
hostgroup_id = 1
hostname = "127.0.0.1"
port = {pg_replica}

[[pgsql_users]]
username = "app"
password = "app"
default_hostgroup = 0

{extra_tables}
"#,
        primary = ports::MY_PRIMARY,
        replica = ports::MY_REPLICA,
        pg_primary = ports::PG_PRIMARY,
        pg_replica = ports::PG_REPLICA,
    )
}

/// The four listeners of a Sluice instance.
#[derive(Debug, Clone, Copy)]
pub struct Ports {
    /// The MySQL frontend.
    pub mysql: u16,
    /// The MySQL-protocol admin port.
    pub admin: u16,
    /// The PostgreSQL-protocol admin port.
    pub pg_admin: u16,
    /// The PostgreSQL frontend.
    pub pg: u16,
}

impl Ports {
    /// Four free ports.
    pub fn free() -> Ports {
        Ports {
            mysql: free_port(),
            admin: free_port(),
            pg_admin: free_port(),
            pg: free_port(),
        }
    }
}

/// A running `sluice` process. Dropping it kills the process.
pub struct Sluice {
    child: Option<Child>,
    /// The MySQL frontend port.
    pub port: u16,
    /// The MySQL-protocol admin port.
    pub admin_port: u16,
    /// The PostgreSQL-protocol admin port.
    pub pg_admin_port: u16,
    /// The PostgreSQL frontend port.
    pub pg_port: u16,
    /// Its scratch folder (config, datadir, log).
    pub dir: PathBuf,
}

impl Sluice {
    /// Starts sluice with `template` (`{port}` replaced) and waits until it accepts connections.
    pub fn start(template: &str) -> Sluice {
        Sluice::start_with(template, scratch_dir("sluice"), &[])
    }

    /// Starts sluice in `dir` (config, datadir, log live there) with extra CLI `args`.
    pub fn start_with(template: &str, dir: PathBuf, args: &[&str]) -> Sluice {
        Sluice::start_on(template, dir, args, (free_port(), free_port()))
    }

    /// Like [`Sluice::start_with`] on given (MySQL, admin) ports, e.g. to restart an instance.
    pub fn start_on(template: &str, dir: PathBuf, args: &[&str], ports: (u16, u16)) -> Sluice {
        let (port, admin_port) = ports;
        let pg_admin_port = free_port();
        let pg_port = free_port();
        let cfg = dir.join("sluice.toml");
        // Every instance gets its own admin port (tests run in parallel).
        let template = if template.contains("[admin_variables]") {
            template.to_string()
        } else {
            let pg = if template.contains("[pgsql_variables]") {
                ""
            } else {
                "[pgsql_variables]\ninterfaces = \"127.0.0.1:{pg_port}\"\n"
            };
            format!(
                "[admin_variables]\nmysql_ifaces = \"127.0.0.1:{{admin_port}}\"\npgsql_ifaces = \"127.0.0.1:{{pg_admin_port}}\"\n{pg}{template}"
            )
        };
        let text = template
            .replace("{port}", &port.to_string())
            .replace("{admin_port}", &admin_port.to_string())
            .replace("{pg_admin_port}", &pg_admin_port.to_string())
            .replace("{pg_port}", &pg_port.to_string());
        std::fs::write(&cfg, text).expect("write config");
        let ports = Ports {
            mysql: port,
            admin: admin_port,
            pg_admin: pg_admin_port,
            pg: pg_port,
        };
        Sluice::start_file(&cfg, dir, args, ports)
    }

    /// Starts sluice with the config file `cfg` as it is (any format `--config` takes), whose
    /// listeners are `ports`; waits until the MySQL and admin ports accept connections.
    pub fn start_file(cfg: &Path, dir: PathBuf, args: &[&str], ports: Ports) -> Sluice {
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(dir.join("sluice.log"))
            .expect("log file");
        let child = Command::new(sluice_bin())
            .arg("--config")
            .arg(cfg)
            .arg("--datadir")
            .arg(dir.join("data"))
            .args(args)
            .env("RUST_LOG", "info,sluice_mysql_backend=debug")
            .env("NO_COLOR", "1")
            .stdin(Stdio::null())
            .stdout(log.try_clone().expect("clone log"))
            .stderr(log)
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {}: {e}", sluice_bin().display()));
        let mut s = Sluice {
            child: Some(child),
            port: ports.mysql,
            admin_port: ports.admin,
            pg_admin_port: ports.pg_admin,
            pg_port: ports.pg,
            dir,
        };
        let (port, admin_port) = (ports.mysql, ports.admin);
        let up = xtask::proc::wait_until(Duration::from_secs(20), || {
            (xtask::proc::port_open(port) && xtask::proc::port_open(admin_port))
                || s.exited().is_some()
        });
        assert!(
            up && s.exited().is_none(),
            "sluice did not start; log:\n{}",
            s.log()
        );
        s
    }

    /// Runs SQL on the admin port as admin/admin; tab-separated rows without headers.
    pub fn admin(&self, sql: &str) -> Output {
        mariadb(self.admin_port, "admin", "admin", &["--skip-ssl"], sql)
    }

    /// Runs SQL on the PostgreSQL admin port with psql as admin/admin (unaligned, no headers).
    pub fn psql_admin(&self, sql: &str, headers: bool) -> Output {
        let mut c = Command::new("psql");
        c.env("PGPASSWORD", "admin").args([
            "-h",
            "127.0.0.1",
            "-p",
            &self.pg_admin_port.to_string(),
            "-U",
            "admin",
            "-X",
            "-A",
            "-F",
            "\t",
        ]);
        if !headers {
            c.arg("-t");
        }
        c.arg("-c").arg(sql).output().expect("psql installed")
    }

    /// Like [`Sluice::admin`], panicking on failure.
    pub fn admin_ok(&self, sql: &str) -> String {
        ok_stdout(&self.admin(sql))
    }

    /// Sluice's log so far.
    pub fn log(&self) -> String {
        let mut text = String::new();
        if let Ok(mut f) = std::fs::File::open(self.dir.join("sluice.log")) {
            let _ = f.read_to_string(&mut text);
        }
        text
    }

    /// The exit status, if the process has exited.
    pub fn exited(&mut self) -> Option<ExitStatus> {
        self.child
            .as_mut()
            .and_then(|c| c.try_wait().ok().flatten())
    }

    /// The process id.
    pub fn pid(&self) -> u32 {
        self.child.as_ref().map(Child::id).unwrap_or(0)
    }

    /// Sends SIGTERM.
    pub fn terminate(&self) {
        xtask::proc::signal(self.pid(), "TERM");
    }

    /// Waits up to `limit` for the process to exit.
    pub fn wait_exit(&mut self, limit: Duration) -> Option<ExitStatus> {
        let start = Instant::now();
        while start.elapsed() < limit {
            if let Some(s) = self.exited() {
                return Some(s);
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        None
    }

    /// A `mysql://` URL for mysql_async.
    pub fn url(&self, user: &str, password: &str, db: &str) -> String {
        // prefer_socket=false: otherwise mysql_async asks `SELECT @@socket`, gets the backend's unix
        // socket and reconnects straight to MariaDB, bypassing Sluice.
        format!(
            "mysql://{user}:{password}@127.0.0.1:{}/{db}?prefer_socket=false",
            self.port
        )
    }
}

impl Drop for Sluice {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// Polls `check` every 20 ms until it holds or `limit` passes; how long it took, or `None`.
pub fn within(limit: Duration, mut check: impl FnMut() -> bool) -> Option<Duration> {
    let start = Instant::now();
    while start.elapsed() < limit {
        if check() {
            return Some(start.elapsed());
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    None
}

/// `curl` on `path` of the HTTP port (`admin-restapi_port`): (status, body).
pub fn curl(port: u16, path: &str) -> (u16, String) {
    let out = Command::new("curl")
        .args(["-s", "--max-time", "10", "-w", "\n%{http_code}"])
        .arg(format!("http://127.0.0.1:{port}{path}"))
        .output()
        .expect("curl installed");
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let (body, code) = text.rsplit_once('\n').unwrap_or(("", "0"));
    (code.trim().parse().unwrap_or(0), body.to_string())
}

/// Runs `mariadb-admin` (app/app, no TLS) against `port` with the given commands.
pub fn mariadb_admin(port: u16, commands: &[&str]) -> Output {
    Command::new("mariadb-admin")
        .args([
            "--no-defaults",
            "-h127.0.0.1",
            &format!("-P{port}"),
            "-uapp",
            "-papp",
            "--skip-ssl",
        ])
        .args(commands)
        .output()
        .expect("mariadb-admin installed")
}

/// Names of a process's threads, as `top -H` shows them, sorted.
pub fn thread_names(pid: u32) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(format!("/proc/{pid}/task"))
        .expect("task list")
        .filter_map(|t| std::fs::read_to_string(t.ok()?.path().join("comm")).ok())
        .map(|n| n.trim().to_string())
        .collect();
    names.sort();
    names
}

/// The names of Sluice's session threads starting with `prefix` (`sluice-my-`, `sluice-pg-`),
/// once `n` of them run (the ports open a moment before the threads start, so the harness's
/// start can return first).
pub fn session_threads(s: &Sluice, prefix: &str, n: usize) -> Vec<String> {
    let names = || -> Vec<String> {
        thread_names(s.pid())
            .into_iter()
            .filter(|t| t.starts_with(prefix))
            .collect()
    };
    wait_for("the session threads", || names().len() >= n);
    names()
}

/// [`standard_config`] with hostgroup 0's server (the primary) capped at `max` connections.
pub fn capped_config(max: u32, extra_vars: &str, extra_tables: &str) -> String {
    standard_config(extra_vars, extra_tables).replacen(
        &format!("port = {}\n", ports::MY_PRIMARY),
        &format!("port = {}\nmax_connections = {max}\n", ports::MY_PRIMARY),
        1,
    )
}

/// stdout of a successful command, or a panic with its stderr.
pub fn ok_stdout(out: &Output) -> String {
    assert!(
        out.status.success(),
        "command failed ({}): {}{}",
        out.status,
        String::from_utf8_lossy(&out.stderr),
        String::from_utf8_lossy(&out.stdout)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Runs a Python 3 script (PyMySQL is installed by `cargo xtask test`).
pub fn python(script: &str, args: &[&str]) -> Output {
    let mut child = Command::new("python3")
        .arg("-")
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("python3 installed");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(script.as_bytes())
        .expect("write script");
    child.wait_with_output().expect("python ran")
}

/// Runs a single-file Java program from `tests/java/` with the JDBC driver `jar` (installed by
/// `cargo xtask test` from Debian's packages) and `args`; its stdout, or a panic with its output
/// and `context` (e.g. Sluice's log).
pub fn java(jar: &str, source: &str, args: &[String], context: &str) -> String {
    let out = Command::new("java")
        .arg("-cp")
        .arg(jar)
        .arg(xtask::workspace_root().join("tests/java").join(source))
        .args(args)
        .output()
        .expect("java installed (cargo xtask test installs default-jdk-headless)");
    assert!(
        out.status.success(),
        "{source} failed ({}): {}{}\n{context}",
        out.status,
        String::from_utf8_lossy(&out.stderr),
        String::from_utf8_lossy(&out.stdout)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Runs a Python check script with Sluice's PostgreSQL port and the primary's as its arguments
/// (so it can compare with a direct connection) and returns its trimmed stdout.
pub fn python_pg_pair(script: &str, sluice_pg_port: u16) -> String {
    let out = python(
        script,
        &[&sluice_pg_port.to_string(), &ports::PG_PRIMARY.to_string()],
    );
    ok_stdout(&out).trim().to_string()
}

/// Polls until `running()` is true, checking every 25 ms for up to 20 s; panics naming `what`
/// otherwise. For ordering a test's steps on what the servers report, not on a fixed sleep.
pub fn wait_for(what: &str, mut running: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while !running() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(25));
    }
}

/// Waits until the MariaDB server on `port` runs a statement starting with `prefix` (its
/// processlist, read as root over TCP).
pub fn wait_mysql_running(port: u16, prefix: &str) {
    let sql = format!(
        "SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE INFO LIKE '{}%'",
        prefix.replace('\'', "''")
    );
    wait_for(&format!("{prefix:?} to run on :{port}"), || {
        let out = mariadb(port, "root", "root", &["--skip-ssl"], &sql);
        String::from_utf8_lossy(&out.stdout)
            .trim()
            .parse::<u32>()
            .unwrap_or(0)
            > 0
    });
}

/// Waits until the PostgreSQL server on `port` runs a statement of user `app` starting with
/// `prefix` (`pg_stat_activity`).
pub fn wait_pg_running(port: u16, prefix: &str) {
    let sql = format!(
        "SELECT count(*) FROM pg_stat_activity WHERE state = 'active' AND query LIKE '{}%'",
        prefix.replace('\'', "''")
    );
    wait_for(&format!("{prefix:?} to run on :{port}"), || {
        let out = psql_app(port, &sql);
        String::from_utf8_lossy(&out.stdout)
            .trim()
            .parse::<u32>()
            .unwrap_or(0)
            > 0
    });
}

/// Resumes WAL replay on the PostgreSQL standby when dropped: held by a test that pauses it,
/// so the standby is back for the others also when that test fails.
pub struct ResumeReplay;

impl Drop for ResumeReplay {
    fn drop(&mut self) {
        let _ = xtask::postgres::replica(&xtask::state_dir()).sql("SELECT pg_wal_replay_resume()");
    }
}

/// Root SQL on the MariaDB primary over TCP (fault injection, checks).
pub fn primary_root(sql: &str) -> String {
    ok_stdout(&mariadb(
        ports::MY_PRIMARY,
        "root",
        "root",
        &["--skip-ssl"],
        sql,
    ))
}

/// Path of a file in the scratch dir.
pub fn write_file(dir: &Path, name: &str, text: &str) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, text).expect("write file");
    p
}

/// pgbench as user `app` on database `app` against `port`.
pub fn pgbench(port: u16, args: &[&str]) -> Output {
    Command::new("pgbench")
        .env("PGPASSWORD", "app")
        .args(["-h", "127.0.0.1", "-p", &port.to_string(), "-U", "app"])
        .args(args)
        .arg("app")
        .output()
        .expect("pgbench installed")
}

/// sysbench as user `app` against `port`: `db` with `tables` x `size` rows, one `test` and
/// `action` (prepare / run / cleanup) with `extra` options.
pub fn sysbench(
    port: u16,
    (db, tables, size): (&str, u32, u32),
    test: &str,
    extra: &[&str],
    action: &str,
) -> Output {
    Command::new("sysbench")
        .args(["--db-driver=mysql", "--mysql-host=127.0.0.1"])
        .arg(format!("--mysql-port={port}"))
        .args(["--mysql-user=app", "--mysql-password=app"])
        .arg(format!("--mysql-db={db}"))
        .arg(format!("--tables={tables}"))
        .arg(format!("--table-size={size}"))
        .args(extra)
        .arg(test)
        .arg(action)
        .output()
        .expect("sysbench installed (cargo xtask test installs it)")
}

//! MariaDB test servers: a GTID primary/replica pair, and standalone instances for fault tests.

use crate::proc::{self, alive, read_pid, run_capture, run_with_input, step, wait_until};
use crate::{Result, ports};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

/// One mariadbd process and its folder (`data/`, socket, pid file, error log, TLS material).
#[derive(Debug, Clone)]
pub struct MariaDb {
    /// The instance folder.
    pub dir: PathBuf,
    /// TCP port on 127.0.0.1.
    pub port: u16,
    /// `server_id` (unique per replication topology).
    pub server_id: u32,
    /// Extra mariadbd flags (e.g. `--read-only=ON`).
    pub extra: Vec<String>,
}

const USERS_SQL: &str = "
CREATE USER IF NOT EXISTS 'app'@'%' IDENTIFIED BY 'app';
GRANT ALL ON *.* TO 'app'@'%';
REVOKE READ_ONLY ADMIN ON *.* FROM 'app'@'%';
CREATE USER IF NOT EXISTS 'repl'@'%' IDENTIFIED BY 'repl';
GRANT REPLICATION SLAVE ON *.* TO 'repl'@'%';
CREATE USER IF NOT EXISTS 'monitor'@'%' IDENTIFIED BY 'monitor';
GRANT REPLICATION CLIENT, SLAVE MONITOR, PROCESS ON *.* TO 'monitor'@'%';
GRANT CREATE, INSERT, UPDATE, SELECT ON sluice.* TO 'monitor'@'%';
CREATE USER IF NOT EXISTS 'root'@'127.0.0.1' IDENTIFIED BY 'root';
GRANT ALL ON *.* TO 'root'@'127.0.0.1' WITH GRANT OPTION;
CREATE DATABASE IF NOT EXISTS app;
CREATE DATABASE IF NOT EXISTS sbtest;
";

impl MariaDb {
    /// Describes an instance in `dir` (nothing is started).
    pub fn new(dir: PathBuf, port: u16, server_id: u32, extra: &[&str]) -> Self {
        let extra = extra.iter().map(|s| s.to_string()).collect();
        MariaDb {
            dir,
            port,
            server_id,
            extra,
        }
    }

    fn socket(&self) -> PathBuf {
        self.dir.join("mysqld.sock")
    }

    fn pid_file(&self) -> PathBuf {
        self.dir.join("mysqld.pid")
    }

    /// The pid of the running server, if it runs.
    pub fn pid(&self) -> Option<u32> {
        read_pid(&self.pid_file()).filter(|p| alive(*p))
    }

    /// True when the server answers a ping on its socket.
    pub fn is_up(&self) -> bool {
        self.pid().is_some()
            && run_capture(
                Command::new("mariadb-admin")
                    .arg("--no-defaults")
                    .arg("-S")
                    .arg(self.socket())
                    .args(["-uroot", "--connect-timeout=2", "ping"]),
            )
            .is_ok()
    }

    /// Runs SQL as root over the unix socket and returns the tab-separated output.
    pub fn sql(&self, sql: &str) -> Result<String> {
        self.client(&["-N", "-B"], sql)
    }

    /// Runs SQL as root with the client's default (headed) output, e.g. for `\G` listings.
    pub fn sql_headed(&self, sql: &str) -> Result<String> {
        self.client(&[], sql)
    }

    fn client(&self, flags: &[&str], sql: &str) -> Result<String> {
        run_with_input(
            Command::new("mariadb")
                .arg("--no-defaults")
                .arg("-S")
                .arg(self.socket())
                .arg("-uroot")
                .args(flags),
            sql,
        )
    }

    /// Creates the datadir when missing (with users and TLS files), then starts the server.
    /// Returns true when the datadir was freshly initialised.
    pub fn start(&self) -> Result<bool> {
        if self.is_up() {
            return Ok(false);
        }
        let data = self.dir.join("data");
        let fresh = !data.join("mysql").exists();
        std::fs::create_dir_all(&self.dir).map_err(|e| format!("{}: {e}", self.dir.display()))?;
        let tmp = proc::mariadb_tmpdir(&self.dir)?;
        if fresh {
            if data.exists() {
                std::fs::remove_dir_all(&data).map_err(|e| format!("{}: {e}", data.display()))?;
            }
            step(&format!(
                "MariaDB :{}: initialising {}",
                self.port,
                data.display()
            ));
            run_capture(
                Command::new("mariadb-install-db")
                    .env("TMPDIR", &tmp)
                    .arg("--no-defaults")
                    .arg("--user=root")
                    .arg(format!("--datadir={}", data.display()))
                    .args(["--skip-test-db", "--auth-root-authentication-method=socket"]),
            )?;
            self.write_tls_files()?;
        }
        if proc::port_open(self.port) {
            return Err(format!(
                "port {} is busy: another server is listening there",
                self.port
            ));
        }
        step(&format!("MariaDB :{}: starting", self.port));
        let log = std::fs::File::create(self.dir.join("stdout.log"))
            .map_err(|e| format!("creating log in {}: {e}", self.dir.display()))?;
        let log2 = log.try_clone().map_err(|e| e.to_string())?;
        Command::new("setsid")
            .arg("mariadbd")
            .arg("--no-defaults")
            .arg("--user=root")
            .arg(format!("--datadir={}", data.display()))
            .arg(format!("--tmpdir={}", tmp.display()))
            .arg(format!("--port={}", self.port))
            .arg("--bind-address=127.0.0.1")
            .arg(format!("--socket={}", self.socket().display()))
            .arg(format!("--pid-file={}", self.pid_file().display()))
            .arg(format!(
                "--log-error={}",
                self.dir.join("error.log").display()
            ))
            .arg(format!("--server-id={}", self.server_id))
            .args([
                "--log-bin=mysql-bin",
                "--binlog-format=ROW",
                "--log-slave-updates",
                "--gtid-strict-mode=ON",
                "--relay-log=relay-bin",
                "--skip-name-resolve",
                "--max-connections=1000",
                "--max-allowed-packet=64M",
                "--innodb-buffer-pool-size=256M",
                "--innodb-flush-log-at-trx-commit=2",
                "--sync-binlog=0",
            ])
            .arg(format!(
                "--ssl-cert={}",
                self.dir.join("server-cert.pem").display()
            ))
            .arg(format!(
                "--ssl-key={}",
                self.dir.join("server-key.pem").display()
            ))
            .args(&self.extra)
            .stdin(Stdio::null())
            .stdout(log)
            .stderr(log2)
            .spawn()
            .map_err(|e| format!("cannot start mariadbd: {e}"))?;
        if !wait_until(Duration::from_secs(60), || self.is_up()) {
            return Err(format!(
                "mariadbd :{} did not come up; error log:\n{}",
                self.port,
                proc::tail(&self.dir.join("error.log"), 20)
            ));
        }
        Ok(fresh)
    }

    fn write_tls_files(&self) -> Result<()> {
        let state = self.dir.parent().unwrap_or(&self.dir);
        crate::tls::server_cert(
            state,
            &self.dir.join("server-key.pem"),
            &self.dir.join("server-cert.pem"),
            "sluice-test-mariadb",
        )
    }

    /// Creates the test accounts (app, repl, monitor, root over TCP) and databases, and loads
    /// the time zone tables (so `SET time_zone = 'America/...'` works).
    pub fn create_users(&self) -> Result<()> {
        self.sql(USERS_SQL)?;
        let tz = run_capture(Command::new("mariadb-tzinfo-to-sql").arg("/usr/share/zoneinfo"))?;
        self.sql(&format!("USE mysql;\n{tz}")).map(|_| ())
    }

    /// Stops the server (SIGTERM, then SIGKILL after 30 s).
    pub fn stop(&self) {
        if let Some(pid) = self.pid() {
            proc::stop_pid(pid, Duration::from_secs(30));
            step(&format!("MariaDB :{} stopped (pid {pid})", self.port));
        }
        let _ = std::fs::remove_file(self.pid_file());
    }
}

/// The primary of the test pair.
pub fn primary(state: &Path) -> MariaDb {
    MariaDb::new(state.join("my1"), ports::MY_PRIMARY, 1, &[])
}

/// The replica of the test pair.
pub fn replica(state: &Path) -> MariaDb {
    MariaDb::new(state.join("my2"), ports::MY_REPLICA, 2, &["--read-only=ON"])
}

/// Starts the primary and the replica and waits until the replica has caught up.
pub fn pair_up(state: &Path) -> Result<()> {
    let (p, r) = (primary(state), replica(state));
    if p.start()? {
        p.create_users()?;
    }
    let replica_fresh = r.start()?;
    if replica_fresh {
        step("MariaDB: configuring GTID replication :13307 <- :13306");
        r.sql(&format!(
            "CHANGE MASTER TO MASTER_HOST='127.0.0.1', MASTER_PORT={}, MASTER_USER='repl', \
             MASTER_PASSWORD='repl', MASTER_USE_GTID=slave_pos, MASTER_CONNECT_RETRY=1; START SLAVE;",
            ports::MY_PRIMARY
        ))?;
    }
    let want = p.sql("SELECT @@gtid_binlog_pos")?.trim().to_string();
    let caught_up = wait_until(Duration::from_secs(30), || {
        r.sql("SELECT @@gtid_slave_pos")
            .map(|s| s.trim() == want)
            .unwrap_or(false)
    });
    if !caught_up {
        let status = r.sql_headed("SHOW SLAVE STATUS\\G").unwrap_or_default();
        return Err(format!(
            "MariaDB replica did not catch up to {want}:\n{status}"
        ));
    }
    step(&format!(
        "MariaDB primary :{} + replica :{} up, replication flowing (gtid {want})",
        ports::MY_PRIMARY,
        ports::MY_REPLICA
    ));
    Ok(())
}

/// Stops the replica, then the primary.
pub fn pair_down(state: &Path) -> Result<()> {
    replica(state).stop();
    primary(state).stop();
    Ok(())
}

/// Prints the pair's state.
pub fn print_status(state: &Path) {
    for (name, db) in [("primary", primary(state)), ("replica", replica(state))] {
        if db.is_up() {
            let info = db
                .sql("SELECT CONCAT('read_only=', @@read_only, ' gtid_binlog_pos=', @@gtid_binlog_pos)")
                .unwrap_or_default();
            println!(
                "MariaDB {name} :{} up (pid {:?}) {}",
                db.port,
                db.pid(),
                info.trim()
            );
        } else {
            println!("MariaDB {name} :{} down", db.port);
        }
    }
    let r = replica(state);
    if r.is_up() {
        let status = r.sql_headed("SHOW SLAVE STATUS\\G").unwrap_or_default();
        for line in status.lines() {
            let l = line.trim();
            if l.starts_with("Slave_IO_Running")
                || l.starts_with("Slave_SQL_Running:")
                || l.starts_with("Seconds_Behind_Master")
            {
                println!("  {l}");
            }
        }
    }
}

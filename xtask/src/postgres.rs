//! PostgreSQL 15 test servers: a primary and a streaming replica (scram-sha-256 over TCP).

use crate::packages::PG_BIN;
use crate::proc::{self, is_root, read_pid, run_capture, run_with_input, step, wait_until};
use crate::{Result, ports};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

/// One PostgreSQL cluster folder and its port.
#[derive(Debug, Clone)]
pub struct Postgres {
    /// Cluster folder (holds `data/`, `server.log`).
    pub dir: PathBuf,
    /// Unix socket folder.
    pub sock: PathBuf,
    /// TCP port on 127.0.0.1.
    pub port: u16,
    /// `cluster_name`, also the walreceiver's application_name.
    pub name: String,
}

/// Runs a PostgreSQL server binary as the `postgres` user when we are root (it refuses root).
fn as_postgres(bin: &str) -> Command {
    let path = Path::new(PG_BIN).join(bin);
    if is_root() {
        let mut c = Command::new("runuser");
        c.args(["-u", "postgres", "--"]).arg(path);
        c
    } else {
        Command::new(path)
    }
}

fn chown_postgres(path: &Path) -> Result<()> {
    if is_root() {
        run_capture(
            Command::new("chown")
                .args(["-R", "postgres:postgres"])
                .arg(path),
        )?;
    }
    Ok(())
}

impl Postgres {
    fn data(&self) -> PathBuf {
        self.dir.join("data")
    }

    /// The postmaster pid, if it runs.
    pub fn pid(&self) -> Option<u32> {
        read_pid(&self.data().join("postmaster.pid")).filter(|p| proc::alive(*p))
    }

    /// Runs SQL as the superuser over the unix socket; returns unaligned tuples.
    pub fn sql(&self, sql: &str) -> Result<String> {
        run_with_input(
            Command::new("psql")
                .arg("-X")
                .arg("-h")
                .arg(&self.sock)
                .arg("-p")
                .arg(self.port.to_string())
                .args([
                    "-U",
                    "postgres",
                    "-d",
                    "postgres",
                    "-At",
                    "-v",
                    "ON_ERROR_STOP=1",
                ]),
            sql,
        )
    }

    /// True when the server answers a query.
    pub fn is_up(&self) -> bool {
        self.pid().is_some() && self.sql("SELECT 1").is_ok()
    }

    /// Starts a cluster whose data folder exists (after a stop or a crash).
    pub fn start_existing(&self) -> Result<()> {
        if proc::port_open(self.port) {
            return Err(format!(
                "port {} is busy: another server is listening there",
                self.port
            ));
        }
        step(&format!("PostgreSQL :{}: starting", self.port));
        run_capture(
            as_postgres("pg_ctl")
                .arg("-D")
                .arg(self.data())
                .arg("-l")
                .arg(self.dir.join("server.log"))
                .args(["-w", "-t", "60", "start"]),
        )
        .map_err(|e| format!("{e}\n{}", proc::tail(&self.dir.join("server.log"), 20)))?;
        if !wait_until(Duration::from_secs(30), || self.is_up()) {
            return Err(format!("PostgreSQL :{} does not answer", self.port));
        }
        Ok(())
    }

    fn overrides(&self) -> String {
        format!(
            "\n# --- sluice test overrides\nlisten_addresses = '127.0.0.1'\nport = {}\n\
             cluster_name = '{}'\nunix_socket_directories = '{}'\nmax_connections = 300\n\
             shared_buffers = 256MB\npassword_encryption = 'scram-sha-256'\nwal_level = replica\n\
             max_wal_senders = 10\nmax_replication_slots = 10\nhot_standby = on\n\
             hot_standby_feedback = on\nsynchronous_commit = off\nssl = on\n",
            self.port,
            self.name,
            self.sock.display()
        )
    }

    fn append_conf(&self) -> Result<()> {
        let conf = self.data().join("postgresql.conf");
        let mut text =
            std::fs::read_to_string(&conf).map_err(|e| format!("{}: {e}", conf.display()))?;
        text.push_str(&self.overrides());
        std::fs::write(&conf, text).map_err(|e| format!("{}: {e}", conf.display()))
    }

    fn prepare_dirs(&self) -> Result<()> {
        for d in [&self.dir, &self.sock] {
            std::fs::create_dir_all(d).map_err(|e| format!("{}: {e}", d.display()))?;
            chown_postgres(d)?;
        }
        Ok(())
    }

    /// Stops the cluster (fast shutdown).
    pub fn stop(&self) {
        if let Some(pid) = self.pid() {
            let _ = run_capture(
                as_postgres("pg_ctl")
                    .arg("-D")
                    .arg(self.data())
                    .args(["-m", "fast", "-w", "-t", "60", "stop"]),
            );
            proc::stop_pid(pid, Duration::from_secs(10));
            step(&format!("PostgreSQL :{} stopped (pid {pid})", self.port));
        }
    }
}

/// The primary of the test pair.
pub fn primary(state: &Path) -> Postgres {
    Postgres {
        dir: state.join("pg1"),
        sock: state.join("pgsock1"),
        port: ports::PG_PRIMARY,
        name: "pg1".into(),
    }
}

/// The streaming replica of the test pair.
pub fn replica(state: &Path) -> Postgres {
    Postgres {
        dir: state.join("pg2"),
        sock: state.join("pgsock2"),
        port: ports::PG_REPLICA,
        name: "pg2".into(),
    }
}

const ROLES_SQL: &str = "
CREATE ROLE repl WITH REPLICATION LOGIN PASSWORD 'repl';
CREATE ROLE app LOGIN PASSWORD 'app';
CREATE ROLE monitor LOGIN PASSWORD 'monitor' IN ROLE pg_monitor;
GRANT CREATE ON SCHEMA public TO monitor;
CREATE DATABASE app OWNER app;
";

/// A server certificate for `localhost`, signed by the test CA, in the data directory (`ssl =
/// on` reads server.crt and server.key from there).
fn write_tls_files(p: &Postgres) -> Result<()> {
    let key = p.data().join("server.key");
    let cert = p.data().join("server.crt");
    let state = p.dir.parent().unwrap_or(&p.dir);
    crate::tls::server_cert(state, &key, &cert, "sluice-test-postgres")?;
    run_capture(Command::new("chmod").arg("600").arg(&key))?;
    chown_postgres(&key)?;
    chown_postgres(&cert)
}

fn init_primary(p: &Postgres) -> Result<()> {
    p.prepare_dirs()?;
    let pwfile = p.dir.join("pwfile");
    std::fs::write(&pwfile, "postgres\n").map_err(|e| format!("{}: {e}", pwfile.display()))?;
    chown_postgres(&pwfile)?;
    step(&format!("PostgreSQL :{}: initdb", p.port));
    run_capture(
        as_postgres("initdb")
            .arg("-D")
            .arg(p.data())
            .args(["-U", "postgres"])
            .arg(format!("--pwfile={}", pwfile.display()))
            .args([
                "--auth-local=trust",
                "--auth-host=scram-sha-256",
                "-E",
                "UTF8",
                "--locale=C.UTF-8",
            ]),
    )?;
    write_tls_files(p)?;
    p.append_conf()?;
    p.start_existing()?;
    p.sql(ROLES_SQL)?;
    Ok(())
}

fn init_replica(p: &Postgres, r: &Postgres) -> Result<()> {
    r.prepare_dirs()?;
    step(&format!(
        "PostgreSQL :{}: pg_basebackup from :{}",
        r.port, p.port
    ));
    let mut cmd = if is_root() {
        let mut c = Command::new("runuser");
        c.args(["-u", "postgres", "--", "env", "PGPASSWORD=repl"]);
        c.arg(Path::new(PG_BIN).join("pg_basebackup"));
        c
    } else {
        let mut c = Command::new(Path::new(PG_BIN).join("pg_basebackup"));
        c.env("PGPASSWORD", "repl");
        c
    };
    run_capture(
        cmd.args([
            "-h",
            "127.0.0.1",
            "-p",
            &p.port.to_string(),
            "-U",
            "repl",
            "-D",
        ])
        .arg(r.data())
        .args(["-R", "-X", "stream", "-C", "-S", "replica1", "-c", "fast"]),
    )?;
    r.append_conf()?;
    r.start_existing()
}

/// Starts (creating when needed) the primary and the replica and waits for streaming.
pub fn pair_up(state: &Path) -> Result<()> {
    let (p, r) = (primary(state), replica(state));
    if !p.is_up() {
        if p.data().join("PG_VERSION").exists() {
            p.start_existing()?;
        } else {
            init_primary(&p)?;
        }
    }
    if !r.is_up() {
        if r.data().join("PG_VERSION").exists() {
            r.start_existing()?;
        } else {
            if r.dir.exists() {
                std::fs::remove_dir_all(&r.dir).map_err(|e| format!("{}: {e}", r.dir.display()))?;
            }
            let _ = p.sql("SELECT pg_drop_replication_slot('replica1') FROM pg_replication_slots WHERE slot_name = 'replica1'");
            init_replica(&p, &r)?;
        }
    }
    let streaming = wait_until(Duration::from_secs(30), || {
        p.sql("SELECT count(*) FROM pg_stat_replication WHERE state = 'streaming'")
            .map(|s| s.trim() == "1")
            .unwrap_or(false)
    });
    if !streaming {
        return Err(format!(
            "PostgreSQL replica :{} is not streaming from :{}; log:\n{}",
            r.port,
            p.port,
            proc::tail(&r.dir.join("server.log"), 20)
        ));
    }
    step(&format!(
        "PostgreSQL primary :{} + replica :{} up, streaming replication flowing",
        p.port, r.port
    ));
    Ok(())
}

/// `bin` (`psql`, `pgbench`) logging in as app/app over TCP to `port` on 127.0.0.1, without
/// TLS; the caller adds the database and the rest.
pub fn as_app(bin: &str, port: u16) -> Command {
    let mut c = Command::new(bin);
    c.env("PGPASSWORD", "app")
        .env("PGSSLMODE", "disable")
        .args(["-h", "127.0.0.1", "-p", &port.to_string(), "-U", "app"]);
    c
}

/// Stops the replica, then the primary.
pub fn pair_down(state: &Path) -> Result<()> {
    replica(state).stop();
    primary(state).stop();
    Ok(())
}

/// Prints the pair's state.
pub fn print_status(state: &Path) {
    for (role, pg) in [("primary", primary(state)), ("replica", replica(state))] {
        if pg.is_up() {
            let rec = pg.sql("SELECT pg_is_in_recovery()").unwrap_or_default();
            println!(
                "PostgreSQL {role} :{} up (pid {:?}) in_recovery={}",
                pg.port,
                pg.pid(),
                rec.trim()
            );
        } else {
            println!("PostgreSQL {role} :{} down", pg.port);
        }
    }
    let p = primary(state);
    if p.is_up() {
        let rep = p
            .sql("SELECT application_name || ' ' || state || ' lag_bytes=' || pg_wal_lsn_diff(sent_lsn, replay_lsn) FROM pg_stat_replication")
            .unwrap_or_default();
        for l in rep.lines() {
            println!("  replication: {l}");
        }
    }
}

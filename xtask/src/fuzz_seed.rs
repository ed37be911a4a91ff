//! `cargo xtask fuzz seed`: records real client/server traffic — the mariadb CLI (plain and
//! compressed), sysbench with server-side prepared statements, psql with startup options and
//! pgbench in the simple, extended and prepared protocols — through a recording relay to the
//! test backends, and cuts it into the seed corpus of each fuzz target (`fuzz/seeds/<target>`).
//! Run by hand when the protocols' coverage should be refreshed; the seeds are committed.

use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use xtask::ports;
use xtask::proc::{run_capture, step};

/// One read on one side of a recorded connection: `true` when the client sent it.
pub(crate) type Chunk = (bool, Vec<u8>);
/// The chunks of every connection the relay carried, each in the order they were read.
type Recording = Arc<Mutex<Vec<Arc<Mutex<Vec<Chunk>>>>>>;

/// A loopback relay to `backend` that keeps a copy of every byte in both directions.
struct Relay {
    port: u16,
    stop: Arc<AtomicBool>,
    recording: Recording,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Relay {
    fn start(backend: u16) -> xtask::Result<Relay> {
        let listener = TcpListener::bind("127.0.0.1:0").map_err(|e| format!("relay: {e}"))?;
        let port = listener.local_addr().map_err(|e| e.to_string())?.port();
        listener
            .set_nonblocking(true)
            .map_err(|e| format!("relay: {e}"))?;
        let stop = Arc::new(AtomicBool::new(false));
        let recording: Recording = Arc::default();
        let (s, r) = (stop.clone(), recording.clone());
        let thread = std::thread::spawn(move || {
            while !s.load(Ordering::Relaxed) {
                match listener.accept() {
                    Ok((client, _)) => {
                        let _ = client.set_nonblocking(false);
                        if let Ok(server) = TcpStream::connect(("127.0.0.1", backend)) {
                            let chunks = Arc::new(Mutex::new(Vec::new()));
                            lock(&r).push(chunks.clone());
                            pipe(&client, &server, true, chunks.clone());
                            pipe(&server, &client, false, chunks);
                        }
                    }
                    Err(_) => std::thread::sleep(Duration::from_millis(5)),
                }
            }
        });
        Ok(Relay {
            port,
            stop,
            recording,
            thread: Some(thread),
        })
    }

    /// Stops accepting and returns every connection's chunks.
    fn finish(mut self) -> Vec<Vec<Chunk>> {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        // Give the copy threads a moment to record the last replies and closes.
        std::thread::sleep(Duration::from_millis(200));
        lock(&self.recording)
            .iter()
            .map(|c| lock(c).clone())
            .collect()
    }
}

/// Copies `from` to `to` on a thread, recording each read before forwarding it (so a reply is
/// never recorded ahead of the request that caused it).
fn pipe(from: &TcpStream, to: &TcpStream, client: bool, chunks: Arc<Mutex<Vec<Chunk>>>) {
    let (Ok(mut from), Ok(mut to)) = (from.try_clone(), to.try_clone()) else {
        return;
    };
    std::thread::spawn(move || {
        let mut buf = vec![0u8; 64 * 1024];
        loop {
            match from.read(&mut buf) {
                Ok(0) | Err(_) => break,
                Ok(n) => {
                    lock(&chunks).push((client, buf[..n].to_vec()));
                    if to.write_all(&buf[..n]).is_err() {
                        break;
                    }
                }
            }
        }
        let _ = to.shutdown(Shutdown::Write);
    });
}

/// Writes seed files, named by content so reruns do not duplicate them.
pub(crate) struct Seeds {
    root: std::path::PathBuf,
    written: std::collections::HashSet<std::path::PathBuf>,
}

impl Seeds {
    pub(crate) fn add(&mut self, target: &str, bytes: &[u8]) {
        if bytes.is_empty() || bytes.len() > 64 * 1024 {
            return;
        }
        let dir = self.root.join(target);
        let _ = std::fs::create_dir_all(&dir);
        let path = dir.join(format!("{:016x}", fnv(bytes)));
        if std::fs::write(&path, bytes).is_ok() {
            self.written.insert(path);
        }
    }

    pub(crate) fn add_with(&mut self, target: &str, prefix: &[u8], bytes: &[u8]) {
        let mut v = prefix.to_vec();
        v.extend_from_slice(bytes);
        self.add(target, &v);
    }
}

fn fnv(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
        (h ^ u64::from(*b)).wrapping_mul(0x0100_0000_01b3)
    })
}

/// Entry point: records, then cuts the recordings into seeds.
pub(crate) fn run() -> xtask::Result<()> {
    xtask::backends_up()?;
    let root = xtask::workspace_root().join("fuzz").join("seeds");
    let mut seeds = Seeds {
        root,
        written: Default::default(),
    };
    step("recording MySQL traffic: mariadb CLI (plain, compressed) and sysbench (prepared)");
    let mysql = record_mysql()?;
    step(&format!("recorded {} MySQL connection(s)", mysql.len()));
    for conn in mysql {
        crate::fuzz_cut::mysql(&conn, &mut seeds);
    }
    step("recording PostgreSQL traffic: psql and pgbench (simple, extended, prepared)");
    let pgsql = record_pgsql()?;
    step(&format!(
        "recorded {} PostgreSQL connection(s)",
        pgsql.len()
    ));
    for conn in pgsql {
        crate::fuzz_cut::pgsql(&conn, &mut seeds);
    }
    step("adding the admin statements and configuration files of docs/ and compose/");
    crate::fuzz_cut::texts(&mut seeds)?;
    step(&format!(
        "wrote {} seed file(s) under fuzz/seeds",
        seeds.written.len()
    ));
    Ok(())
}

const MYSQL_SCRIPT: &str = "SELECT 1; SELECT @@version, NOW(), 'a''b', 0x41, NULL;
SET NAMES utf8mb4; SET SESSION sql_mode = 'ANSI_QUOTES', autocommit = 0, @x := 5;
CREATE TEMPORARY TABLE fz (a INT PRIMARY KEY, b VARCHAR(10)) ENGINE=InnoDB;
INSERT INTO fz VALUES (1, 'x'), (2, NULL); SELECT * FROM fz WHERE a IN (1, 2) /* hostgroup=1 */;
BEGIN; SELECT a FROM fz WHERE a = 1 FOR UPDATE; UPDATE fz SET b = 'y' WHERE a = 2; COMMIT;
SHOW TABLES; SHOW VARIABLES LIKE 'max%'; USE mysql; SELECT user FROM user LIMIT 1;
PREPARE s FROM 'SELECT ?+1'; SET @p = 4; EXECUTE s USING @p; DEALLOCATE PREPARE s;
SELECT REPEAT('z', 3000); SELECT GET_LOCK('fz', 0), RELEASE_LOCK('fz'); KILL QUERY 999999;
SELECT * FROM no_such_table; DO SLEEP(0); SELECT LAST_INSERT_ID(), FOUND_ROWS();";

fn record_mysql() -> xtask::Result<Vec<Vec<Chunk>>> {
    let relay = Relay::start(ports::MY_PRIMARY)?;
    for extra in [&[][..], &["--compress"][..]] {
        let mut cmd = Command::new("mariadb");
        cmd.args([
            "--no-defaults",
            "-h127.0.0.1",
            "-uapp",
            "-papp",
            "--skip-ssl",
        ])
        .arg(format!("-P{}", relay.port))
        .args(["--force", "-D", "app"])
        .args(extra)
        .args(["-e", MYSQL_SCRIPT]);
        // Errors are part of the traffic (the script asks for some): the output is not checked.
        let _ = cmd.output();
    }
    let db = "fuzzseed";
    let primary = xtask::mariadb::primary(&xtask::state_dir());
    primary.sql(&format!(
        "DROP DATABASE IF EXISTS {db}; CREATE DATABASE {db}; GRANT ALL ON {db}.* TO 'app'@'%';"
    ))?;
    let sysbench = |port: u16, action: &str| {
        let mut c = Command::new("sysbench");
        c.args(["--db-driver=mysql", "--mysql-host=127.0.0.1"])
            .arg(format!("--mysql-port={port}"))
            .args(["--mysql-user=app", "--mysql-password=app"])
            .arg(format!("--mysql-db={db}"))
            .args([
                "--tables=1",
                "--table-size=50",
                "--events=40",
                "--threads=1",
            ])
            .args([
                "--db-ps-mode=auto",
                "--mysql-ssl=off",
                "oltp_read_write",
                action,
            ]);
        c
    };
    run_capture(&mut sysbench(ports::MY_PRIMARY, "prepare"))?;
    let ran = run_capture(&mut sysbench(relay.port, "run"));
    let _ = primary.sql(&format!("DROP DATABASE {db}"));
    ran?;
    Ok(relay.finish())
}

const PG_SCRIPT: &str = "SELECT 1; SELECT now(), 'a''b', E'\\\\x41', NULL::int, $q$quoted$q$;
SET work_mem = '8MB'; SET LOCAL statement_timeout = 0; RESET work_mem; SHOW search_path;
BEGIN; CREATE TEMP TABLE fz (a int primary key, b text); INSERT INTO fz VALUES (1, 'x'), (2, NULL);
SELECT * FROM fz WHERE a = ANY('{1,2}') /* hostgroup=1 */ FOR UPDATE; COMMIT;
SELECT pg_advisory_lock(1); SELECT pg_advisory_unlock(1); PREPARE p AS SELECT $1::int + 1;
EXECUTE p(4); DEALLOCATE p; LISTEN fz; UNLISTEN fz; SELECT pg_cancel_backend(0);
SELECT * FROM no_such_table; DISCARD ALL; SELECT set_config('application_name', 'x', false);";

fn record_pgsql() -> xtask::Result<Vec<Vec<Chunk>>> {
    let relay = Relay::start(ports::PG_PRIMARY)?;
    let psql = |port: u16, sql: &str| {
        let mut c = xtask::postgres::as_app("psql", port);
        c.env("PGOPTIONS", "-c search_path=public -c statement_timeout=5s")
            .env("PGAPPNAME", "fuzzseed")
            .args(["-d", "app", "-X", "-q", "-A", "-t", "-c", sql]);
        c
    };
    for stmt in PG_SCRIPT.split(";\n") {
        let _ = psql(relay.port, stmt).output();
    }
    let has_tables = run_capture(&mut psql(
        ports::PG_PRIMARY,
        "SELECT count(*) FROM pg_tables WHERE tablename = 'pgbench_accounts'",
    ))
    .unwrap_or_default();
    if has_tables.trim() != "1" {
        let mut init = xtask::postgres::as_app("pgbench", ports::PG_PRIMARY);
        init.args(["-i", "-s", "1", "-q", "app"]);
        run_capture(&mut init)?;
    }
    for mode in ["simple", "extended", "prepared"] {
        let mut bench = xtask::postgres::as_app("pgbench", relay.port);
        bench.args(["-n", "-c", "1", "-t", "10", "-M", mode, "app"]);
        run_capture(&mut bench)?;
    }
    Ok(relay.finish())
}

/// Locks a mutex; a copy thread that panicked leaves its chunks readable.
fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

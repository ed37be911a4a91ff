//! LOAD DATA LOCAL INFILE through Sluice with the mariadb CLI, PyMySQL and MariaDB Connector/J:
//! off by default with a clear error, streamed with bounded memory when on, and a client that
//! gives up mid-file costs nothing but its own session.

use sluice_tests::*;
use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn enabled() -> String {
    standard_config("enable_load_data_local_infile = true", "")
}

/// A fresh table `infile_e2e.<name>` (id, payload) on the primary.
fn fresh_table(name: &str) {
    primary_root(&format!(
        "CREATE DATABASE IF NOT EXISTS infile_e2e; DROP TABLE IF EXISTS infile_e2e.{name}; \
         CREATE TABLE infile_e2e.{name} (id INT PRIMARY KEY, payload TEXT); \
         GRANT ALL ON infile_e2e.* TO 'app'@'%';"
    ));
}

fn count(name: &str) -> u64 {
    primary_root(&format!("SELECT COUNT(*) FROM infile_e2e.{name}"))
        .trim()
        .parse()
        .unwrap_or(u64::MAX)
}

/// Writes `rows` CSV lines of `width` payload bytes; returns the path.
fn csv(dir: &Path, rows: u64, width: usize) -> std::path::PathBuf {
    let path = dir.join(format!("rows-{rows}x{width}.csv"));
    let mut f = std::io::BufWriter::new(std::fs::File::create(&path).expect("csv"));
    let payload = "x".repeat(width);
    for i in 0..rows {
        writeln!(f, "{i},{payload}").expect("write csv");
    }
    f.flush().expect("flush csv");
    path
}

fn load_sql(path: &Path, table: &str) -> String {
    format!(
        "LOAD DATA LOCAL INFILE '{}' INTO TABLE infile_e2e.{table} FIELDS TERMINATED BY ','",
        path.display()
    )
}

#[test]
fn disabled_by_default_with_a_clear_error() {
    if !backends_ready(Servers::MariaDb) {
        return;
    }
    fresh_table("off");
    let s = Sluice::start(&standard_config("", ""));
    let path = csv(&s.dir, 10, 8);
    let out = mariadb(
        s.port,
        "app",
        "app",
        &["--skip-ssl", "--local-infile=1"],
        &load_sql(&path, "off"),
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        err.contains("ERROR 1148") && err.contains("mysql-enable_load_data_local_infile=false"),
        "{err}"
    );
    assert_eq!(count("off"), 0);
    // The session goes on after the refusal.
    let sql = format!("{};\nSELECT 5", load_sql(&path, "off"));
    let out = mariadb(
        s.port,
        "app",
        "app",
        &["--skip-ssl", "--local-infile=1", "--force"],
        &sql,
    );
    assert!(String::from_utf8_lossy(&out.stdout).contains('5'));
}

#[test]
fn mariadb_cli_and_pymysql_load_local_files() {
    if !backends_ready(Servers::MariaDb) {
        return;
    }
    fresh_table("cli");
    fresh_table("py");
    let s = Sluice::start(&enabled());
    let path = csv(&s.dir, 1000, 20);
    ok_stdout(&mariadb(
        s.port,
        "app",
        "app",
        &["--skip-ssl", "--local-infile=1"],
        &load_sql(&path, "cli"),
    ));
    assert_eq!(count("cli"), 1000);
    // The same over the compressed protocol (the client leg compressed, the backend leg not).
    fresh_table("clizip");
    ok_stdout(&mariadb(
        s.port,
        "app",
        "app",
        &["--skip-ssl", "--local-infile=1", "--compress"],
        &load_sql(&path, "clizip"),
    ));
    assert_eq!(count("clizip"), 1000);
    // Without the client's permission the server's request never reaches it: Sluice refuses.
    let out = mariadb(
        s.port,
        "app",
        "app",
        &["--skip-ssl", "--local-infile=0"],
        &load_sql(&path, "cli"),
    );
    assert!(String::from_utf8_lossy(&out.stderr).contains("ERROR 1148"));
    let script = r#"
import sys, pymysql
c = pymysql.connect(host="127.0.0.1", port=int(sys.argv[1]), user="app", password="app",
                    local_infile=True, autocommit=True)
with c.cursor() as cur:
    n = cur.execute(f"LOAD DATA LOCAL INFILE '{sys.argv[2]}' INTO TABLE infile_e2e.py FIELDS TERMINATED BY ','")
    cur.execute("SELECT COUNT(*), SUM(LENGTH(payload)) FROM infile_e2e.py")
    print(n, *cur.fetchone())
    # The connection is usable afterwards and pins nothing.
    cur.execute("SELECT 1")
print("ok")
"#;
    let out = ok_stdout(&python(
        script,
        &[&s.port.to_string(), &path.display().to_string()],
    ));
    assert_eq!(out, "1000 1000 20000\nok\n");
    let plist = s.admin_ok("SELECT COUNT(*) FROM stats_mysql_processlist WHERE pin_reason <> ''");
    assert_eq!(plist.trim(), "0");
}

#[test]
fn a_100_mb_file_streams_with_bounded_memory() {
    if !backends_ready(Servers::MariaDb) {
        return;
    }
    fresh_table("big");
    let s = Sluice::start(&enabled());
    // 100 MB: 50,000 rows of 2,000 bytes.
    let path = csv(&s.dir, 50_000, 2_000);
    let size = std::fs::metadata(&path).map(|m| m.len()).unwrap_or(0);
    assert!(size > 100_000_000, "{size}");
    let pid = s.pid();
    let before = xtask::proc::rss_kib(pid);
    let done = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let sampler = {
        let done = done.clone();
        std::thread::spawn(move || {
            let mut peak = 0;
            let start = Instant::now();
            while !done.load(std::sync::atomic::Ordering::Relaxed)
                && start.elapsed() < Duration::from_secs(300)
            {
                peak = peak.max(xtask::proc::rss_kib(pid));
                std::thread::sleep(Duration::from_millis(20));
            }
            peak
        })
    };
    let out = mariadb(
        s.port,
        "app",
        "app",
        &["--skip-ssl", "--local-infile=1"],
        &load_sql(&path, "big"),
    );
    done.store(true, std::sync::atomic::Ordering::Relaxed);
    let peak = sampler.join().unwrap_or(u64::MAX);
    ok_stdout(&out);
    assert_eq!(count("big"), 50_000);
    let grew_mib = peak.saturating_sub(before) / 1024;
    eprintln!("RSS before {before} KiB, peak during the load {peak} KiB (+{grew_mib} MiB)");
    assert!(
        grew_mib < 48,
        "Sluice's RSS grew by {grew_mib} MiB while relaying a {} MB file",
        size / 1_000_000
    );
}

#[test]
fn a_client_that_aborts_mid_file_ends_only_its_session() {
    if !backends_ready(Servers::MariaDb) {
        return;
    }
    fresh_table("abort");
    let s = Sluice::start(&enabled());
    // The client reads its "file" from a FIFO that is fed slowly, then is killed mid-file.
    let fifo = s.dir.join("feed.fifo");
    let made = Command::new("mkfifo").arg(&fifo).status().expect("mkfifo");
    assert!(made.success());
    let script = r#"
import sys, pymysql
c = pymysql.connect(host="127.0.0.1", port=int(sys.argv[1]), user="app", password="app",
                    local_infile=True, autocommit=True)
c.cursor().execute(f"LOAD DATA LOCAL INFILE '{sys.argv[2]}' INTO TABLE infile_e2e.abort FIELDS TERMINATED BY ','")
"#;
    let mut client = Command::new("python3")
        .arg("-c")
        .arg(script)
        .arg(s.port.to_string())
        .arg(&fifo)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("python3");
    let mut feed = std::fs::OpenOptions::new()
        .write(true)
        .open(&fifo)
        .expect("open fifo for writing");
    for i in 0..2000 {
        writeln!(feed, "{i},{}", "y".repeat(500)).expect("feed");
    }
    feed.flush().expect("flush feed");
    // Rows are on their way through Sluice; now the client dies without ending the file.
    let relayed = xtask::proc::wait_until(Duration::from_secs(10), || {
        s.admin_ok("SELECT COUNT(*) FROM stats_mysql_processlist")
            .trim()
            .parse::<u32>()
            .unwrap_or(0)
            >= 1
    });
    assert!(relayed);
    wait_mysql_running(ports::MY_PRIMARY, "LOAD DATA LOCAL INFILE");
    let _ = client.kill();
    let _ = client.wait();
    drop(feed);
    let logged = xtask::proc::wait_until(Duration::from_secs(10), || {
        s.log()
            .contains("client went away while sending a LOCAL INFILE file")
    });
    assert!(logged, "{}", s.log());
    // The statement did not complete; the server rolled it back with the closed connection.
    let rolled_back = xtask::proc::wait_until(Duration::from_secs(10), || count("abort") == 0);
    assert!(rolled_back, "{} rows", count("abort"));
    // Everyone else is served, on clean connections.
    let out = ok_stdout(&mariadb(
        s.port,
        "app",
        "app",
        &["--skip-ssl"],
        "SELECT COUNT(*) FROM infile_e2e.abort",
    ));
    assert_eq!(out.trim(), "0");
}

#[test]
fn connector_j_allow_local_infile() {
    if !backends_ready(Servers::MariaDb) {
        return;
    }
    fresh_table("jdbc");
    let s = Sluice::start(&enabled());
    let path = csv(&s.dir, 300, 10);
    let out = java(
        xtask::packages::MARIADB_JDBC_JAR,
        "MariaDbLocalInfile.java",
        &[s.port.to_string(), path.display().to_string()],
        &s.log(),
    );
    assert_eq!(out, "loaded 300\n");
    assert_eq!(count("jdbc"), 300);
}

//! Upgrading Sluice without refusing a connection: while sysbench, pgbench and the soak's ledger
//! writers run through it, Sluice is replaced three times by a new process started with
//! `--takeover`. Every connection attempt succeeds (pgbench opens one per transaction), no client
//! sees an error, every acknowledged commit is on the primary once, and each replaced process
//! stops by itself once its last session ended.

use sluice_tests::*;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// How long the load runs; the replacements happen inside it.
const LOAD: Duration = Duration::from_secs(24);
const SB_DB: (&str, u32, u32) = ("sbtakeover", 2, 1000);
const LEDGER: &str = "takeover_ledger";

/// A successor process, started as an operator would during an upgrade.
fn successor(dir: &Path, n: usize) -> Child {
    successor_notifying(dir, n, None)
}

/// As [`successor`], with systemd's `NOTIFY_SOCKET` set to `notify`.
fn successor_notifying(dir: &Path, n: usize, notify: Option<&Path>) -> Child {
    let log = std::fs::File::create(dir.join(format!("sluice-{n}.log"))).expect("log");
    let mut c = Command::new(sluice_bin());
    if let Some(path) = notify {
        c.env("NOTIFY_SOCKET", path);
    }
    c.arg("--config")
        .arg(dir.join("sluice.toml"))
        .arg("--datadir")
        .arg(dir.join("data"))
        .args(["--shutdown-timeout", "60", "--takeover"])
        .env("NO_COLOR", "1")
        .stdin(Stdio::null())
        .stdout(log.try_clone().expect("log"))
        .stderr(log)
        .spawn()
        .expect("sluice starts")
}

fn log_of(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_default()
}

/// The soak's ledger writer, connecting anew for every commit; its report.
fn ledger(proto: &'static str, port: u16, dir: PathBuf) -> JoinHandle<serde_json::Value> {
    std::thread::spawn(move || {
        let out = dir.join(format!("ledger-{proto}.json"));
        let script = xtask::workspace_root().join("xtask/src/soak_clients.py");
        let run = Command::new("python3")
            .arg(script)
            .args(["ledger-reconnect", proto, &port.to_string(), "7"])
            .arg((LOAD.as_secs() - 2).to_string())
            .arg(&out)
            .env("LEDGER_TABLE", LEDGER)
            .output()
            .expect("python3");
        assert!(run.status.success(), "{run:?}");
        serde_json::from_str(&log_of(&out)).expect("ledger report")
    })
}

/// Short sysbench runs back to back (sysbench keeps its connections for a run).
fn sysbench_loop(port: u16) -> JoinHandle<Vec<Output>> {
    std::thread::spawn(move || {
        let start = Instant::now();
        let mut runs = Vec::new();
        while start.elapsed() + Duration::from_secs(3) < LOAD {
            let args = ["--threads=2", "--time=2", "--report-interval=0"];
            runs.push(sysbench(port, SB_DB, "oltp_read_only", &args, "run"));
        }
        runs
    })
}

fn rows(sql: &str) -> String {
    primary_root(sql)
}

fn pg_count(sql: &str) -> String {
    ok_stdout(&psql_login(ports::PG_PRIMARY, "app", "app", sql))
}

#[test]
fn replaced_three_times_under_load_without_a_refused_connection_or_a_lost_commit() {
    if !backends_ready(Servers::Both) {
        return;
    }
    rows(&format!(
        "DROP TABLE IF EXISTS app.{LEDGER}; CREATE TABLE app.{LEDGER} (id BIGINT AUTO_INCREMENT PRIMARY KEY, writer INT NOT NULL, seq BIGINT NOT NULL); DROP DATABASE IF EXISTS {db}; CREATE DATABASE {db}",
        db = SB_DB.0
    ));
    pg_count(&format!(
        "DROP TABLE IF EXISTS {LEDGER}; CREATE TABLE {LEDGER} (id BIGSERIAL PRIMARY KEY, writer INT NOT NULL, seq BIGINT NOT NULL); DROP TABLE IF EXISTS takeover_bench; CREATE TABLE takeover_bench (id BIGSERIAL PRIMARY KEY, client INT NOT NULL)"
    ));
    ok_stdout(&sysbench(
        ports::MY_PRIMARY,
        SB_DB,
        "oltp_read_only",
        &[],
        "prepare",
    ));
    let dir = scratch_dir("takeover");
    let mut first = Sluice::start_with(
        &standard_config("", ""),
        dir.clone(),
        &["--shutdown-timeout", "60"],
    );
    let script = write_file(
        &dir,
        "insert.sql",
        "INSERT INTO takeover_bench (client) VALUES (:client_id);\n",
    );
    let pg_port = first.pg_port;
    let seconds = LOAD.as_secs().to_string();
    let script_arg = script.display().to_string();
    let pgbench_run = std::thread::spawn(move || {
        pgbench(
            pg_port,
            &["-n", "-C", "-c", "4", "-T", &seconds, "-f", &script_arg],
        )
    });
    let sysbench_runs = sysbench_loop(first.port);
    let ledgers = [
        ledger("mysql", first.port, dir.clone()),
        ledger("pgsql", pg_port, dir.clone()),
    ];

    // Three replacements, each waiting for the previous process to drain and stop by itself.
    let mut children = Vec::new();
    std::thread::sleep(Duration::from_secs(4));
    for n in 1..=3 {
        children.push(successor(&dir, n));
        let new_log = dir.join(format!("sluice-{n}.log"));
        within(Duration::from_secs(30), || {
            log_of(&new_log).contains("accepting on the listeners")
        })
        .unwrap_or_else(|| panic!("successor {n} did not take over:\n{}", log_of(&new_log)));
        let previous_log = if n == 1 {
            dir.join("sluice.log")
        } else {
            dir.join(format!("sluice-{}.log", n - 1))
        };
        let stopped = within(Duration::from_secs(20), || {
            log_of(&previous_log).contains("sluice stopped")
        });
        let text = log_of(&previous_log);
        assert!(stopped.is_some(), "process {} did not stop:\n{text}", n - 1);
        assert!(
            text.contains("took over the listeners") && text.contains("every session ended"),
            "process {} did not drain on its own:\n{text}",
            n - 1
        );
        std::thread::sleep(Duration::from_secs(3));
    }
    assert_eq!(
        first.wait_exit(Duration::from_secs(5)).map(|s| s.success()),
        Some(true)
    );
    for c in children.iter_mut().take(2) {
        let status = c.wait().expect("replaced process exits");
        assert!(status.success(), "{status}");
    }

    // pgbench: a connection per transaction, none refused, every insert it counted is there.
    let bench = pgbench_run.join().expect("pgbench thread");
    let text = ok_stdout(&bench);
    let processed: u64 = text
        .lines()
        .find_map(|l| l.strip_prefix("number of transactions actually processed: "))
        .and_then(|n| n.split(['/', ' ']).next()?.parse().ok())
        .unwrap_or_else(|| panic!("pgbench output:\n{text}"));
    assert!(processed > 100, "{text}");
    assert!(!text.contains("aborted"), "{text}");
    assert_eq!(
        pg_count("SELECT COUNT(*) FROM takeover_bench").trim(),
        processed.to_string()
    );
    // sysbench: every short run through whichever process accepted it, without an error.
    let runs = sysbench_runs.join().expect("sysbench thread");
    assert!(runs.len() >= 5, "{} sysbench runs", runs.len());
    for out in &runs {
        let text = ok_stdout(out);
        assert!(
            text.contains("ignored errors:                      0"),
            "{text}"
        );
        assert!(
            text.contains("reconnects:                          0"),
            "{text}"
        );
    }
    // The ledgers: no error, every acknowledged commit on the primary exactly once.
    for (h, proto) in ledgers.into_iter().zip(["mysql", "pgsql"]) {
        let report = h.join().expect("ledger thread");
        let acked = report["acked"].as_array().expect("acked").len();
        assert!(acked > 50, "{proto}: {report}");
        assert_eq!(report["errors"], serde_json::json!({}), "{proto}: {report}");
        assert_eq!(
            report["unknown"],
            serde_json::json!([]),
            "{proto}: {report}"
        );
        let sql = format!("SELECT COUNT(*), COUNT(DISTINCT seq) FROM {LEDGER} WHERE writer = 7");
        let counts = match proto {
            "mysql" => rows(&format!("USE app; {sql}")),
            _ => pg_count(&sql).replace('|', "\t"),
        };
        assert_eq!(counts.trim(), format!("{acked}\t{acked}"), "{proto}");
    }
    // The last process serves on: the admin answers on the same port.
    let mut last = children.pop().expect("the last successor");
    let servers = first.admin_ok("SELECT COUNT(*) FROM runtime_mysql_servers");
    assert_eq!(servers.trim(), "2");
    let _ = last.kill();
    let _ = last.wait();
}

/// Clients that stay: a MySQL session idle, one inside a transaction, a PostgreSQL session
/// inside a transaction. After the takeover the old process waits `--shutdown-timeout` for
/// them to leave; then the idle one is closed, and each transaction may still commit before its
/// session closes.
const STAYING: &str = r#"
import sys, time, pymysql, psycopg
my, pg, ledger = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
def my_conn():
    return pymysql.connect(host="127.0.0.1", port=my, user="app", password="app", database="app")
idle, busy = my_conn(), my_conn()
pgc = psycopg.connect(host="127.0.0.1", port=pg, user="app", password="app", dbname="app", sslmode="disable")
busy.cursor().execute(f"INSERT INTO {ledger} (writer, seq) VALUES (8, 1)")
pgc.execute(f"INSERT INTO {ledger} (writer, seq) VALUES (8, 1)")
print("open", flush=True)
sys.stdin.readline()            # the test has started a successor and waited past the window
busy.commit()
pgc.commit()
print("committed", flush=True)
try:
    idle.cursor().execute("SELECT 1")
    print("idle still served")
except Exception as e:
    print("idle closed:", type(e).__name__)
time.sleep(1.5)
for name, c in (("busy", busy), ("pg", pgc)):
    try:
        (c.cursor() if name == "busy" else c).execute("SELECT 1")
        print(name, "still served")
    except Exception as e:
        print(name, "closed:", type(e).__name__)
"#;

#[test]
fn sessions_left_after_the_drain_window_close_at_their_transaction_boundary() {
    if !backends_ready(Servers::Both) {
        return;
    }
    let table = "takeover_staying";
    rows(&format!(
        "DROP TABLE IF EXISTS app.{table}; CREATE TABLE app.{table} (id BIGINT AUTO_INCREMENT PRIMARY KEY, writer INT NOT NULL, seq BIGINT NOT NULL)"
    ));
    pg_count(&format!(
        "DROP TABLE IF EXISTS {table}; CREATE TABLE {table} (id BIGSERIAL PRIMARY KEY, writer INT NOT NULL, seq BIGINT NOT NULL)"
    ));
    let dir = scratch_dir("takeover-staying");
    let mut old = Sluice::start_with(
        &standard_config("", ""),
        dir.clone(),
        &["--shutdown-timeout", "3"],
    );
    let script = write_file(&dir, "staying.py", STAYING);
    let mut clients = Command::new("python3")
        .arg(&script)
        .args([&old.port.to_string(), &old.pg_port.to_string(), table])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("python3");
    let mut out = std::io::BufReader::new(clients.stdout.take().expect("stdout"));
    let mut line = String::new();
    std::io::BufRead::read_line(&mut out, &mut line).expect("read");
    assert_eq!(line.trim(), "open");
    // The successor tells systemd it is ready and is now the service's main process.
    let notify_path = dir.join("notify.sock");
    let notify = std::os::unix::net::UnixDatagram::bind(&notify_path).expect("notify socket");
    notify
        .set_read_timeout(Some(Duration::from_secs(30)))
        .expect("timeout");
    let mut new = successor_notifying(&dir, 1, Some(&notify_path));
    let mut buf = [0u8; 256];
    let n = notify.recv(&mut buf).expect("sd_notify datagram");
    assert_eq!(
        String::from_utf8_lossy(&buf[..n]),
        format!(
            "READY=1\nMAINPID={}\nSTATUS=accepting connections",
            new.id()
        )
    );
    let old_log = dir.join("sluice.log");
    within(Duration::from_secs(30), || {
        log_of(&old_log).contains("still open after 3s")
    })
    .unwrap_or_else(|| panic!("{}", log_of(&old_log)));
    std::io::Write::write_all(&mut clients.stdin.take().expect("stdin"), b"go\n").expect("go");
    let mut rest = String::new();
    std::io::Read::read_to_string(&mut out, &mut rest).expect("read");
    assert!(clients.wait().expect("python").success());
    assert_eq!(
        rest.lines().collect::<Vec<_>>(),
        [
            "committed",
            "idle closed: OperationalError",
            "busy closed: OperationalError",
            "pg closed: OperationalError",
        ],
        "{}",
        log_of(&old_log)
    );
    assert_eq!(
        rows(&format!(
            "SELECT COUNT(*) FROM app.{table} WHERE writer = 8"
        ))
        .trim(),
        "1"
    );
    assert_eq!(
        pg_count(&format!("SELECT COUNT(*) FROM {table} WHERE writer = 8")).trim(),
        "1"
    );
    assert!(old.wait_exit(Duration::from_secs(10)).is_some());
    let _ = new.kill();
    let _ = new.wait();
}

/// A datagram socket standing in for systemd's `NOTIFY_SOCKET`.
fn notify_socket(dir: &Path, name: &str) -> (std::os::unix::net::UnixDatagram, PathBuf) {
    let path = dir.join(name);
    let sock = std::os::unix::net::UnixDatagram::bind(&path).expect("notify socket");
    sock.set_read_timeout(Some(Duration::from_secs(30)))
        .expect("timeout");
    (sock, path)
}

fn next_message(sock: &std::os::unix::net::UnixDatagram) -> Option<String> {
    let mut buf = [0u8; 256];
    let n = sock.recv(&mut buf).ok()?;
    Some(String::from_utf8_lossy(&buf[..n]).into_owned())
}

#[test]
fn under_systemd_the_old_process_names_its_successor_and_never_says_stopping() {
    if !backends_ready(Servers::Both) {
        return;
    }
    let dir = scratch_dir("takeover-notify");
    let _first = Sluice::start_with(
        &standard_config("", ""),
        dir.clone(),
        &["--shutdown-timeout", "5"],
    );
    let (n1, p1) = notify_socket(&dir, "n1.sock");
    let mut b = successor_notifying(&dir, 1, Some(&p1));
    let ready = format!("READY=1\nMAINPID={}\nSTATUS=accepting connections", b.id());
    assert_eq!(next_message(&n1).as_deref(), Some(ready.as_str()));
    // A second takeover: b, under "systemd", hands over to c.
    let (n2, p2) = notify_socket(&dir, "n2.sock");
    let mut c = successor_notifying(&dir, 2, Some(&p2));
    let ready = format!("READY=1\nMAINPID={}\nSTATUS=accepting connections", c.id());
    assert_eq!(next_message(&n2).as_deref(), Some(ready.as_str()));
    let handed = format!("MAINPID={}\nSTATUS=draining after a takeover", c.id());
    assert_eq!(next_message(&n1).as_deref(), Some(handed.as_str()));
    assert!(b.wait().expect("b exits").success());
    n1.set_read_timeout(Some(Duration::from_millis(500)))
        .expect("timeout");
    assert_eq!(
        next_message(&n1),
        None,
        "nothing after the handover (STOPPING=1 would stop the unit)"
    );
    let _ = c.kill();
    let _ = c.wait();
}

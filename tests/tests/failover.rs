//! The monitor against real servers, under client load: a PostgreSQL and a MariaDB failover
//! (stop the primary, promote the replica) recovered by read_only monitoring, and heartbeat
//! shunning of a SIGSTOP-ed server. The backends are put back as they were afterwards.

use sluice_tests::*;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

fn unix_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// A bounded client loop in Python: every 20 ms a writer query (default hostgroup 0) and a
/// reader query (`/* hostgroup=1 */`), each on a fresh transaction; prints
/// `<unix ms> <w|r> <server port|ERR>` lines.
const LOAD: &str = r#"
import sys, time, threading
proto, port, secs = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
end = time.time() + secs
out = []
lock = threading.Lock()
def connect():
    if proto == "pg":
        import psycopg
        return psycopg.connect(host="127.0.0.1", port=port, user="app", password="app", dbname="app",
                               sslmode="disable", autocommit=True, connect_timeout=3)
    import pymysql
    return pymysql.connect(host="127.0.0.1", port=port, user="app", password="app", autocommit=True,
                           connect_timeout=3, read_timeout=15)
def loop(tag, sql):
    c = None
    while time.time() < end:
        try:
            if c is None:
                c = connect()
            cur = c.cursor()
            cur.execute(sql)
            v = str(cur.fetchone()[0])
        except Exception as e:
            v = "ERR"
            try:
                c.close()
            except Exception:
                pass
            c = None
        with lock:
            out.append("%d %s %s" % (int(time.time() * 1000), tag, v))
        time.sleep(0.02)
q = "SELECT inet_server_port()" if proto == "pg" else "SELECT @@port"
hint = q.replace("SELECT", "SELECT /* hostgroup=1 */")
ts = [threading.Thread(target=loop, args=("w", q)), threading.Thread(target=loop, args=("r", hint))]
for t in ts: t.start()
for t in ts: t.join()
print("\n".join(out))
"#;

fn start_load(proto: &str, port: u16, secs: u32) -> Child {
    let mut child = Command::new("python3")
        .args(["-", proto, &port.to_string(), &secs.to_string()])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("python3");
    use std::io::Write;
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(LOAD.as_bytes())
        .expect("script");
    child
}

/// (time, writer/reader, port or None for an error) lines of the load loop.
fn samples(child: Child) -> Vec<(u64, char, Option<u16>)> {
    let out = child.wait_with_output().expect("load loop");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| {
            let mut w = l.split_whitespace();
            let t = w.next()?.parse().ok()?;
            let tag = w.next()?.chars().next()?;
            let v = w.next()?;
            Some((t, tag, v.parse().ok()))
        })
        .collect()
}

/// How long after `promoted` (unix ms) writer traffic reached `port`, printed with the error
/// count; panics when it never did.
fn recovery(what: &str, s: &[(u64, char, Option<u16>)], port: u16, promoted: u64) -> u64 {
    let recovered = first_writer_answer(s, port, promoted).unwrap_or_else(|| {
        panic!(
            "{what}: writer traffic never reached the promoted replica: {:?}",
            &s[s.len().saturating_sub(20)..]
        )
    });
    let ms = recovered.saturating_sub(promoted);
    let errors = s.iter().filter(|x| x.2.is_none()).count();
    eprintln!(
        "{what} failover: writer traffic on the new primary {ms} ms after the promotion (bar 1500 ms); {errors} failed queries of {}",
        s.len()
    );
    ms
}

/// First writer answer from `port` at or after `since` (unix ms).
fn first_writer_answer(s: &[(u64, char, Option<u16>)], port: u16, since: u64) -> Option<u64> {
    s.iter()
        .filter(|(t, tag, p)| *tag == 'w' && *p == Some(port) && *t >= since)
        .map(|(t, _, _)| *t)
        .min()
}

fn monitor_vars(prefix: &str) -> String {
    format!(
        "{prefix}monitor_read_only_interval = 1000\n{prefix}monitor_ping_interval = 1000\n{prefix}monitor_connect_interval = 2000\n"
    )
}

/// Puts the PostgreSQL pair back: wiped and recreated (the replica was promoted).
struct RestorePg;

impl Drop for RestorePg {
    fn drop(&mut self) {
        let dir = xtask::state_dir();
        let _ = xtask::postgres::pair_down(&dir);
        for sub in ["pg1", "pg2", "pgsock1", "pgsock2"] {
            let _ = std::fs::remove_dir_all(dir.join(sub));
        }
        if let Err(e) = xtask::postgres::pair_up(&dir) {
            eprintln!("restoring the PostgreSQL pair failed: {e}");
        }
    }
}

/// Puts the MariaDB pair back: primary started, replica read-only and replicating again.
struct RestoreMy;

impl Drop for RestoreMy {
    fn drop(&mut self) {
        let dir = xtask::state_dir();
        let (p, r) = (xtask::mariadb::primary(&dir), xtask::mariadb::replica(&dir));
        let _ = p.start();
        let _ = r.sql("SET GLOBAL read_only = 1; STOP SLAVE; START SLAVE;");
    }
}

#[test]
fn postgresql_failover_under_load_recovers_within_one_and_a_half_read_only_intervals() {
    if !backends_ready() {
        return;
    }
    let _restore = RestorePg;
    let cfg = format!(
        "[pgsql_variables]\ninterfaces = \"127.0.0.1:{{pg_port}}\"\n{}{}",
        monitor_vars(""),
        standard_config(
            "",
            "[[pgsql_replication_hostgroups]]\nwriter_hostgroup = 0\nreader_hostgroup = 1\ncomment = 'pg-replication'\n",
        )
    );
    let s = Sluice::start(&cfg);
    let placed = xtask::proc::wait_until(Duration::from_secs(10), || {
        s.admin_ok(
            "SELECT hostgroup_id, port FROM runtime_pgsql_servers ORDER BY hostgroup_id, port",
        ) == format!(
            "0\t{p}\n1\t{p}\n1\t{r}\n",
            p = ports::PG_PRIMARY,
            r = ports::PG_REPLICA
        )
    });
    assert!(
        placed,
        "read_only placement: {}",
        s.admin_ok("SELECT * FROM runtime_pgsql_servers")
    );
    // pgbench -S on the writer hostgroup as load (it gives up on a client at its first error, so
    // the recovery is measured by the client loop beside it).
    ok_stdout(&pgbench(ports::PG_PRIMARY, &["-i", "-q", "-s", "1"]));
    let bench_port = s.pg_port;
    let bench =
        std::thread::spawn(move || pgbench(bench_port, &["-n", "-S", "-c", "4", "-T", "12"]));
    let load = start_load("pg", s.pg_port, 12);
    std::thread::sleep(Duration::from_secs(2));
    let dir = xtask::state_dir();
    xtask::postgres::primary(&dir).stop();
    let stopped = unix_ms();
    std::thread::sleep(Duration::from_millis(1500));
    let promoted_at = Instant::now();
    xtask::postgres::replica(&dir)
        .sql("SELECT pg_promote()")
        .expect("promote the replica");
    let promoted = unix_ms();
    eprintln!(
        "primary stopped at +0 ms, replica promoted at +{} ms ({:?} to promote)",
        promoted - stopped,
        promoted_at.elapsed()
    );
    let s_out = samples(load);
    let recovery_ms = recovery("PostgreSQL", &s_out, ports::PG_REPLICA, promoted);
    if let Ok(out) = bench.join() {
        let text = String::from_utf8_lossy(&out.stdout);
        eprintln!(
            "pgbench -S during the failover: {}",
            text.lines()
                .find(|l| l.contains("transactions actually processed"))
                .unwrap_or("no summary")
        );
    }
    let recovered = promoted + recovery_ms;
    assert!(recovery_ms <= 1500, "recovered after {recovery_ms} ms");
    let readers_ok = s_out
        .iter()
        .filter(|(t, tag, p)| *tag == 'r' && *t > recovered && p.is_some())
        .count();
    assert!(readers_ok > 10, "reads go on after the failover");
    let rt = s.admin_ok(
        "SELECT hostgroup_id, port, status FROM runtime_pgsql_servers WHERE hostgroup_id = 0",
    );
    assert_eq!(
        rt,
        format!("0\t{}\tONLINE\n", ports::PG_REPLICA),
        "the promoted replica is the writer"
    );
    let log = s.log();
    assert!(
        log.contains(&format!(
            "server 127.0.0.1:{} added to hostgroup 0",
            ports::PG_REPLICA
        )),
        "{log}"
    );
    let ro_log = s.admin_ok(&format!(
        "SELECT COUNT(*) FROM monitor.pgsql_server_read_only_log WHERE port = {} AND read_only = 0",
        ports::PG_REPLICA
    ));
    assert_ne!(ro_log.trim(), "0");
}

#[test]
fn mariadb_failover_under_load_and_heartbeat_shunning_of_a_stopped_server() {
    if !backends_ready() {
        return;
    }
    let _restore = RestoreMy;
    let cfg = standard_config(
        &monitor_vars(""),
        "[[mysql_replication_hostgroups]]\nwriter_hostgroup = 0\nreader_hostgroup = 1\n",
    );
    let s = Sluice::start(&cfg);
    let (p, r) = (ports::MY_PRIMARY, ports::MY_REPLICA);
    let placed = xtask::proc::wait_until(Duration::from_secs(10), || {
        s.admin_ok(
            "SELECT hostgroup_id, port FROM runtime_mysql_servers ORDER BY hostgroup_id, port",
        ) == format!("0\t{p}\n1\t{p}\n1\t{r}\n")
    });
    assert!(
        placed,
        "{}",
        s.admin_ok("SELECT * FROM runtime_mysql_servers")
    );

    // Heartbeats: a SIGSTOP-ed replica is shunned after 3 missed pings, back after SIGCONT.
    let dir = xtask::state_dir();
    let replica = xtask::mariadb::replica(&dir);
    let pid = replica.pid().expect("replica pid");
    xtask::proc::signal(pid, "STOP");
    let shunned = xtask::proc::wait_until(Duration::from_secs(10), || {
        s.admin_ok(&format!(
            "SELECT status FROM runtime_mysql_servers WHERE port = {r}"
        ))
        .trim()
            == "SHUNNED"
    });
    xtask::proc::signal(pid, "CONT");
    assert!(shunned, "{}", s.log());
    assert!(s.log().contains(&format!(
        "Server 127.0.0.1:{r} missed 3 heartbeats, shunning it"
    )));
    let back = xtask::proc::wait_until(Duration::from_secs(10), || {
        s.admin_ok(&format!(
            "SELECT status FROM runtime_mysql_servers WHERE port = {r}"
        ))
        .trim()
            == "ONLINE"
    });
    assert!(back, "{}", s.log());
    let pings = s.admin_ok(&format!(
        "SELECT COUNT(*) FROM monitor.mysql_server_ping_log WHERE port = {r} AND ping_error IS NOT NULL"
    ));
    assert!(pings.trim().parse::<u32>().unwrap_or(0) >= 3, "{pings}");

    // Failover: stop the primary, make the replica writable.
    let load = start_load("my", s.port, 12);
    std::thread::sleep(Duration::from_secs(2));
    xtask::mariadb::primary(&dir).stop();
    let stopped = unix_ms();
    std::thread::sleep(Duration::from_millis(1500));
    replica
        .sql("STOP SLAVE; SET GLOBAL read_only = 0;")
        .expect("promote");
    let promoted = unix_ms();
    eprintln!(
        "MariaDB primary stopped, replica promoted {} ms later",
        promoted - stopped
    );
    let s_out = samples(load);
    let recovery_ms = recovery("MariaDB", &s_out, r, promoted);
    assert!(recovery_ms <= 1500, "recovered after {recovery_ms} ms");
    assert_eq!(
        s.admin_ok("SELECT hostgroup_id, port FROM runtime_mysql_servers WHERE hostgroup_id = 0"),
        format!("0\t{r}\n")
    );
    let g = s.admin_ok("SELECT Variable_Value FROM stats_mysql_global WHERE Variable_Name = 'MySQL_Monitor_read_only_check_ERR'");
    assert!(g.trim().parse::<u32>().unwrap_or(0) >= 1, "{g}");
}

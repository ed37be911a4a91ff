//! The monitor against real servers, under client load: a PostgreSQL and a MariaDB failover
//! (stop the primary, promote the replica) recovered by read_only monitoring — on PostgreSQL with
//! causal reads and a LISTEN fan-out going through it — and heartbeat shunning of a SIGSTOP-ed
//! server. The backends are put back as they were afterwards.

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

/// A bounded PostgreSQL client in Python beside [`LOAD`], for the features a failover must not
/// break: every 30 ms an UPDATE (the writer) then a read of the row routed to the readers
/// (`/* hostgroup=1 */`, gated by `pgsql-causal_reads`), each read's latency recorded; and a
/// session listening on `failover` that, after the run, must still hear a NOTIFY sent through
/// Sluice (its listener connection followed the writer) and has heard the reset notification.
/// Prints `max_read_ms late_reads_ok late_reads heard_after heard_reset listener_port,reconnects`.
const CAUSAL_AND_LISTEN: &str = r#"
import subprocess, sys, time, psycopg
port, secs, admin = int(sys.argv[1]), float(sys.argv[2]), sys.argv[3]
dsn = f"host=127.0.0.1 port={port} user=app password=app dbname=app sslmode=disable connect_timeout=3"
listener = psycopg.connect(dsn, autocommit=True)
listener.execute("LISTEN failover")
end = time.time() + secs
c, reads = None, []
while time.time() < end:
    t0 = time.time()
    try:
        if c is None:
            c = psycopg.connect(dsn, autocommit=True)
        c.execute("UPDATE causal_failover SET v = v + 1 WHERE id = 1")
        t0 = time.time()
        c.execute("SELECT /* hostgroup=1 */ v FROM causal_failover WHERE id = 1").fetchone()
        reads.append((t0, time.time() - t0, True))
    except Exception:
        reads.append((t0, time.time() - t0, False))
        try:
            c.close()
        except Exception:
            pass
        c = None
    time.sleep(0.03)
late = [r for r in reads if r[0] > end - 3]
sender = psycopg.connect(dsn, autocommit=True)
sender.execute("NOTIFY failover, 'after'")
heard, reset = [], False
for n in listener.notifies(timeout=5):
    heard.append(n.payload)
    reset = reset or (n.channel == "sluice_reset" and n.pid == 0)
    if "after" in heard and reset:
        break
row = subprocess.run(["psql", "-h", "127.0.0.1", "-p", admin, "-U", "admin", "-XAt", "-F", ",", "-c",
    "SELECT srv_port, reconnects FROM stats_pgsql_listeners"], capture_output=True, text=True,
    env={"PGPASSWORD": "admin", "PATH": "/usr/bin:/bin"}).stdout.strip() or "none"
print(int(1000 * max(r[1] for r in reads)), sum(1 for r in late if r[2]), len(late),
      "after" in heard, reset, row)
"#;

fn start_load(proto: &str, port: u16, secs: u32) -> Child {
    spawn_python(LOAD, &[proto, &port.to_string(), &secs.to_string()])
}

/// Starts `script` with `args`, its output piped.
fn spawn_python(script: &str, args: &[&str]) -> Child {
    let mut child = Command::new("python3")
        .arg("-")
        .args(args)
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
        .write_all(script.as_bytes())
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
    // Stops, promotes and rebuilds the servers every other test needs: it runs alone.
    if !backends_exclusive(Servers::Both) {
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
    let cfg = cfg.replacen(
        "[pgsql_variables]\n",
        "[pgsql_variables]\ncausal_reads = \"user\"\nlisten_reset_channel = \"sluice_reset\"\n",
        1,
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
    ok_stdout(&psql_app(
        ports::PG_PRIMARY,
        "DROP TABLE IF EXISTS causal_failover; CREATE TABLE causal_failover (id int PRIMARY KEY, v bigint); \
         INSERT INTO causal_failover VALUES (1, 0)",
    ));
    let load = start_load("pg", s.pg_port, 12);
    let features = spawn_python(
        CAUSAL_AND_LISTEN,
        &[&s.pg_port.to_string(), "12", &s.pg_admin_port.to_string()],
    );
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
    // Causal reads: tokens of the old writer are dropped with it, so no read waits for a
    // position the new writer will never report; reads after the failover are served.
    // LISTEN: the listener connection followed the writer and every session heard the reset.
    let out = features
        .wait_with_output()
        .expect("the causal/listen client");
    let report = String::from_utf8_lossy(&out.stdout).trim().to_string();
    eprintln!("causal reads and LISTEN through the failover: {report}");
    let fields: Vec<&str> = report.split_whitespace().collect();
    assert_eq!(
        fields.len(),
        6,
        "{report} {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let max_read_ms: u64 = fields[0].parse().unwrap_or(u64::MAX);
    assert!(
        max_read_ms < 3_000,
        "a gated read took {max_read_ms} ms: {report}"
    );
    assert_eq!(
        fields[1], fields[2],
        "reads in the last 3 s all served: {report}"
    );
    assert_eq!(
        &fields[3..5],
        ["True", "True"],
        "NOTIFY after the failover, reset: {report}"
    );
    assert_eq!(
        fields[5],
        format!("{},1", ports::PG_REPLICA),
        "the listener moved once: {report}"
    );
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
    // Stops, promotes and rebuilds the servers every other test needs: it runs alone.
    if !backends_exclusive(Servers::Both) {
        return;
    }
    let _restore = RestoreMy;
    let (p, r) = (ports::MY_PRIMARY, ports::MY_REPLICA);
    // Hostgroup 2 (outside the replication pair) reaches only the replica, for a query that is
    // in flight on it when it stops.
    let cfg = standard_config(
        &monitor_vars(""),
        &format!(
            "[[mysql_replication_hostgroups]]\nwriter_hostgroup = 0\nreader_hostgroup = 1\n\n[[mysql_servers]]\nhostgroup_id = 2\nhostname = \"127.0.0.1\"\nport = {r}\n"
        ),
    );
    let s = Sluice::start(&cfg);
    let placed = xtask::proc::wait_until(Duration::from_secs(10), || {
        s.admin_ok(
            "SELECT hostgroup_id, port FROM runtime_mysql_servers WHERE hostgroup_id < 2 ORDER BY hostgroup_id, port",
        ) == format!("0\t{p}\n1\t{p}\n1\t{r}\n")
    });
    assert!(
        placed,
        "{}",
        s.admin_ok("SELECT * FROM runtime_mysql_servers")
    );

    // Heartbeats: a SIGSTOP-ed replica is shunned after 3 missed pings and its connections are
    // killed (a query in flight there ends with an error, not after its 60 s), back after SIGCONT.
    let port = s.port;
    let in_flight = std::thread::spawn(move || {
        let t0 = Instant::now();
        let out = mariadb(
            port,
            "app",
            "app",
            &["--comments", "--skip-reconnect"],
            "/* hostgroup=2 */ SELECT SLEEP(60)",
        );
        (t0.elapsed(), out)
    });
    wait_mysql_running(ports::MY_REPLICA, "/* hostgroup=2 */ SELECT SLEEP(60)");
    let dir = xtask::state_dir();
    let replica = xtask::mariadb::replica(&dir);
    let pid = replica.pid().expect("replica pid");
    xtask::proc::signal(pid, "STOP");
    shunned_with_its_query_killed(
        &s,
        &format!("SELECT status FROM runtime_mysql_servers WHERE port = {r} AND hostgroup_id = 1"),
        in_flight,
        || xtask::proc::signal(pid, "CONT"),
        (
            "ERROR 1927 (70100)",
            &format!("Killed 1 MySQL connection(s) to shunned server 127.0.0.1:{r}"),
        ),
    );
    assert!(s.log().contains(&format!(
        "Server 127.0.0.1:{r} missed 3 heartbeats, shunning it"
    )));
    assert!(s.log().contains(&format!(
        "hostgroup manager: server 127.0.0.1:{r} in hostgroup 1: ONLINE -> SHUNNED (missed 3 heartbeats, read_only=1"
    )));
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

/// A client's query, run on a thread: how long it took and the client's output.
type InFlight = std::thread::JoinHandle<(Duration, std::process::Output)>;

/// After the server behind `status_sql` was SIGSTOP-ed with `in_flight` running on it: it is
/// SHUNNED within 10 s and the query ends within 5 s more, then `resume` (SIGCONT); the client
/// got an error containing `expected.0`, the log says `expected.1`, and the server comes back
/// ONLINE.
fn shunned_with_its_query_killed(
    s: &Sluice,
    status_sql: &str,
    in_flight: InFlight,
    resume: impl FnOnce(),
    expected: (&str, &str),
) {
    let status_is = |want: &str| s.admin_ok(status_sql).trim() == want;
    let shunned = xtask::proc::wait_until(Duration::from_secs(10), || status_is("SHUNNED"));
    let query_ended = xtask::proc::wait_until(Duration::from_secs(5), || in_flight.is_finished());
    resume();
    assert!(shunned, "{}", s.log());
    assert!(
        query_ended,
        "the query on the stopped server was not killed: {}",
        s.log()
    );
    let (took, out) = in_flight.join().expect("client thread");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && err.contains(expected.0), "{err}");
    eprintln!(
        "the query in flight on the stopped server ended after {took:?}: {}",
        err.lines()
            .rfind(|l| !l.trim().is_empty())
            .unwrap_or_default()
    );
    assert!(s.log().contains(expected.1), "{}", s.log());
    let back = xtask::proc::wait_until(Duration::from_secs(10), || status_is("ONLINE"));
    assert!(back, "{}", s.log());
}

/// Sends `signal` to a PostgreSQL server's postmaster and all its processes (a session's query
/// runs in a child process, so stopping the postmaster alone would not stop it).
fn signal_postgres(postmaster: u32, signal: &str) {
    let children = Command::new("pgrep")
        .args(["-P", &postmaster.to_string()])
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).to_string())
        .unwrap_or_default();
    for pid in children.split_whitespace().filter_map(|p| p.parse().ok()) {
        xtask::proc::signal(pid, signal);
    }
    xtask::proc::signal(postmaster, signal);
}

/// Resumes a SIGSTOP-ed PostgreSQL server, also when the test fails.
struct ContPg(u32);

impl Drop for ContPg {
    fn drop(&mut self) {
        signal_postgres(self.0, "CONT");
    }
}

#[test]
fn postgresql_heartbeat_shuns_a_stopped_server_and_kills_its_queries() {
    // Stops, promotes and rebuilds the servers every other test needs: it runs alone.
    if !backends_exclusive(Servers::Both) {
        return;
    }
    let cfg = format!(
        "[pgsql_variables]\ninterfaces = \"127.0.0.1:{{pg_port}}\"\n{}{}",
        monitor_vars(""),
        standard_config(
            "",
            "[[pgsql_query_rules]]\nrule_id = 1\nactive = 1\nmatch_digest = 'pg_sleep'\ndestination_hostgroup = 1\napply = 1\n",
        )
    );
    let s = Sluice::start(&cfg);
    let r = ports::PG_REPLICA;
    let port = s.pg_port;
    let in_flight = std::thread::spawn(move || {
        let t0 = Instant::now();
        let out = psql_app(port, "SELECT pg_sleep(60)");
        (t0.elapsed(), out)
    });
    wait_pg_running(ports::PG_REPLICA, "SELECT pg_sleep(60)");
    let dir = xtask::state_dir();
    let pid = xtask::postgres::replica(&dir).pid().expect("replica pid");
    let _cont = ContPg(pid);
    signal_postgres(pid, "STOP");
    shunned_with_its_query_killed(
        &s,
        &format!("SELECT status FROM runtime_pgsql_servers WHERE port = {r}"),
        in_flight,
        || signal_postgres(pid, "CONT"),
        (
            // The session ends with its server connection, as PostgreSQL ends it.
            "FATAL:  the server connection was lost",
            &format!("Killed 1 PostgreSQL connection(s) to shunned server 127.0.0.1:{r}"),
        ),
    );
}

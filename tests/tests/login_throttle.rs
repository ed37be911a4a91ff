//! Failed logins per client address (`<prefix>-client_host_*`), on every port: counted in
//! `stats_{mysql,pgsql}_client_host_cache`, logged with the reason, and past the threshold the
//! address gets one attempt per interval (a burst of guesses waits its turn or is refused), until
//! `PROXYSQL FLUSH … CLIENT HOSTS` or a successful login forgets it.

use sluice_tests::*;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::Output;
use std::time::{Duration, Instant};

const VARS: &str = "client_host_error_counts = 3\nclient_host_error_delay_ms = 300";

fn config() -> String {
    let pg = format!("\n[pgsql_variables]\ninterfaces = \"127.0.0.1:{{pg_port}}\"\n{VARS}\n");
    standard_config(VARS, &pg)
}

fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

fn psql(port: u16, user: &str, password: &str) -> Output {
    std::process::Command::new("psql")
        .env("PGPASSWORD", password)
        .env("PGSSLMODE", "disable")
        .env("PGCONNECT_TIMEOUT", "20")
        .args(["-h", "127.0.0.1", "-p", &port.to_string(), "-U", user])
        .args(["-d", "app", "-X", "-A", "-t", "-c", "SELECT 1"])
        .output()
        .expect("psql installed")
}

/// What Sluice first answered one attempt of a burst, and when (from the burst's start).
struct Answer {
    first: Vec<u8>,
    after: Duration,
}

/// Opens `n` connections to `port` at once from this process, sends `hello` on each, and
/// returns what each was first answered and when. The sockets are opened within milliseconds;
/// `n` client processes can take longer than one 300 ms turn to start on a loaded machine.
fn burst(port: u16, n: usize, hello: &[u8]) -> Vec<Answer> {
    let started = Instant::now();
    let sockets: Vec<TcpStream> = (0..n)
        .map(|_| {
            let mut tcp = TcpStream::connect(("127.0.0.1", port)).expect("connect");
            tcp.write_all(hello).expect("hello");
            tcp
        })
        .collect();
    std::thread::scope(|s| {
        let handles: Vec<_> = sockets
            .into_iter()
            .map(|mut tcp| {
                s.spawn(move || {
                    tcp.set_read_timeout(Some(Duration::from_secs(20)))
                        .expect("timeout");
                    let mut first = vec![0u8; 512];
                    let got = tcp.read(&mut first).expect("Sluice's first answer");
                    first.truncate(got);
                    Answer {
                        first,
                        after: started.elapsed(),
                    }
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("attempt thread"))
            .collect()
    })
}

/// Checks a burst of fourteen against the throttle of [`VARS`]: one turn per 300 ms, at most
/// ten queued, the rest refused at once. `refused` tells a refusal from a queued attempt's
/// greeting.
fn assert_throttled(answers: &[Answer], refused: impl Fn(&[u8]) -> bool) {
    let (no, yes): (Vec<&Answer>, Vec<&Answer>) = answers.iter().partition(|a| refused(&a.first));
    // The first turn comes at most one delay after the last failure: 10 or 11 turns fit in 3 s.
    assert!(
        no.len() == 3 || no.len() == 4,
        "{} refused of {}",
        no.len(),
        answers.len()
    );
    let last = yes.iter().map(|a| a.after).max().unwrap_or_default();
    assert!(
        last >= Duration::from_millis(2700),
        "the last of {} queued attempts was let in after {last:?}, not after its turn",
        yes.len()
    );
    for a in &no {
        assert!(
            a.after < Duration::from_millis(2700),
            "a refusal waited {:?}: refused attempts are not queued",
            a.after
        );
    }
}

#[test]
fn mysql_ports_throttle_an_address_that_keeps_failing() {
    if !backends_ready(Servers::Both) {
        return;
    }
    let s = Sluice::start(&config());
    // Read through the PostgreSQL admin port: a successful login on a MySQL port (the MySQL
    // admin's too) forgets the address.
    let stats = |sql: &str| ok_stdout(&s.psql_admin(sql, false));
    let wrong = || mariadb(s.port, "app", "wrong", &["--skip-ssl"], "SELECT 1;");
    for _ in 0..3 {
        let out = wrong();
        assert!(text(&out).contains("Access denied"), "{}", text(&out));
    }
    // The failure is counted once the client has its error: wait for the log line it writes.
    wait_for("the throttling log line", || {
        s.log()
            .contains("throttling logins from 127.0.0.1: 3 failed logins")
    });
    let row = stats("SELECT client_address, error_count FROM stats_mysql_client_host_cache;");
    assert_eq!(row.trim(), "127.0.0.1\t3", "{row}");
    // Fourteen guesses at once: one turn per 300 ms, at most ten queued, the rest refused
    // with error 1129 before the greeting; a queued one gets its greeting at its turn.
    let answers = burst(s.port, 14, b"");
    assert_throttled(&answers, |first| {
        first.get(4) == Some(&0xff) && first.get(5..7) == Some(&1129u16.to_le_bytes()[..])
    });
    for a in answers.iter().filter(|a| a.first.get(4) != Some(&0xff)) {
        assert_eq!(a.first.get(4), Some(&10), "not a handshake: {:?}", a.first);
    }
    // Flushing forgets the address.
    ok_stdout(&s.psql_admin("PROXYSQL FLUSH MYSQL CLIENT HOSTS", false));
    let empty = stats("SELECT COUNT(*) FROM stats_mysql_client_host_cache;");
    assert_eq!(empty.trim(), "0");
    // The admin port shares the table: its failures count for the same address.
    let out = mariadb(s.admin_port, "admin", "wrong", &["--skip-ssl"], "SELECT 1;");
    assert!(text(&out).contains("Access denied"), "{}", text(&out));
    let count = "SELECT client_address, error_count FROM stats_mysql_client_host_cache;";
    wait_for("the admin port's failure counted", || {
        stats(count).trim() == "127.0.0.1\t1"
    });
    // A successful login forgets the address's failures.
    let ok = mariadb(s.port, "app", "app", &["--skip-ssl"], "SELECT 42;");
    assert_eq!(ok_stdout(&ok).trim(), "42");
    let empty = stats("SELECT COUNT(*) FROM stats_mysql_client_host_cache;");
    assert_eq!(empty.trim(), "0");
}

#[test]
fn postgresql_ports_throttle_an_address_that_keeps_failing() {
    if !backends_ready(Servers::Both) {
        return;
    }
    let s = Sluice::start(&config());
    for _ in 0..3 {
        let out = psql(s.pg_port, "app", "wrong");
        assert!(
            text(&out).contains("password authentication failed"),
            "{}",
            text(&out)
        );
    }
    // The failure is counted once the client has its error.
    let count = "SELECT client_address, error_count FROM stats_pgsql_client_host_cache;";
    wait_for("three failures counted", || {
        s.admin_ok(count).trim() == "127.0.0.1\t3"
    });
    // Fourteen startups at once: refused with SQLSTATE 28000 at once, or queued and asked for
    // the password at their turn.
    let answers = burst(s.pg_port, 14, &startup_message("app", "app"));
    assert_throttled(&answers, |first| {
        first.first() == Some(&b'E')
            && String::from_utf8_lossy(first).contains("too many failed logins from 127.0.0.1")
    });
    for a in answers.iter().filter(|a| a.first.first() != Some(&b'E')) {
        assert_eq!(
            a.first.first(),
            Some(&b'R'),
            "not an authentication request"
        );
    }
    s.admin_ok("PROXYSQL FLUSH PGSQL CLIENT HOSTS;");
    // The PostgreSQL admin port counts into the same table.
    let out = psql(s.pg_admin_port, "admin", "wrong");
    assert!(!out.status.success(), "a wrong admin password was accepted");
    wait_for("the admin port's failure counted", || {
        s.admin_ok(count).trim() == "127.0.0.1\t1"
    });
    assert!(
        s.log().contains("PostgreSQL admin login failed"),
        "no log line for the admin failure"
    );
    // A successful login forgets the address's failures.
    let ok = psql(s.pg_port, "app", "app");
    assert_eq!(ok_stdout(&ok).trim(), "1");
    let empty = s.admin_ok("SELECT COUNT(*) FROM stats_pgsql_client_host_cache;");
    assert_eq!(empty.trim(), "0");
}

/// A PostgreSQL StartupMessage (protocol 3.0) for `user` on `database`.
fn startup_message(user: &str, database: &str) -> Vec<u8> {
    let mut body = 196_608u32.to_be_bytes().to_vec();
    for (k, v) in [("user", user), ("database", database)] {
        body.extend_from_slice(k.as_bytes());
        body.push(0);
        body.extend_from_slice(v.as_bytes());
        body.push(0);
    }
    body.push(0);
    let mut msg = u32::try_from(body.len() + 4)
        .expect("short")
        .to_be_bytes()
        .to_vec();
    msg.extend_from_slice(&body);
    msg
}

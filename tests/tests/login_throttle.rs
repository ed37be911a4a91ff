//! Failed logins per client address (`<prefix>-client_host_*`), on every port: counted in
//! `stats_{mysql,pgsql}_client_host_cache`, logged with the reason, and past the threshold the
//! address gets one attempt per interval (a burst of guesses waits its turn or is refused), until
//! `PROXYSQL FLUSH … CLIENT HOSTS` or a successful login forgets it.

use sluice_tests::*;
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

/// Runs `attempt` `n` times at once; returns the outputs and how long the burst took.
fn burst(n: usize, attempt: impl Fn() -> Output + Sync) -> (Vec<Output>, Duration) {
    let started = Instant::now();
    let outs = std::thread::scope(|s| {
        let handles: Vec<_> = (0..n).map(|_| s.spawn(&attempt)).collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("attempt thread"))
            .collect::<Vec<_>>()
    });
    (outs, started.elapsed())
}

#[test]
fn mysql_ports_throttle_an_address_that_keeps_failing() {
    if !backends_ready() {
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
    let row = stats("SELECT client_address, error_count FROM stats_mysql_client_host_cache;");
    assert_eq!(row.trim(), "127.0.0.1\t3", "{row}");
    wait_for("the throttling log line", || {
        s.log()
            .contains("throttling logins from 127.0.0.1: 3 failed logins")
    });
    // Fourteen guesses at once: one turn per 300 ms, at most ten queued, the rest refused.
    let (outs, took) = burst(14, wrong);
    let refused = outs
        .iter()
        .filter(|o| text(o).contains("1129") && text(o).contains("blocked"))
        .count();
    let denied = outs
        .iter()
        .filter(|o| text(o).contains("Access denied"))
        .count();
    assert!(refused >= 3, "{refused} refused, {denied} denied");
    assert!(denied >= 8, "{refused} refused, {denied} denied");
    assert!(
        took >= Duration::from_millis(2400),
        "ten queued attempts 300 ms apart took {took:?}"
    );
    // Flushing forgets the address.
    ok_stdout(&s.psql_admin("PROXYSQL FLUSH MYSQL CLIENT HOSTS", false));
    let empty = stats("SELECT COUNT(*) FROM stats_mysql_client_host_cache;");
    assert_eq!(empty.trim(), "0");
    // The admin port shares the table: its failures count for the same address.
    let out = mariadb(s.admin_port, "admin", "wrong", &["--skip-ssl"], "SELECT 1;");
    assert!(text(&out).contains("Access denied"), "{}", text(&out));
    let row = stats("SELECT client_address, error_count FROM stats_mysql_client_host_cache;");
    assert_eq!(row.trim(), "127.0.0.1\t1", "{row}");
    // A successful login forgets the address's failures.
    let ok = mariadb(s.port, "app", "app", &["--skip-ssl"], "SELECT 42;");
    assert_eq!(ok_stdout(&ok).trim(), "42");
    let empty = stats("SELECT COUNT(*) FROM stats_mysql_client_host_cache;");
    assert_eq!(empty.trim(), "0");
}

#[test]
fn postgresql_ports_throttle_an_address_that_keeps_failing() {
    if !backends_ready() {
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
    let row = s.admin_ok("SELECT client_address, error_count FROM stats_pgsql_client_host_cache;");
    assert_eq!(row.trim(), "127.0.0.1\t3", "{row}");
    let (outs, _) = burst(14, || psql(s.pg_port, "app", "wrong"));
    let refused = outs
        .iter()
        .filter(|o| text(o).contains("too many failed logins from 127.0.0.1"))
        .count();
    assert!(refused >= 3, "{refused} refused of 14");
    s.admin_ok("PROXYSQL FLUSH PGSQL CLIENT HOSTS;");
    // The PostgreSQL admin port counts into the same table.
    let out = psql(s.pg_admin_port, "admin", "wrong");
    assert!(!out.status.success(), "a wrong admin password was accepted");
    let row = s.admin_ok("SELECT client_address, error_count FROM stats_pgsql_client_host_cache;");
    assert_eq!(row.trim(), "127.0.0.1\t1", "{row}");
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

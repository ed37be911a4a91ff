//! The hostgroup manager on the data path: connect errors to a server shun it
//! (`shun_on_failures` within a second) while clients are served by the others, and it gets
//! traffic again after `shun_recovery_time_sec`.

use sluice_tests::*;
use std::time::Duration;

#[test]
fn connect_errors_shun_a_server_and_it_recovers_after_the_recovery_time() {
    if !backends_ready(Servers::MariaDb) {
        return;
    }
    let dead = free_port();
    let p = ports::MY_PRIMARY;
    let cfg = format!(
        r#"
[mysql_variables]
interfaces = "127.0.0.1:{{port}}"
shun_on_failures = 2
shun_recovery_time_sec = 3
monitor_ping_interval = 600000
monitor_connect_interval = 600000

[[mysql_servers]]
hostgroup_id = 0
hostname = "127.0.0.1"
port = {p}

[[mysql_servers]]
hostgroup_id = 2
hostname = "127.0.0.1"
port = {dead}

[[mysql_servers]]
hostgroup_id = 2
hostname = "127.0.0.1"
port = {p}

[[mysql_users]]
username = "app"
password = "app"
"#
    );
    let s = Sluice::start(&cfg);
    let status = |s: &Sluice| {
        s.admin_ok(&format!(
            "SELECT status FROM runtime_mysql_servers WHERE port = {dead}"
        ))
        .trim()
        .to_string()
    };
    // Every query reaches a server: the dead one is tried, fails, and the other answers.
    let out = ok_stdout(&mariadb(
        s.port,
        "app",
        "app",
        &["--skip-ssl", "--comments"],
        &"SELECT /* hostgroup=2 */ @@port;".repeat(30),
    ));
    assert!(out.lines().all(|l| l == p.to_string()), "{out}");
    assert_eq!(status(&s), "SHUNNED", "{}", s.log());
    assert!(
        s.log().contains(&format!(
            "Shunning server 127.0.0.1:{dead} with 2 connect errors within a second"
        )),
        "{}",
        s.log()
    );
    // The data path logs each failed attempt on the dead server; the monitor's own checks of
    // it (it keeps checking shunned servers, as ProxySQL's does) are not counted.
    let attempts = |log: &str| {
        log.lines()
            .filter(|l| {
                l.contains("error connecting to backend")
                    && l.contains(&format!("127.0.0.1:{dead}"))
            })
            .count()
    };
    let errors_while_shunned = attempts(&s.log());
    assert!(errors_while_shunned >= 2, "{}", s.log());
    ok_stdout(&mariadb(
        s.port,
        "app",
        "app",
        &["--skip-ssl", "--comments"],
        &"SELECT /* hostgroup=2 */ 1;".repeat(20),
    ));
    // The shun may already have run out on a slow machine (the clients take their time to
    // start): only the log before the recovery line must be free of new attempts.
    let log = s.log();
    let recovered = format!("Re-enabling server 127.0.0.1:{dead}");
    let while_shunned = log.find(&recovered).map_or(log.as_str(), |at| &log[..at]);
    assert_eq!(
        attempts(while_shunned),
        errors_while_shunned,
        "a shunned server gets no connection attempts: {log}"
    );
    let back = xtask::proc::wait_until(Duration::from_secs(10), || status(&s) == "ONLINE");
    assert!(back, "{}", s.log());
    assert!(s.log().contains(&format!(
        "Re-enabling server 127.0.0.1:{dead} after shun_recovery_time_sec"
    )));
}

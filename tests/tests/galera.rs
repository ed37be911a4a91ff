//! Galera hostgroups against a real three-node MariaDB Galera cluster on loopback (started here,
//! stopped at the end): writer election with `max_writers`, backup writers,
//! `writer_is_also_reader` 0/1/2 each applied with one LOAD, a desynced node moved to the offline
//! hostgroup and back, a read_only node as a reader, and client writes following the writer.

use sluice_tests::*;
use std::time::Duration;

struct Cluster;

impl Drop for Cluster {
    fn drop(&mut self) {
        let _ = xtask::galera::cluster_down(&xtask::state_dir());
    }
}

fn layout(s: &Sluice) -> String {
    s.admin_ok(
        "SELECT hostgroup_id, port, status FROM runtime_mysql_servers ORDER BY hostgroup_id, port",
    )
}

fn expect(s: &Sluice, want: &[(u32, u16)]) {
    let mut want = want.to_vec();
    want.sort();
    let text: String = want
        .iter()
        .map(|(hg, p)| format!("{hg}\t{p}\tONLINE\n"))
        .collect();
    let ok = xtask::proc::wait_until(Duration::from_secs(10), || layout(s) == text);
    assert!(ok, "want:\n{text}got:\n{}\nlog:\n{}", layout(s), s.log());
}

#[test]
fn galera_hostgroups_elect_a_writer_and_move_desynced_nodes_offline() {
    if !backends_ready(Servers::MariaDb) {
        return;
    }
    let state = xtask::state_dir();
    xtask::galera::cluster_up(&state).expect("Galera cluster");
    let _cluster = Cluster;
    let [p1, p2, p3] = xtask::galera::PORTS;
    let servers: String = [p1, p2, p3]
        .iter()
        .map(|p| {
            format!("[[mysql_servers]]\nhostgroup_id = 10\nhostname = \"127.0.0.1\"\nport = {p}\n")
        })
        .collect();
    let cfg = format!(
        r#"
[mysql_variables]
interfaces = "127.0.0.1:{{port}}"
monitor_galera_healthcheck_interval = 300
monitor_ping_interval = 1000

{servers}
[[mysql_galera_hostgroups]]
writer_hostgroup = 10
backup_writer_hostgroup = 20
reader_hostgroup = 30
offline_hostgroup = 40
max_writers = 1
writer_is_also_reader = 0

[[mysql_users]]
username = "app"
password = "app"
default_hostgroup = 10
"#
    );
    let s = Sluice::start(&cfg);
    // Every node is writable: the highest port (equal weights and hostnames) writes.
    expect(&s, &[(10, p3), (20, p1), (20, p2)]);
    let port = ok_stdout(&mariadb(
        s.port,
        "app",
        "app",
        &["--skip-ssl"],
        "SELECT @@port",
    ));
    assert_eq!(port.trim(), p3.to_string());
    s.admin_ok("UPDATE mysql_galera_hostgroups SET writer_is_also_reader = 1; LOAD MYSQL SERVERS TO RUNTIME;");
    expect(
        &s,
        &[(10, p3), (20, p1), (20, p2), (30, p1), (30, p2), (30, p3)],
    );
    s.admin_ok("UPDATE mysql_galera_hostgroups SET writer_is_also_reader = 2; LOAD MYSQL SERVERS TO RUNTIME;");
    expect(&s, &[(10, p3), (20, p1), (20, p2), (30, p1), (30, p2)]);

    // A desynced node leaves for the offline hostgroup, and comes back.
    let n2 = xtask::galera::node(&state, 1);
    n2.sql("SET GLOBAL wsrep_desync = ON").expect("desync");
    expect(&s, &[(10, p3), (20, p1), (30, p1), (40, p2)]);
    n2.sql("SET GLOBAL wsrep_desync = OFF").expect("resync");
    expect(&s, &[(10, p3), (20, p1), (20, p2), (30, p1), (30, p2)]);

    // A read_only node is a reader, not a writer candidate.
    let n1 = xtask::galera::node(&state, 0);
    n1.sql("SET GLOBAL read_only = ON").expect("read_only");
    expect(&s, &[(10, p3), (20, p2), (30, p1), (30, p2)]);
    n1.sql("SET GLOBAL read_only = OFF").expect("read_only off");

    // The writer stops: the next one by port takes over; client writes follow.
    xtask::galera::node(&state, 2).stop();
    let moved = xtask::proc::wait_until(Duration::from_secs(15), || {
        s.admin_ok(
            "SELECT port FROM runtime_mysql_servers WHERE hostgroup_id = 10 AND status = 'ONLINE'",
        )
        .trim()
            == p2.to_string()
    });
    assert!(moved, "{}\n{}", layout(&s), s.log());
    let port = ok_stdout(&mariadb(
        s.port,
        "app",
        "app",
        &["--skip-ssl"],
        "SELECT @@port",
    ));
    assert_eq!(port.trim(), p2.to_string());
    let log = s.admin_ok(&format!(
        "SELECT primary_partition, wsrep_local_state FROM monitor.mysql_server_galera_log WHERE port = {p2} ORDER BY time_start_us DESC LIMIT 1"
    ));
    assert_eq!(log, "YES\t4\n");
}

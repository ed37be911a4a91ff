//! Group Replication hostgroups against scripted fake members (MySQL Group Replication cannot
//! run here): primary election, secondaries, members in RECOVERING/ERROR/UNREACHABLE states,
//! transactions behind at one and two times the threshold, `max_writers` with backup writers and
//! `writer_is_also_reader` changed with one LOAD, and client queries following the writer.

use sluice_tests::fake_mysql::FakeGroupMember;
use sluice_tests::*;
use std::time::Duration;

/// `hostgroup_id<TAB>port<TAB>status` lines of `runtime_mysql_servers`, sorted.
fn layout(s: &Sluice) -> String {
    s.admin_ok(
        "SELECT hostgroup_id, port, status FROM runtime_mysql_servers ORDER BY hostgroup_id, port",
    )
}

fn expect(s: &Sluice, want: &[(u32, u16, &str)]) {
    let mut want: Vec<(u32, u16, &str)> = want.to_vec();
    want.sort();
    let text: String = want
        .iter()
        .map(|(hg, p, st)| format!("{hg}\t{p}\t{st}\n"))
        .collect();
    let ok = xtask::proc::wait_until(Duration::from_secs(5), || layout(s) == text);
    assert!(ok, "want:\n{text}got:\n{}\nlog:\n{}", layout(s), s.log());
}

#[test]
fn group_replication_hostgroups_follow_the_members_states() {
    let a = FakeGroupMember::start("ONLINE", "PRIMARY");
    let b = FakeGroupMember::start("ONLINE", "SECONDARY");
    let c = FakeGroupMember::start("ONLINE", "SECONDARY");
    let (pa, pb, pc) = (a.port, b.port, c.port);
    // All three configured in the writer hostgroup: the monitor sorts them out.
    let servers: String = [pa, pb, pc]
        .iter()
        .map(|p| {
            format!("[[mysql_servers]]\nhostgroup_id = 10\nhostname = \"127.0.0.1\"\nport = {p}\n")
        })
        .collect();
    let cfg = format!(
        r#"
[mysql_variables]
interfaces = "127.0.0.1:{{port}}"
monitor_groupreplication_healthcheck_interval = 200
monitor_ping_interval = 600000

{servers}
[[mysql_group_replication_hostgroups]]
writer_hostgroup = 10
backup_writer_hostgroup = 20
reader_hostgroup = 30
offline_hostgroup = 40
max_writers = 1
writer_is_also_reader = 0
max_transactions_behind = 100

[[mysql_users]]
username = "app"
password = "app"
default_hostgroup = 10
"#
    );
    let s = Sluice::start(&cfg);
    expect(
        &s,
        &[(10, pa, "ONLINE"), (30, pb, "ONLINE"), (30, pc, "ONLINE")],
    );
    let port = |s: &Sluice| {
        ok_stdout(&mariadb(
            s.port,
            "app",
            "app",
            &["--skip-ssl"],
            "SELECT @@port",
        ))
        .trim()
        .to_string()
    };
    assert_eq!(port(&s), pa.to_string(), "client writes reach the primary");

    // The primary fails; a secondary is elected: it moves to the writer hostgroup.
    a.set("ERROR", "SECONDARY", 0);
    b.set("ONLINE", "PRIMARY", 0);
    expect(
        &s,
        &[(10, pb, "ONLINE"), (30, pc, "ONLINE"), (40, pa, "ONLINE")],
    );
    assert_eq!(
        port(&s),
        pb.to_string(),
        "client writes follow the new primary"
    );
    assert!(
        s.log()
            .contains(&format!("cluster member 127.0.0.1:{pb} is ONLINE PRIMARY"))
    );

    // Transactions behind: over the threshold SHUNNED, over twice it offline.
    c.set("ONLINE", "SECONDARY", 150);
    expect(
        &s,
        &[(10, pb, "ONLINE"), (30, pc, "SHUNNED"), (40, pa, "ONLINE")],
    );
    c.set("ONLINE", "SECONDARY", 250);
    expect(
        &s,
        &[(10, pb, "ONLINE"), (40, pa, "ONLINE"), (40, pc, "ONLINE")],
    );
    // Recovering and unreachable members stay offline; back ONLINE they read again.
    a.set("RECOVERING", "SECONDARY", 0);
    c.set("UNREACHABLE", "SECONDARY", 0);
    expect(
        &s,
        &[(10, pb, "ONLINE"), (40, pa, "ONLINE"), (40, pc, "ONLINE")],
    );
    a.set("ONLINE", "SECONDARY", 0);
    c.set("ONLINE", "SECONDARY", 0);
    expect(
        &s,
        &[(10, pb, "ONLINE"), (30, pa, "ONLINE"), (30, pc, "ONLINE")],
    );

    // Multi-primary: every member PRIMARY, one writer (highest port among equal weights), the
    // rest backup writers; writer_is_also_reader = 2 makes the backups readers — one LOAD.
    for m in [&a, &b, &c] {
        m.set("ONLINE", "PRIMARY", 0);
    }
    let mut ports = [pa, pb, pc];
    ports.sort_unstable();
    let (lo, mid, hi) = (ports[0], ports[1], ports[2]);
    expect(
        &s,
        &[(10, hi, "ONLINE"), (20, lo, "ONLINE"), (20, mid, "ONLINE")],
    );
    s.admin_ok("UPDATE mysql_group_replication_hostgroups SET writer_is_also_reader = 2; LOAD MYSQL SERVERS TO RUNTIME;");
    expect(
        &s,
        &[
            (10, hi, "ONLINE"),
            (20, lo, "ONLINE"),
            (20, mid, "ONLINE"),
            (30, lo, "ONLINE"),
            (30, mid, "ONLINE"),
        ],
    );
    s.admin_ok("UPDATE mysql_group_replication_hostgroups SET max_writers = 2; LOAD MYSQL SERVERS TO RUNTIME;");
    expect(
        &s,
        &[
            (10, hi, "ONLINE"),
            (10, mid, "ONLINE"),
            (20, lo, "ONLINE"),
            (30, lo, "ONLINE"),
        ],
    );

    let log = s.admin_ok(&format!(
        "SELECT viable_candidate, read_only, transactions_behind FROM monitor.mysql_server_group_replication_log WHERE port = {hi} ORDER BY time_start_us DESC LIMIT 1"
    ));
    assert_eq!(log, "YES\tNO\t0\n");
    let ok: u64 = s
        .admin_ok("SELECT Variable_Value FROM stats_mysql_global WHERE Variable_Name = 'MySQL_Monitor_group_replication_check_OK'")
        .trim()
        .parse()
        .unwrap_or(0);
    assert!(ok > 10, "{ok}");
}

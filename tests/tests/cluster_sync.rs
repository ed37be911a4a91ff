//! ProxySQL Cluster compatible sync between Sluice nodes: three (or four) nodes on loopback,
//! each listing the others in `proxysql_servers`, with the cluster account in their admin
//! credentials. A `LOAD … TO RUNTIME` on one node must reach the others, through real admin
//! connections, while real clients keep using every node.

use sluice_tests::*;
use std::path::PathBuf;
use std::time::{Duration, Instant};

/// ProxySQL's default check interval and diff threshold: a change must arrive within
/// 2 × interval × diffs.
const INTERVAL_MS: u64 = 1000;
const DIFFS: u64 = 3;

fn arrival_bound() -> Duration {
    Duration::from_millis(2 * INTERVAL_MS * DIFFS)
}

/// One node's fixed ports and folder, so it can be restarted on the same ones.
struct NodeSpec {
    port: u16,
    admin_port: u16,
    dir: PathBuf,
}

fn node_config(peers: &[u16], extra_vars: &str, tables: bool) -> String {
    let mut servers = String::new();
    for p in peers {
        servers.push_str(&format!(
            "[[proxysql_servers]]\nhostname = \"127.0.0.1\"\nport = {p}\ncomment = \"node on {p}\"\n"
        ));
    }
    let admin = format!(
        "[admin_variables]\nmysql_ifaces = \"127.0.0.1:{{admin_port}}\"\npgsql_ifaces = \"127.0.0.1:{{pg_admin_port}}\"\n\
         admin_credentials = \"admin:admin;cluster:clusterpass\"\ncluster_username = \"cluster\"\n\
         cluster_password = \"clusterpass\"\ncluster_check_interval_ms = {INTERVAL_MS}\n\
         [pgsql_variables]\ninterfaces = \"127.0.0.1:{{pg_port}}\"\n"
    );
    if tables {
        format!("{admin}{}", standard_config(extra_vars, &servers))
    } else {
        format!(
            "{admin}[mysql_variables]\ninterfaces = \"127.0.0.1:{{port}}\"\n{extra_vars}\n{servers}"
        )
    }
}

fn specs(n: usize) -> Vec<NodeSpec> {
    (0..n)
        .map(|_| NodeSpec {
            port: free_port(),
            admin_port: free_port(),
            dir: scratch_dir("cluster-node"),
        })
        .collect()
}

fn start(spec: &NodeSpec, config: &str) -> Sluice {
    Sluice::start_on(config, spec.dir.clone(), &[], (spec.port, spec.admin_port))
}

fn checksums(node: &Sluice) -> String {
    node.admin_ok("SELECT name, checksum FROM runtime_checksums_values ORDER BY name")
}

const CHANGES: &str = "UPDATE mysql_servers SET weight = 7, comment = 'synced' WHERE hostgroup_id = 1;
LOAD MYSQL SERVERS TO RUNTIME;
INSERT INTO mysql_users (username, password, default_hostgroup) VALUES ('fleet_user', 'fleet_pw', 0);
LOAD MYSQL USERS TO RUNTIME;
INSERT INTO mysql_query_rules (rule_id, active, match_digest, destination_hostgroup, apply) VALUES (77, 1, '^SELECT fleet', 1, 1);
LOAD MYSQL QUERY RULES TO RUNTIME;
SET mysql-max_connections = 1234;
LOAD MYSQL VARIABLES TO RUNTIME;
SET admin-stats_credentials = 'stats:stats;fleetstats:pw';
LOAD ADMIN VARIABLES TO RUNTIME;
UPDATE pgsql_servers SET weight = 9 WHERE hostgroup_id = 1;
LOAD PGSQL SERVERS TO RUNTIME;
INSERT INTO pgsql_users (username, password, default_hostgroup) VALUES ('postgres', 'postgres', 0);
LOAD PGSQL USERS TO RUNTIME;
INSERT INTO pgsql_query_rules (rule_id, active, match_digest, destination_hostgroup, apply) VALUES (78, 1, '^SELECT fleet', 1, 1);
LOAD PGSQL QUERY RULES TO RUNTIME;
SET pgsql-max_connections = 4321;
LOAD PGSQL VARIABLES TO RUNTIME;";

/// What every node must show once the changes arrived, one query per module.
const PROBES: [(&str, &str); 9] = [
    (
        "SELECT weight, comment FROM runtime_mysql_servers WHERE hostgroup_id = 1",
        "7\tsynced",
    ),
    (
        "SELECT username FROM runtime_mysql_users WHERE username = 'fleet_user'",
        "fleet_user",
    ),
    (
        "SELECT rule_id FROM runtime_mysql_query_rules WHERE rule_id = 77",
        "77",
    ),
    (
        "SELECT variable_value FROM runtime_global_variables WHERE variable_name = 'mysql-max_connections'",
        "1234",
    ),
    (
        "SELECT variable_value FROM runtime_global_variables WHERE variable_name = 'admin-stats_credentials'",
        "stats:stats;fleetstats:pw",
    ),
    (
        "SELECT weight FROM runtime_pgsql_servers WHERE hostgroup_id = 1",
        "9",
    ),
    (
        "SELECT username FROM runtime_pgsql_users WHERE username = 'postgres'",
        "postgres",
    ),
    (
        "SELECT rule_id FROM runtime_pgsql_query_rules WHERE rule_id = 78",
        "78",
    ),
    (
        "SELECT variable_value FROM runtime_global_variables WHERE variable_name = 'pgsql-max_connections'",
        "4321",
    ),
];

fn has_changes(node: &Sluice) -> bool {
    PROBES.iter().all(|(sql, want)| {
        node.admin(sql).status.success()
            && String::from_utf8_lossy(&node.admin(sql).stdout).trim() == *want
    })
}

/// The backend account behind the `fleet_user` a node gets from its peers.
fn create_fleet_user() {
    primary_root(
        "CREATE USER IF NOT EXISTS 'fleet_user'@'%' IDENTIFIED BY 'fleet_pw'; GRANT USAGE ON *.* TO 'fleet_user'@'%';",
    );
}

fn three_nodes() -> (Vec<NodeSpec>, Vec<Sluice>) {
    create_fleet_user();
    let specs = specs(3);
    let peers: Vec<u16> = specs.iter().map(|s| s.admin_port).collect();
    let nodes = specs
        .iter()
        .map(|s| start(s, &node_config(&peers, "", true)))
        .collect();
    (specs, nodes)
}

#[test]
fn a_load_on_one_node_reaches_the_others_for_every_module() {
    if !backends_ready(Servers::Both) {
        return;
    }
    let (_specs, nodes) = three_nodes();
    let (one, others) = (&nodes[0], &nodes[1..]);
    // The same start: every module at version 1 with the same checksum on all three.
    let start_sums = checksums(one);
    assert_eq!(start_sums.lines().count(), 10, "{start_sums}");
    for n in others {
        assert_eq!(checksums(n), start_sums);
    }
    one.admin_ok(CHANGES);
    let loaded = Instant::now();
    for (i, n) in others.iter().enumerate() {
        let left = arrival_bound().saturating_sub(loaded.elapsed());
        let took = within(left, || has_changes(n));
        assert!(
            took.is_some(),
            "node {} did not get the changes within {:?}; its log:\n{}",
            i + 2,
            arrival_bound(),
            n.log()
        );
    }
    eprintln!(
        "every module reached both peers {:?} after the LOADs",
        loaded.elapsed()
    );
    let settled = within(Duration::from_secs(5), || {
        others.iter().all(|n| checksums(n) == checksums(one))
    });
    assert!(settled.is_some(), "checksums differ after the sync");
    assert_ne!(checksums(one), start_sums);
    // Each sync is one log line naming the module, the peer and both checksums.
    let log = nodes[1].log();
    let line = log
        .lines()
        .find(|l| l.contains("cluster: mysql_servers synced from peer 127.0.0.1:"))
        .unwrap_or_else(|| panic!("no sync line:\n{log}"));
    assert!(
        line.contains("checksum 0x") && line.contains(" -> 0x"),
        "{line}"
    );
    // The peers' view in ProxySQL's stats tables.
    // (diff_check counted up to the pull; the next check sees equal checksums and resets it)
    let seen = || {
        nodes[1].admin_ok(&format!(
            "SELECT hostname, port, name, version > 1, diff_check FROM stats_proxysql_servers_checksums WHERE port = {} AND name = 'mysql_servers'",
            one.admin_port
        ))
    };
    let want = format!("127.0.0.1\t{}\tmysql_servers\t1\t0", one.admin_port);
    assert!(
        within(Duration::from_secs(3), || seen().trim() == want).is_some(),
        "{}",
        seen()
    );
    let status =
        nodes[1].admin_ok("SELECT COUNT(*), SUM(checks_OK > 0) FROM stats_proxysql_servers_status");
    assert_eq!(status.trim(), "3\t3");
    // Clients use the synced users on every node.
    for n in &nodes {
        let out = mariadb(n.port, "fleet_user", "fleet_pw", &[], "SELECT 1");
        assert_eq!(ok_stdout(&out).trim(), "1", "fleet_user on node {}", n.port);
        let pg = psql_login(n.pg_port, "postgres", "postgres", "SELECT 2");
        assert_eq!(ok_stdout(&pg).trim(), "2");
    }
    // The node-local listeners were not copied.
    for n in &nodes {
        let iface = n.admin_ok(
            "SELECT variable_value FROM runtime_global_variables WHERE variable_name = 'admin-mysql_ifaces'",
        );
        assert_eq!(iface.trim(), format!("127.0.0.1:{}", n.admin_port));
    }
}

#[test]
fn sysbench_through_every_node_sees_no_error_while_servers_sync() {
    if !backends_ready(Servers::Both) {
        return;
    }
    const DB: (&str, u32, u32) = ("sbcluster", 2, 2000);
    primary_root("CREATE DATABASE IF NOT EXISTS sbcluster; GRANT ALL ON sbcluster.* TO 'app'@'%';");
    let _ = sysbench(ports::MY_PRIMARY, DB, "oltp_read_only", &[], "cleanup");
    ok_stdout(&sysbench(
        ports::MY_PRIMARY,
        DB,
        "oltp_read_only",
        &[],
        "prepare",
    ));
    let (_specs, nodes) = three_nodes();
    let runs: Vec<_> = nodes
        .iter()
        .map(|n| {
            let port = n.port;
            std::thread::spawn(move || {
                sysbench(
                    port,
                    DB,
                    "oltp_read_only",
                    &["--threads=4", "--time=15", "--report-interval=0"],
                    "run",
                )
            })
        })
        .collect();
    // A change every 1.5 s on node 1; the other two pull while their clients run.
    let mut syncs = 0;
    let until = Instant::now() + Duration::from_secs(13);
    // (a weight that only grows: flipping back to the peers' value would reset their count of
    // differing checks, and rightly never reach diffs_before_sync)
    let mut w = 1;
    while Instant::now() < until {
        w += 1;
        nodes[0].admin_ok(&format!(
            "UPDATE mysql_servers SET weight = {w} WHERE hostgroup_id = 1; LOAD MYSQL SERVERS TO RUNTIME;"
        ));
        syncs += 1;
        std::thread::sleep(Duration::from_millis(1500));
    }
    for (i, r) in runs.into_iter().enumerate() {
        let out = r.join().expect("sysbench thread");
        let text = ok_stdout(&out);
        // sysbench counts errors it skipped and reconnections; both must be zero.
        let count = |label: &str| {
            text.lines()
                .find(|l| l.trim_start().starts_with(label))
                .and_then(|l| l.split_whitespace().nth(l.split_whitespace().count() - 4))
                .unwrap_or("?")
                .to_string()
        };
        assert!(!text.contains("FATAL"), "node {}:\n{text}", i + 1);
        assert_eq!(count("ignored errors:"), "0", "node {}:\n{text}", i + 1);
        assert_eq!(count("reconnects:"), "0", "node {}:\n{text}", i + 1);
        assert!(text.contains("transactions:"), "{text}");
    }
    let synced = nodes[1]
        .log()
        .matches("cluster: mysql_servers synced from peer")
        .count();
    assert!(
        synced >= 3,
        "only {synced} syncs of {syncs} changes reached node 2"
    );
    let _ = sysbench(ports::MY_PRIMARY, DB, "oltp_read_only", &[], "cleanup");
}

#[test]
fn a_node_restarted_empty_catches_up_and_a_node_alone_keeps_serving() {
    if !backends_ready(Servers::Both) {
        return;
    }
    let (specs, mut nodes) = three_nodes();
    nodes[0].admin_ok(CHANGES);
    assert!(
        within(arrival_bound(), || has_changes(&nodes[2])).is_some(),
        "{}",
        nodes[2].log()
    );
    // Node 3 restarts with an empty datadir: it boots from its config file (none of the
    // changes) and takes everything from its peers.
    drop(nodes.pop());
    let _ = std::fs::remove_dir_all(specs[2].dir.join("data"));
    let _ = std::fs::remove_file(specs[2].dir.join("sluice.log"));
    let peers: Vec<u16> = specs.iter().map(|s| s.admin_port).collect();
    let restarted = start(&specs[2], &node_config(&peers, "", true));
    let took = within(arrival_bound(), || has_changes(&restarted));
    assert!(
        took.is_some(),
        "the restarted node did not catch up:\n{}",
        restarted.log()
    );
    eprintln!("restarted empty node caught up in {took:?}");
    // Its peers go away: it keeps its last configuration and keeps serving clients.
    drop(nodes);
    let noted = within(Duration::from_secs(10), || {
        restarted.log().matches("cannot be checked").count() >= 2
    });
    assert!(noted.is_some(), "{}", restarted.log());
    assert!(has_changes(&restarted));
    let out = mariadb(restarted.port, "fleet_user", "fleet_pw", &[], "SELECT 3");
    assert_eq!(ok_stdout(&out).trim(), "3");
    let errs = restarted.admin_ok(&format!(
        "SELECT COUNT(*) FROM stats_proxysql_servers_status WHERE checks_ERR > 0 AND port IN ({}, {})",
        specs[0].admin_port, specs[1].admin_port
    ));
    assert_eq!(errs.trim(), "2", "both lost peers counted as failing");
}

#[test]
fn a_node_with_a_fresh_empty_config_never_overwrites_the_others() {
    if !backends_ready(Servers::Both) {
        return;
    }
    let specs = specs(4);
    let peers: Vec<u16> = specs.iter().map(|s| s.admin_port).collect();
    let nodes: Vec<Sluice> = specs[..3]
        .iter()
        .map(|s| start(s, &node_config(&peers, "", true)))
        .collect();
    nodes[0].admin_ok(CHANGES);
    assert!(
        within(arrival_bound(), || has_changes(&nodes[1])
            && has_changes(&nodes[2]))
        .is_some()
    );
    // A fourth node with no servers, users or rules: version 1 everywhere, never a source.
    // It even loads its empty tables (version 2, newest epoch): empty is never a source either.
    let fresh = start(&specs[3], &node_config(&peers, "", false));
    fresh.admin_ok(
        "DELETE FROM mysql_servers; LOAD MYSQL SERVERS TO RUNTIME; DELETE FROM pgsql_users; LOAD PGSQL USERS TO RUNTIME;",
    );
    std::thread::sleep(arrival_bound() + Duration::from_secs(1));
    for n in &nodes {
        assert!(
            has_changes(n),
            "node {} was overwritten:\n{}",
            n.admin_port,
            n.log()
        );
        let servers = n.admin_ok("SELECT COUNT(*) FROM runtime_mysql_servers");
        assert_eq!(servers.trim(), "2");
    }
    // What it never loaded itself it took from the others (its users cannot apply: they
    // point at hostgroup 0, which it has no server in; the log says why).
    let max = fresh.admin_ok(
        "SELECT variable_value FROM runtime_global_variables WHERE variable_name = 'mysql-max_connections'",
    );
    assert_eq!(max.trim(), "1234", "{}", fresh.log());
    let servers = fresh.admin_ok("SELECT COUNT(*) FROM runtime_mysql_servers");
    assert_eq!(
        servers.trim(),
        "0",
        "its own later (empty) load stays its own"
    );
}

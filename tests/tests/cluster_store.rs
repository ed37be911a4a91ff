//! etcd as the fleet's configuration store: a real three-member etcd cluster (Debian's
//! etcd-server) on loopback and three Sluice nodes started with `--config-store`. A module saved
//! with `SAVE … TO CLUSTER` on one node is applied by every node; members failing, or the whole
//! store going away, never stop traffic.

use sluice_tests::*;
use std::time::{Duration, Instant};
use xtask::etcd::EtcdCluster;

fn etcd(name: &str) -> EtcdCluster {
    let ports: Vec<(u16, u16)> = (0..3).map(|_| (free_port(), free_port())).collect();
    EtcdCluster::start(&scratch_dir(name), &ports).expect("etcd cluster")
}

fn node(store: &str, http_port: Option<u16>) -> Sluice {
    let extra = http_port.map_or(String::new(), |p| {
        format!("[admin_variables]\nrestapi_enabled = true\nrestapi_port = {p}\nmysql_ifaces = \"127.0.0.1:{{admin_port}}\"\npgsql_ifaces = \"127.0.0.1:{{pg_admin_port}}\"\n[pgsql_variables]\ninterfaces = \"127.0.0.1:{{pg_port}}\"\n")
    });
    let config = format!("{extra}{}", standard_config("", ""));
    Sluice::start_with(
        &config,
        scratch_dir("store-node"),
        &["--config-store", store],
    )
}

fn replica_weight(n: &Sluice) -> String {
    n.admin_ok("SELECT weight FROM runtime_mysql_servers WHERE hostgroup_id = 1")
        .trim()
        .to_string()
}

fn store_row(n: &Sluice) -> String {
    n.admin_ok("SELECT state, revision FROM stats_config_store")
        .trim()
        .to_string()
}

fn save_weight(n: &Sluice, w: u32) {
    n.admin_ok(&format!(
        "UPDATE mysql_servers SET weight = {w} WHERE hostgroup_id = 1; LOAD MYSQL SERVERS TO RUNTIME; SAVE MYSQL SERVERS TO CLUSTER;"
    ));
}

fn wait_connected(nodes: &[&Sluice]) {
    let ok = within(Duration::from_secs(15), || {
        nodes
            .iter()
            .all(|n| store_row(n).starts_with("connected\t"))
    });
    assert!(
        ok.is_some(),
        "not connected to the store:\n{}",
        nodes[0].log()
    );
}

#[test]
fn a_module_saved_on_one_node_reaches_every_node_within_a_second() {
    if !backends_ready(Servers::MariaDb) {
        return;
    }
    let store = etcd("etcd-reach");
    let url = store.url("reach");
    let nodes: Vec<Sluice> = (0..3).map(|_| node(&url, None)).collect();
    wait_connected(&nodes.iter().collect::<Vec<_>>());
    save_weight(&nodes[0], 11);
    let saved = Instant::now();
    for n in &nodes[1..] {
        let left = Duration::from_secs(1).saturating_sub(saved.elapsed());
        assert!(
            within(left, || replica_weight(n) == "11").is_some(),
            "not applied within 1 s:\n{}",
            n.log()
        );
    }
    eprintln!(
        "applied on both other nodes {:?} after SAVE",
        saved.elapsed()
    );
    // Every node runs the same revision, says so, and sees the other two as live members.
    let revisions: Vec<String> = nodes.iter().map(store_row).collect();
    assert!(
        revisions.iter().all(|r| r == &revisions[0]),
        "{revisions:?}"
    );
    let rev = revisions[0].split('\t').nth(1).unwrap_or("0").to_string();
    assert_ne!(rev, "0");
    let members = within(Duration::from_secs(5), || {
        nodes[2]
            .admin_ok("SELECT COUNT(*), MIN(global_version), MAX(global_version) FROM stats_proxysql_servers_status")
            .trim()
            == format!("3\t{rev}\t{rev}")
    });
    assert!(
        members.is_some(),
        "{}",
        nodes[2].admin_ok("SELECT * FROM stats_proxysql_servers_status")
    );
    assert!(
        nodes[1]
            .log()
            .contains("cluster: mysql_servers synced from the configuration store (revision"),
        "{}",
        nodes[1].log()
    );
    // A node that drifted is brought back with LOAD … FROM CLUSTER.
    nodes[2].admin_ok("UPDATE mysql_servers SET weight = 99 WHERE hostgroup_id = 1; LOAD MYSQL SERVERS TO RUNTIME;");
    assert_eq!(replica_weight(&nodes[2]), "99");
    nodes[2].admin_ok("LOAD MYSQL SERVERS FROM CLUSTER");
    assert_eq!(replica_weight(&nodes[2]), "11");
    // A node that joins later starts from the store's configuration.
    let late = node(&url, None);
    assert!(
        within(Duration::from_secs(5), || replica_weight(&late) == "11").is_some(),
        "{}",
        late.log()
    );
    // Users travel too; clients log in on every node with what one node saved.
    primary_root(
        "CREATE USER IF NOT EXISTS 'store_user'@'%' IDENTIFIED BY 'store_pw'; GRANT USAGE ON *.* TO 'store_user'@'%';",
    );
    nodes[0].admin_ok(
        "INSERT INTO mysql_users (username, password, default_hostgroup) VALUES ('store_user', 'store_pw', 0); LOAD MYSQL USERS TO RUNTIME; SAVE MYSQL USERS TO CLUSTER;",
    );
    for n in nodes.iter().chain([&late]) {
        let ok = within(Duration::from_secs(2), || {
            mariadb(n.port, "store_user", "store_pw", &[], "SELECT 5")
                .status
                .success()
        });
        assert!(ok.is_some(), "store_user on {}:\n{}", n.port, n.log());
    }
}

#[test]
fn members_failing_and_the_whole_store_stopping_never_stop_traffic() {
    if !backends_ready(Servers::MariaDb) {
        return;
    }
    let mut store = etcd("etcd-faults");
    let url = store.url("faults");
    let http = free_port();
    let nodes: Vec<Sluice> = vec![node(&url, Some(http)), node(&url, None), node(&url, None)];
    wait_connected(&nodes.iter().collect::<Vec<_>>());
    // One member killed: saves and their arrival go on.
    store.kill(0);
    save_weight(&nodes[1], 21);
    for n in &nodes {
        assert!(
            within(Duration::from_secs(3), || replica_weight(n) == "21").is_some(),
            "{}",
            n.log()
        );
    }
    // Every member stopped: nodes keep their configuration, serve clients, and say so.
    store.stop_all();
    let noted = within(Duration::from_secs(10), || {
        nodes
            .iter()
            .all(|n| store_row(n).starts_with("unreachable\t"))
    });
    assert!(noted.is_some(), "{}", nodes[0].log());
    for n in &nodes {
        assert_eq!(replica_weight(n), "21");
        let out = mariadb(n.port, "app", "app", &[], "SELECT 7");
        assert_eq!(ok_stdout(&out).trim(), "7", "traffic through {}", n.port);
        assert!(
            n.log()
                .contains("this node keeps serving its configuration of revision")
        );
    }
    let ready = http_get(http, "/readyz");
    assert!(
        ready.starts_with("HTTP/1.1 200")
            && ready.contains("note: the configuration store etcd://"),
        "{ready}"
    );
    let refused = nodes[0].admin("SAVE MYSQL SERVERS TO CLUSTER");
    assert!(!refused.status.success());
    assert!(String::from_utf8_lossy(&refused.stderr).contains("SAVE TO CLUSTER failed"));
    // The store comes back: every node reconnects, catches up, and follows again.
    store.restart_stopped().expect("etcd restarts");
    wait_connected(&nodes.iter().collect::<Vec<_>>());
    assert!(nodes[0].log().contains("answers again after"));
    save_weight(&nodes[2], 23);
    for n in &nodes {
        assert!(
            within(Duration::from_secs(3), || replica_weight(n) == "23").is_some(),
            "{}",
            n.log()
        );
    }
    let ready = http_get(http, "/readyz");
    assert!(!ready.contains("note:"), "{ready}");
}

/// A plain HTTP GET on loopback; the whole answer.
fn http_get(port: u16, path: &str) -> String {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).expect("HTTP port");
    let _ = s.set_read_timeout(Some(Duration::from_secs(5)));
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
    )
    .expect("send");
    let mut out = String::new();
    let _ = s.read_to_string(&mut out);
    out
}

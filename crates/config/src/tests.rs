use super::*;

const GOOD: &str = r#"
datadir = "/tmp/x"
[mysql_variables]
interfaces = "127.0.0.1:6033"
server_version = "8.0.36"
monitor_query_interval = 2000

[[mysql_servers]]
hostgroup_id = 0
hostname = "127.0.0.1"
port = 13306

[[mysql_servers]]
hostgroup_id = 1
hostname = "127.0.0.1"
port = 13307
weight = 10
use_ssl = true

[[mysql_users]]
username = "app"
password = "app"
default_hostgroup = 0
"#;

#[test]
fn parses_proxysql_shaped_file_with_defaults() {
    let cfg = Config::parse(GOOD).expect("valid config");
    assert_eq!(cfg.datadir.as_deref(), Some("/tmp/x"));
    assert_eq!(cfg.mysql_variables.server_version, "8.0.36");
    assert_eq!(cfg.mysql_servers.len(), 2);
    let s = &cfg.mysql_servers[0];
    assert_eq!(
        (s.weight.0, s.max_connections.0, s.status),
        (1, 1000, ServerStatus::Online)
    );
    assert!(cfg.mysql_servers[1].use_ssl.0);
    let u = &cfg.mysql_users[0];
    assert!(u.active.0 && u.transaction_persistent.0 && u.frontend.0 && u.backend.0);
    assert_eq!(u.max_connections.0, 10000);
    assert_eq!(cfg.warnings.len(), 1, "{:?}", cfg.warnings);
    assert!(cfg.warnings[0].contains("monitor_query_interval"));
}

fn err(text: &str) -> String {
    Config::parse(text)
        .expect_err("must be rejected")
        .to_string()
}

#[test]
fn unknown_key_names_key_and_line() {
    let e = err("[[mysql_servers]]\nhostname = \"h\"\nprot = 3306\n");
    assert!(e.contains("prot") && e.contains("line 3"), "{e}");
}

#[test]
fn unknown_section_is_an_error() {
    let e = err("[mysql_varaibles]\nx = 1\n");
    assert!(e.contains("mysql_varaibles") && e.contains("line 1"), "{e}");
}

#[test]
fn bad_values_name_key_and_line() {
    let e = err("[[mysql_servers]]\nhostname = \"h\"\nweight = -1\n");
    assert!(
        e.contains("weight") && e.contains("line 3") && e.contains("between"),
        "{e}"
    );
    let e = err("[[mysql_servers]]\nhostname = \"h\"\nport = 70000\n");
    assert!(e.contains("port") && e.contains("line 3"), "{e}");
    let e = err("[[mysql_servers]]\nhostname = \"h\"\nstatus = \"UP\"\n");
    assert!(e.contains("status") && e.contains("line 3"), "{e}");
    let e = err("[[mysql_users]]\nusername = \"a\"\nactive = 2\n");
    assert!(e.contains("active") && e.contains("line 3"), "{e}");
    let e = err("\n[mysql_variables]\nmax_connections = 0\n");
    assert!(e.contains("max_connections") && e.contains("line 3"), "{e}");
    let e = err("[mysql_variables]\nbogus_variable = 1\n");
    assert!(e.contains("bogus_variable") && e.contains("line 2"), "{e}");
}

#[test]
fn cross_row_checks() {
    let dup = "[[mysql_servers]]\nhostname = \"h\"\n[[mysql_servers]]\nhostname = \"h\"\n";
    assert!(err(dup).contains("duplicate"));
    let users = "[[mysql_users]]\nusername = \"a\"\n[[mysql_users]]\nusername = \"a\"\n";
    assert!(err(users).contains("duplicate frontend user"));
    let hash = "[[mysql_users]]\nusername = \"a\"\npassword = \"*12\"\n";
    assert!(err(hash).contains("mysql_native_password hash"));
}

#[test]
fn native_hash_shape() {
    assert!(is_native_hash("*2470C0C06DEE42FD1618BB99005ADCA2EC9D1E19"));
    assert!(!is_native_hash("*2470C0C06DEE42FD1618BB99005ADCA2EC9D1E1"));
    assert!(!is_native_hash("2470C0C06DEE42FD1618BB99005ADCA2EC9D1E19x"));
}

#[test]
fn users_must_point_at_a_hostgroup_with_servers() {
    let e = err(
        "[[mysql_servers]]\nhostname = \"h\"\n[[mysql_users]]\nusername = \"u\"\ndefault_hostgroup = 7\n",
    );
    assert!(e.contains("default_hostgroup 7"), "{e}");
}

#[test]
fn admin_variables_section() {
    let cfg = Config::parse(
        "[admin_variables]\nmysql_ifaces = \"127.0.0.1:7032\"\nadmin_credentials = \"a:b;c:d\"\n",
    )
    .expect("ok");
    assert_eq!(cfg.admin_variables.mysql_ifaces, "127.0.0.1:7032");
    assert_eq!(
        AdminVariables::parse_credentials(&cfg.admin_variables.admin_credentials).len(),
        2
    );
    let e = err("[admin_variables]\nadmin_credentials = \"nocolon\"\n");
    assert!(
        e.contains("admin_credentials") && e.contains("line 2"),
        "{e}"
    );
}

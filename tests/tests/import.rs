//! `sluice import` and `--config` with other proxies' files, tested on files nobody here wrote:
//! Debian's `/etc/pgbouncer/pgbouncer.ini`, the example of PgBouncer's documentation with every
//! setting uncommented, and the `proxysql.cnf` of Ansible's community.proxysql role (rendered by
//! `cargo xtask test` from the `ansible` wheel); plus a `proxysql.cnf` in the shape of seed 003's
//! PostgreSQL walk-through given to `--config` directly. Each translated config starts and serves
//! a real client against the real servers; every setting that does not carry over is reported
//! with its line.

use sluice_tests::*;
use std::path::Path;
use std::process::{Command, Output};
use xtask::import_samples::{PGBOUNCER_DOC_INI, PGBOUNCER_INI, proxysql_sample};

fn sluice(args: &[&str]) -> Output {
    Command::new(sluice_bin())
        .args(args)
        .env("NO_COLOR", "1")
        .output()
        .expect("sluice runs")
}

fn read(path: &str) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| {
        panic!("{path}: {e} (`cargo xtask test` installs it; `cargo xtask tools` alone)")
    })
}

/// The 1-based line of the first line of `text` starting with `prefix`.
fn line_of(text: &str, prefix: &str) -> usize {
    text.lines()
        .position(|l| l.starts_with(prefix))
        .unwrap_or_else(|| panic!("no line starting with {prefix:?}"))
        + 1
}

/// `text` with `from` replaced once; the sample must contain it.
fn edit(text: &str, from: &str, to: &str) -> String {
    assert_eq!(text.matches(from).count(), 1, "{from:?} once in the sample");
    text.replacen(from, to, 1)
}

/// The server's own SCRAM verifier of `app`, as PgBouncer users put it in userlist.txt.
fn app_verifier() -> String {
    let sql = "SELECT rolpassword FROM pg_authid WHERE rolname = 'app'";
    let script = format!(
        "import psycopg\nk = psycopg.connect('host=127.0.0.1 port={} user=postgres password=postgres dbname=postgres sslmode=disable')\nprint(k.execute(\"{sql}\").fetchone()[0])\n",
        ports::PG_PRIMARY
    );
    ok_stdout(&python(&script, &[])).trim().to_string()
}

#[test]
fn debian_pgbouncer_ini_is_translated_and_each_leftover_reported_with_its_line() {
    let ini = read(PGBOUNCER_INI);
    let out = sluice(&["import", PGBOUNCER_INI]);
    let toml = ok_stdout(&out);
    let notes = String::from_utf8_lossy(&out.stderr).to_string();
    for setting in ["logfile =", "pidfile =", "unix_socket_dir ="] {
        let expect = format!("line {}: [pgbouncer] {setting}", line_of(&ini, setting));
        assert!(notes.contains(&expect), "{expect:?} in:\n{notes}");
    }
    assert!(toml.contains("interfaces = \"127.0.0.1:6432\""), "{toml}");
    assert!(toml.contains("authentication_method = 2"), "{toml}");
    let check = sluice(&["check-config", PGBOUNCER_INI]);
    assert_eq!(check.status.code(), Some(0), "{check:?}");
    let log = String::from_utf8_lossy(&check.stderr);
    assert!(
        log.contains("is a PgBouncer pgbouncer.ini file: translated"),
        "{log}"
    );
}

#[test]
fn debian_pgbouncer_ini_serves_psql_with_the_userlist_verifier() {
    let dir = scratch_dir("import-pgbouncer");
    let ports = Ports::free();
    let userlist = write_file(
        &dir,
        "userlist.txt",
        &format!("\"app\" \"{}\"\n", app_verifier()),
    );
    // The operator's edits: a port of its own, a database, the auth file.
    let ini = read(PGBOUNCER_INI);
    let ini = edit(
        &ini,
        "\nlisten_port = 6432",
        &format!("\nlisten_port = {}", ports.pg),
    );
    let ini = edit(
        &ini,
        "[databases]\n",
        &format!(
            "[databases]\n* = host=127.0.0.1 port={}\n",
            ports::PG_PRIMARY
        ),
    );
    let ini = edit(
        &ini,
        "auth_file = /etc/pgbouncer/userlist.txt",
        &format!("auth_file = {}", userlist.display()),
    );
    let ini_path = write_file(&dir, "pgbouncer.ini", &ini);
    let toml = ok_stdout(&sluice(&["import", &ini_path.display().to_string()]));
    assert!(
        toml.contains("authentication_method = 3"),
        "SCRAM verifiers:\n{toml}"
    );
    // PgBouncer serves PostgreSQL only: the translation opens no MySQL port; the harness waits
    // for one, so the test gives it one.
    assert_eq!(toml.matches("interfaces = \"\"").count(), 1, "{toml}");
    let template = toml.replace("interfaces = \"\"", "interfaces = \"127.0.0.1:{port}\"");
    let s = Sluice::start_on(&template, dir, &[], (ports.mysql, ports.admin));
    within(std::time::Duration::from_secs(10), || {
        xtask::proc::port_open(ports.pg)
    })
    .expect("the pgbouncer.ini's listen_port accepts connections");
    let out = psql_login(
        ports.pg,
        "app",
        "app",
        "SELECT current_user, inet_server_port()",
    );
    assert_eq!(ok_stdout(&out).trim(), format!("app|{}", ports::PG_PRIMARY));
    let wrong = psql_login(ports.pg, "app", "nope", "SELECT 1");
    assert!(!wrong.status.success(), "a wrong password is refused");
    drop(s);
}

/// Every `;setting = …` of the documentation's example uncommented, as PgBouncer reads it.
fn uncommented(ini: &str) -> (String, Vec<(usize, String)>) {
    let mut live = Vec::new();
    let mut lines = Vec::new();
    for (i, l) in ini.lines().enumerate() {
        let rest = l.trim_start_matches(';');
        let bare = rest.strip_prefix(' ').unwrap_or(rest);
        let key: String = bare
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '_' || *c == '*')
            .collect();
        let is_setting = l.starts_with(';')
            && !key.is_empty()
            && bare[key.len()..].trim_start().starts_with('=');
        if is_setting {
            live.push((i + 1, key));
            lines.push(bare.to_string());
        } else {
            lines.push(l.to_string());
        }
    }
    (lines.join("\n") + "\n", live)
}

#[test]
fn pgbouncer_doc_example_with_every_setting_uncommented_reports_what_it_drops() {
    let (ini, live) = uncommented(&read(PGBOUNCER_DOC_INI));
    assert!(live.len() > 60, "{} settings uncommented", live.len());
    let dir = scratch_dir("import-pgbouncer-doc");
    let path = write_file(&dir, "pgbouncer.ini", &ini);
    // `bardb = host=localhost dbname=bazdb` renames a database: Sluice cannot, and says where.
    let out = sluice(&["import", &path.display().to_string()]);
    assert_eq!(out.status.code(), Some(64), "{out:?}");
    let err = String::from_utf8_lossy(&out.stderr);
    let alias = line_of(&ini, "bardb =");
    assert!(err.contains(&format!("line {alias}:")), "{err}");
    assert!(err.contains("bazdb"), "{err}");
    // Without it, the rest translates; each setting is either carried over or reported.
    let ini = edit(
        &ini,
        "bardb = host=localhost dbname=bazdb",
        ";bardb (removed)",
    );
    let path = write_file(&dir, "pgbouncer.ini", &ini);
    let out = sluice(&[
        "import",
        &path.display().to_string(),
        "--auth-file",
        "/usr/share/doc/pgbouncer/examples/userlist.txt",
    ]);
    let toml = ok_stdout(&out);
    let notes = String::from_utf8_lossy(&out.stderr).to_string();
    // Settings that map to a Sluice variable or row (checked below) need no report.
    let carried = [
        "listen_addr",
        "listen_port",
        "auth_file",
        "max_client_conn",
        "default_pool_size",
        "pool_mode",
        "server_connect_timeout",
        "query_wait_timeout",
        "query_timeout",
        "max_prepared_statements",
        "client_tls_key_file",
        "client_tls_cert_file",
        "client_tls_sslmode",
        "server_tls_sslmode",
        "server_tls_ca_file",
        "server_tls_key_file",
        "server_tls_cert_file",
        "ignore_startup_parameters",
        "auth_type",
    ];
    let mut unreported = Vec::new();
    for (line, key) in &live {
        let reported = notes.contains(&format!("line {line}:"));
        let database = ini
            .lines()
            .take(*line)
            .filter(|l| l.starts_with('['))
            .last()
            == Some("[databases]");
        if !reported && !database && !carried.contains(&key.as_str()) {
            unreported.push((*line, key.clone()));
        }
    }
    assert!(
        unreported.is_empty(),
        "dropped silently: {unreported:?}\n{notes}"
    );
    let cfg = sluice_core::config::Config::parse(&toml).expect("Sluice reads it");
    assert!(!cfg.pgsql_servers.is_empty(), "{toml}");
    assert_eq!(cfg.pgsql_users.len(), 3, "the example userlist's users");
    // Its admin_users have no cleartext password in the userlist: reported, admin unchanged.
    assert_eq!(cfg.admin_variables.admin_credentials, "admin:admin");
}

#[test]
fn ansible_proxysql_cnf_is_translated_and_serves_mariadb() {
    let sample = proxysql_sample();
    let cnf = read(&sample.display().to_string());
    let dir = scratch_dir("import-proxysql");
    let ports = Ports::free();
    // The operator's edits: ports of its own, a datadir, and the servers, user and rule the
    // role's defaults leave empty (written as ProxySQL's sample writes them).
    let cnf = edit(&cnf, "0.0.0.0:6033", &format!("127.0.0.1:{}", ports.mysql));
    let cnf = edit(&cnf, "0.0.0.0:6032", &format!("127.0.0.1:{}", ports.admin));
    let cnf = edit(
        &cnf,
        "admin_credentials=\"admin:admin\"",
        &format!(
            "admin_credentials=\"admin:admin\"\n\tpgsql_ifaces=\"127.0.0.1:{}\"",
            ports.pg_admin
        ),
    );
    let cnf = edit(
        &cnf,
        "datadir=\"/var/lib/proxysql\"",
        &format!("datadir=\"{}\"", dir.join("data").display()),
    );
    let cnf = format!(
        "{cnf}\npgsql_variables=\n{{\n\tinterfaces=\"127.0.0.1:{pg}\"\n}}\n\
         mysql_servers =\n(\n\t{{ address=\"127.0.0.1\" , port={p} , hostgroup=0, max_connections=200 }},\n\
         \t{{ address=\"127.0.0.1\" , port={r} , hostgroup=1, max_connections=200 }}\n)\n\
         mysql_users:\n(\n\t{{ username = \"app\", password = \"app\", default_hostgroup = 0, active = 1 }}\n)\n\
         mysql_query_rules:\n(\n\t{{ rule_id=1 active=1 match_pattern=\"^SELECT @@port\" destination_hostgroup=1 apply=1 }}\n)\n",
        pg = ports.pg,
        p = ports::MY_PRIMARY,
        r = ports::MY_REPLICA,
    );
    let cnf_path = write_file(&dir, "proxysql.cnf", &cnf);
    let out = sluice(&["import", &cnf_path.display().to_string()]);
    let toml = ok_stdout(&out);
    let notes = String::from_utf8_lossy(&out.stderr).to_string();
    for setting in ["restart_on_missing_heartbeats", "pidfile"] {
        let expect = format!("line {}: {setting}", line_of(&cnf, setting));
        assert!(notes.contains(&expect), "{expect:?} in:\n{notes}");
    }
    let socket = format!(
        "line {}: mysql_variables.interfaces: the Unix socket",
        line_of(&cnf, "\t\tinterfaces=")
    );
    assert!(notes.contains(&socket), "{socket:?} in:\n{notes}");
    let toml_path = write_file(&dir, "sluice.toml", &toml);
    let s = Sluice::start_file(&toml_path, dir.clone(), &[], ports);
    // The role's server_version reaches clients; the rule sends @@port to the replica.
    let version = mariadb(
        ports.mysql,
        "app",
        "app",
        &["--skip-ssl"],
        "SELECT @@version",
    );
    assert_eq!(ok_stdout(&version).trim(), "5.5.30");
    let port = mariadb(ports.mysql, "app", "app", &["--skip-ssl"], "SELECT @@port");
    assert_eq!(ok_stdout(&port).trim(), ports::MY_REPLICA.to_string());
    let vars = s.admin_ok(
        "SELECT variable_value FROM global_variables WHERE variable_name = 'mysql-max_connections'",
    );
    assert_eq!(vars.trim(), "2048");
    let servers =
        s.admin_ok("SELECT hostgroup_id, port FROM runtime_mysql_servers ORDER BY hostgroup_id");
    assert_eq!(
        servers.trim(),
        format!("0\t{}\n1\t{}", ports::MY_PRIMARY, ports::MY_REPLICA)
    );
}

/// A proxysql.cnf in the shape of seed 003's PostgreSQL walk-through (its admin credentials,
/// PostgreSQL admin interface and monitor account), with the primary and replica and a reader
/// rule, given to `--config` as it is.
fn walkthrough_cnf(ports: Ports) -> String {
    format!(
        r#"# Administration variables
admin_variables=
{{
    # IMPORTANT: default 'admin:admin' credentials can only be used from localhost.
    admin_credentials="admin:admin;radmin:radmin"
    mysql_ifaces="127.0.0.1:{admin}"
    # Port for accessing Admin interface using `PostgreSQL` Protocol
    pgsql_ifaces="127.0.0.1:{pg_admin}"
}}

mysql_variables=
{{
    interfaces="127.0.0.1:{mysql}"
}}

pgsql_variables=
{{
    interfaces="127.0.0.1:{pg}"
    monitor_username="monitor"
    monitor_password="monitor"
    monitor_ping_interval=8000
}}

pgsql_servers=
(
    {{ hostgroup_id=0, hostname="127.0.0.1", port={primary}, comment="pg-primary" }},
    {{ hostgroup_id=1, hostname="127.0.0.1", port={replica}, comment="pg-replica" }}
)

pgsql_users=
(
    {{ username="app", password="app", default_hostgroup=0 }}
)

pgsql_query_rules=
(
    {{ rule_id=10, active=1, match_digest="^SELECT inet_server_port", destination_hostgroup=1, apply=1 }}
)
"#,
        admin = ports.admin,
        pg_admin = ports.pg_admin,
        mysql = ports.mysql,
        pg = ports.pg,
        primary = ports::PG_PRIMARY,
        replica = ports::PG_REPLICA,
    )
}

#[test]
fn a_proxysql_cnf_given_to_config_is_translated_at_start() {
    let dir = scratch_dir("import-walkthrough");
    let ports = Ports::free();
    let cnf = write_file(&dir, "proxysql.cnf", &walkthrough_cnf(ports));
    let s = Sluice::start_file(&cnf, dir.clone(), &[], ports);
    assert!(
        s.log()
            .contains("is a ProxySQL proxysql.cnf file: translated"),
        "{}",
        s.log()
    );
    let rows = Command::new("psql")
        .env("PGPASSWORD", "radmin")
        .args([
            "-h",
            "127.0.0.1",
            "-p",
            &ports.pg_admin.to_string(),
            "-U",
            "radmin",
        ])
        .args(["-X", "-A", "-t", "-c"])
        .arg("SELECT hostgroup_id, port, comment FROM runtime_pgsql_servers ORDER BY hostgroup_id")
        .output()
        .expect("psql");
    assert_eq!(
        ok_stdout(&rows).trim(),
        format!(
            "0|{}|pg-primary\n1|{}|pg-replica",
            ports::PG_PRIMARY,
            ports::PG_REPLICA
        )
    );
    let port = psql_login(ports.pg, "app", "app", "SELECT inet_server_port()");
    assert_eq!(ok_stdout(&port).trim(), ports::PG_REPLICA.to_string());
    assert!(Path::new(&dir).join("sluice.log").is_file());
}

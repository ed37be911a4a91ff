//! Backend TLS verification (`<prefix>-ssl_p2s_ca` / `_capath` / `_verify`) on both protocols,
//! for the data path and the monitor alike. The test servers' certificates are signed by the
//! test CA for `localhost` only (a DNS name, no IP address): `verify-ca` accepts them at
//! `127.0.0.1`, `verify-full` only at `localhost`, and a CA that did not sign them is refused.

use sluice_tests::*;
use std::process::Command;

fn test_ca() -> String {
    xtask::tls::test_ca(&xtask::state_dir())
        .expect("the test CA")
        .display()
        .to_string()
}

/// A CA that signed nothing the servers present.
fn other_ca(dir: &std::path::Path) -> String {
    let (cert, key) = (dir.join("other-ca.pem"), dir.join("other-ca.key"));
    let out = Command::new("openssl")
        .args([
            "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2",
        ])
        .arg("-keyout")
        .arg(&key)
        .arg("-out")
        .arg(&cert)
        .args(["-subj", "/CN=another-ca"])
        .output()
        .expect("openssl installed");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    cert.display().to_string()
}

/// Sluice with hostgroup 0 reached over TLS at `host` on both protocols, with the monitor on.
fn config(host: &str, ca: &str, verify: &str) -> String {
    format!(
        r#"
[mysql_variables]
interfaces = "127.0.0.1:{{port}}"
ssl_p2s_ca = "{ca}"
ssl_p2s_verify = "{verify}"
monitor_connect_interval = 500

[pgsql_variables]
interfaces = "127.0.0.1:{{pg_port}}"
ssl_p2s_ca = "{ca}"
ssl_p2s_verify = "{verify}"
monitor_connect_interval = 500

[[mysql_servers]]
hostgroup_id = 0
hostname = "{host}"
port = {my}
use_ssl = 1

[[mysql_users]]
username = "app"
password = "app"
default_hostgroup = 0

[[pgsql_servers]]
hostgroup_id = 0
hostname = "{host}"
port = {pg}
use_ssl = 1

[[pgsql_users]]
username = "app"
password = "app"
default_hostgroup = 0
"#,
        my = ports::MY_PRIMARY,
        pg = ports::PG_PRIMARY,
    )
}

fn mysql_cipher(s: &Sluice) -> std::process::Output {
    mariadb(
        s.port,
        "app",
        "app",
        &["--skip-ssl"],
        "SHOW SESSION STATUS LIKE 'Ssl_cipher';",
    )
}

fn pg_ssl(s: &Sluice) -> std::process::Output {
    psql_app(
        s.pg_port,
        "SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()",
    )
}

/// The last monitor connect error for the server, as the admin shows it.
fn last_connect_error(s: &Sluice, proto: &str, port: u16) -> String {
    s.admin_ok(&format!(
        "SELECT COALESCE(connect_error, 'ok') FROM monitor.{proto}_server_connect_log \
         WHERE port = {port} ORDER BY time_start_us DESC LIMIT 1;"
    ))
    .trim()
    .to_string()
}

#[test]
fn verify_ca_and_verify_full_check_server_certificates_for_data_and_monitor() {
    if !backends_ready(Servers::Both) {
        return;
    }
    let ca = test_ca();
    // verify-ca at an IP address: the chain is checked, the name is not.
    let s = Sluice::start(&config("127.0.0.1", &ca, "verify-ca"));
    let cipher = ok_stdout(&mysql_cipher(&s));
    assert!(
        cipher.starts_with("Ssl_cipher\t") && cipher.trim().len() > "Ssl_cipher".len(),
        "{cipher}"
    );
    assert_eq!(ok_stdout(&pg_ssl(&s)).trim(), "t");
    wait_for("the monitor's TLS connects succeed", || {
        last_connect_error(&s, "mysql", ports::MY_PRIMARY) == "ok"
            && last_connect_error(&s, "pgsql", ports::PG_PRIMARY) == "ok"
    });
    drop(s);
    // verify-full: `localhost` is in the certificates...
    let s = Sluice::start(&config("localhost", &ca, "verify-full"));
    assert!(ok_stdout(&mysql_cipher(&s)).starts_with("Ssl_cipher\t"));
    assert_eq!(ok_stdout(&pg_ssl(&s)).trim(), "t");
    drop(s);
    // ...`127.0.0.1` is not: neither the data path nor the monitor gets in.
    let s = Sluice::start(
        &format!(
            "{}\n",
            config("127.0.0.1", &ca, "verify-full").replace(
                "[mysql_variables]\n",
                "[mysql_variables]\nconnect_timeout_server_max = 2000\n"
            )
        )
        .replace(
            "[pgsql_variables]\n",
            "[pgsql_variables]\nconnect_timeout_server_max = 2000\n",
        ),
    );
    let out = mysql_cipher(&s);
    assert!(
        !out.status.success(),
        "reached a server whose certificate does not name it"
    );
    let out = pg_ssl(&s);
    assert!(
        !out.status.success(),
        "reached a PostgreSQL server whose certificate does not name it"
    );
    wait_for("the monitor refusing the certificates", || {
        let my = last_connect_error(&s, "mysql", ports::MY_PRIMARY);
        let pg = last_connect_error(&s, "pgsql", ports::PG_PRIMARY);
        my.to_lowercase().contains("certificate") && pg.to_lowercase().contains("certificate")
    });
    assert!(
        s.log()
            .contains("certificate not valid for name \"127.0.0.1\""),
        "the reason is logged"
    );
}

#[test]
fn a_ca_that_did_not_sign_the_server_is_refused_and_verification_needs_a_ca() {
    if !backends_ready(Servers::Both) {
        return;
    }
    let dir = scratch_dir("backend-tls");
    let other = other_ca(&dir);
    let s = Sluice::start(&config("127.0.0.1", &other, "verify-ca").replace(
        "[mysql_variables]\n",
        "[mysql_variables]\nconnect_timeout_server_max = 2000\n",
    ));
    assert!(
        !mysql_cipher(&s).status.success(),
        "a foreign CA was trusted"
    );
    wait_for("the unknown issuer logged", || {
        s.log().contains("UnknownIssuer")
    });
    drop(s);
    // verify-ca without any CA is refused at start, naming the variable.
    let text = format!(
        "[admin_variables]\nmysql_ifaces = \"127.0.0.1:0\"\npgsql_ifaces = \"127.0.0.1:0\"\n{}",
        config("127.0.0.1", "", "verify-ca")
    )
    .replace("{port}", &free_port().to_string())
    .replace("{pg_port}", &free_port().to_string());
    let cfg = write_file(&dir, "no-ca.toml", &text);
    let out = Command::new(sluice_bin())
        .arg("--config")
        .arg(&cfg)
        .arg("--datadir")
        .arg(dir.join("data"))
        .env("NO_COLOR", "1")
        .output()
        .expect("sluice runs");
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(!out.status.success(), "started without a CA to verify with");
    assert!(
        said.contains("mysql-ssl_p2s_verify") && said.contains("need a CA"),
        "{said}"
    );
}

/// `mysql_servers_ssl_params` / `pgsql_servers_ssl_params` (ProxySQL 2.6's table): a row for a
/// server replaces the variables' settings for it — here the variables name a CA that signed
/// nothing, and the row the test CA: the data path and the monitor get in, and the row is in the
/// admin's runtime table.
#[test]
fn per_server_ssl_params_override_the_variables() {
    if !backends_ready(Servers::Both) {
        return;
    }
    let dir = scratch_dir("backend-tls-params");
    let other = other_ca(&dir);
    let ca = test_ca();
    let rows = format!(
        "\n[[mysql_servers_ssl_params]]\nhostname = \"127.0.0.1\"\nport = {my}\nssl_ca = \"{ca}\"\nssl_verify = \"verify-ca\"\n\
         \n[[pgsql_servers_ssl_params]]\nhostname = \"127.0.0.1\"\nport = {pg}\nusername = \"app\"\nssl_ca = \"{ca}\"\n\
         \n[[pgsql_servers_ssl_params]]\nhostname = \"127.0.0.1\"\nport = {pg}\nssl_ca = \"{ca}\"\n",
        my = ports::MY_PRIMARY,
        pg = ports::PG_PRIMARY
    );
    let s = Sluice::start(&format!(
        "{}{rows}",
        config("127.0.0.1", &other, "verify-ca")
    ));
    assert!(ok_stdout(&mysql_cipher(&s)).starts_with("Ssl_cipher\t"));
    assert_eq!(ok_stdout(&pg_ssl(&s)).trim(), "t");
    wait_for(
        "the monitor's TLS connects succeed with the rows' CA",
        || {
            last_connect_error(&s, "mysql", ports::MY_PRIMARY) == "ok"
                && last_connect_error(&s, "pgsql", ports::PG_PRIMARY) == "ok"
        },
    );
    let runtime = s.admin_ok(
        "SELECT hostname, port, username, ssl_verify FROM runtime_mysql_servers_ssl_params;",
    );
    assert_eq!(
        runtime.trim(),
        format!("127.0.0.1\t{}\t\tverify-ca", ports::MY_PRIMARY)
    );
    let pg_rows = s.admin_ok("SELECT COUNT(*) FROM runtime_pgsql_servers_ssl_params;");
    assert_eq!(pg_rows.trim(), "2");
}

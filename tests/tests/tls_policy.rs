//! Frontend TLS versions and cipher suites: `mysql-tls_version` / `mysql-ssl_cipher` and
//! `pgsql-ssl_min_protocol_version` / `pgsql-ssl_ciphers`, checked with `openssl s_client
//! -starttls mysql|postgres` offering one version and one suite at a time; a change applies
//! with `PROXYSQL RELOAD TLS`, and an unknown suite is refused with the list of known ones.

use sluice_tests::*;
use std::process::Command;

/// Whether a TLS handshake with `version` (`-tls1_2` / `-tls1_3`) and, for TLS 1.2, `cipher`
/// completes on `port` after the protocol's STARTTLS; the negotiated suite when it does.
fn handshake(port: u16, starttls: &str, version: &str, cipher: &str) -> Option<String> {
    let mut cmd = Command::new("openssl");
    cmd.args(["s_client", "-connect", &format!("127.0.0.1:{port}")])
        .args(["-starttls", starttls, version]);
    if !cipher.is_empty() {
        let flag = if version == "-tls1_3" {
            "-ciphersuites"
        } else {
            "-cipher"
        };
        cmd.args([flag, cipher]);
    }
    let out = cmd
        .stdin(std::process::Stdio::null())
        .output()
        .expect("openssl installed");
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    // s_client prints the suite it agreed on; "(NONE)" or nothing when the handshake failed.
    text.lines()
        .find_map(|l| l.trim().strip_prefix("Cipher    : "))
        .or_else(|| text.lines().find_map(|l| l.split(", Cipher is ").nth(1)))
        .map(str::trim)
        .filter(|c| !c.is_empty() && *c != "(NONE)" && *c != "0000")
        .map(str::to_string)
}

#[test]
fn versions_and_cipher_suites_are_what_the_variables_allow() {
    if !backends_ready(Servers::Both) {
        return;
    }
    let pg = "\n[pgsql_variables]\ninterfaces = \"127.0.0.1:{pg_port}\"\nssl_min_protocol_version = \"TLSv1.3\"\n";
    let s = Sluice::start(&standard_config(
        "tls_version = \"TLSv1.2\"\nssl_cipher = \"ECDHE-ECDSA-AES128-GCM-SHA256\"",
        pg,
    ));
    // MySQL: TLS 1.2 only, one suite.
    let agreed = handshake(s.port, "mysql", "-tls1_2", "ECDHE-ECDSA-AES128-GCM-SHA256");
    assert_eq!(agreed.as_deref(), Some("ECDHE-ECDSA-AES128-GCM-SHA256"));
    assert_eq!(
        handshake(s.port, "mysql", "-tls1_2", "ECDHE-ECDSA-AES256-GCM-SHA384"),
        None
    );
    assert_eq!(
        handshake(s.port, "mysql", "-tls1_3", ""),
        None,
        "TLS 1.3 is off"
    );
    // PostgreSQL: TLS 1.3 minimum.
    assert_eq!(
        handshake(s.pg_port, "postgres", "-tls1_2", ""),
        None,
        "TLS 1.2 is below the minimum"
    );
    assert!(handshake(s.pg_port, "postgres", "-tls1_3", "").is_some());
    // Real clients agree: psql refusing TLS 1.3 cannot connect, psql allowing it can.
    let psql = |max: &str| {
        Command::new("psql")
            .env("PGPASSWORD", "app")
            .arg(format!(
                "host=127.0.0.1 port={} user=app dbname=app sslmode=require ssl_max_protocol_version={max}",
                s.pg_port
            ))
            .args(["-X", "-A", "-t", "-c", "SELECT 1"])
            .output()
            .expect("psql installed")
    };
    assert!(
        !psql("TLSv1.2").status.success(),
        "psql connected with TLS 1.2"
    );
    assert_eq!(ok_stdout(&psql("TLSv1.3")).trim(), "1");
    // A change applies with PROXYSQL RELOAD TLS; a bad suite is refused and the old policy stays.
    s.admin_ok("SET mysql-tls_version = 'TLSv1.2,TLSv1.3'; SET mysql-ssl_cipher = ''; LOAD MYSQL VARIABLES TO RUNTIME; PROXYSQL RELOAD TLS;");
    assert!(
        handshake(s.port, "mysql", "-tls1_3", "").is_some(),
        "TLS 1.3 after reload"
    );
    assert!(handshake(s.port, "mysql", "-tls1_2", "ECDHE-ECDSA-AES256-GCM-SHA384").is_some());
    s.admin_ok("SET mysql-ssl_cipher = 'RC4-MD5'; LOAD MYSQL VARIABLES TO RUNTIME;");
    let refused = s.admin("PROXYSQL RELOAD TLS;");
    let err = String::from_utf8_lossy(&refused.stderr);
    assert!(
        err.contains("unknown cipher suite RC4-MD5") && err.contains("current certificates stay"),
        "{err}"
    );
    assert!(
        handshake(s.port, "mysql", "-tls1_3", "").is_some(),
        "the old policy stays"
    );
    // Versions Sluice does not offer are refused when set.
    let old = s.admin("SET mysql-tls_version = 'TLSv1.1';");
    assert!(!old.status.success(), "TLSv1.1 was accepted");
}

//! `admin-ssl_keylog_file`: the secrets of the TLS sessions Sluice terminates (a PyMySQL client)
//! and originates (to a MariaDB server with `use_ssl=1`) are appended in the NSS key log format;
//! the client's own key log (Python's `ssl` module) holds the same lines for its session, so a
//! capture of either leg can be decrypted with Sluice's file.

use sluice_tests::*;
use std::collections::BTreeSet;
use std::os::unix::fs::PermissionsExt;

/// (label, client random, secret) of every line but comments; panics on a malformed one.
fn entries(text: &str) -> BTreeSet<(String, String, String)> {
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .map(|l| {
            let parts: Vec<&str> = l.split(' ').collect();
            let hex = |s: &str| !s.is_empty() && s.chars().all(|c| c.is_ascii_hexdigit());
            assert!(
                parts.len() == 3 && parts[1].len() == 64 && hex(parts[1]) && hex(parts[2]),
                "not an NSS key log line: {l:?}"
            );
            (
                parts[0].to_string(),
                parts[1].to_string(),
                parts[2].to_string(),
            )
        })
        .collect()
}

const CLIENT: &str = r#"
import ssl, sys, pymysql
ctx = ssl.create_default_context()
ctx.check_hostname = False
ctx.verify_mode = ssl.CERT_NONE
ctx.keylog_filename = sys.argv[2]
c = pymysql.connect(host="127.0.0.1", port=int(sys.argv[1]), user="app", password="app", ssl=ctx)
cur = c.cursor()
cur.execute("SHOW SESSION STATUS LIKE 'Ssl_cipher'")
print(cur.fetchone()[1] != "")
c.close()
"#;

#[test]
fn tls_secrets_of_both_legs_are_logged_in_nss_format_in_a_private_file() {
    if !backends_ready(Servers::MariaDb) {
        return;
    }
    let dir = scratch_dir("keylog");
    let sluice_log = dir.join("sluice-keys.log");
    let client_log = dir.join("client-keys.log");
    let cfg = format!(
        "[admin_variables]\nmysql_ifaces = \"127.0.0.1:{{admin_port}}\"\npgsql_ifaces = \"127.0.0.1:{{pg_admin_port}}\"\n\
         ssl_keylog_file = \"{}\"\n[pgsql_variables]\ninterfaces = \"127.0.0.1:{{pg_port}}\"\n{}",
        sluice_log.display(),
        standard_config("have_ssl = true", "").replacen(
            "port = 13306\n",
            "port = 13306\nuse_ssl = 1\n",
            1
        )
    );
    let s = Sluice::start(&cfg);
    let out = ok_stdout(&python(
        CLIENT,
        &[&s.port.to_string(), &client_log.to_string_lossy()],
    ));
    // The backend leg is TLS too (the server reports a cipher for Sluice's connection).
    assert_eq!(out.trim(), "True");
    let logged = entries(&std::fs::read_to_string(&sluice_log).expect("Sluice wrote its key log"));
    let client =
        entries(&std::fs::read_to_string(&client_log).expect("the client wrote its key log"));
    assert!(!client.is_empty());
    // Every secret of the client's session is in Sluice's file, under the same client random.
    for line in &client {
        assert!(
            logged.contains(line),
            "{line:?} missing from Sluice's key log"
        );
    }
    // And Sluice's own session to MariaDB: another client random, with its traffic secrets.
    let randoms: BTreeSet<&str> = logged.iter().map(|(_, r, _)| r.as_str()).collect();
    let client_random = client
        .iter()
        .next()
        .map(|(_, r, _)| r.as_str())
        .unwrap_or("");
    assert!(
        randoms.iter().any(|r| *r != client_random),
        "no backend session in {logged:?}"
    );
    assert!(
        logged
            .iter()
            .any(|(label, _, _)| label == "CLIENT_TRAFFIC_SECRET_0")
    );
    let mode = std::fs::metadata(&sluice_log)
        .expect("meta")
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o600);
    assert!(s.log().contains("TLS secrets are logged to"), "{}", s.log());
}

//! `PROXYSQL RELOAD TLS`: the frontend certificate is read from disk again and used for new
//! handshakes; sessions already encrypted go on; a bad file is refused with a clear error and the
//! certificate in use stays.

use sluice_tests::*;
use std::process::Command;

/// A self-signed EC certificate and key for `cn` in `dir`.
fn certificate(dir: &std::path::Path, cn: &str) -> (String, String) {
    let (cert, key) = (
        dir.join(format!("{cn}-cert.pem")),
        dir.join(format!("{cn}-key.pem")),
    );
    let out = Command::new("openssl")
        .args(["req", "-x509", "-nodes", "-days", "2", "-newkey", "ec"])
        .args(["-pkeyopt", "ec_paramgen_curve:prime256v1", "-subj"])
        .arg(format!("/CN={cn}"))
        .arg("-keyout")
        .arg(&key)
        .arg("-out")
        .arg(&cert)
        .output()
        .expect("openssl installed");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    (cert.display().to_string(), key.display().to_string())
}

const SCRIPT: &str = r#"
import hashlib, shutil, ssl, sys, pymysql
port, admin_port, cert, key, cert_a, cert_b, key_b = sys.argv[1:8]
ctx = ssl.create_default_context()
ctx.check_hostname = False
ctx.verify_mode = ssl.CERT_NONE
def fingerprint(pem):
    return hashlib.sha256(ssl.PEM_cert_to_DER_cert(open(pem).read())).hexdigest()
def connect():
    c = pymysql.connect(host="127.0.0.1", port=int(port), user="app", password="app", ssl=ctx)
    return c, hashlib.sha256(c._sock.getpeercert(True)).hexdigest()
def reload():
    a = pymysql.connect(host="127.0.0.1", port=int(admin_port), user="admin", password="admin")
    try:
        a.cursor().execute("PROXYSQL RELOAD TLS")
        return "ok"
    except pymysql.err.MySQLError as e:
        return e.args[1]
    finally:
        a.close()
first, fp = connect()
print("first is A:", fp == fingerprint(cert_a))
shutil.copy(cert_b, cert); shutil.copy(key_b, key)
print("reload:", reload())
second, fp = connect()
print("second is B:", fp == fingerprint(cert_b))
cur = first.cursor(); cur.execute("SELECT 41 + 1"); print("first still works:", cur.fetchone()[0] == 42)
open(cert, "w").write("not a certificate\n")
print("bad reload:", reload())
third, fp = connect()
print("third is B:", fp == fingerprint(cert_b))
"#;

#[test]
fn reload_tls_swaps_the_certificate_for_new_handshakes_and_refuses_a_bad_one() {
    if !backends_ready(Servers::MariaDb) {
        return;
    }
    let dir = scratch_dir("tls-reload");
    let (cert_a, key_a) = certificate(&dir, "a");
    let (cert_b, key_b) = certificate(&dir, "b");
    let (cert, key) = (dir.join("cert.pem"), dir.join("key.pem"));
    std::fs::copy(&cert_a, &cert).expect("copy");
    std::fs::copy(&key_a, &key).expect("copy");
    let vars = format!(
        "have_ssl = true\nssl_cert = \"{}\"\nssl_key = \"{}\"",
        cert.display(),
        key.display()
    );
    let s = Sluice::start(&standard_config(&vars, ""));
    let out = ok_stdout(&python(
        SCRIPT,
        &[
            &s.port.to_string(),
            &s.admin_port.to_string(),
            &cert.display().to_string(),
            &key.display().to_string(),
            &cert_a,
            &cert_b,
            &key_b,
        ],
    ));
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines[0], "first is A: True", "{out}");
    assert_eq!(lines[1], "reload: ok", "{out}");
    assert_eq!(lines[2], "second is B: True", "{out}");
    assert_eq!(lines[3], "first still works: True", "{out}");
    assert!(
        lines[4].starts_with(
            "bad reload: TLS reload failed, the current certificates stay: mysql-ssl_cert"
        ),
        "{out}"
    );
    assert_eq!(lines[5], "third is B: True", "{out}");
    assert!(
        s.log().contains("PROXYSQL RELOAD TLS refused"),
        "{}",
        s.log()
    );
}

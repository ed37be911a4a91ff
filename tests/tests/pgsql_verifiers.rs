//! `pgsql_users` passwords stored as SCRAM verifiers (`SCRAM-SHA-256$…`, copied from
//! `pg_authid`): Sluice checks clients against the verifier without knowing the password, and
//! logs in to the server with the ClientKey the client's proof revealed (PgBouncer's way); a
//! verifier with another salt than the server's, or the MD5 method, is refused with the reason.

use sluice_tests::*;
use std::process::Output;

fn psql(port: u16, password: &str, sql: &str) -> Output {
    psql_login(port, "app", password, sql)
}

/// The server's own verifier of `app`, read as the superuser.
fn server_verifier() -> String {
    let script = format!(
        r#"
import psycopg
k = psycopg.connect("host=127.0.0.1 port={port} user=postgres password=postgres dbname=postgres sslmode=disable")
print(k.execute("SELECT rolpassword FROM pg_authid WHERE rolname = 'app'").fetchone()[0])
"#,
        port = ports::PG_PRIMARY
    );
    ok_stdout(&python(&script, &[])).trim().to_string()
}

/// A verifier of `password` with a salt of Sluice's own (not the server's).
fn other_verifier(password: &str) -> String {
    let script = r#"
import base64, hashlib, hmac, os, sys
salt = os.urandom(16)
salted = hashlib.pbkdf2_hmac("sha256", sys.argv[1].encode(), salt, 4096)
ck = hmac.new(salted, b"Client Key", "sha256").digest()
sk = hmac.new(salted, b"Server Key", "sha256").digest()
b = lambda x: base64.b64encode(x).decode()
print(f"SCRAM-SHA-256$4096:{b(salt)}${b(hashlib.sha256(ck).digest())}:{b(sk)}")
"#;
    ok_stdout(&python(script, &[password])).trim().to_string()
}

fn config(password: &str, method: u32) -> String {
    standard_config("", "")
        .replacen(
            "username = \"app\"\npassword = \"app\"\ndefault_hostgroup = 0\n\n[[pgsql_servers]]",
            "username = \"app\"\npassword = \"app\"\ndefault_hostgroup = 0\n\n[pgsql_variables]\ninterfaces = \"127.0.0.1:{pg_port}\"\nauthentication_method = METHOD\n\n[[pgsql_servers]]",
            1,
        )
        .replace("METHOD", &method.to_string())
        .replacen(
            "[[pgsql_users]]\nusername = \"app\"\npassword = \"app\"",
            &format!("[[pgsql_users]]\nusername = \"app\"\npassword = \"{password}\""),
            1,
        )
}

#[test]
fn users_stored_as_scram_verifiers_log_in_and_reach_the_server() {
    if !backends_ready(Servers::Postgres) {
        return;
    }
    let verifier = server_verifier();
    assert!(verifier.starts_with("SCRAM-SHA-256$"), "{verifier}");
    let s = Sluice::start(&config(&verifier, 3));
    // The right password: checked against the verifier, then the server is reached with the
    // recovered key (two statements: the connection is pooled and reused).
    let out = psql(
        s.pg_port,
        "app",
        "SELECT current_user, inet_server_port(); SELECT 42",
    );
    assert_eq!(
        ok_stdout(&out).trim(),
        format!("app|{}\n42", ports::PG_PRIMARY),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let wrong = psql(s.pg_port, "nope", "SELECT 1");
    assert!(
        String::from_utf8_lossy(&wrong.stderr).contains("password authentication failed"),
        "{}",
        String::from_utf8_lossy(&wrong.stderr)
    );
}

#[test]
fn a_verifier_the_server_does_not_share_or_the_md5_method_is_refused_with_the_reason() {
    if !backends_ready(Servers::Postgres) {
        return;
    }
    // The client's password is right, but the server's salt differs: the server login fails.
    let s = Sluice::start(&config(&other_verifier("app"), 3));
    let out = psql(s.pg_port, "app", "SELECT 1");
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(
        !out.status.success(),
        "logged in to the server with a foreign verifier"
    );
    assert!(err.contains("pg_authid"), "{err}");
    drop(s);
    // MD5 cannot check a verifier.
    let s = Sluice::start(&config(&server_verifier(), 2));
    let out = psql(s.pg_port, "app", "SELECT 1");
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(err.contains("stored as a SCRAM verifier"), "{err}");
}

/// `md5` + md5(password + user), as `pg_authid` and PgBouncer's userlist.txt hold MD5 users.
const APP_MD5: &str = "md5fe63fea7be31b0200b496d08bc6b517d";

#[test]
fn users_stored_as_md5_hashes_log_in_with_cleartext_and_scram_is_refused_with_the_reason() {
    if !backends_ready(Servers::Postgres) {
        return;
    }
    // Cleartext: the password is checked against the hash and then known, so the server's SCRAM
    // login works.
    let s = Sluice::start(&config(APP_MD5, 1));
    let out = psql(s.pg_port, "app", "SELECT current_user, inet_server_port()");
    assert_eq!(ok_stdout(&out).trim(), format!("app|{}", ports::PG_PRIMARY));
    let wrong = psql(s.pg_port, "nope", "SELECT 1");
    assert!(!wrong.status.success(), "a wrong password logged in");
    let the_hash = psql(s.pg_port, APP_MD5, "SELECT 1");
    assert!(
        !the_hash.status.success(),
        "the stored hash itself logged in as a password"
    );
    drop(s);
    // SCRAM cannot check an MD5 hash: refused with the reason, not a bare failure.
    let s = Sluice::start(&config(APP_MD5, 3));
    let out = psql(s.pg_port, "app", "SELECT 1");
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(err.contains("stored as an MD5 hash"), "{err}");
}

//! Rust's tokio-postgres through Sluice's PostgreSQL port, over plaintext and over TLS (trusting
//! the certificate Sluice generated in its datadir): extended protocol with binary results,
//! prepared statements reused across pooled connections, transactions.

use rustls::pki_types::CertificateDer;
use rustls::pki_types::pem::PemObject;
use sluice_tests::*;
use std::sync::Arc;
use tokio_postgres::{Client, NoTls};

fn conninfo(port: u16) -> String {
    format!("host=127.0.0.1 port={port} user=app password=app dbname=app")
}

fn tls_connector(s: &Sluice) -> tokio_postgres_rustls::MakeRustlsConnect {
    let pem = std::fs::read(s.dir.join("data/sluice-cert.pem")).expect("generated certificate");
    let mut roots = rustls::RootCertStore::empty();
    for cert in CertificateDer::pem_slice_iter(&pem) {
        roots.add(cert.expect("PEM")).expect("root");
    }
    let config = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .expect("TLS versions")
    .with_root_certificates(roots)
    .with_no_client_auth();
    tokio_postgres_rustls::MakeRustlsConnect::new(config)
}

/// DDL, DML and SELECT with parameters; returns what a user would check.
async fn workload(c: &mut Client, table: &str) -> (i32, i64, Vec<String>) {
    let port: i32 = c
        .query_one("SELECT inet_server_port()", &[])
        .await
        .expect("port")
        .get(0);
    c.batch_execute(&format!(
        "DROP TABLE IF EXISTS {table}; CREATE TABLE {table} (id int PRIMARY KEY, v text)"
    ))
    .await
    .expect("ddl");
    let insert = c
        .prepare(&format!("INSERT INTO {table} VALUES ($1, $2)"))
        .await
        .expect("prepare");
    for i in 0..20 {
        c.execute(&insert, &[&i, &format!("v{i}")])
            .await
            .expect("insert");
    }
    let tx = c.transaction().await.expect("begin");
    tx.execute(&format!("DELETE FROM {table} WHERE id >= $1"), &[&18i32])
        .await
        .expect("delete");
    tx.commit().await.expect("commit");
    let count: i64 = c
        .query_one(&format!("SELECT count(*) FROM {table}"), &[])
        .await
        .expect("count")
        .get(0);
    let rows = c
        .query(
            &format!("SELECT v FROM {table} WHERE id < $1 ORDER BY id"),
            &[&3i32],
        )
        .await
        .expect("select");
    (port, count, rows.iter().map(|r| r.get(0)).collect())
}

#[tokio::test]
async fn tokio_postgres_over_plaintext_and_tls() {
    if !backends_ready(Servers::Postgres) {
        return;
    }
    // Two server connections for everything: statements prepared once are re-parsed on
    // whichever connection later transactions land on.
    let cfg = standard_config("", "").replacen(
        &format!("port = {}\n", ports::PG_PRIMARY),
        &format!("port = {}\nmax_connections = 2\n", ports::PG_PRIMARY),
        1,
    );
    let s = Sluice::start(&cfg);
    let expected = (15432, 18, vec!["v0".to_string(), "v1".into(), "v2".into()]);

    let (mut plain, conn) = tokio_postgres::connect(&conninfo(s.pg_port), NoTls)
        .await
        .expect("plaintext connect");
    tokio::spawn(conn);
    assert_eq!(workload(&mut plain, "tp_plain").await, expected);

    let (mut tls, conn) = tokio_postgres::connect(
        &format!("{} sslmode=require", conninfo(s.pg_port)),
        tls_connector(&s),
    )
    .await
    .expect("TLS connect");
    tokio::spawn(conn);
    assert_eq!(workload(&mut tls, "tp_tls").await, expected);

    // A statement prepared on one session keeps working while both sessions interleave.
    let stmt = plain.prepare("SELECT $1::int + 1").await.expect("prepare");
    for i in 0..10i32 {
        let _: i32 = tls
            .query_one("SELECT $1::int", &[&i])
            .await
            .expect("tls")
            .get(0);
        let v: i32 = plain.query_one(&stmt, &[&i]).await.expect("reuse").get(0);
        assert_eq!(v, i + 1);
    }
    assert!(s.log().contains("tls=true"), "{}", s.log());
}

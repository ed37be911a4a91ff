//! The MySQL compressed protocol, per leg: `mariadb --compress`, mysql_async with compression and
//! MariaDB Connector/J `useCompression=true` through Sluice, with compressed and uncompressed
//! backend connections (`mysql_servers.compression`), large results and packets that straddle
//! the 16 MiB packet boundary.

use mysql_async::prelude::*;
use sluice_tests::*;

/// The standard config with hostgroup 0's server at `compression` (0 or 1).
fn config(compression: u8) -> String {
    standard_config("", "").replacen(
        &format!("port = {}\n", ports::MY_PRIMARY),
        &format!(
            "port = {}\ncompression = {compression}\n",
            ports::MY_PRIMARY
        ),
        1,
    )
}

/// stdout of a successful mariadb CLI run; on failure only the end of its stderr is shown (it
/// echoes the 17 MiB statement).
fn cli_ok(out: &std::process::Output) -> String {
    let err = String::from_utf8_lossy(&out.stderr);
    let tail = &err[err.len().saturating_sub(400)..];
    assert!(out.status.success(), "mariadb failed: …{tail}");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// 10 MiB of rows, a 17 MiB value (two packets: 16 MiB - 1 and the rest) and a 17 MiB query
/// from the client, checked by their lengths and checksums.
const BIG: &str = "SELECT COUNT(*), SUM(LENGTH(v)) FROM (SELECT REPEAT('r', 1024) AS v FROM mysql.seq_1_to_10240) t;\n\
     SELECT LENGTH(REPEAT('a', 17825792)), MD5(REPEAT('a', 17825792)) = MD5(CONCAT(REPEAT('a', 16777215), REPEAT('a', 1048577)));\n";

#[test]
fn mariadb_cli_compress_with_both_kinds_of_backend() {
    if !backends_ready(Servers::MariaDb) {
        return;
    }
    for backend in [0, 1] {
        let s = Sluice::start(&config(backend));
        let big_literal = format!("SELECT LENGTH('{}');\n", "q".repeat(17 << 20));
        let sql = format!(
            "{BIG}{big_literal}SHOW SESSION STATUS LIKE 'Compression';\nSELECT REPEAT('z', 10485760) = REPEAT('z', 10485760);\n"
        );
        let out = cli_ok(&mariadb(
            s.port,
            "app",
            "app",
            &["--skip-ssl", "--compress", "--max-allowed-packet=64M"],
            &sql,
        ));
        let lines: Vec<&str> = out.lines().collect();
        assert_eq!(
            lines,
            [
                "10240\t10485760",
                "17825792\t1",
                &(17 << 20).to_string(),
                if backend == 1 {
                    "Compression\tON"
                } else {
                    "Compression\tOFF"
                },
                "1",
            ],
            "backend compression={backend}"
        );
        let log = s.log();
        assert!(
            log.contains("client logged in") && log.contains("compressed=true"),
            "{log}"
        );
    }
}

#[test]
fn uncompressed_client_on_a_compressed_backend() {
    if !backends_ready(Servers::MariaDb) {
        return;
    }
    let s = Sluice::start(&config(1));
    let out = cli_ok(&mariadb(
        s.port,
        "app",
        "app",
        &["--skip-ssl", "--max-allowed-packet=64M"],
        &format!("{BIG}SHOW SESSION STATUS LIKE 'Compression';\n"),
    ));
    assert_eq!(
        out,
        "10240\t10485760\n17825792\t1\nCompression\tON\n",
        "{}",
        s.log()
    );
    assert!(s.log().contains("compressed=false"));
}

#[tokio::test]
async fn mysql_async_with_compression() {
    if !backends_ready(Servers::MariaDb) {
        return;
    }
    let s = Sluice::start(&config(0));
    let url = format!(
        "{}&compression=fast&max_allowed_packet=67108864",
        s.url("app", "app", "")
    );
    let mut c = mysql_async::Conn::from_url(url).await.expect("connect");
    let (n, total): (u64, u64) = c
        .query_first(
            "SELECT COUNT(*), SUM(LENGTH(v)) FROM (SELECT REPEAT('r', 1024) AS v FROM mysql.seq_1_to_10240) t",
        )
        .await
        .expect("query")
        .expect("row");
    assert_eq!((n, total), (10240, 10 << 20));
    let big: Vec<u8> = c
        .exec_first("SELECT REPEAT('b', ?)", (17_000_000u32,))
        .await
        .expect("prepared")
        .expect("row");
    assert_eq!(big.len(), 17_000_000);
    assert!(big.iter().all(|b| *b == b'b'));
    let echoed: u64 = c
        .exec_first("SELECT LENGTH(?)", (vec![7u8; 17 << 20],))
        .await
        .expect("long parameter")
        .expect("row");
    assert_eq!(echoed, 17 << 20);
    c.disconnect().await.expect("disconnect");
}

#[test]
fn connector_j_use_compression() {
    if !backends_ready(Servers::MariaDb) {
        return;
    }
    let s = Sluice::start(&config(1));
    let out = java(
        xtask::packages::MARIADB_JDBC_JAR,
        "MariaDbCompression.java",
        &[s.port.to_string()],
        &s.log(),
    );
    assert_eq!(out, "rows 10240 bytes 10485760\nok\n");
    assert!(s.log().contains("compressed=true"));
}

//! sysbench oltp_read_write through Sluice, with server-side prepared statements (sysbench's
//! default) and with the text protocol.

use sluice_tests::*;

/// The suite's sysbench tables.
const SBTEST: (&str, u32, u32) = ("sbtest", 4, 10000);

#[test]
fn oltp_read_write_with_and_without_prepared_statements() {
    if !backends_ready(Servers::MariaDb) {
        return;
    }
    let _ = sysbench(ports::MY_PRIMARY, SBTEST, "oltp_read_write", &[], "cleanup");
    ok_stdout(&sysbench(
        ports::MY_PRIMARY,
        SBTEST,
        "oltp_read_write",
        &[],
        "prepare",
    ));
    let s = Sluice::start(&standard_config("", ""));
    for mode in [&["--db-ps-mode=auto"][..], &["--db-ps-mode=disable"][..]] {
        let mut args = vec!["--threads=8", "--time=20", "--report-interval=0"];
        args.extend_from_slice(mode);
        let out = sysbench(s.port, SBTEST, "oltp_read_write", &args, "run");
        let text = ok_stdout(&out);
        assert!(!text.contains("FATAL"), "{mode:?}:\n{text}");
        let tx_line = text
            .lines()
            .find(|l| l.contains("transactions:"))
            .unwrap_or_default();
        let tx: u64 = tx_line
            .split_whitespace()
            .nth(1)
            .and_then(|n| n.parse().ok())
            .unwrap_or(0);
        assert!(tx > 100, "{mode:?}: too few transactions:\n{text}");
        eprintln!("sysbench {mode:?} through sluice: {tx_line}");
    }
    let log = s.log();
    assert!(
        !log.contains("Lost connection") && !log.contains("backend connection lost"),
        "{log}"
    );

    // 64 client threads, prepared statements on, through a server capped at 16 connections.
    let capped = capped_config(16, "", "");
    let s = Sluice::start(&capped);
    let out = sysbench(
        s.port,
        SBTEST,
        "oltp_read_write",
        &["--threads=64", "--time=20", "--report-interval=0"],
        "run",
    );
    let text = ok_stdout(&out);
    assert!(
        !text.contains("FATAL"),
        "64 threads on 16 connections:\n{text}"
    );
    eprintln!(
        "sysbench 64 threads / 16 backend connections: {}",
        text.lines()
            .find(|l| l.contains("transactions:"))
            .unwrap_or_default()
    );
}

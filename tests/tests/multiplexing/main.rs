//! Multiplexing: many clients on few backend connections; session state follows a client to
//! another backend connection; every pin cause keeps the connection and lets it go when it ends.

use mysql_async::prelude::*;
use mysql_async::{Conn, Opts};
use sluice_tests::*;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

mod pins;

async fn conn(s: &Sluice, user: &str) -> Conn {
    let opts = Opts::from_url(&s.url(user, user, "app")).expect("url");
    Conn::new(opts).await.expect("connect through sluice")
}

/// Waits until no server connection is in use. A session hands its connection back just after
/// the reply reached the client, so a test's next statement on another session can come first.
fn wait_all_released(s: &Sluice) {
    let released = xtask::proc::wait_until(Duration::from_secs(5), || {
        s.admin_ok("SELECT SUM(ConnUsed) FROM stats_mysql_connection_pool")
            .trim()
            == "0"
    });
    assert!(released, "connections went back to the pool");
}

async fn conn_id(c: &mut Conn) -> u64 {
    c.query_first(BACKEND_THREAD_ID)
        .await
        .expect("id")
        .expect("row")
}

fn make_user(name: &str) {
    primary_root(&format!(
        "CREATE USER IF NOT EXISTS '{name}'@'%' IDENTIFIED BY '{name}'; GRANT ALL ON *.* TO '{name}'@'%'; \
         REVOKE READ_ONLY ADMIN ON *.* FROM '{name}'@'%';"
    ));
}

fn user_table(name: &str) -> String {
    format!(
        "[[mysql_users]]\nusername = \"{name}\"\npassword = \"{name}\"\ndefault_hostgroup = 0\n"
    )
}

fn backend_conns_of(user: &str) -> u64 {
    primary_root(&format!(
        "SELECT COUNT(*) FROM information_schema.processlist WHERE user = '{user}';"
    ))
    .trim()
    .parse()
    .unwrap_or(0)
}

const STAGE_CONNECT: u64 = 1;
const STAGE_DISCONNECT: u64 = 2;
const STAGE_DONE: u64 = 3;
/// Query `n` of a client is stage `STAGE_QUERY + n`.
const STAGE_QUERY: u64 = 10;

fn stage_name(stage: u64) -> String {
    match stage {
        STAGE_CONNECT => "connect".into(),
        STAGE_DISCONNECT => "disconnect".into(),
        n if n >= STAGE_QUERY => format!("query {}", n - STAGE_QUERY),
        n => format!("stage {n}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn five_hundred_clients_share_twenty_backend_connections() {
    if !backends_ready(Servers::MariaDb) {
        return;
    }
    make_user("mux500");
    // Two workers accept 500 simultaneous connects slowly enough to overflow a short listen
    // backlog: with the kernel's default of 128, about one run in two left clients waiting
    // forever for their greeting (SYN cookies, handshakes dropped).
    let s = Sluice::start(&capped_config(20, "threads = 2", &user_table("mux500")));
    let opts = Opts::from_url(&s.url("mux500", "mux500", "app")).expect("url");
    let ok = Arc::new(AtomicU64::new(0));
    let errors = Arc::new(AtomicU64::new(0));
    // Where each client is, so that a client that never finishes is named with its step.
    let stages: Arc<Vec<AtomicU64>> = Arc::new((0..500).map(|_| AtomicU64::new(0)).collect());
    let start = Instant::now();
    let mut tasks = Vec::new();
    for i in 0..500u64 {
        let (opts, ok, errors, stages) = (opts.clone(), ok.clone(), errors.clone(), stages.clone());
        tasks.push(tokio::spawn(async move {
            let stage = &stages[i as usize];
            stage.store(STAGE_CONNECT, Ordering::Relaxed);
            let mut c = match Conn::new(opts).await {
                Ok(c) => c,
                Err(e) => {
                    eprintln!("client {i}: connect failed: {e}");
                    errors.fetch_add(1, Ordering::Relaxed);
                    stage.store(STAGE_DONE, Ordering::Relaxed);
                    return;
                }
            };
            // Every client runs ten autocommit selects, spread over about three seconds (the
            // 60 s bound on the whole run is the watchdog below).
            let mut n = 0;
            while n < 10 {
                stage.store(STAGE_QUERY + n, Ordering::Relaxed);
                match c.query_first::<u64, _>(format!("SELECT {i} + {n}")).await {
                    Ok(Some(v)) if v == i + n => {
                        ok.fetch_add(1, Ordering::Relaxed);
                    }
                    other => {
                        eprintln!("client {i}: {other:?}");
                        errors.fetch_add(1, Ordering::Relaxed);
                    }
                }
                n += 1;
                tokio::time::sleep(Duration::from_millis(300)).await;
            }
            stage.store(STAGE_DISCONNECT, Ordering::Relaxed);
            let _ = c.disconnect().await;
            stage.store(STAGE_DONE, Ordering::Relaxed);
        }));
    }
    let mut peak = 0;
    while tasks.iter().any(|t| !t.is_finished()) && start.elapsed() < Duration::from_secs(60) {
        let sample = tokio::task::spawn_blocking(|| backend_conns_of("mux500"));
        match tokio::time::timeout(Duration::from_secs(10), sample).await {
            Ok(Ok(n)) => peak = peak.max(n),
            other => panic!("counting MariaDB's connections did not answer: {other:?}"),
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let stuck: Vec<String> = stages
        .iter()
        .enumerate()
        .filter(|(_, s)| s.load(Ordering::Relaxed) != STAGE_DONE)
        .map(|(i, s)| format!("client {i} at {}", stage_name(s.load(Ordering::Relaxed))))
        .collect();
    assert!(
        stuck.is_empty(),
        "{} client(s) unfinished after 60s: {}\nlog:\n{}",
        stuck.len(),
        stuck
            .iter()
            .take(20)
            .cloned()
            .collect::<Vec<_>>()
            .join(", "),
        s.log()
    );
    for t in tasks {
        t.await.expect("client task");
    }
    let (ok, errors) = (ok.load(Ordering::Relaxed), errors.load(Ordering::Relaxed));
    eprintln!("500 clients: {ok} queries, {errors} errors, peak backend connections {peak}");
    assert_eq!(errors, 0, "log:\n{}", s.log());
    assert_eq!(ok, 5000);
    assert!(
        peak > 0 && peak <= 20,
        "backend connections seen on MariaDB: {peak}"
    );
}

/// Each case: a statement that sets session state, and a query whose first column shows it.
const STATE_CASES: &[(&str, &str, &str)] = &[
    (
        "SET sql_mode = 'ANSI_QUOTES'",
        "SELECT @@sql_mode",
        "ANSI_QUOTES",
    ),
    (
        "SET SESSION sql_mode = CONCAT('NO_ZERO_DATE', ',', 'ANSI_QUOTES')",
        "SELECT @@sql_mode",
        "ANSI_QUOTES,NO_ZERO_DATE",
    ),
    (
        "SET time_zone = 'America/Argentina/Buenos_Aires'",
        "SELECT @@time_zone",
        "America/Argentina/Buenos_Aires",
    ),
    (
        "SET time_zone = 'America/Port-au-Prince'",
        "SELECT @@session.time_zone",
        "America/Port-au-Prince",
    ),
    (
        "SET @@session.time_zone = '-03:00'",
        "SELECT @@time_zone",
        "-03:00",
    ),
    (
        "SET NAMES latin1 COLLATE latin1_german1_ci",
        "SELECT @@collation_connection",
        "latin1_german1_ci",
    ),
    (
        "SET NAMES utf8mb4",
        "SELECT @@character_set_results",
        "utf8mb4",
    ),
    (
        "SET CHARACTER SET latin1",
        "SELECT @@character_set_client",
        "latin1",
    ),
    (
        "SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED",
        "SELECT @@tx_isolation",
        "READ-COMMITTED",
    ),
    ("SET sql_select_limit = 3", "SELECT @@sql_select_limit", "3"),
    (
        "SET max_statement_time = 7",
        "SELECT @@max_statement_time",
        "7.000000",
    ),
    (
        "SET LOCAL sql_auto_is_null = 1",
        "SELECT @@sql_auto_is_null",
        "1",
    ),
    (
        "SET SESSION foreign_key_checks = 0, LOCAL unique_checks = 0, @@session.group_concat_max_len = 4096",
        "SELECT CONCAT(@@foreign_key_checks, @@unique_checks, @@group_concat_max_len)",
        "OFFOFF4096",
    ),
    ("USE mysql", "SELECT DATABASE()", "mysql"),
];

#[tokio::test]
async fn session_state_follows_the_client_to_another_backend_connection() {
    if !backends_ready(Servers::MariaDb) {
        return;
    }
    // One session thread: A and B draw on one idle list, so B's checkout takes the connection A
    // released last (with two threads, B would take an idle one of its own thread first).
    let s = Sluice::start(&capped_config(2, "threads = 1", ""));
    let mut direct = Conn::from_url(format!(
        "mysql://app:app@127.0.0.1:{}/app?prefer_socket=false",
        ports::MY_PRIMARY
    ))
    .await
    .expect("direct");
    for (set, check, want) in STATE_CASES {
        let mut a = conn(&s, "app").await;
        let mut b = conn(&s, "app").await;
        // The connectors' own first queries may still be handing connections back: wait, so
        // that the connection A uses below is the last one returned.
        wait_all_released(&s);
        a.query_drop(*set)
            .await
            .unwrap_or_else(|e| panic!("{set}: {e}"));
        let first = conn_id(&mut a).await;
        wait_all_released(&s);
        // B takes the connection A just released and holds it in a transaction...
        b.query_drop("BEGIN").await.expect("begin");
        let held = conn_id(&mut b).await;
        assert_eq!(
            held, first,
            "B reuses A's released connection (pool is LIFO)"
        );
        // ...so A's next statement runs on the other backend connection.
        let (value, moved): (String, u64) = a
            .query_first(format!("SELECT ({check}), CONNECTION_ID()"))
            .await
            .expect("check")
            .expect("row");
        assert_ne!(
            moved, first,
            "{set}: A must have moved to another backend connection"
        );
        assert_eq!(
            value, *want,
            "{set}: the client sees its own value after the move"
        );
        b.query_drop("ROLLBACK").await.expect("rollback");
        a.disconnect().await.expect("disconnect");
        // A fresh client sees the server's defaults, not what A left on the connections.
        let mut c = conn(&s, "app").await;
        let mut d = conn(&s, "app").await;
        d.query_drop("BEGIN").await.expect("hold one");
        let seen: Option<String> = c.query_first(*check).await.expect("fresh check");
        let direct_value: Option<String> = direct.query_first(*check).await.expect("direct check");
        if !check.contains("DATABASE()") {
            assert_eq!(
                seen, direct_value,
                "{set}: a new session starts from the defaults"
            );
        } else {
            assert_eq!(seen.as_deref(), Some("app"));
        }
        d.query_drop("ROLLBACK").await.expect("rollback");
        for x in [b, c, d] {
            x.disconnect().await.expect("disconnect");
        }
    }
}

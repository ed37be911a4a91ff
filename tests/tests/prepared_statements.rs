//! Server-side prepared statements under multiplexing: they survive a change of backend
//! connection, and many clients preparing the same statements never exhaust the server's
//! `max_prepared_stmt_count`. (Its own test binary: it changes a global server variable.)

use mysql_async::prelude::*;
use mysql_async::{Conn, Opts};
use sluice_tests::*;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

#[tokio::test]
async fn statements_follow_the_client_across_backend_connections() {
    if !backends_ready(Servers::MariaDb) {
        return;
    }
    primary_root(
        "CREATE TABLE IF NOT EXISTS app.ps_t (id INT PRIMARY KEY, name VARCHAR(20)); REPLACE INTO app.ps_t VALUES (1,'one'),(2,'two'),(3,'three');",
    );
    // One session thread, so both clients draw on one idle list: a checkout takes the most
    // recently used connection there, and B, taking one while A is idle, takes A's last one.
    let s = Sluice::start(&capped_config(2, "threads = 1", ""));
    let opts = Opts::from_url(&s.url("app", "app", "app")).expect("url");
    let mut a = Conn::new(opts.clone()).await.expect("a");
    let mut b = Conn::new(opts).await.expect("b");
    let by_id = a
        .prep("SELECT name FROM ps_t WHERE id = ?")
        .await
        .expect("prepare 1");
    let add = a.prep("SELECT ? + ?").await.expect("prepare 2");
    let mut last_conn: Option<u64> = None;
    for round in 0..10u64 {
        // Every other round B holds the connection A used last, so A moves.
        let hold = round % 2 == 1;
        let mut held_by_b = None;
        if hold {
            b.query_drop("BEGIN").await.expect("begin");
            held_by_b = b.query_first(BACKEND_THREAD_ID).await.expect("b's id");
        }
        let id = 1 + round % 3;
        let name: Option<String> = a.exec_first(&by_id, (id,)).await.expect("execute 1");
        let want = ["one", "two", "three"][(id - 1) as usize];
        assert_eq!(name.as_deref(), Some(want), "round {round}");
        let sum: Option<u64> = a
            .exec_first(&add, (round, 100u64))
            .await
            .expect("execute 2");
        assert_eq!(sum, Some(round + 100));
        let cid: u64 = a
            .query_first(BACKEND_THREAD_ID)
            .await
            .expect("id")
            .expect("row");
        if hold {
            assert_eq!(
                held_by_b, last_conn,
                "round {round}: B did not take the connection A used last"
            );
            assert_ne!(
                Some(cid),
                last_conn,
                "round {round}: A stayed on connection {cid} while B held it"
            );
            b.query_drop("ROLLBACK").await.expect("rollback");
        }
        last_conn = Some(cid);
    }
    a.close(by_id).await.expect("close");
    a.close(add).await.expect("close");
}

/// Restores the server's `max_prepared_stmt_count` when the test ends, even when it fails.
struct RestoreLimit(String);

impl Drop for RestoreLimit {
    fn drop(&mut self) {
        primary_root(&format!("SET GLOBAL max_prepared_stmt_count = {};", self.0));
    }
}

async fn run_clients(url: String, clients: u64) -> (u64, u64) {
    let ok = Arc::new(AtomicU64::new(0));
    let errors = Arc::new(AtomicU64::new(0));
    let mut tasks = Vec::new();
    for i in 0..clients {
        let (url, ok, errors) = (url.clone(), ok.clone(), errors.clone());
        tasks.push(tokio::spawn(async move {
            let r: Result<(), mysql_async::Error> = async {
                let mut c = Conn::new(Opts::from_url(&url).expect("url")).await?;
                let s1 = c.prep("SELECT ? + 1").await?;
                let s2 = c.prep("SELECT CONCAT(?, 'x')").await?;
                let s3 = c.prep("SELECT COUNT(*) FROM app.ps_t WHERE id > ?").await?;
                // Hold the statements open together, as an application's statement cache does.
                tokio::time::sleep(std::time::Duration::from_millis(200)).await;
                for _ in 0..3 {
                    let v: Option<u64> = c.exec_first(&s1, (i,)).await?;
                    assert_eq!(v, Some(i + 1));
                    let t: Option<String> = c.exec_first(&s2, ("a",)).await?;
                    assert_eq!(t.as_deref(), Some("ax"));
                    let n: Option<u64> = c.exec_first(&s3, (1,)).await?;
                    assert_eq!(n, Some(2));
                }
                c.disconnect().await?;
                Ok(())
            }
            .await;
            match r {
                Ok(()) => ok.fetch_add(1, Ordering::Relaxed),
                Err(e) => {
                    if errors.fetch_add(1, Ordering::Relaxed) < 3 {
                        eprintln!("client {i}: {e}");
                    }
                    0
                }
            };
        }));
    }
    for t in tasks {
        t.await.expect("client task");
    }
    (ok.load(Ordering::Relaxed), errors.load(Ordering::Relaxed))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn many_clients_never_exhaust_max_prepared_stmt_count() {
    // Lowers the server's max_prepared_stmt_count, which every test that prepares needs: it
    // runs alone.
    if !backends_exclusive(Servers::MariaDb) {
        return;
    }
    primary_root(
        "CREATE TABLE IF NOT EXISTS app.ps_t (id INT PRIMARY KEY, name VARCHAR(20)); REPLACE INTO app.ps_t VALUES (1,'one'),(2,'two'),(3,'three');",
    );
    let before = primary_root("SELECT @@global.max_prepared_stmt_count;")
        .trim()
        .to_string();
    let _restore = RestoreLimit(before);
    primary_root("SET GLOBAL max_prepared_stmt_count = 64;");

    // Control: 200 clients straight to MariaDB need 600 statements and hit the limit.
    let direct = format!(
        "mysql://app:app@127.0.0.1:{}/app?prefer_socket=false",
        ports::MY_PRIMARY
    );
    let (_, direct_errors) = run_clients(direct, 200).await;
    assert!(direct_errors > 0, "the limit must bind for the control run");
    // Failed clients close their connections in the background; wait until the server has
    // released their statements.
    let drained = xtask::proc::wait_until(std::time::Duration::from_secs(20), || {
        prepared_on_server() == 0
    });
    assert!(
        drained,
        "statements of the control run still held: {}",
        prepared_on_server()
    );

    // Through Sluice: at most 8 backend connections x 3 statements each.
    let s = Sluice::start(&capped_config(8, "", ""));
    let (ok, errors) = run_clients(s.url("app", "app", "app"), 200).await;
    assert_eq!((ok, errors), (200, 0), "log:\n{}", s.log());
    let held = prepared_on_server();
    assert!(held <= 24, "statements held on the server: {held}");
}

fn prepared_on_server() -> u64 {
    primary_root("SELECT VARIABLE_VALUE FROM information_schema.global_status WHERE VARIABLE_NAME = 'PREPARED_STMT_COUNT';")
        .trim()
        .parse()
        .unwrap_or(u64::MAX)
}

/// A connection reset on its way back to the pool (its session held pinned state) forgets its
/// prepared statements and session variables on the server: Sluice's record of it must too, or
/// the next session runs a statement id that no longer exists (MariaDB Connector/J threads on a
/// small pool found it).
#[tokio::test]
async fn a_reset_connection_forgets_its_prepared_statements_and_variables() {
    if !backends_ready(Servers::MariaDb) {
        return;
    }
    let s = Sluice::start(&capped_config(1, "", ""));
    let url = s.url("app", "app", "app");
    let mut a = Conn::new(Opts::from_url(&url).expect("url"))
        .await
        .expect("a");
    let n: i64 = a
        .exec_first("SELECT ? + 1", (41,))
        .await
        .expect("a exec")
        .expect("row");
    assert_eq!(n, 42);
    a.query_drop("SET SESSION sql_mode = 'ANSI_QUOTES'")
        .await
        .expect("set");
    // A user variable pins the session; leaving resets the connection before it is pooled.
    a.query_drop("SET @pin = 1").await.expect("pin");
    a.disconnect().await.expect("disconnect");
    let mut b = Conn::new(Opts::from_url(&url).expect("url"))
        .await
        .expect("b");
    let n: i64 = b
        .exec_first("SELECT ? + 1", (1,))
        .await
        .expect("b exec on the reset connection")
        .expect("row");
    assert_eq!(n, 2);
    b.query_drop("SET SESSION sql_mode = 'ANSI_QUOTES'")
        .await
        .expect("set");
    let mode: String = b
        .query_first("SELECT @@sql_mode")
        .await
        .expect("mode")
        .expect("row");
    assert_eq!(
        mode, "ANSI_QUOTES",
        "b's own SET is in force on the reset connection"
    );
    b.disconnect().await.expect("disconnect");
}

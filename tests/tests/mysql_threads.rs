//! MySQL sessions run on `mysql-threads` event-loop threads (ProxySQL's worker model): the
//! threads exist under their names (one per CPU but one by default), the processlist shows each
//! session's thread, one server connection serves sessions on different threads in turn
//! without carrying one client's state to the other, and a stop lets statements in flight on
//! the threads finish.

use mysql_async::prelude::*;
use sluice_tests::*;

/// The MySQL session threads' names, once `n` of them run.
fn my_threads(s: &Sluice, n: usize) -> Vec<String> {
    session_threads(s, "sluice-my-", n)
}

fn runtime_variable(s: &Sluice, name: &str) -> String {
    s.admin_ok(&format!(
        "SELECT variable_value FROM runtime_global_variables WHERE variable_name = '{name}'"
    ))
    .trim()
    .to_string()
}

async fn connect(s: &Sluice) -> mysql_async::Conn {
    let opts = mysql_async::Opts::from_url(&s.url("app", "app", "app")).expect("url");
    mysql_async::Conn::new(opts)
        .await
        .expect("connect through sluice")
}

#[test]
fn both_protocols_run_one_session_thread_per_cpu_but_one_by_default() {
    if !backends_ready(Servers::MariaDb) {
        return;
    }
    let s = Sluice::start(&standard_config("", ""));
    let cpus = std::thread::available_parallelism().map_or(1, usize::from);
    let threads = cpus.saturating_sub(1).max(1);
    for (prefix, variable) in [
        ("sluice-my-", "mysql-threads"),
        ("sluice-pg-", "pgsql-threads"),
    ] {
        let want: Vec<String> = (0..threads).map(|i| format!("{prefix}{i}")).collect();
        let mut got = session_threads(&s, prefix, threads);
        got.sort_by_key(|n| n.len());
        assert_eq!(got, want);
        assert_eq!(runtime_variable(&s, variable), "0");
    }
}

#[tokio::test]
async fn sessions_on_two_threads_share_one_server_connection_and_not_their_state() {
    if !backends_ready(Servers::MariaDb) {
        return;
    }
    let s = Sluice::start(&capped_config(1, "threads = 2", ""));
    assert_eq!(my_threads(&s, 2), ["sluice-my-0", "sluice-my-1"]);
    assert_eq!(runtime_variable(&s, "mysql-threads"), "2");

    // Sessions are dealt to the threads in turn: these two run on different threads (the
    // processlist's ThreadID says which), and the one server connection serves both.
    let mut a = connect(&s).await;
    let mut b = connect(&s).await;
    // (The harness's readiness probe took a turn already, so which comes first is not fixed.)
    let threads = s.admin_ok("SELECT ThreadID FROM stats_mysql_processlist ORDER BY ThreadID");
    assert_eq!(threads.split_whitespace().collect::<Vec<_>>(), ["0", "1"]);

    let mut ids = std::collections::BTreeSet::new();
    for i in 0..20u32 {
        if i == 0 {
            a.query_drop("SET time_zone = '+03:00'")
                .await
                .expect("set on a");
        }
        let (c, want) = if i % 2 == 0 {
            (&mut a, "+03:00")
        } else {
            (&mut b, "SYSTEM")
        };
        let row: (u64, String, u32) = c
            .exec_first("SELECT CONNECTION_ID(), @@session.time_zone, ? + 1", (i,))
            .await
            .expect("query")
            .expect("a row");
        assert_eq!((row.1.as_str(), row.2), (want, i + 1), "turn {i}");
        ids.insert(row.0);
    }
    assert_eq!(ids.len(), 1, "one server connection: {ids:?}");

    // Both at once: each waits its turn for the connection, none fails, neither sees the
    // other's time zone.
    let run = |mut c: mysql_async::Conn, want: &'static str| async move {
        for i in 0..200u32 {
            let row: (String, u32) = c
                .exec_first("SELECT @@session.time_zone, ? * 2", (i,))
                .await
                .expect("concurrent query")
                .expect("a row");
            assert_eq!((row.0.as_str(), row.1), (want, i * 2));
        }
        c
    };
    let (a, b) = tokio::join!(
        tokio::spawn(run(a, "+03:00")),
        tokio::spawn(run(b, "SYSTEM"))
    );
    let mut a = a.expect("client a");
    b.expect("client b").disconnect().await.expect("quit b");
    // (A bare `SELECT CONNECTION_ID()` is answered by Sluice with the session's own id.)
    let id: Option<u64> = a
        .exec_first("SELECT CONNECTION_ID() + ?", (0,))
        .await
        .expect("id");
    assert!(
        id.is_some_and(|id| ids.contains(&id)),
        "still the same server connection: {id:?} {ids:?}\n{}",
        s.log()
    );
    a.disconnect().await.expect("quit a");
}

/// The id of the server connection serving `c`'s next statement (prepared, so the server
/// answers it, not Sluice).
async fn server_id(c: &mut mysql_async::Conn) -> u64 {
    c.exec_first("SELECT CONNECTION_ID() + ?", (0,))
        .await
        .expect("query")
        .expect("a row")
}

#[tokio::test]
async fn a_session_takes_the_idle_connection_of_its_own_thread() {
    if !backends_ready(Servers::MariaDb) {
        return;
    }
    let s = Sluice::start(&capped_config(2, "threads = 2", ""));
    my_threads(&s, 2);
    let mut a = connect(&s).await;
    let mut b = connect(&s).await;
    // The clients' own start-up queries are done once no connection is in use any more (a
    // session gives its connection back just after its reply is sent). Then a holds one in a
    // transaction, an idle one opened on a's thread if there is one, while b needs one: b's
    // thread opens its own.
    wait_for("the start-up queries' connections back in the pool", || {
        s.admin_ok("SELECT SUM(ConnUsed) FROM stats_mysql_connection_pool")
            .trim()
            == "0"
    });
    a.query_drop("BEGIN").await.expect("begin");
    let on_a = server_id(&mut a).await;
    let on_b = server_id(&mut b).await;
    assert_ne!(on_a, on_b);
    a.query_drop("COMMIT").await.expect("commit");
    // Both idle now; taken in turns, each session gets its own thread's connection back, not
    // the one the other session released last.
    for turn in 0..10 {
        assert_eq!(server_id(&mut a).await, on_a, "a, turn {turn}");
        assert_eq!(server_id(&mut b).await, on_b, "b, turn {turn}");
    }
}

#[tokio::test]
async fn a_stop_lets_statements_on_session_threads_finish() {
    if !backends_ready(Servers::MariaDb) {
        return;
    }
    let mut s = Sluice::start(&standard_config("threads = 2", ""));
    let mut busy = connect(&s).await;
    let mut idle = connect(&s).await;
    let running = tokio::spawn(async move {
        busy.query_first::<u32, _>("SELECT 42 FROM (SELECT SLEEP(1.5)) AS t")
            .await
    });
    tokio::task::spawn_blocking(|| wait_mysql_running(ports::MY_PRIMARY, "SELECT 42 FROM"))
        .await
        .expect("poll");
    s.terminate();
    // The statement in flight is answered; then the session threads let Sluice exit.
    assert_eq!(
        running.await.expect("task").expect("statement in flight"),
        Some(42)
    );
    let (status, log) = tokio::task::spawn_blocking(move || {
        let st = s.wait_exit(std::time::Duration::from_secs(15));
        (st, s.log())
    })
    .await
    .expect("wait");
    assert!(
        status.is_some_and(|st| st.success()),
        "exit: {status:?}\nlog:\n{log}"
    );
    assert!(log.contains("sluice stopped"), "log:\n{log}");
    assert!(
        log.contains("waiting up to 30s for 2 session(s)"),
        "log:\n{log}"
    );
    // The idle session was closed by the stop, not left hanging.
    assert!(idle.query_drop("SELECT 1").await.is_err());
}

#[tokio::test]
async fn many_clients_on_two_threads_share_a_small_pool_without_errors() {
    if !backends_ready(Servers::MariaDb) {
        return;
    }
    // 40 clients dealt to two session threads queue for 4 server connections: a freed
    // connection goes to a waiting session of its own thread first, but no session is passed
    // over for long, so every statement is answered well within the connect timeout, and the
    // server never sees more than 4 connections from Sluice.
    let s = Sluice::start(&capped_config(4, "threads = 2", ""));
    my_threads(&s, 2);
    let mut tasks = Vec::new();
    for n in 0..40u32 {
        let c = connect(&s).await;
        tasks.push(tokio::spawn(async move {
            let mut c = c;
            let mut ids = std::collections::BTreeSet::new();
            for i in 0..50u32 {
                let row: (u64, u32) = c
                    .exec_first("SELECT CONNECTION_ID(), ? * 3", (n * 1000 + i,))
                    .await
                    .expect("query through a shared server connection")
                    .expect("a row");
                assert_eq!(row.1, (n * 1000 + i) * 3);
                ids.insert(row.0);
            }
            c.disconnect().await.expect("quit");
            ids
        }));
    }
    let mut ids = std::collections::BTreeSet::new();
    for t in tasks {
        ids.extend(t.await.expect("client"));
    }
    assert!(
        (1..=4).contains(&ids.len()),
        "server connections used: {ids:?}"
    );
    let in_use: u32 = s
        .admin_ok("SELECT MAX(MaxConnUsed) FROM stats_mysql_connection_pool WHERE hostgroup = 0")
        .trim()
        .parse()
        .expect("a count");
    assert!(
        (1..=4).contains(&in_use),
        "peak connections in use: {in_use}"
    );
}

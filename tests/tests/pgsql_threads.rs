//! PostgreSQL sessions run on `pgsql-threads` event-loop threads (ProxySQL's worker model): the
//! threads exist under their names (one per CPU but one by default: tests/mysql_threads.rs checks
//! both protocols' defaults), one server connection serves sessions on different threads in turn
//! when the budget allows no more (its socket moves to the thread of the session using it), and
//! with room each thread keeps a connection of its own.

use sluice_tests::*;
use tokio_postgres::{Client, NoTls};

async fn client(port: u16) -> Client {
    let (c, conn) = tokio_postgres::connect(
        &format!("host=127.0.0.1 port={port} user=app password=app dbname=app"),
        NoTls,
    )
    .await
    .expect("connect through sluice");
    tokio::spawn(conn);
    c
}

/// The PostgreSQL session threads' names, once `n` of them run.
fn session_threads(s: &Sluice, n: usize) -> Vec<String> {
    sluice_tests::session_threads(s, "sluice-pg-", n)
}

/// The standard config with two session threads and the primary capped at `max` connections.
fn two_threads_config(max: u32) -> String {
    format!(
        "[pgsql_variables]\ninterfaces = \"127.0.0.1:{{pg_port}}\"\nthreads = 2\n{}",
        standard_config("", "").replacen(
            &format!("port = {}\n", ports::PG_PRIMARY),
            &format!("port = {}\nmax_connections = {max}\n", ports::PG_PRIMARY),
            1,
        )
    )
}

#[tokio::test]
async fn sessions_on_two_threads_share_one_server_connection() {
    if !backends_ready(Servers::Postgres) {
        return;
    }
    let s = Sluice::start(&two_threads_config(1));
    let mut got = session_threads(&s, 2);
    got.sort();
    assert_eq!(got, ["sluice-pg-0", "sluice-pg-1"]);
    assert_eq!(
        s.admin_ok(
            "SELECT variable_value FROM runtime_global_variables WHERE variable_name = 'pgsql-threads'"
        )
        .trim(),
        "2"
    );

    // Sessions are dealt to the threads in turn: these two run on different threads, and the
    // one server connection (max_connections = 1) serves both.
    let a = client(s.pg_port).await;
    let b = client(s.pg_port).await;
    let mut pids = std::collections::BTreeSet::new();
    for i in 0..20i32 {
        let c = if i % 2 == 0 { &a } else { &b };
        let row = c
            .query_one("SELECT pg_backend_pid(), $1::int + 1", &[&i])
            .await
            .expect("query");
        assert_eq!(row.get::<_, i32>(1), i + 1);
        pids.insert(row.get::<_, i32>(0));
    }
    assert_eq!(pids.len(), 1, "one server connection: {pids:?}");

    // Both at once: each waits its turn for the connection, none fails.
    let run = |c: Client, n: i32| async move {
        for i in 0..n {
            let v: i32 = c
                .query_one("SELECT $1::int * 2", &[&i])
                .await
                .expect("concurrent query")
                .get(0);
            assert_eq!(v, i * 2);
        }
        c
    };
    let (a, b) = tokio::join!(tokio::spawn(run(a, 200)), tokio::spawn(run(b, 200)));
    let (a, _b) = (a.expect("client a"), b.expect("client b"));
    let pid: i32 = a
        .query_one("SELECT pg_backend_pid()", &[])
        .await
        .expect("pid")
        .get(0);
    assert!(pids.contains(&pid), "still the same server connection");
}

/// With room under `max_connections`, a session thread opens a server connection of its own
/// rather than take one from the other thread at every transaction: two clients on two threads
/// taking turns keep one connection each (before, the one connection moved threads — two
/// `epoll_ctl` calls and a new registration — for every statement).
#[tokio::test]
async fn with_room_each_session_thread_keeps_a_server_connection_of_its_own() {
    if !backends_ready(Servers::Postgres) {
        return;
    }
    let s = Sluice::start(&two_threads_config(4));
    session_threads(&s, 2);
    let clients = [client(s.pg_port).await, client(s.pg_port).await];
    let mut pids = [
        std::collections::BTreeSet::new(),
        std::collections::BTreeSet::new(),
    ];
    for i in 0..20usize {
        let row = clients[i % 2]
            .query_one("SELECT pg_backend_pid()", &[])
            .await
            .expect("query");
        pids[i % 2].insert(row.get::<_, i32>(0));
    }
    assert_eq!(pids[0].len(), 1, "client a kept one connection: {pids:?}");
    assert_eq!(pids[1].len(), 1, "client b kept one connection: {pids:?}");
    assert_ne!(pids[0], pids[1], "one connection per thread: {pids:?}");
}

#[tokio::test]
async fn a_stop_lets_statements_on_session_threads_finish() {
    if !backends_ready(Servers::Postgres) {
        return;
    }
    let mut s = Sluice::start(&standard_config("", ""));
    let busy = client(s.pg_port).await;
    let idle = client(s.pg_port).await;
    let running = tokio::spawn(async move {
        busy.query_one("SELECT 42 FROM pg_sleep(1.5)", &[])
            .await
            .map(|r| r.get::<_, i32>(0))
    });
    tokio::task::spawn_blocking(|| wait_pg_running(ports::PG_PRIMARY, "SELECT 42 FROM pg_sleep"))
        .await
        .expect("poll");
    s.terminate();
    // The statement in flight is answered; then the session threads let Sluice exit.
    assert_eq!(
        running.await.expect("task").expect("statement in flight"),
        42
    );
    let status = tokio::task::spawn_blocking(move || {
        let st = s.wait_exit(std::time::Duration::from_secs(15));
        (st, s.log())
    })
    .await
    .expect("wait");
    assert!(
        status.0.is_some_and(|st| st.success()),
        "exit: {:?}\nlog:\n{}",
        status.0,
        status.1
    );
    assert!(status.1.contains("sluice stopped"), "log:\n{}", status.1);
    // The stop counted both PostgreSQL sessions (it used to count MySQL sessions only).
    assert!(
        status.1.contains("waiting up to 30s for 2 session(s)"),
        "log:\n{}",
        status.1
    );
    // The idle session was closed by the stop, not left hanging.
    assert!(idle.query_one("SELECT 1", &[]).await.is_err());
}

#[tokio::test]
async fn many_clients_on_two_threads_share_a_small_budget_without_errors() {
    if !backends_ready(Servers::Postgres) {
        return;
    }
    // 40 clients dealt to two session threads, 4 server connections split between the threads:
    // every statement is answered, and the server never sees more than 4 connections however
    // the slots move between the threads' shares.
    let s = Sluice::start(&two_threads_config(4));
    session_threads(&s, 2);
    let mut clients = Vec::new();
    for _ in 0..40 {
        clients.push(client(s.pg_port).await);
    }
    let run = |c: Client, n: i32| async move {
        let mut pids = std::collections::BTreeSet::new();
        for i in 0..n {
            let row = c
                .query_one("SELECT pg_backend_pid(), $1::int * 3", &[&i])
                .await
                .expect("query through a shared server connection");
            assert_eq!(row.get::<_, i32>(1), i * 3);
            pids.insert(row.get::<_, i32>(0));
        }
        pids
    };
    let tasks: Vec<_> = clients
        .into_iter()
        .map(|c| tokio::spawn(run(c, 50)))
        .collect();
    let mut pids = std::collections::BTreeSet::new();
    for t in tasks {
        pids.extend(t.await.expect("client task"));
    }
    assert!(
        !pids.is_empty() && pids.len() <= 4,
        "server connections used: {pids:?}"
    );
    let used = s.admin_ok(
        "SELECT SUM(ConnUsed + ConnFree), MAX(MaxConnUsed) FROM stats_pgsql_connection_pool",
    );
    let counts: Vec<u32> = used
        .split_whitespace()
        .map(|n| n.parse().expect("a count"))
        .collect();
    assert_eq!(counts.len(), 2, "{used}");
    assert!(counts[0] <= 4, "pool holds {} connections", counts[0]);
    assert!(
        (1..=4).contains(&counts[1]),
        "peak connections in use: {}",
        counts[1]
    );
}

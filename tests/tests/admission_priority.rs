//! Sessions waiting for a backend connection are served by their workload class's priority,
//! then arrival, on both protocols: one server connection (`max_connections = 1`) held by a
//! statement blocked on a table the test has locked, four `bulk` statements queued for it, then
//! one `urgent`; the lock is released and the order in which they finish is compared, once with
//! `urgent` more urgent than `bulk` and once the other way round.

use sluice_tests::*;

/// `Variable_Value` of `ConnPool_waiting_sessions` in the protocol's global stats is at least
/// `n`.
fn waiting_at_least(s: &Sluice, table: &str, n: u32) -> bool {
    s.admin_ok(&format!(
        "SELECT Variable_Value FROM {table} WHERE Variable_Name = 'ConnPool_waiting_sessions'"
    ))
    .trim()
    .parse::<u32>()
    .unwrap_or(0)
        >= n
}

fn classes(bulk: &str, urgent: &str) -> String {
    format!(
        "[[workload_classes]]\nname = \"hold\"\n\
         [[workload_classes]]\nname = \"bulk\"\npriority = \"{bulk}\"\n\
         [[workload_classes]]\nname = \"urgent\"\npriority = \"{urgent}\"\n"
    )
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime")
}

/// One MariaDB connection (`max_connections = 1`), held by a statement of class `hold` that
/// waits on a table the test has locked; four `bulk` statements queue for the connection, then
/// one `urgent`; the table is unlocked. Returns the order in which the five queued statements
/// finished (their labels).
async fn mysql_handoff_order(bulk: &str, urgent: &str) -> Vec<String> {
    use mysql_async::prelude::*;
    let s = Sluice::start(&capped_config(1, "", &classes(bulk, urgent)));
    let url = s.url("app", "app", "app");
    let mut root = mysql_async::Conn::from_url(format!(
        "mysql://root:root@127.0.0.1:{}/",
        ports::MY_PRIMARY
    ))
    .await
    .expect("root on the primary");
    for sql in [
        "CREATE TABLE IF NOT EXISTS app.prio_gate (id INT)",
        "LOCK TABLES app.prio_gate WRITE",
    ] {
        root.query_drop(sql).await.expect(sql);
    }
    // Every client logs in first, so only the statements below wait for the connection.
    let mut conns = Vec::new();
    for _ in 0..6 {
        let mut c = mysql_async::Conn::from_url(url.clone())
            .await
            .expect("login");
        c.query_drop("SELECT 1").await.expect("warm");
        conns.push(c);
    }
    let waiting = |n: u32| {
        let s = &s;
        move || waiting_at_least(s, "stats_mysql_global", n)
    };
    let finished = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let run = |mut c: mysql_async::Conn, label: String, sql: String| {
        let finished = finished.clone();
        tokio::spawn(async move {
            c.query_drop(sql).await.expect(&label);
            finished.lock().expect("order").push(label);
            c.disconnect().await.ok();
        })
    };
    let mut conns = conns.into_iter();
    let mut next = || conns.next().expect("a client");
    let holder = run(
        next(),
        "hold".into(),
        "/* workload=hold */ SELECT id AS prio_hold FROM app.prio_gate".into(),
    );
    tokio::task::block_in_place(|| wait_mysql_running(ports::MY_PRIMARY, "/* workload=hold */"));
    let mut queued = Vec::new();
    for i in 0..4 {
        queued.push(run(
            next(),
            format!("bulk{i}"),
            format!("/* workload=bulk */ SELECT SLEEP(0.1) AS bulk{i}"),
        ));
    }
    tokio::task::block_in_place(|| wait_for("four bulk sessions queued", waiting(4)));
    queued.push(run(
        next(),
        "urgent".into(),
        "/* workload=urgent */ SELECT SLEEP(0.1) AS urgent".into(),
    ));
    tokio::task::block_in_place(|| wait_for("the urgent session queued", waiting(5)));
    root.query_drop("UNLOCK TABLES")
        .await
        .expect("unlock the gate");
    holder.await.expect("holder");
    for q in queued {
        q.await.expect("client");
    }
    let order = finished.lock().expect("order").clone();
    order.into_iter().filter(|l| l != "hold").collect()
}

#[test]
fn mysql_sessions_waiting_for_a_connection_are_served_by_class_priority() {
    if !backends_ready(Servers::MariaDb) {
        return;
    }
    let rt = runtime();
    // Critical arrives last and is served first.
    let order = rt.block_on(mysql_handoff_order("background", "critical"));
    assert_eq!(
        order.first().map(String::as_str),
        Some("urgent"),
        "{order:?}"
    );
    // The same arrivals with the priorities swapped: last in, last out.
    let order = rt.block_on(mysql_handoff_order("critical", "background"));
    assert_eq!(
        order.last().map(String::as_str),
        Some("urgent"),
        "{order:?}"
    );
}

async fn pg_client(port: u16) -> tokio_postgres::Client {
    let (c, conn) = tokio_postgres::connect(
        &format!("host=127.0.0.1 port={port} user=app password=app dbname=app"),
        tokio_postgres::NoTls,
    )
    .await
    .expect("connect");
    tokio::spawn(conn);
    c
}

/// The PostgreSQL run of [`mysql_handoff_order`]: one session thread (priority orders the
/// waiters of a thread's share of the server's connections).
async fn pg_handoff_order(bulk: &str, urgent: &str) -> Vec<String> {
    let config = format!(
        "[pgsql_variables]\ninterfaces = \"127.0.0.1:{{pg_port}}\"\nthreads = 1\n{}",
        standard_config("", &classes(bulk, urgent)).replacen(
            &format!("port = {}\n", ports::PG_PRIMARY),
            &format!("port = {}\nmax_connections = 1\n", ports::PG_PRIMARY),
            1,
        )
    );
    let s = Sluice::start(&config);
    let root = pg_client(ports::PG_PRIMARY).await;
    root.batch_execute("CREATE TABLE IF NOT EXISTS prio_gate (id int)")
        .await
        .expect("the gate");
    root.batch_execute("BEGIN; LOCK TABLE prio_gate IN ACCESS EXCLUSIVE MODE")
        .await
        .expect("lock the gate");
    // Every client logs in (and runs a statement) first, so only the statements below wait.
    let mut clients = Vec::new();
    for _ in 0..6 {
        let c = pg_client(s.pg_port).await;
        c.simple_query("SELECT 1").await.expect("warm");
        clients.push(c);
    }
    let finished = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let run = |c: tokio_postgres::Client, label: String, sql: String| {
        let finished = finished.clone();
        tokio::spawn(async move {
            c.simple_query(&sql).await.expect(&label);
            finished.lock().expect("order").push(label);
        })
    };
    let mut clients = clients.into_iter();
    let mut next = || clients.next().expect("a client");
    let holder = run(
        next(),
        "hold".into(),
        "/* workload=hold */ SELECT count(*) AS prio_hold FROM prio_gate".into(),
    );
    tokio::task::block_in_place(|| wait_pg_running(ports::PG_PRIMARY, "/* workload=hold */"));
    let mut queued = Vec::new();
    for i in 0..4 {
        queued.push(run(
            next(),
            format!("bulk{i}"),
            format!("/* workload=bulk */ SELECT pg_sleep(0.1), {i} AS bulk"),
        ));
    }
    let waiting = |n: u32| {
        let s = &s;
        move || waiting_at_least(s, "stats_pgsql_global", n)
    };
    tokio::task::block_in_place(|| wait_for("four bulk sessions queued", waiting(4)));
    queued.push(run(
        next(),
        "urgent".into(),
        "/* workload=urgent */ SELECT pg_sleep(0.1) AS urgent".into(),
    ));
    tokio::task::block_in_place(|| wait_for("the urgent session queued", waiting(5)));
    root.batch_execute("COMMIT").await.expect("unlock the gate");
    holder.await.expect("holder");
    for q in queued {
        q.await.expect("client");
    }
    let order = finished.lock().expect("order").clone();
    order.into_iter().filter(|l| l != "hold").collect()
}

#[test]
fn pgsql_sessions_waiting_for_a_connection_are_served_by_class_priority() {
    if !backends_ready(Servers::Postgres) {
        return;
    }
    let rt = runtime();
    let order = rt.block_on(pg_handoff_order("background", "critical"));
    assert_eq!(
        order.first().map(String::as_str),
        Some("urgent"),
        "{order:?}"
    );
    let order = rt.block_on(pg_handoff_order("critical", "background"));
    assert_eq!(
        order.last().map(String::as_str),
        Some("urgent"),
        "{order:?}"
    );
}

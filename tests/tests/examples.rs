//! The crates' embedding examples (`crates/*/examples/`) run as a user would run them: the core
//! one on its own, the pool ones against the real test backends. `cargo xtask test` builds them
//! first (`cargo build --workspace --examples`).

use sluice_tests::*;
use std::process::Command;

/// Runs an example binary from `target/debug/examples` with `args`; its stdout.
fn example(name: &str, args: &[&str]) -> String {
    let bin = xtask::workspace_root()
        .join("target/debug/examples")
        .join(name);
    assert!(
        bin.exists(),
        "{} is not built: run `cargo build --workspace --examples` (cargo xtask test does)",
        bin.display()
    );
    ok_stdout(
        &Command::new(&bin)
            .args(args)
            .output()
            .expect("example runs"),
    )
}

#[test]
fn core_routes_statements_with_rules_built_in_code() {
    let out = example("route", &[]);
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), 6, "{out}");
    assert!(lines[0].ends_with("| SELECT balance FROM accounts WHERE id = ? | hostgroup 1"));
    assert!(lines[1].ends_with("FOR UPDATE | hostgroup 0"));
    assert!(lines[2].ends_with("| default hostgroup"));
    assert!(lines[3].ends_with("| refused: DELETE without WHERE is not allowed here"));
    assert_eq!(
        lines[5],
        "  rewritten: SELECT * FROM orders WHERE id IN (1, 2, 3)"
    );
}

#[test]
fn pgsql_pool_serves_a_service_from_one_pooled_connection() {
    if !backends_ready(Servers::Both) {
        return;
    }
    let addr = format!("127.0.0.1:{}", ports::PG_PRIMARY);
    let out = example("pg_pooled_query", &[&addr, "app", "app", "app"]);
    assert!(out.contains("says 20 + 22 = 42"), "{out}");
    assert!(
        out.ends_with("one pooled connection served every checkout: true\n"),
        "{out}"
    );
}

#[test]
fn mysql_pool_serves_a_service_from_one_pooled_connection() {
    if !backends_ready(Servers::Both) {
        return;
    }
    let addr = format!("127.0.0.1:{}", ports::MY_PRIMARY);
    let out = example("mysql_pooled_query", &[&addr, "app", "app"]);
    assert!(out.contains("says 20 + 22 = 42"), "{out}");
    assert!(
        out.ends_with("one pooled connection served every checkout: true\n"),
        "{out}"
    );
}

/// An example that serves clients until it is killed (on drop).
struct ServingExample(std::process::Child);

impl ServingExample {
    /// Starts example `name` with `args` and waits until it accepts on `port`.
    fn start(name: &str, port: u16, args: &[&str]) -> ServingExample {
        let bin = xtask::workspace_root()
            .join("target/debug/examples")
            .join(name);
        let child = Command::new(&bin)
            .args(args)
            .stdout(std::process::Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("{} does not start: {e}", bin.display()));
        let serving = ServingExample(child);
        assert!(
            xtask::proc::wait_until(std::time::Duration::from_secs(20), || {
                xtask::proc::port_open(port)
            }),
            "{name} does not listen on {port}"
        );
        serving
    }
}

impl Drop for ServingExample {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn mysql_mini_proxy_routes_reads_to_the_replica_with_its_own_hook() {
    if !backends_ready(Servers::Both) {
        return;
    }
    let port = free_port();
    let listen = format!("127.0.0.1:{port}");
    let primary = format!("127.0.0.1:{}", ports::MY_PRIMARY);
    let replica = format!("127.0.0.1:{}", ports::MY_REPLICA);
    let _proxy = ServingExample::start(
        "mysql_mini_proxy",
        port,
        &[&listen, &primary, &replica, "app", "app"],
    );
    let out = ok_stdout(&mariadb(
        port,
        "app",
        "app",
        &[],
        "SELECT @@port; SHOW VARIABLES LIKE 'port'; SELECT @@port FROM DUAL FOR UPDATE;",
    ));
    let expected = format!(
        "{}\nport\t{}\n{}\n",
        ports::MY_REPLICA,
        ports::MY_PRIMARY,
        ports::MY_PRIMARY
    );
    assert_eq!(out, expected);
}

#[test]
fn pgsql_mini_proxy_routes_reads_to_the_replica_with_its_own_hook() {
    if !backends_ready(Servers::Both) {
        return;
    }
    let port = free_port();
    let listen = format!("127.0.0.1:{port}");
    let primary = format!("127.0.0.1:{}", ports::PG_PRIMARY);
    let replica = format!("127.0.0.1:{}", ports::PG_REPLICA);
    let _proxy = ServingExample::start(
        "pg_mini_proxy",
        port,
        &[&listen, &primary, &replica, "app", "app"],
    );
    let read = ok_stdout(&psql_app(port, "SELECT inet_server_port()"));
    assert_eq!(read.trim(), ports::PG_REPLICA.to_string());
    let other = ok_stdout(&psql_app(port, "SHOW port"));
    assert_eq!(other.trim(), ports::PG_PRIMARY.to_string());
}

#[test]
fn mysql_custom_handler_answers_in_process_and_forwards_the_rest() {
    if !backends_ready(Servers::Both) {
        return;
    }
    let port = free_port();
    let listen = format!("127.0.0.1:{port}");
    let server = format!("127.0.0.1:{}", ports::MY_PRIMARY);
    let _proxy = ServingExample::start(
        "mysql_custom_handler",
        port,
        &[&listen, &server, "app", "app"],
    );
    // Forwarded: the server's own answer.
    let out = ok_stdout(&mariadb(port, "app", "app", &[], "SELECT @@port, 6 * 7;"));
    assert_eq!(out, format!("{}\t42\n", ports::MY_PRIMARY));
    // In-process: the handler's table, which counted the statement it forwarded above.
    let out = ok_stdout(&mariadb(port, "app", "app", &[], "SHOW APP STATUS;"));
    let cells: Vec<&str> = out.trim_end().split('\t').collect();
    assert_eq!(cells[0], "app", "{out}");
    assert!(cells[1].parse::<u32>().is_ok_and(|id| id > 0), "{out}");
    assert!(cells[2].parse::<u64>().is_ok_and(|n| n >= 1), "{out}");
    // Refused in-process with the handler's error; the server never sees the DROP.
    primary_root("CREATE TABLE IF NOT EXISTS app.handler_keep (id INT)");
    let refused = mariadb(port, "app", "app", &[], "DROP TABLE app.handler_keep;");
    assert!(!refused.status.success());
    let err = String::from_utf8_lossy(&refused.stderr);
    assert!(
        err.contains("ERROR 1142 (42000)")
            && err.contains("DROP is not allowed through this service"),
        "{err}"
    );
    let still = primary_root(
        "SELECT COUNT(*) FROM information_schema.tables WHERE table_schema = 'app' AND table_name = 'handler_keep'",
    );
    assert_eq!(still.trim(), "1");
}

/// `serve(…).with_graceful_shutdown(ctrl_c)`, as the example wires it: on Ctrl-C the port stops
/// accepting at once, a transaction under way is served to its end, and the process exits
/// cleanly once its last session went idle and closed.
#[tokio::test]
async fn mysql_custom_handler_stops_gracefully_on_ctrl_c() {
    use mysql_async::prelude::*;
    if !backends_ready(Servers::Both) {
        return;
    }
    let port = free_port();
    let listen = format!("127.0.0.1:{port}");
    let server = format!("127.0.0.1:{}", ports::MY_PRIMARY);
    let mut proxy = ServingExample::start(
        "mysql_custom_handler",
        port,
        &[&listen, &server, "app", "app"],
    );
    let url = format!("mysql://app:app@127.0.0.1:{port}/app");
    let mut conn = mysql_async::Conn::from_url(url).await.expect("connect");
    conn.query_drop("BEGIN").await.expect("BEGIN");
    let interrupted = Command::new("kill")
        .args(["-INT", &proxy.0.id().to_string()])
        .status()
        .expect("kill");
    assert!(interrupted.success());
    let limit = std::time::Duration::from_secs(10);
    assert!(
        xtask::proc::wait_until(limit, || !xtask::proc::port_open(port)),
        "still accepting after Ctrl-C"
    );
    let answer: Option<u32> = conn
        .query_first("SELECT 6 * 7")
        .await
        .expect("in transaction");
    assert_eq!(answer, Some(42));
    conn.query_drop("COMMIT").await.expect("COMMIT");
    let mut status = None;
    assert!(
        xtask::proc::wait_until(limit, || {
            status = proxy.0.try_wait().ok().flatten();
            status.is_some()
        }),
        "the example did not exit once its session was idle"
    );
    assert!(status.is_some_and(|s| s.success()), "{status:?}");
}

#[test]
fn mcp_runs_agents_sql_read_only_on_its_own() {
    if !backends_ready(Servers::Both) {
        return;
    }
    let addr = format!("127.0.0.1:{}", ports::MY_REPLICA);
    let out = example(
        "agent_readonly",
        &[
            &addr,
            "app",
            "app",
            "mysql",
            "SELECT 41 + 1 AS answer",
            "SELECT 1; DROP TABLE t",
            "SELECT seq FROM seq_1_to_100",
        ],
    );
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(
        lines[0],
        "SELECT 41 + 1 AS answer -> 1 row(s), truncated: false, first: Some([Number(42)])",
        "{out}"
    );
    assert!(lines[1].contains("refused: exactly one statement"), "{out}");
    assert!(lines[2].contains("10 row(s), truncated: true"), "{out}");
}

#[test]
fn rag_indexes_and_searches_with_a_real_embedding_model() {
    let server = sluice_tests::rag::EmbeddingServer::start(1);
    let out = example(
        "rag_search",
        &[&server.base_url(), "how do I remove every row of a table"],
    );
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), 4, "{out}");
    for (line, leg) in lines[1..].iter().zip(["text: ", "meaning: ", "hybrid: "]) {
        assert!(line.starts_with(leg), "{out}");
    }
    assert!(lines[2].starts_with("meaning: TRUNCATE"), "{out}");
    assert!(lines[3].starts_with("hybrid: TRUNCATE"), "{out}");
}

#[test]
fn import_translates_a_pgbouncer_ini_into_sluice_toml() {
    let toml = example("import_pgbouncer", &[]);
    let cfg = sluice_core::config::Config::parse(&toml).expect("Sluice reads the translation");
    let servers: Vec<(u32, &str)> = cfg
        .pgsql_servers
        .iter()
        .map(|s| (s.hostgroup_id.0, s.hostname.as_str()))
        .collect();
    assert_eq!(
        servers,
        [(0, "10.0.0.10"), (1, "10.0.0.20"), (1, "10.0.0.21")]
    );
    assert_eq!(cfg.pgsql_query_rules.len(), 2, "{toml}");
    assert_eq!(cfg.pgsql_variables.interfaces, "0.0.0.0:6432");
    assert_eq!(cfg.pgsql_users[0].default_hostgroup.0, 0);
    assert!(
        toml.contains("# not carried over (line 11): [pgbouncer] logfile"),
        "{toml}"
    );
}

#[test]
fn app_embedded_serves_both_protocols_and_stops_on_proxysql_shutdown() {
    if !backends_ready(Servers::Both) {
        return;
    }
    let (my, pg, admin) = (free_port(), free_port(), free_port());
    let bin = xtask::workspace_root().join("target/debug/examples/embedded");
    let mut child = Command::new(&bin)
        .args([
            my.to_string(),
            pg.to_string(),
            admin.to_string(),
            format!("127.0.0.1:{}", ports::MY_PRIMARY),
            format!("127.0.0.1:{}", ports::PG_PRIMARY),
            "app".into(),
            "app".into(),
        ])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("{} does not start: {e}", bin.display()));
    let listening = xtask::proc::wait_until(std::time::Duration::from_secs(20), || {
        [my, pg, admin].into_iter().all(xtask::proc::port_open)
    });
    if !listening {
        let _ = child.kill();
        panic!("the embedded Sluice does not listen on {my}, {pg} and {admin}");
    }
    let mysql = ok_stdout(&mariadb(my, "app", "app", &[], "SELECT @@port"));
    assert_eq!(mysql.trim(), ports::MY_PRIMARY.to_string());
    let pgsql = ok_stdout(&psql_app(pg, "SHOW port"));
    assert_eq!(pgsql.trim(), ports::PG_PRIMARY.to_string());
    ok_stdout(&mariadb(admin, "admin", "admin", &[], "PROXYSQL SHUTDOWN"));
    let stopped = xtask::proc::wait_until(std::time::Duration::from_secs(20), || {
        matches!(child.try_wait(), Ok(Some(_)))
    });
    if !stopped {
        let _ = child.kill();
        panic!("PROXYSQL SHUTDOWN did not stop the embedded Sluice");
    }
    let out = child.wait_with_output().expect("its output");
    assert!(out.status.success(), "{:?}", out.status);
    assert!(
        String::from_utf8_lossy(&out.stdout).ends_with("stopped\n"),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
}

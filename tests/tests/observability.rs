//! The tools operators already run, against Sluice: Prometheus scraping `/metrics` and answering
//! PromQL, `promtool check metrics`, `prometheus-pgbouncer-exporter` reading the PostgreSQL admin
//! port, `curl` on `/healthz` and `/readyz` (503 while the only writer is shunned), and the
//! admin's `SHOW PROMETHEUS METRICS`, `SHOW MYSQL STATUS` and `stats_memory_metrics`.

use sluice_tests::*;
use std::process::{Child, Command, Stdio};
use xtask::mariadb::MariaDb;

/// The config of [`standard_config`] with the HTTP port on, and the admin and PostgreSQL ports
/// as `Sluice::start` assigns them.
fn http_config(http_port: u16, extra_vars: &str, tables: &str) -> String {
    format!(
        "[admin_variables]\nmysql_ifaces = \"127.0.0.1:{{admin_port}}\"\npgsql_ifaces = \"127.0.0.1:{{pg_admin_port}}\"\n\
         restapi_enabled = true\nrestapi_port = {http_port}\n\
         [pgsql_variables]\ninterfaces = \"127.0.0.1:{{pg_port}}\"\n{}",
        if tables.is_empty() {
            standard_config(extra_vars, "")
        } else {
            format!(
                "[mysql_variables]\ninterfaces = \"127.0.0.1:{{port}}\"\n{extra_vars}\n{tables}"
            )
        }
    )
}

/// Both pairs, the replica with a lag limit (so the monitor reads its lag), a query rule.
fn busy_tables() -> String {
    format!(
        "[[mysql_servers]]\nhostgroup_id = 0\nhostname = \"127.0.0.1\"\nport = {p}\n\
         [[mysql_servers]]\nhostgroup_id = 1\nhostname = \"127.0.0.1\"\nport = {r}\nmax_replication_lag = 600\n\
         [[mysql_users]]\nusername = \"app\"\npassword = \"app\"\n\
         [[mysql_query_rules]]\nrule_id = 1\nactive = 1\nmatch_digest = \"^SELECT \\\\?$\"\ndestination_hostgroup = 0\napply = 1\n\
         [[pgsql_servers]]\nhostgroup_id = 0\nhostname = \"127.0.0.1\"\nport = {pp}\n\
         [[pgsql_users]]\nusername = \"app\"\npassword = \"app\"\n",
        p = ports::MY_PRIMARY,
        r = ports::MY_REPLICA,
        pp = ports::PG_PRIMARY,
    )
}

/// The metric names a Grafana dashboard's queries use (histogram series folded to their family).
fn dashboard_metrics(path: &std::path::Path) -> std::collections::BTreeSet<String> {
    let text = std::fs::read_to_string(path).expect("dashboard file");
    let dash: serde_json::Value = serde_json::from_str(&text).expect("the dashboard is JSON");
    let mut names = std::collections::BTreeSet::new();
    for panel in dash["panels"].as_array().expect("panels") {
        for target in panel["targets"].as_array().expect("targets") {
            let expr = target["expr"].as_str().expect("expr");
            for word in expr.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_')) {
                if word.starts_with("proxysql_") || word.starts_with("sluice_") {
                    let family = ["_bucket", "_count", "_sum"]
                        .iter()
                        .find_map(|s| word.strip_suffix(s))
                        .unwrap_or(word);
                    names.insert(family.to_string());
                }
            }
        }
    }
    names
}

/// The value of the sample of `family` whose labels contain every one of `labels`.
fn sample(text: &str, family: &str, labels: &[&str]) -> Option<f64> {
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .filter(|l| l.starts_with(&format!("{family}{{")) || l.starts_with(&format!("{family} ")))
        .find(|l| labels.iter().all(|want| l.contains(want)))
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|v| v.parse().ok())
}

/// A child process killed when dropped.
struct Running(Child);

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Prometheus scraping `target` every second, its API on a free port.
fn start_prometheus(target: u16) -> (Running, u16) {
    let dir = scratch_dir("prometheus");
    let port = free_port();
    let cfg = write_file(
        &dir,
        "prometheus.yml",
        &format!(
            "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\nscrape_configs:\n  - job_name: sluice\n    static_configs:\n      - targets: ['127.0.0.1:{target}']\n"
        ),
    );
    let child = Command::new("prometheus")
        .arg(format!("--config.file={}", cfg.display()))
        .arg(format!(
            "--storage.tsdb.path={}",
            dir.join("data").display()
        ))
        .arg(format!("--web.listen-address=127.0.0.1:{port}"))
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(dir.join("prometheus.log")).expect("log"))
        .spawn()
        .expect("prometheus installed (cargo xtask test installs it)");
    let running = Running(child);
    wait_for("Prometheus to answer", || curl(port, "/-/ready").0 == 200);
    (running, port)
}

/// The first value of an instant PromQL query, once it has one.
fn promql(prometheus: u16, query: &str) -> Option<f64> {
    let out = Command::new("curl")
        .args(["-s", "--max-time", "10", "--data-urlencode"])
        .arg(format!("query={query}"))
        .arg(format!("http://127.0.0.1:{prometheus}/api/v1/query"))
        .output()
        .expect("curl");
    let body = String::from_utf8_lossy(&out.stdout);
    // {"status":"success","data":{"resultType":"vector","result":[{"metric":{...},"value":[t,"v"]}]}}
    let value = body.split("\"value\":[").nth(1)?;
    let v = value.split(',').nth(1)?.trim_start_matches('"');
    v.split('"').next()?.parse().ok()
}

#[test]
fn prometheus_scrapes_sluice_and_answers_promql_and_promtool_finds_no_errors() {
    if !backends_ready(Servers::Both) {
        return;
    }
    let http = free_port();
    let s = Sluice::start(&http_config(
        http,
        "monitor_replication_lag_interval = 500",
        &busy_tables(),
    ));
    let statements: String = (0..50).map(|i| format!("SELECT {i};\n")).collect();
    ok_stdout(&mariadb(s.port, "app", "app", &["--skip-ssl"], &statements));
    // A transaction (a pin), a rule hit, and an error on each side: every family the dashboard
    // reads has samples.
    ok_stdout(&mariadb(
        s.port,
        "app",
        "app",
        &["--skip-ssl"],
        "BEGIN; SELECT 7; COMMIT;",
    ));
    let _ = mariadb(
        s.port,
        "app",
        "app",
        &["--skip-ssl"],
        "SELECT nosuchcolumn;",
    );
    let _ = psql_app(s.pg_port, "SELECT nosuchcolumn");
    for i in 0..20 {
        ok_stdout(&psql_app(s.pg_port, &format!("SELECT {i}")));
    }
    let (code, text) = curl(http, "/metrics");
    assert_eq!(code, 200, "{text}");
    let questions = sample(&text, "proxysql_questions_total", &["protocol=\"mysql\""]);
    assert!(questions.is_some_and(|n| n >= 50.0), "{text}");
    let pg_latency = sample(
        &text,
        "sluice_query_duration_seconds_count",
        &["protocol=\"pgsql\"", "hostgroup=\"0\""],
    );
    assert!(pg_latency.is_some_and(|n| n >= 20.0), "{text}");
    let sent = sample(
        &text,
        "proxysql_connpool_data_bytes_total",
        &[
            "protocol=\"mysql\"",
            "traffic_flow=\"sent\"",
            "endpoint=\"127.0.0.1:13306\"",
        ],
    );
    assert!(sent.is_some_and(|b| b > 0.0), "{text}");
    let opened = sample(
        &text,
        "proxysql_connpool_conns_total",
        &["protocol=\"pgsql\"", "status=\"ok\""],
    );
    assert!(opened.is_some_and(|n| n >= 1.0), "{text}");

    // promtool: no errors; the only lint is the unit in ProxySQL's own metric name, kept for
    // dashboards written for ProxySQL (sluice_connpool_latency_seconds is the clean twin).
    let mut lint = Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("promtool installed");
    std::io::Write::write_all(&mut lint.stdin.take().expect("stdin"), text.as_bytes())
        .expect("feed promtool");
    let out = lint.wait_with_output().expect("promtool ran");
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert_ne!(out.status.code(), Some(1), "promtool found errors: {said}");
    for line in said.lines().filter(|l| !l.trim().is_empty()) {
        assert_eq!(
            line,
            "proxysql_connpool_conns_latency_us metric names should not contain abbreviated units"
        );
    }

    // Prometheus scrapes it; PromQL sees the counters, the pools and the histograms.
    let (_prometheus, api) = start_prometheus(http);
    wait_for("Prometheus to scrape Sluice", || {
        promql(api, "up{job=\"sluice\"}") == Some(1.0)
    });
    wait_for("the MySQL questions in Prometheus", || {
        promql(api, "proxysql_questions_total{protocol=\"mysql\"}").is_some_and(|n| n >= 50.0)
    });
    let free = promql(
        api,
        "sum(proxysql_connpool_conns{protocol=\"pgsql\",status=\"free\"})",
    );
    assert!(free.is_some_and(|n| n >= 1.0), "{free:?}");
    let p99 = promql(
        api,
        "histogram_quantile(0.99, sum by (le) (sluice_query_duration_seconds_bucket{protocol=\"mysql\"}))",
    );
    assert!(p99.is_some_and(|s| s > 0.0 && s < 10.0), "{p99:?}");

    // The shipped Grafana dashboard reads only families Sluice serves.
    wait_for("a replication lag reading", || {
        sample(
            &curl(http, "/metrics").1,
            "sluice_server_replication_lag_seconds",
            &[],
        )
        .is_some()
    });
    let (_, text) = curl(http, "/metrics");
    let dashboard = xtask::workspace_root().join("compose/grafana/dashboards/sluice.json");
    for family in dashboard_metrics(&dashboard) {
        assert!(
            text.contains(&format!("# TYPE {family} ")),
            "the dashboard reads {family}, which /metrics does not serve:\n{text}"
        );
    }
    assert_eq!(curl(http, "/healthz"), (200, "ok\n".to_string()));
    assert_eq!(curl(http, "/readyz"), (200, "ready\n".to_string()));
    assert_eq!(curl(http, "/nothing").0, 404);
}

#[test]
fn the_compose_files_are_valid() {
    let root = xtask::workspace_root().join("compose");
    sluice_core::config::Config::from_file(&root.join("sluice.toml"))
        .expect("compose/sluice.toml is a valid Sluice config");
    let out = Command::new("promtool")
        .args(["check", "config"])
        .arg(root.join("prometheus.yml"))
        .output()
        .expect("promtool installed");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
}

#[test]
fn the_admin_shows_the_same_metrics_status_and_memory() {
    if !backends_ready(Servers::Both) {
        return;
    }
    let s = Sluice::start(&standard_config("", ""));
    let statements: String = (0..30).map(|i| format!("SELECT {i};\n")).collect();
    ok_stdout(&mariadb(s.port, "app", "app", &["--skip-ssl"], &statements));
    let text = s.admin_ok("SHOW PROMETHEUS METRICS;").replace("\\n", "\n");
    assert!(
        sample(&text, "proxysql_questions_total", &["protocol=\"mysql\""])
            .is_some_and(|n| n >= 30.0),
        "{text}"
    );
    let status = s.admin_ok("SHOW MYSQL STATUS;");
    let value = |name: &str| -> u64 {
        status
            .lines()
            .find_map(|l| l.strip_prefix(&format!("{name}\t")))
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or_else(|| panic!("{name} missing: {status}"))
    };
    assert!(value("Questions") >= 30, "{status}");
    assert_eq!(value("Client_Connections_created"), 1, "{status}");
    assert!(value("Server_Connections_created") >= 1, "{status}");
    assert!(value("ConnPool_get_conn_success") >= 30, "{status}");
    // One client's statements one after another: nearly all find its connection idle at once.
    assert!(value("ConnPool_get_conn_immediate") >= 25, "{status}");
    // Not timed by default (two clock reads per statement), as in ProxySQL; timed once
    // `*-stats_time_query_processor` is on, on each side.
    assert_eq!(value("Query_Processor_time_nsec"), 0, "{status}");
    let processor_ns = |table: &str| -> u64 {
        let sql = format!(
            "SELECT Variable_Value FROM {table} WHERE Variable_Name = 'Query_Processor_time_nsec';"
        );
        let v = s.admin_ok(&sql);
        v.trim().parse().unwrap_or_else(|_| panic!("{table}: {v}"))
    };
    assert_eq!(processor_ns("stats_pgsql_global"), 0);
    s.admin_ok(
        "SET mysql-stats_time_query_processor='true'; SET pgsql-stats_time_query_processor='true'; \
         LOAD MYSQL VARIABLES TO RUNTIME; LOAD PGSQL VARIABLES TO RUNTIME;",
    );
    ok_stdout(&mariadb(s.port, "app", "app", &["--skip-ssl"], &statements));
    ok_stdout(&psql_app(s.pg_port, &statements));
    assert!(processor_ns("stats_mysql_global") > 0);
    assert!(processor_ns("stats_pgsql_global") > 0);
    // (The harness's port probe, a connect without a login, already counts as aborted.)
    let aborted = value("Client_Connections_aborted");
    let wrong = mariadb(s.port, "app", "nope", &["--skip-ssl"], "SELECT 1;");
    assert!(!wrong.status.success());
    // The refusal is counted once the client has its error (the counters are bumped after the
    // ERR packet is written): wait for both.
    let counted = |status: &str| {
        let aborted_now: u64 = status
            .lines()
            .find_map(|l| l.strip_prefix("Client_Connections_aborted\t"))
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or(0);
        status.contains("Access_Denied_Wrong_Password\t1\n") && aborted_now > aborted
    };
    wait_for("the wrong password counted", || {
        counted(&s.admin_ok("SHOW MYSQL STATUS;"))
    });
    let rss = s.admin_ok(
        "SELECT Variable_Value FROM stats_memory_metrics WHERE Variable_Name = 'resident_memory_bytes';",
    );
    assert!(
        rss.trim().parse::<u64>().is_ok_and(|b| b > 1 << 20),
        "{rss}"
    );
}

#[test]
fn pgbouncer_exporter_reads_pools_and_stats_from_the_postgresql_admin() {
    if !backends_ready(Servers::Both) {
        return;
    }
    let s = Sluice::start(&standard_config("", ""));
    for i in 0..12 {
        ok_stdout(&psql_app(s.pg_port, &format!("SELECT {i}")));
    }
    let port = free_port();
    let exporter = Running(
        Command::new("prometheus-pgbouncer-exporter")
            .env("PGPASSWORD", "admin")
            .args(["--host", "127.0.0.1", "--port", &port.to_string()])
            .args(["--pgbouncer-host", "127.0.0.1", "--pgbouncer-user", "admin"])
            .args(["--pgbouncer-port", &s.pg_admin_port.to_string()])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("prometheus-pgbouncer-exporter installed"),
    );
    let mut text = String::new();
    wait_for("the exporter to serve metrics", || {
        let (code, body) = curl(port, "/metrics");
        text = body;
        code == 200 && text.contains("pgbouncer_pools")
    });
    drop(exporter);
    let requests = sample(
        &text,
        "pgbouncer_requests_total",
        &["database=\"hostgroup_0\""],
    );
    assert!(requests.is_some_and(|n| n >= 12.0), "{text}");
    let received = sample(
        &text,
        "pgbouncer_received_bytes_total",
        &["database=\"hostgroup_0\""],
    );
    assert!(received.is_some_and(|n| n > 0.0), "{text}");
    assert_eq!(sample(&text, "pgbouncer_pools", &[]), Some(2.0), "{text}");
    assert!(
        sample(&text, "pgbouncer_free_servers", &[]).is_some_and(|n| n >= 1.0),
        "{text}"
    );
    // What does not map onto Sluice is refused with a reason.
    let out = s.psql_admin("KILL app", false);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("KILL app is not supported"), "{err}");
}

/// A dedicated MariaDB, stopped when the test ends however it ends.
struct StopOnDrop(MariaDb);

impl Drop for StopOnDrop {
    fn drop(&mut self) {
        self.0.stop();
    }
}

#[test]
fn readyz_turns_503_while_the_only_writer_is_shunned_and_200_when_it_is_back() {
    if !backends_ready(Servers::Both) {
        return;
    }
    // A MariaDB of its own, so stopping it disturbs no other test.
    let db = StopOnDrop(MariaDb::new(
        xtask::state_dir().join("my-ready"),
        13311,
        11,
        &[],
    ));
    if db.0.start().expect("start dedicated MariaDB") {
        db.0.create_users().expect("users");
    }
    let pid = db.0.pid().expect("mariadbd pid");
    let http = free_port();
    let vars = "monitor_username = \"monitor\"\nmonitor_password = \"monitor\"\n\
                monitor_ping_interval = 200\nmonitor_ping_timeout = 200\nmonitor_ping_max_failures = 2\n\
                monitor_connect_interval = 1000\nmonitor_read_only_interval = 1000";
    let tables = "[[mysql_servers]]\nhostgroup_id = 0\nhostname = \"127.0.0.1\"\nport = 13311\n\
                  [[mysql_users]]\nusername = \"app\"\npassword = \"app\"\n";
    let s = Sluice::start(&http_config(http, vars, tables));
    wait_for("ready", || curl(http, "/readyz").0 == 200);
    xtask::proc::signal(pid, "STOP");
    let mut body = String::new();
    let stopped = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        wait_for("/readyz to turn 503", || {
            let (code, b) = curl(http, "/readyz");
            body = b;
            code == 503
        })
    }));
    xtask::proc::signal(pid, "CONT");
    assert!(
        stopped.is_ok(),
        "still ready while the writer is stopped; log:\n{}",
        s.log()
    );
    assert_eq!(
        body,
        "not ready: no ONLINE server in MySQL writer hostgroup(s) 0\n"
    );
    wait_for("/readyz to turn 200 again", || {
        curl(http, "/readyz").0 == 200
    });
    assert!(s.log().contains("shunning it"), "{}", s.log());
}

//! Running Sluice with its MCP endpoint, a test schema on both primaries, and the MCP Python SDK
//! client (`tests/python/mcp_helper.py`) against it.

use crate::{Sluice, free_port, ok_stdout, ports, primary_root, psql_app, python};
use std::path::PathBuf;
use std::time::Duration;

/// The shared bearer token of `/mcp/query` in [`config`].
pub const QUERY_TOKEN: &str = "query-token-for-tests";

/// A config with both protocols' replication hostgroups (0 writer, 1 reader), the MCP endpoint
/// on `mcp_port` over plain HTTP on loopback with [`QUERY_TOKEN`], and `extra` appended (more
/// `[mcp_variables]` keys must come through `extra_vars`).
pub fn config(mcp_port: u16, extra_vars: &str, extra: &str) -> String {
    format!(
        r#"
[mysql_variables]
interfaces = "127.0.0.1:{{port}}"

[mcp_variables]
enabled = "true"
port = "{mcp_port}"
use_ssl = "false"
query_endpoint_auth = "{QUERY_TOKEN}"
{extra_vars}

[[mysql_servers]]
hostgroup_id = 0
hostname = "127.0.0.1"
port = {my_primary}

[[mysql_servers]]
hostgroup_id = 1
hostname = "127.0.0.1"
port = {my_replica}

[[mysql_users]]
username = "app"
password = "app"
default_hostgroup = 0
default_schema = "mcp_e2e"

[[mysql_replication_hostgroups]]
writer_hostgroup = 0
reader_hostgroup = 1

[[pgsql_servers]]
hostgroup_id = 0
hostname = "127.0.0.1"
port = {pg_primary}

[[pgsql_servers]]
hostgroup_id = 1
hostname = "127.0.0.1"
port = {pg_replica}

[[pgsql_users]]
username = "app"
password = "app"
default_hostgroup = 0

[[pgsql_replication_hostgroups]]
writer_hostgroup = 0
reader_hostgroup = 1

{extra}
"#,
        my_primary = ports::MY_PRIMARY,
        my_replica = ports::MY_REPLICA,
        pg_primary = ports::PG_PRIMARY,
        pg_replica = ports::PG_REPLICA,
    )
}

/// Sluice with its MCP endpoint.
pub struct McpSluice {
    /// The process.
    pub sluice: Sluice,
    /// The MCP port.
    pub mcp_port: u16,
}

impl McpSluice {
    /// Starts Sluice with [`config`] and waits for the MCP port.
    pub fn start(extra_vars: &str, extra: &str) -> McpSluice {
        let mcp_port = free_port();
        let sluice = Sluice::start(&config(mcp_port, extra_vars, extra));
        let up =
            xtask::proc::wait_until(Duration::from_secs(20), || xtask::proc::port_open(mcp_port));
        assert!(up, "the MCP port did not open; log:\n{}", sluice.log());
        McpSluice { sluice, mcp_port }
    }

    /// `http://127.0.0.1:<port>/mcp/<endpoint>`.
    pub fn url(&self, endpoint: &str) -> String {
        format!("http://127.0.0.1:{}/mcp/{endpoint}", self.mcp_port)
    }

    /// Runs `body` (Python, after `from mcp_helper import *` and `URL`/`TOKEN` set from the
    /// arguments) and returns the JSON lines it emitted; panics with its output on failure.
    pub fn python(&self, endpoint: &str, token: &str, body: &str) -> Vec<serde_json::Value> {
        run_python(&self.url(endpoint), token, body, &self.sluice.log())
    }
}

/// The folder of the Python helpers.
pub fn python_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("python")
}

/// Runs an MCP client script (see [`McpSluice::python`]) against `url`; `log` is shown on
/// failure.
pub fn run_python(url: &str, token: &str, body: &str, log: &str) -> Vec<serde_json::Value> {
    let script = format!(
        "import asyncio, json, sys\nsys.path.insert(0, {dir:?})\nfrom mcp_helper import *\nURL = sys.argv[1]\nTOKEN = sys.argv[2]\n{body}\n",
        dir = python_dir().display().to_string()
    );
    let out = python(&script, &[url, token]);
    assert!(
        out.status.success(),
        "MCP client script failed ({}):\n{}\n{}\nSluice log:\n{log}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter(|l| l.starts_with('{'))
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect()
}

/// Creates the test schema `mcp_e2e` on both primaries (customers with a masked-worthy phone,
/// orders referencing them) once per test process, and waits until both replicas have it.
pub fn create_schema() {
    static CREATED: std::sync::Once = std::sync::Once::new();
    CREATED.call_once(create_schema_now);
}

fn create_schema_now() {
    primary_root(
        "CREATE DATABASE IF NOT EXISTS mcp_e2e;
         CREATE TABLE IF NOT EXISTS mcp_e2e.customers (
             id INT PRIMARY KEY, name VARCHAR(40) NOT NULL, phone VARCHAR(20),
             created_at DATETIME NOT NULL DEFAULT '2026-01-01 00:00:00', balance DECIMAL(10,2)
         ) COMMENT 'who buys';
         CREATE TABLE IF NOT EXISTS mcp_e2e.orders (
             id INT PRIMARY KEY, customer_id INT NOT NULL, total DECIMAL(10,2),
             KEY by_customer (customer_id),
             CONSTRAINT orders_customer FOREIGN KEY (customer_id) REFERENCES mcp_e2e.customers (id)
         );
         INSERT IGNORE INTO mcp_e2e.customers (id, name, phone, balance) VALUES
             (1, 'Ann', '555-0101', 10.50), (2, 'Bo', NULL, 0), (3, 'Cy', '555-0303', 7);
         INSERT IGNORE INTO mcp_e2e.orders VALUES (1, 1, 20.00), (2, 1, 5.25), (3, 3, 1.00);",
    );
    ok_stdout(&psql_app(
        ports::PG_PRIMARY,
        // The transaction-level advisory lock keeps sessions that create it at once apart
        // until the first one's work is committed (CREATE … IF NOT EXISTS is not safe against
        // a concurrent CREATE in PostgreSQL; a session-level lock is released before the
        // implicit transaction of the statement list commits).
        "SELECT pg_advisory_xact_lock(7071);
         CREATE SCHEMA IF NOT EXISTS mcp_e2e;
         CREATE TABLE IF NOT EXISTS mcp_e2e.customers (
             id int PRIMARY KEY, name text NOT NULL, phone text,
             created_at timestamp NOT NULL DEFAULT '2026-01-01', balance numeric(10,2));
         COMMENT ON TABLE mcp_e2e.customers IS 'who buys';
         CREATE TABLE IF NOT EXISTS mcp_e2e.orders (
             id int PRIMARY KEY, customer_id int NOT NULL REFERENCES mcp_e2e.customers (id),
             total numeric(10,2));
         CREATE INDEX IF NOT EXISTS by_customer ON mcp_e2e.orders (customer_id);
         INSERT INTO mcp_e2e.customers (id, name, phone, balance) VALUES
             (1, 'Ann', '555-0101', 10.50), (2, 'Bo', NULL, 0), (3, 'Cy', '555-0303', 7)
             ON CONFLICT DO NOTHING;
         INSERT INTO mcp_e2e.orders VALUES (1, 1, 20.00), (2, 1, 5.25), (3, 3, 1.00)
             ON CONFLICT DO NOTHING;",
    ));
    crate::wait_for("the MariaDB replica to have mcp_e2e.orders", || {
        crate::mariadb(
            ports::MY_REPLICA,
            "app",
            "app",
            &["--skip-ssl", "-N"],
            "SELECT COUNT(*) FROM mcp_e2e.orders",
        )
        .stdout
        .starts_with(b"3")
    });
    crate::wait_for("the PostgreSQL replica to have mcp_e2e.orders", || {
        psql_app(ports::PG_REPLICA, "SELECT count(*) FROM mcp_e2e.orders")
            .stdout
            .starts_with(b"3")
    });
}

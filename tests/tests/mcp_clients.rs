//! The MCP endpoint with the npm clients: the MCP Inspector's CLI lists and calls tools on
//! MariaDB and PostgreSQL targets, and the MCP conformance suite's server scenarios that apply
//! to a database server pass (tests/mcp_conformance_baseline.yml lists, check by check, what
//! the suite cannot test here and why).

use serde_json::{Value, json};
use sluice_tests::mcp::{McpSluice, QUERY_TOKEN, create_schema, python_dir};
use sluice_tests::{Servers, backends_ready, free_port};
use std::process::{Command, Stdio};
use xtask::packages::{npm_mcp_bin, npm_mcp_node};

/// Runs an npm client's command with the Node.js 22 `cargo xtask test` installed.
fn node(bin: &str, args: &[&str]) -> std::process::Output {
    let node = npm_mcp_node();
    assert!(
        node.exists(),
        "{} is missing: `cargo xtask test` installs the npm MCP clients",
        node.display()
    );
    let path = format!(
        "{}:{}",
        node.parent()
            .map(|p| p.display().to_string())
            .unwrap_or_default(),
        std::env::var("PATH").unwrap_or_default()
    );
    Command::new(&node)
        .arg(npm_mcp_bin(bin))
        .args(args)
        .env("PATH", path)
        .env("NO_COLOR", "1")
        .output()
        .expect("node runs")
}

fn inspector(s: &McpSluice, args: &[&str]) -> Value {
    let (ok, v) = inspector_answer(s, args);
    assert!(ok, "inspector {args:?} failed: {v}\n{}", s.sluice.log());
    v
}

/// The Inspector's answer (its first JSON document) and whether it exited 0 (it does not for
/// a tool result with `isError`).
fn inspector_answer(s: &McpSluice, args: &[&str]) -> (bool, Value) {
    let url = s.url("query");
    let auth = format!("Authorization: Bearer {QUERY_TOKEN}");
    let mut all = vec![
        "--cli",
        url.as_str(),
        "--transport",
        "http",
        "--header",
        auth.as_str(),
    ];
    all.extend_from_slice(args);
    let out = node("mcp-inspector", &all);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let first = serde_json::Deserializer::from_str(&stdout)
        .into_iter::<Value>()
        .next()
        .and_then(Result::ok)
        .unwrap_or_else(|| {
            panic!(
                "inspector {args:?} printed no JSON: {stdout}{}",
                String::from_utf8_lossy(&out.stderr)
            )
        });
    (out.status.success(), first)
}

#[test]
fn the_mcp_inspector_lists_and_calls_tools_on_both_protocols() {
    if !backends_ready(Servers::Both) {
        return;
    }
    create_schema();
    let s = McpSluice::start("", "");
    let list = inspector(&s, &["--method", "tools/list"]);
    let names: Vec<&str> = list["tools"]
        .as_array()
        .expect("tools")
        .iter()
        .map(|t| t["name"].as_str().unwrap_or(""))
        .collect();
    assert!(
        names.contains(&"run_sql_readonly") && names.contains(&"catalog.search"),
        "{names:?}"
    );
    for target in ["mysql_hg1", "pgsql_hg1"] {
        let target_arg = format!("target_id={target}");
        let r = inspector(
            &s,
            &[
                "--method",
                "tools/call",
                "--tool-name",
                "run_sql_readonly",
                "--tool-arg",
                "sql=SELECT name FROM mcp_e2e.customers WHERE id = 3",
                "--tool-arg",
                &target_arg,
            ],
        );
        assert_eq!(r["isError"], false, "{r}");
        assert_eq!(r["structuredContent"]["rows"], json!([["Cy"]]), "{r}");
        let d = inspector(
            &s,
            &[
                "--method",
                "tools/call",
                "--tool-name",
                "describe_table",
                "--tool-arg",
                "schema=mcp_e2e",
                "--tool-arg",
                "table=orders",
                "--tool-arg",
                &target_arg,
            ],
        );
        assert_eq!(d["structuredContent"]["primary_key"], json!(["id"]), "{d}");
        let (_, refused) = inspector_answer(
            &s,
            &[
                "--method",
                "tools/call",
                "--tool-name",
                "run_sql_readonly",
                "--tool-arg",
                "sql=DELETE FROM mcp_e2e.orders",
                "--tool-arg",
                &target_arg,
            ],
        );
        assert_eq!(refused["isError"], true, "{refused}");
    }
}

#[test]
fn the_conformance_suites_server_scenarios_pass() {
    if !backends_ready(Servers::Both) {
        return;
    }
    let s = McpSluice::start("", "");
    // The suite sends no Authorization header: a relay adds the token to each request and
    // changes nothing else (Host, Origin and the rest reach Sluice as the suite sent them).
    let relay_port = free_port();
    let mut relay = Command::new("python3")
        .arg(python_dir().join("auth_relay.py"))
        .args([
            &relay_port.to_string(),
            &s.mcp_port.to_string(),
            QUERY_TOKEN,
        ])
        .stdout(Stdio::piped())
        .spawn()
        .expect("python3");
    sluice_tests::wait_for("the relay", || xtask::proc::port_open(relay_port));
    let url = format!("http://127.0.0.1:{relay_port}/mcp/query");
    let baseline =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("mcp_conformance_baseline.yml");
    let results = sluice_tests::scratch_dir("mcp_conformance");
    let mut failed = Vec::new();
    for scenario in [
        "server-initialize",
        "ping",
        "tools-list",
        "server-session-lifecycle",
        "server-stateless",
        "http-header-validation",
        "dns-rebinding-protection",
        "caching",
    ] {
        let out = node(
            "conformance",
            &[
                "server",
                "--url",
                &url,
                "--scenario",
                scenario,
                "--expected-failures",
                &baseline.display().to_string(),
                "-o",
                &results.display().to_string(),
            ],
        );
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        if !out.status.success() {
            failed.push(format!(
                "{scenario}:\n{text}{}",
                String::from_utf8_lossy(&out.stderr)
            ));
        }
    }
    let _ = relay.kill();
    let _ = relay.wait();
    assert!(
        failed.is_empty(),
        "{}\nSluice log:\n{}",
        failed.join("\n"),
        s.sluice.log()
    );
}

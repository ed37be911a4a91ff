//! The MCP port as HTTP: the working start from the admin alone (HTTPS with the generated
//! certificate), plaintext refused off loopback, and bad input of every kind answered with a
//! clear HTTP or JSON-RPC error while SQL clients keep being served.

use sluice_tests::mcp::{McpSluice, QUERY_TOKEN, create_schema, run_python};
use sluice_tests::{Servers, Sluice, backends_ready, free_port, mariadb, ok_stdout};

#[test]
fn set_enable_and_load_is_a_working_https_start() {
    if !backends_ready(Servers::Both) {
        return;
    }
    create_schema();
    // The config has no MCP variables: the admin turns it on.
    let cfg = sluice_tests::mcp::config(1, "", "")
        .replace(
            "[mcp_variables]\nenabled = \"true\"\nport = \"1\"\nuse_ssl = \"false\"\nquery_endpoint_auth = \"query-token-for-tests\"\n",
            "",
        );
    assert!(!cfg.contains("mcp_variables"), "{cfg}");
    let s = Sluice::start(&cfg);
    let port = free_port();
    s.admin_ok(&format!(
        "SET mcp-enabled='true'; SET mcp-port='{port}'; SET mcp-query_endpoint_auth='{QUERY_TOKEN}'; LOAD MCP VARIABLES TO RUNTIME; SAVE MCP VARIABLES TO DISK;"
    ));
    sluice_tests::wait_for("the MCP port", || xtask::proc::port_open(port));
    let cert = s.dir.join("data").join("sluice-cert.pem");
    let lines = run_python(
        &format!("https://127.0.0.1:{port}/mcp/query"),
        QUERY_TOKEN,
        &format!(
            r#"
async def main():
    async with client(URL, TOKEN, verify={cert:?}) as c:
        emit(r=await call(c, "list_targets", {{}}))
        emit(r=await call(c, "run_sql_readonly", {{"sql": "SELECT name FROM mcp_e2e.customers WHERE id = 1"}}))
asyncio.run(main())
"#,
            cert = cert.display().to_string()
        ),
        &s.log(),
    );
    let targets = &lines[0]["r"]["data"]["targets"];
    assert_eq!(targets[0]["target_id"], "mysql_hg1", "{targets}");
    assert_eq!(targets[1]["target_id"], "pgsql_hg1", "{targets}");
    assert_eq!(
        lines[1]["r"]["data"]["rows"],
        serde_json::json!([["Ann"]]),
        "{lines:?}"
    );
    assert!(s.log().contains(&format!(
        "MCP endpoint listening on https://127.0.0.1:{port}"
    )));
    // Plaintext off loopback is refused, and the port closes rather than serve it.
    s.admin_ok(
        "SET mcp-use_ssl='false'; SET mcp-interface='0.0.0.0'; LOAD MCP VARIABLES TO RUNTIME;",
    );
    sluice_tests::wait_for("the refusal", || {
        s.log().contains("mcp-use_ssl=false is refused on 0.0.0.0")
    });
    sluice_tests::wait_for("the port to close", || !xtask::proc::port_open(port));
    // Turned off, it stays off.
    s.admin_ok(
        "SET mcp-enabled='false'; SET mcp-interface='127.0.0.1'; LOAD MCP VARIABLES TO RUNTIME;",
    );
    assert!(!xtask::proc::port_open(port));
}

#[test]
fn bad_input_gets_clear_errors_and_sql_clients_keep_being_served() {
    if !backends_ready(Servers::Both) {
        return;
    }
    create_schema();
    let s = McpSluice::start(
        "max_request_bytes = \"4096\"\nrequest_timeout_ms = \"1000\"",
        "",
    );
    // Failed tokens count like failed MySQL logins.
    s.sluice.admin_ok(
        "SET mysql-client_host_error_counts='5'; SET mysql-client_host_cache_size='16'; LOAD MYSQL VARIABLES TO RUNTIME;",
    );
    let lines = s.python(
        "query",
        QUERY_TOKEN,
        r#"
import httpx2, socket, time
ACCEPT = "application/json, text/event-stream"
def headers(**extra):
    h = {"Authorization": f"Bearer {TOKEN}", "Accept": ACCEPT, "Content-Type": "application/json"}
    h.update(extra)
    return {k: v for k, v in h.items() if v is not None}
async def main():
    init = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}
    async with httpx2.AsyncClient(timeout=30) as h:
        async def post(name, body=None, raw=None, url=URL, **hdr):
            r = await h.post(url, headers=headers(**hdr), content=raw if raw is not None else json.dumps(body))
            try:
                j = r.json()
            except Exception:
                j = None
            emit(name=name, status=r.status_code, body=j, text=r.text[:300], connection=r.headers.get("connection"))
        await post("malformed", raw=b'{"jsonrpc": "2.0", "id": 1, "method": ')
        await post("batch", [init, init])
        await post("not_jsonrpc", {"hello": "world"})
        await post("oversized", raw=json.dumps(dict(init, pad="x" * 10000)).encode())
        await post("content_type", init, **{"Content-Type": "text/plain"})
        await post("no_token", init, Authorization=None)
        await post("wrong_token", init, Authorization="Bearer nope")
        await post("token_in_url", init, url=URL + "?token=" + TOKEN, Authorization=None)
        await post("bad_version", init, **{"MCP-Protocol-Version": "1999-01-01"})
        await post("no_accept", init, Accept="text/html")
        await post("evil_host", init, Host="evil.example")
        await post("evil_origin", init, Origin="https://evil.example")
        tools = {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "drop_everything", "arguments": {}}}
        await post("unknown_tool", tools, **{"MCP-Protocol-Version": "2025-11-25"})
        args = {"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "run_sql_readonly", "arguments": {"sql": "SELECT 1", "sudo": True}}}
        await post("unknown_argument", args, **{"MCP-Protocol-Version": "2025-11-25"})
        missing = {"jsonrpc": "2.0", "id": 4, "method": "tools/call", "params": {"name": "run_sql_readonly", "arguments": {}}}
        await post("missing_argument", missing, **{"MCP-Protocol-Version": "2025-11-25"})
    # A body that never finishes arriving.
    host, port = URL.split("//")[1].split("/")[0].split(":")
    sock = socket.create_connection((host, int(port)))
    sock.sendall(f"POST /mcp/query HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {TOKEN}\r\nAccept: {ACCEPT}\r\nContent-Type: application/json\r\nContent-Length: 500\r\n\r\n{{\"jsonrpc\"".encode())
    t = time.monotonic()
    reply = sock.recv(4096).decode(errors="replace")
    emit(name="slow_body", status=int(reply.split()[1]) if reply else 0, text=reply[-200:], seconds=time.monotonic() - t)
    sock.close()
    # A head larger than the bound.
    sock = socket.create_connection((host, int(port)))
    sock.sendall(("GET /mcp/query HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Big: " + "a" * 40000 + "\r\n\r\n").encode())
    reply = sock.recv(4096).decode(errors="replace")
    emit(name="huge_head", status=int(reply.split()[1]) if reply else 0)
    sock.close()
    # Failed tokens are throttled per address, like failed logins: past the count, each
    # attempt is told when its turn comes (429, Retry-After) instead of being tried.
    async with httpx2.AsyncClient(timeout=30) as h:
        statuses = []
        for i in range(8):
            r = await h.post(URL, headers=headers(Authorization="Bearer wrong-%d" % i), content=json.dumps(init))
            statuses.append([r.status_code, r.headers.get("retry-after")])
        emit(name="throttled", statuses=statuses)
asyncio.run(main())
"#,
    );
    let get = |name: &str| {
        lines
            .iter()
            .find(|l| l["name"] == name)
            .unwrap_or_else(|| panic!("no {name}: {lines:?}"))
    };
    let expect = |name: &str, status: u16, code: Option<i64>, words: &str| {
        let l = get(name);
        assert_eq!(l["status"], status, "{name}: {l}");
        if let Some(code) = code {
            assert_eq!(l["body"]["error"]["code"], code, "{name}: {l}");
        }
        let text = l["text"].as_str().unwrap_or("").to_ascii_lowercase();
        assert!(text.contains(words), "{name} should say {words:?}: {l}");
    };
    expect("malformed", 400, Some(-32700), "not json");
    expect("batch", 400, Some(-32600), "batches are not supported");
    expect("not_jsonrpc", 400, Some(-32600), "json-rpc 2.0");
    expect("oversized", 413, Some(-32600), "over 4096 bytes");
    expect("content_type", 415, Some(-32600), "application/json");
    expect("no_token", 401, Some(-32001), "no bearer token");
    expect("wrong_token", 401, Some(-32001), "not valid");
    expect(
        "token_in_url",
        400,
        Some(-32600),
        "authorization header only",
    );
    expect("bad_version", 400, Some(-32022), "2026-07-28");
    expect("no_accept", 406, None, "accept");
    expect("evil_host", 403, None, "host");
    expect("evil_origin", 403, None, "origin");
    expect("unknown_tool", 200, Some(-32602), "unknown tool");
    expect(
        "unknown_argument",
        200,
        Some(-32602),
        "unknown field `sudo`",
    );
    expect("missing_argument", 200, Some(-32602), "missing field `sql`");
    // A refused request's connection is not reused (its body may not have been read).
    assert_eq!(get("wrong_token")["connection"], "close");
    assert_eq!(get("content_type")["connection"], "close");
    let slow = get("slow_body");
    assert_eq!(slow["status"], 408, "{slow}");
    assert_eq!(get("huge_head")["status"], 431);
    let log = s.sluice.log();
    assert!(
        log.contains("throttling logins from 127.0.0.1"),
        "failed tokens are throttled: {log}"
    );
    // The good tokens before the loop reset the address's count; five failures reach it, the
    // sixth is tried at its turn, the next ones are told to wait for theirs.
    let throttled = &get("throttled")["statuses"];
    assert_eq!(throttled[4], serde_json::json!([401, null]), "{throttled}");
    let last = &throttled[7];
    assert_eq!(last[0], 429, "{throttled}");
    assert!(
        last[1]
            .as_str()
            .is_some_and(|s| s.parse::<u64>().is_ok_and(|n| n >= 1)),
        "{throttled}"
    );
    assert!(
        !log.contains(QUERY_TOKEN) && !log.contains("wrong-3"),
        "no token in the log"
    );
    // SQL clients were served throughout, and still are.
    let out = ok_stdout(&mariadb(
        s.sluice.port,
        "app",
        "app",
        &["--skip-ssl", "-N"],
        "SELECT name FROM mcp_e2e.customers WHERE id = 2",
    ));
    assert_eq!(out.trim(), "Bo");
    let refused = s.sluice.admin_ok("SHOW PROMETHEUS METRICS");
    assert!(
        refused.contains("sluice_mcp_refused_http_requests_total"),
        "{refused}"
    );
}

#[test]
fn the_endpoints_connections_use_tls_where_the_server_row_asks_for_it() {
    if !backends_ready(Servers::Both) {
        return;
    }
    create_schema();
    let s = McpSluice::start(
        "",
        &format!(
            r#"
[[mysql_servers]]
hostgroup_id = 5
hostname = "127.0.0.1"
port = {my}
use_ssl = 1

[[pgsql_servers]]
hostgroup_id = 5
hostname = "127.0.0.1"
port = {pg}
use_ssl = 1

[[mcp_targets]]
target_id = "my_tls"
protocol = "mysql"
hostgroup_id = 5
username = "app"

[[mcp_targets]]
target_id = "pg_tls"
protocol = "pgsql"
hostgroup_id = 5
username = "app"
default_schema = "app"

[[mcp_targets]]
target_id = "my_plain"
protocol = "mysql"
hostgroup_id = 1
username = "app"
"#,
            my = sluice_tests::ports::MY_REPLICA,
            pg = sluice_tests::ports::PG_REPLICA,
        ),
    );
    let lines = s.python(
        "query",
        QUERY_TOKEN,
        r#"
async def main():
    async with client(URL, TOKEN) as c:
        emit(t="my_tls", r=await call(c, "run_sql_readonly", {"target_id": "my_tls", "sql": "SHOW SESSION STATUS LIKE 'Ssl_cipher'"}))
        emit(t="my_plain", r=await call(c, "run_sql_readonly", {"target_id": "my_plain", "sql": "SHOW SESSION STATUS LIKE 'Ssl_cipher'"}))
        emit(t="pg_tls", r=await call(c, "run_sql_readonly", {"target_id": "pg_tls", "sql": "SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()"}))
asyncio.run(main())
"#,
    );
    let rows = |t: &str| {
        lines
            .iter()
            .find(|l| l["t"] == t)
            .map(|l| l["r"]["data"]["rows"].clone())
            .unwrap_or_default()
    };
    let cipher = rows("my_tls")[0][1].as_str().unwrap_or("").to_string();
    assert!(!cipher.is_empty(), "TLS to the MariaDB replica: {lines:?}");
    assert_eq!(
        rows("my_plain")[0][1],
        "",
        "plaintext where use_ssl=0: {lines:?}"
    );
    assert_eq!(rows("pg_tls"), serde_json::json!([[true]]), "{lines:?}");
}

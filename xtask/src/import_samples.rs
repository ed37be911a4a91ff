//! Other proxies' configuration files, as their projects ship them, for the `sluice import`
//! tests: PgBouncer's (Debian's `pgbouncer` package: `/etc/pgbouncer/pgbouncer.ini` and the
//! documentation's example) and a ProxySQL `proxysql.cnf` (Ansible's community.proxysql role,
//! rendered with its defaults from the `ansible` wheel; no registry ships ProxySQL's own sample).
//! Nothing here is committed.

use crate::proc::{run_visible, step};
use crate::{Result, workspace_root};
use std::path::PathBuf;
use std::process::Command;

/// The `ansible` release whose community.proxysql role renders the sample.
pub const ANSIBLE_WHEEL: (&str, &str) = ("ansible", "12.3.0");

/// Debian's default PgBouncer configuration.
pub const PGBOUNCER_INI: &str = "/etc/pgbouncer/pgbouncer.ini";

/// The example configuration of PgBouncer's documentation, as Debian ships it.
pub const PGBOUNCER_DOC_INI: &str = "/usr/share/doc/pgbouncer/examples/pgbouncer.ini";

/// Where the rendered `proxysql.cnf` is written: `target/import-samples/proxysql-ansible.cnf`.
pub fn proxysql_sample() -> PathBuf {
    workspace_root().join("target/import-samples/proxysql-ansible.cnf")
}

/// Installs PgBouncer (for its files) and renders the ProxySQL sample unless present.
pub fn ensure() -> Result<()> {
    crate::packages::ensure_pgbouncer()?;
    let out = proxysql_sample();
    if out.is_file() {
        return Ok(());
    }
    crate::packages::ensure_python_module("jinja2", "Jinja2")?;
    crate::packages::ensure_python_module("yaml", "PyYAML")?;
    let dir = out.parent().unwrap_or(&out).to_path_buf();
    let (name, version) = ANSIBLE_WHEEL;
    step(&format!(
        "import samples: pip download {name}=={version} (for community.proxysql's proxysql.cnf)"
    ));
    run_visible(
        Command::new("python3")
            .args(["-m", "pip", "download", "--quiet", "--no-deps"])
            .args(["--disable-pip-version-check", "-d"])
            .arg(&dir)
            .arg(format!("{name}=={version}")),
    )?;
    let wheel = dir.join(format!("{name}-{version}-py3-none-any.whl"));
    let script = dir.join("render_proxysql_cnf.py");
    std::fs::write(&script, include_str!("render_proxysql_cnf.py"))
        .map_err(|e| format!("{}: {e}", script.display()))?;
    run_visible(Command::new("python3").arg(&script).arg(&wheel).arg(&out))?;
    // The 54 MB wheel is not needed once the sample is rendered.
    let _ = std::fs::remove_file(&wheel);
    step(&format!("import samples: {} rendered", out.display()));
    Ok(())
}

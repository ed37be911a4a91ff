//! The Debian package as an operator meets it: `dpkg -i` of the package `cargo xtask package`
//! builds (here from the debug binary the suite runs), the unit checked by
//! `systemd-analyze verify`, the installed binary started with the installed config as the
//! `sluice` user, a client connected, `--version` and `check-config`, then `dpkg --purge`
//! leaving nothing behind. Needs root (dpkg), as CI runs.

use sluice_tests::*;
use std::os::unix::fs::MetadataExt;
use std::process::{Command, Output, Stdio};
use std::time::Duration;

fn run(program: &str, args: &[&str]) -> Output {
    Command::new(program)
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("{program}: {e}"))
}

fn id(what: &str) -> u32 {
    ok_stdout(&run("id", &[what, "sluice"]))
        .trim()
        .parse()
        .expect("id")
}

#[test]
fn the_deb_installs_runs_as_the_sluice_user_and_purges_cleanly() {
    let deb = xtask::package::build(xtask::package::Profile::Debug, Some(&sluice_bin()))
        .expect("cargo xtask package --debug");
    let install = run("dpkg", &["-i", &deb.display().to_string()]);
    assert!(install.status.success(), "{install:?}");

    // The installed files are the packaged ones (DEBIAN/md5sums).
    let files = run("dpkg", &["--verify", "sluice"]);
    assert!(
        files.status.success() && files.stdout.is_empty(),
        "{files:?}"
    );

    let verify = run(
        "systemd-analyze",
        &["verify", "/lib/systemd/system/sluice.service"],
    );
    assert!(verify.status.success(), "{verify:?}");
    assert_eq!(String::from_utf8_lossy(&verify.stderr), "", "unit warnings");

    let version = ok_stdout(&run("/usr/bin/sluice", &["--version"]));
    assert!(
        version.starts_with("sluice 0.") && version.trim_end().ends_with(", debug)"),
        "{version}"
    );
    let check = run(
        "/usr/bin/sluice",
        &["check-config", "/etc/sluice/sluice.toml"],
    );
    assert!(check.status.success(), "{check:?}");
    let conf = std::fs::metadata("/etc/sluice/sluice.toml").expect("installed config");
    assert_eq!((conf.mode() & 0o777, conf.gid()), (0o640, id("-g")));

    // The installed binary, the installed config, the sluice user, the packaged datadir.
    let mut proxy = Command::new("setpriv")
        .args([
            "--reuid",
            "sluice",
            "--regid",
            "sluice",
            "--init-groups",
            "/usr/bin/sluice",
        ])
        .args([
            "--config",
            "/etc/sluice/sluice.toml",
            "--datadir",
            "/var/lib/sluice",
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("setpriv");
    let up = within(Duration::from_secs(20), || xtask::proc::port_open(6032));
    assert!(
        up.is_some(),
        "the installed Sluice did not listen on the admin port"
    );
    let iface = mariadb(
        6032,
        "admin",
        "admin",
        &["--skip-ssl"],
        "SELECT variable_value FROM global_variables WHERE variable_name = 'mysql-interfaces'",
    );
    assert_eq!(ok_stdout(&iface).trim(), "0.0.0.0:6033");
    let db = std::fs::metadata("/var/lib/sluice/sluice.db").expect("admin database");
    assert_eq!(db.uid(), id("-u"), "the datadir's files belong to sluice");
    xtask::proc::signal(proxy.id(), "TERM");
    let status = proxy.wait().expect("sluice exits");
    assert!(status.success(), "{status}");

    let purge = run("dpkg", &["--purge", "sluice"]);
    assert!(purge.status.success(), "{purge:?}");
    for gone in [
        "/usr/bin/sluice",
        "/etc/sluice",
        "/var/lib/sluice",
        "/lib/systemd/system/sluice.service",
    ] {
        assert!(!std::path::Path::new(gone).exists(), "{gone} left behind");
    }
    assert!(
        !run("getent", &["passwd", "sluice"]).status.success(),
        "user left behind"
    );
}

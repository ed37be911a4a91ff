//! The optional three-node MariaDB Galera cluster on loopback (`cargo xtask backends up
//! --galera`): nodes on :13331-:13333, group communication on :14561-:14563, state transfer by
//! rsync. The first node bootstraps the cluster; the others join it (a full state transfer).

use crate::mariadb::MariaDb;
use crate::proc::{self, run_capture, step, wait_until};
use crate::{Result, packages};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

/// The nodes' client ports.
pub const PORTS: [u16; 3] = [13331, 13332, 13333];

const PROVIDER: &str = "/usr/lib/galera/libgalera_smm.so";

const USERS_SQL: &str = "
CREATE USER IF NOT EXISTS 'app'@'%' IDENTIFIED BY 'app';
GRANT ALL ON *.* TO 'app'@'%';
CREATE USER IF NOT EXISTS 'monitor'@'%' IDENTIFIED BY 'monitor';
GRANT PROCESS, REPLICATION CLIENT ON *.* TO 'monitor'@'%';
CREATE USER IF NOT EXISTS 'root'@'127.0.0.1' IDENTIFIED BY 'root';
GRANT ALL ON *.* TO 'root'@'127.0.0.1' WITH GRANT OPTION;
";

/// Node `i` (0, 1, 2).
pub fn node(state: &Path, i: usize) -> MariaDb {
    MariaDb::new(
        state.join(format!("galera{}", i + 1)),
        PORTS[i],
        100 + i as u32,
        &[],
    )
}

fn start_node(state: &Path, i: usize, bootstrap: bool) -> Result<()> {
    let n = node(state, i);
    if n.is_up() {
        return Ok(());
    }
    let data = n.dir.join("data");
    std::fs::create_dir_all(&n.dir).map_err(|e| format!("{}: {e}", n.dir.display()))?;
    let tmp = proc::mariadb_tmpdir(&n.dir)?;
    if !data.join("mysql").exists() {
        run_capture(
            Command::new("mariadb-install-db")
                .env("TMPDIR", &tmp)
                .arg("--no-defaults")
                .arg("--user=root")
                .arg(format!("--datadir={}", data.display()))
                .args(["--skip-test-db", "--auth-root-authentication-method=socket"]),
        )?;
        if !bootstrap && proc::is_root() {
            // The joiner's rsync daemon runs as nobody; it must be able to write the datadir.
            run_capture(
                Command::new("chown")
                    .args(["-R", "nobody:nogroup"])
                    .arg(&data),
            )?;
        }
    }
    let peers: Vec<String> = (1..=3).map(|k| format!("127.0.0.1:1456{k}")).collect();
    let k = i + 1;
    step(&format!(
        "Galera node :{}: starting{}",
        n.port,
        if bootstrap { " (bootstrap)" } else { "" }
    ));
    let log = std::fs::File::create(n.dir.join("stdout.log")).map_err(|e| e.to_string())?;
    let mut cmd = Command::new("setsid");
    cmd.arg("mariadbd")
        .args(["--no-defaults", "--user=root"])
        .arg(format!("--datadir={}", data.display()))
        .arg(format!("--tmpdir={}", tmp.display()))
        .arg(format!("--port={}", n.port))
        .arg("--bind-address=127.0.0.1")
        .arg(format!("--socket={}", n.dir.join("mysqld.sock").display()))
        .arg(format!("--pid-file={}", n.dir.join("mysqld.pid").display()))
        .arg(format!("--log-error={}", n.dir.join("error.log").display()))
        .arg(format!("--server-id={}", 100 + k))
        .args([
            "--binlog-format=ROW",
            "--innodb-autoinc-lock-mode=2",
            "--innodb-buffer-pool-size=64M",
            "--max-connections=300",
            "--wsrep-on=ON",
        ])
        .arg(format!("--wsrep-provider={PROVIDER}"))
        .arg("--wsrep-cluster-name=sluice-test")
        .arg(format!("--wsrep-cluster-address=gcomm://{}", peers.join(",")))
        .arg(format!("--wsrep-node-address=127.0.0.1:1456{k}"))
        .arg(format!("--wsrep-node-name=galera{k}"))
        .arg(format!(
            "--wsrep-provider-options=gmcast.listen_addr=tcp://127.0.0.1:1456{k};ist.recv_addr=127.0.0.1:1457{k};gcache.size=16M"
        ))
        .arg("--wsrep-sst-method=rsync")
        .arg(format!("--wsrep-sst-receive-address=127.0.0.1:1458{k}"));
    if bootstrap {
        cmd.arg("--wsrep-new-cluster");
    }
    cmd.stdin(Stdio::null())
        .stdout(log.try_clone().map_err(|e| e.to_string())?)
        .stderr(log)
        .spawn()
        .map_err(|e| format!("cannot start mariadbd: {e}"))?;
    let synced = wait_until(Duration::from_secs(90), || {
        n.sql("SHOW STATUS LIKE 'wsrep_local_state_comment'")
            .is_ok_and(|o| o.contains("Synced"))
    });
    if !synced {
        return Err(format!(
            "Galera node :{} did not reach Synced; error log:\n{}",
            n.port,
            proc::tail(&n.dir.join("error.log"), 20)
        ));
    }
    Ok(())
}

/// Starts the three nodes (installing galera-4 and rsync when missing) and the test users.
pub fn cluster_up(state: &Path) -> Result<()> {
    packages::ensure_galera()?;
    let bootstrap = !(0..3).any(|i| node(state, i).is_up());
    start_node(state, 0, bootstrap)?;
    node(state, 0).sql(USERS_SQL)?;
    start_node(state, 1, false)?;
    start_node(state, 2, false)?;
    let size = node(state, 0).sql("SHOW STATUS LIKE 'wsrep_cluster_size'")?;
    step(&format!(
        "Galera cluster up: {}",
        size.trim().replace('\t', " = ")
    ));
    Ok(())
}

/// Stops the nodes and removes their data (the next start bootstraps a fresh cluster).
pub fn cluster_down(state: &Path) -> Result<()> {
    for i in (0..3).rev() {
        let n = node(state, i);
        n.stop();
        let _ = std::fs::remove_dir_all(&n.dir);
    }
    Ok(())
}

/// True when galera-4 is installed.
pub fn available() -> bool {
    Path::new(PROVIDER).exists()
}

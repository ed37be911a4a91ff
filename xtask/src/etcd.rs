//! A three-member etcd cluster on loopback (Debian's `etcd-server`), for the configuration
//! store's tests: started, members killed and restarted by PID, everything stopped on drop.

use crate::Result;
use crate::proc::{port_open, wait_until};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

/// One member: its ports and, while it runs, its process.
struct Member {
    name: String,
    client_port: u16,
    peer_port: u16,
    child: Option<Child>,
}

/// A running etcd cluster.
pub struct EtcdCluster {
    dir: PathBuf,
    members: Vec<Member>,
}

impl EtcdCluster {
    /// Starts one member per (client port, peer port) in `ports`, data under `dir`, and waits
    /// until the cluster has a leader.
    pub fn start(dir: &Path, ports: &[(u16, u16)]) -> Result<EtcdCluster> {
        crate::packages::ensure_etcd()?;
        std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        let mut cluster = EtcdCluster {
            dir: dir.to_path_buf(),
            members: ports
                .iter()
                .enumerate()
                .map(|(i, (client_port, peer_port))| Member {
                    name: format!("m{}", i + 1),
                    client_port: *client_port,
                    peer_port: *peer_port,
                    child: None,
                })
                .collect(),
        };
        for i in 0..cluster.members.len() {
            cluster.spawn(i)?;
        }
        cluster.wait_healthy()?;
        Ok(cluster)
    }

    fn spawn(&mut self, i: usize) -> Result<()> {
        let initial: Vec<String> = self
            .members
            .iter()
            .map(|m| format!("{}=http://127.0.0.1:{}", m.name, m.peer_port))
            .collect();
        let m = &mut self.members[i];
        let client = format!("http://127.0.0.1:{}", m.client_port);
        let peer = format!("http://127.0.0.1:{}", m.peer_port);
        let log = std::fs::File::create(self.dir.join(format!("{}.log", m.name)))
            .map_err(|e| e.to_string())?;
        let child = Command::new("etcd")
            .args(["--name", &m.name])
            .arg("--data-dir")
            .arg(self.dir.join(&m.name))
            .args([
                "--listen-client-urls",
                &client,
                "--advertise-client-urls",
                &client,
            ])
            .args([
                "--listen-peer-urls",
                &peer,
                "--initial-advertise-peer-urls",
                &peer,
            ])
            .args(["--initial-cluster", &initial.join(",")])
            .args([
                "--initial-cluster-token",
                "sluice-test",
                "--initial-cluster-state",
                "new",
            ])
            .args(["--heartbeat-interval", "100", "--election-timeout", "1000"])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .map_err(|e| format!("cannot start etcd (apt-get install etcd-server): {e}"))?;
        m.child = Some(child);
        Ok(())
    }

    /// The running members' client endpoints (`host:port`).
    pub fn endpoints(&self) -> Vec<String> {
        self.members
            .iter()
            .map(|m| format!("127.0.0.1:{}", m.client_port))
            .collect()
    }

    /// `etcd://` address of every member with `prefix`.
    pub fn url(&self, prefix: &str) -> String {
        format!("etcd://{}/{prefix}", self.endpoints().join(","))
    }

    /// Waits until every running member reports healthy (a leader is elected).
    pub fn wait_healthy(&self) -> Result<()> {
        let running: Vec<String> = self
            .members
            .iter()
            .filter(|m| m.child.is_some())
            .map(|m| format!("127.0.0.1:{}", m.client_port))
            .collect();
        let healthy = wait_until(Duration::from_secs(30), || {
            running.iter().all(|e| {
                port_open(
                    e.rsplit(':')
                        .next()
                        .and_then(|p| p.parse().ok())
                        .unwrap_or(0),
                )
            }) && Command::new("etcdctl")
                .env("ETCDCTL_API", "3")
                .args(["--endpoints", &running.join(","), "endpoint", "health"])
                .output()
                .is_ok_and(|o| o.status.success())
        });
        if healthy {
            Ok(())
        } else {
            Err(format!(
                "etcd members {} not healthy within 30s; logs in {}",
                running.join(","),
                self.dir.display()
            ))
        }
    }

    /// Kills member `i` (SIGKILL, by its PID).
    pub fn kill(&mut self, i: usize) {
        if let Some(mut c) = self.members[i].child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// Kills every member.
    pub fn stop_all(&mut self) {
        for i in 0..self.members.len() {
            self.kill(i);
        }
    }

    /// Starts every stopped member again on its data and waits for a healthy cluster.
    pub fn restart_stopped(&mut self) -> Result<()> {
        for i in 0..self.members.len() {
            if self.members[i].child.is_none() {
                self.spawn(i)?;
            }
        }
        self.wait_healthy()
    }
}

impl Drop for EtcdCluster {
    fn drop(&mut self) {
        self.stop_all();
    }
}

//! Upgrading Sluice without refusing a connection: a new process started with `--takeover`
//! asks the running one for its listening sockets over a Unix socket (`--takeover-socket`,
//! default `<datadir>/takeover.sock`), accepts on them, and tells it so; the running one then
//! stops accepting and drains (see `app.rs`). SIGUSR2 (`systemctl reload sluice`) makes the
//! running process start its own successor, the way nginx upgrades its binary.

use crate::Error;
use sluice_net::handover::{self, Handed, HandoverError};
use std::os::fd::OwnedFd;
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use tokio::sync::oneshot;
use tracing::{info, warn};

/// The takeover socket: `--takeover-socket`, else `<datadir>/takeover.sock`, else none.
pub(crate) fn socket_path(explicit: Option<PathBuf>, datadir: Option<&Path>) -> Option<PathBuf> {
    explicit.or_else(|| datadir.map(|d| d.join("takeover.sock")))
}

/// Listeners received from the running process, claimed one by one as the ports are bound.
pub(crate) struct Inherited {
    listeners: Vec<Handed>,
    stream: UnixStream,
}

impl Inherited {
    /// Connects to the running process at `path` and receives its listeners.
    pub(crate) fn receive(path: &Path) -> Result<Inherited, Error> {
        let mut stream = UnixStream::connect(path).map_err(|source| Error::NoPredecessor {
            path: path.display().to_string(),
            source,
        })?;
        let timeout = Some(std::time::Duration::from_secs(60));
        stream
            .set_read_timeout(timeout)
            .and_then(|()| stream.set_write_timeout(timeout))
            .map_err(HandoverError::from)?;
        let listeners = handover::request_listeners(&mut stream)?;
        let names: Vec<&str> = listeners.iter().map(|h| h.name.as_str()).collect();
        info!(
            "--takeover: received {} listener(s) from the running process: {}",
            names.len(),
            names.join(", ")
        );
        Ok(Inherited { listeners, stream })
    }

    /// The listener handed over under `name`, if any.
    pub(crate) fn take(&mut self, name: &str) -> Option<std::net::TcpListener> {
        let at = self.listeners.iter().position(|h| h.name == name)?;
        Some(std::net::TcpListener::from(
            self.listeners.swap_remove(at).fd,
        ))
    }

    /// Tells the running process this one accepts on the listeners, so it stops; listeners
    /// this configuration no longer has are closed (logged).
    pub(crate) fn ready(self) -> Result<(), Error> {
        for h in &self.listeners {
            info!(
                "--takeover: {} is not in this configuration: closed",
                h.name
            );
        }
        let mut stream = self.stream;
        std::io::Write::write_all(
            &mut stream,
            format!("READY {}\n", std::process::id()).as_bytes(),
        )
        .map_err(HandoverError::from)?;
        match handover::read_line(&stream)? {
            Some(l) if l == "BYE" => Ok(()),
            other => Err(Error::NotConfirmed(format!("{other:?}"))),
        }
    }
}

/// The running process's side, bound on a name of its own (`takeover.sock.<pid>`) so that
/// binding cannot fail after a predecessor was told to stop.
pub(crate) struct Prepared {
    socket: tokio::net::UnixListener,
    bound: PathBuf,
    path: PathBuf,
}

impl Prepared {
    /// Binds the socket beside `path`.
    pub(crate) fn bind(path: &Path) -> Result<Prepared, Error> {
        let name = path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let bound = path.with_file_name(format!("{name}.{}", std::process::id()));
        let _ = std::fs::remove_file(&bound);
        let socket =
            tokio::net::UnixListener::bind(&bound).map_err(|source| Error::TakeoverSocket {
                path: bound.display().to_string(),
                source,
            })?;
        restrict(&bound)?;
        Ok(Prepared {
            socket,
            bound,
            path: path.to_path_buf(),
        })
    }

    /// Moves the socket onto its shared path (replacing a predecessor's) and answers takeover
    /// requests there with `listeners`. The receiver resolves with the successor's pid once one
    /// accepts on them; until then (and after a successor that failed before saying READY)
    /// this process keeps serving. `None` (logged) when the socket cannot be put in place.
    pub(crate) fn serve(self, listeners: Vec<(String, OwnedFd)>) -> Option<oneshot::Receiver<u32>> {
        if let Err(e) = std::fs::rename(&self.bound, &self.path) {
            warn!(
                "takeover socket {}: {e}: this process cannot hand over its listeners",
                self.path.display()
            );
            let _ = std::fs::remove_file(&self.bound);
            return None;
        }
        info!(
            "takeover socket {} ready (sluice --takeover)",
            self.path.display()
        );
        let (tx, rx) = oneshot::channel();
        let socket = self.socket;
        tokio::spawn(async move {
            let listeners = std::sync::Arc::new(listeners);
            loop {
                let conn = match socket.accept().await {
                    Ok((conn, _)) => conn,
                    Err(e) => {
                        warn!("takeover socket: {e}");
                        tokio::time::sleep(std::time::Duration::from_secs(1)).await;
                        continue;
                    }
                };
                let lent = listeners.clone();
                match tokio::task::spawn_blocking(move || hand_over(conn, &lent)).await {
                    Ok(Ok(pid)) => {
                        let _ = tx.send(pid);
                        return;
                    }
                    Ok(Err(e)) => warn!("a takeover did not complete: {e}; still serving"),
                    Err(e) => warn!("a takeover did not complete: {e}; still serving"),
                }
            }
        });
        Some(rx)
    }
}

/// Removes the takeover socket at a stop that handed nothing over (it would refuse
/// connections anyway).
pub(crate) fn remove_socket(path: &Path) {
    let _ = std::fs::remove_file(path);
}

/// After start: tells systemd this process is ready, the predecessor (if any) that it accepts,
/// and serves the takeover socket. The socket is bound under a name of its own before the
/// predecessor is told (a failure then leaves it serving: an error for a successor, a warning
/// for a first start) and moved onto the shared path after.
pub(crate) fn begin(
    socket: Option<&Path>,
    successor: bool,
    predecessor: Option<Inherited>,
    lent: Vec<(String, OwnedFd)>,
) -> Result<Option<oneshot::Receiver<u32>>, Error> {
    let prepared = match (socket, successor) {
        (Some(path), true) => Some(Prepared::bind(path)?),
        (Some(path), false) => Prepared::bind(path)
            .map_err(|e| warn!("{e}: this process cannot hand over its listeners"))
            .ok(),
        (None, _) => None,
    };
    crate::notify::ready();
    if let Some(predecessor) = predecessor {
        match predecessor.ready() {
            Ok(()) => info!("--takeover: accepting on the listeners; the previous process drains"),
            Err(e) => warn!("{e}; serving on the listeners anyway"),
        }
    }
    Ok(prepared.and_then(|p| p.serve(lent)))
}

/// Owner-only: the socket gives away every port.
fn restrict(path: &Path) -> Result<(), Error> {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600)).map_err(|source| {
        Error::TakeoverSocket {
            path: path.display().to_string(),
            source,
        }
    })
}

fn hand_over(
    conn: tokio::net::UnixStream,
    listeners: &[(String, OwnedFd)],
) -> Result<u32, HandoverError> {
    let stream = conn.into_std()?;
    stream.set_nonblocking(false)?;
    stream.set_read_timeout(Some(std::time::Duration::from_secs(60)))?;
    stream.set_write_timeout(Some(std::time::Duration::from_secs(60)))?;
    match handover::read_line(&stream)? {
        Some(l) if l == handover::REQUEST => {}
        other => return Err(HandoverError::Protocol(format!("{other:?}"))),
    }
    handover::send_listeners(&stream, listeners)?;
    let ready = handover::read_line(&stream)?.unwrap_or_default();
    let pid = ready
        .strip_prefix("READY ")
        .and_then(|p| p.parse().ok())
        .ok_or_else(|| HandoverError::Protocol(ready.clone()))?;
    std::io::Write::write_all(&mut &stream, b"BYE\n")?;
    Ok(pid)
}

/// SIGUSR2: starts this binary again (the file the process was started from, so an upgraded
/// package's new binary) with the same arguments (but `--initial`) and `--takeover`. Returns its pid; a thread
/// reaps it if it exits while this process still runs.
pub(crate) fn start_successor() -> Result<u32, Error> {
    let mut args = std::env::args_os();
    // argv[0] as given: a path names the (possibly upgraded) file, a bare name is looked up in
    // PATH again. /proc/self/exe would name the old, replaced binary.
    let program = args
        .next()
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("sluice"));
    // --initial would make the successor rebuild the admin database from the config file.
    let rest: Vec<_> = args
        .filter(|a| a != "--takeover" && a != "--initial")
        .collect();
    let mut child = std::process::Command::new(&program)
        .args(rest)
        .arg("--takeover")
        .stdin(std::process::Stdio::null())
        .spawn()
        .map_err(|source| Error::Successor {
            program: program.display().to_string(),
            source,
        })?;
    let pid = child.id();
    std::thread::spawn(move || {
        if let Ok(status) = child.wait() {
            warn!("the successor (pid {pid}) exited with {status} before this process stopped");
        }
    });
    Ok(pid)
}

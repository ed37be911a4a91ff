//! systemd's readiness protocol (`Type=notify`): a datagram to `$NOTIFY_SOCKET`. Without that
//! variable (not under systemd) nothing is sent. The successor of a takeover names itself the
//! service's main process (`MAINPID=`), so systemd follows the upgrade (`NotifyAccess=all`).

use std::os::unix::net::UnixDatagram;
use tracing::debug;

/// Sends `state` (`READY=1`, `STOPPING=1`, …) to the service manager, if there is one.
pub(crate) fn notify(state: &str) {
    let Some(path) = std::env::var_os("NOTIFY_SOCKET") else {
        return;
    };
    let sent = UnixDatagram::unbound().and_then(|sock| {
        let bytes = path.as_encoded_bytes();
        match bytes.strip_prefix(b"@") {
            Some(name) => {
                use std::os::linux::net::SocketAddrExt;
                let addr = std::os::unix::net::SocketAddr::from_abstract_name(name)?;
                sock.send_to_addr(state.as_bytes(), &addr)
            }
            None => sock.send_to(state.as_bytes(), &path),
        }
    });
    if let Err(e) = sent {
        debug!("sd_notify {state:?}: {e}");
    }
}

/// Ready, as the service's main process.
pub(crate) fn ready() {
    notify(&format!(
        "READY=1\nMAINPID={}\nSTATUS=accepting connections",
        std::process::id()
    ));
}

//! A duplicate of a backend connection's socket, kept so that the connection can be killed
//! (`shutdown`) from outside the session that owns it, e.g. when the monitor shuns its server.

use tokio::net::TcpStream;

/// The duplicate socket; [`sluice_core::kill_registry::Kill::kill`] shuts the connection down.
#[derive(Debug)]
pub struct KillHandle(std::net::TcpStream);

impl sluice_core::kill_registry::Kill for KillHandle {
    fn kill(&self) {
        // Shutting the socket down (not closing the fd) wakes the owner's pending read.
        let _ = self.0.shutdown(std::net::Shutdown::Both);
    }
}

/// Splits off a [`KillHandle`] for a freshly connected socket.
pub fn with_kill_handle(tcp: TcpStream) -> std::io::Result<(TcpStream, KillHandle)> {
    let std = tcp.into_std()?;
    let dup = std.try_clone()?;
    Ok((TcpStream::from_std(std)?, KillHandle(dup)))
}

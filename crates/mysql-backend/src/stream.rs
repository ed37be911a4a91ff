//! A backend socket: plain TCP or client-side TLS over TCP, compressed or not.

use tokio::net::TcpStream;

/// Plain or TLS socket to a backend.
pub type BackendSocket =
    sluice_mysql_proto::stream::MaybeTls<tokio_rustls::client::TlsStream<TcpStream>>;

/// A backend socket, compressed when the server row has `compression=1` and the server agreed.
pub type BackendStream = sluice_mysql_proto::compress::MaybeCompressed<BackendSocket>;

/// A duplicate of a backend connection's socket, kept so that the connection can be killed
/// (`shutdown`) from outside the session that owns it, e.g. when the monitor shuns its server.
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

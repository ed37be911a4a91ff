//! Listening sockets for the data and admin ports.

use crate::Error;
use tokio::net::TcpListener;
use tracing::info;

/// Accept queue asked of the kernel (capped by `net.core.somaxconn`). With the default 128 a
/// burst of connects overflows it; the kernel then answers with SYN cookies and drops the
/// handshakes it cannot queue, and a MySQL client (the server speaks first) waits forever for a
/// greeting that never comes.
pub const LISTEN_BACKLOG: u32 = 4096;

/// A listener for every `;`-separated `host:port` in `list` (ProxySQL's `*-interfaces` format);
/// `what` names them in the log and in errors.
pub async fn bind_all(list: &str, what: &str) -> Result<Vec<TcpListener>, Error> {
    let mut out = Vec::new();
    for addr in list.split(';').map(str::trim).filter(|s| !s.is_empty()) {
        let l = listen(addr).await.map_err(|source| Error::Listen {
            addr: addr.to_string(),
            what: what.to_string(),
            source,
        })?;
        info!("{what} listening on {addr}");
        out.push(l);
    }
    Ok(out)
}

/// A listener on `addr` (`host:port`, resolved; the first address that binds) with
/// [`LISTEN_BACKLOG`].
pub async fn listen(addr: &str) -> std::io::Result<TcpListener> {
    let mut last = None;
    for a in tokio::net::lookup_host(addr).await? {
        let socket = if a.is_ipv4() {
            tokio::net::TcpSocket::new_v4()?
        } else {
            tokio::net::TcpSocket::new_v6()?
        };
        // As std and tokio do: a restarted Sluice can bind while old connections linger.
        socket.set_reuseaddr(true)?;
        match socket.bind(a) {
            Ok(()) => return socket.listen(LISTEN_BACKLOG),
            Err(e) => last = Some(e),
        }
    }
    Err(last.unwrap_or_else(|| {
        std::io::Error::new(std::io::ErrorKind::InvalidInput, "no address to listen on")
    }))
}

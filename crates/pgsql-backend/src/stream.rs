//! A server connection's socket: plain TCP, or TLS over TCP when the server row has
//! `use_ssl=1` (SSLRequest, then a rustls handshake).

use std::sync::Arc;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio_rustls::client::TlsStream;

pub(crate) use sluice_net::{KillHandle, with_kill_handle};

/// A server connection's socket: plain, or TLS after the SSLRequest exchange.
pub(crate) type PgStream = sluice_net::MaybeTls<TlsStream<TcpStream>>;

/// SSLRequest: length 8, code 80877103.
const SSL_REQUEST: [u8; 8] = [0, 0, 0, 8, 4, 210, 22, 47];

/// Asks the server for TLS and performs the handshake; an error when it refuses.
pub(crate) async fn upgrade(
    mut tcp: TcpStream,
    tls: Arc<rustls::ClientConfig>,
    host: &str,
) -> Result<PgStream, crate::Error> {
    tcp.write_all(&SSL_REQUEST).await?;
    let mut answer = [0u8; 1];
    tcp.read_exact(&mut answer).await?;
    if answer[0] != b'S' {
        return Err(crate::Error::Auth(format!(
            "{host}: the server does not accept TLS (use_ssl=1 on its row)"
        )));
    }
    let name = rustls::pki_types::ServerName::try_from(host.to_string())
        .map_err(|e| crate::Error::Auth(format!("{host}: not a TLS server name: {e}")))?;
    let s = tokio_rustls::TlsConnector::from(tls)
        .connect(name, tcp)
        .await
        .map_err(|e| crate::Error::Auth(format!("{host}: TLS handshake failed: {e}")))?;
    Ok(PgStream::Tls(Box::new(s)))
}

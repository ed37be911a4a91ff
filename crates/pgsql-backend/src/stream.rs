//! A server connection's socket: plain TCP, or TLS over TCP when the server row has
//! `use_ssl=1` (SSLRequest, then a rustls handshake).

use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, ReadBuf};
use tokio::net::TcpStream;
use tokio_rustls::client::TlsStream;

pub use sluice_net::{KillHandle, with_kill_handle};

/// Plain or TLS.
#[derive(Debug)]
pub enum PgStream {
    /// Plain TCP.
    Plain(TcpStream),
    /// TLS over TCP.
    Tls(Box<TlsStream<TcpStream>>),
}

/// SSLRequest: length 8, code 80877103.
const SSL_REQUEST: [u8; 8] = [0, 0, 0, 8, 4, 210, 22, 47];

impl PgStream {
    /// Asks the server for TLS and performs the handshake; an error when it refuses.
    pub async fn upgrade(
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

    /// The same connection registered with the current runtime's poll (its file descriptor
    /// taken out of the poll it was in). TLS connections are returned as they are.
    pub fn reregistered(self) -> io::Result<PgStream> {
        match self {
            PgStream::Plain(tcp) => Ok(PgStream::Plain(TcpStream::from_std(tcp.into_std()?)?)),
            tls @ PgStream::Tls(_) => Ok(tls),
        }
    }

    /// True for a TLS connection.
    pub fn is_tls(&self) -> bool {
        matches!(self, PgStream::Tls(_))
    }

    /// Whether bytes or an end of stream are waiting on a plain connection. TLS connections
    /// say no: the server may send session tickets at any time, which are not a closed socket.
    pub fn poll_peek(
        &self,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<usize>> {
        match self {
            PgStream::Plain(s) => s.poll_peek(cx, buf),
            PgStream::Tls(_) => Poll::Pending,
        }
    }
}

impl AsyncRead for PgStream {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        match self.get_mut() {
            PgStream::Plain(s) => Pin::new(s).poll_read(cx, buf),
            PgStream::Tls(s) => Pin::new(s.as_mut()).poll_read(cx, buf),
        }
    }
}

impl AsyncWrite for PgStream {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            PgStream::Plain(s) => Pin::new(s).poll_write(cx, buf),
            PgStream::Tls(s) => Pin::new(s.as_mut()).poll_write(cx, buf),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            PgStream::Plain(s) => Pin::new(s).poll_flush(cx),
            PgStream::Tls(s) => Pin::new(s.as_mut()).poll_flush(cx),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            PgStream::Plain(s) => Pin::new(s).poll_shutdown(cx),
            PgStream::Tls(s) => Pin::new(s.as_mut()).poll_shutdown(cx),
        }
    }
}

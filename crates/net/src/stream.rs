//! A socket that is plain TCP or TLS over TCP; generic over the TLS stream type so frontends
//! (server-side TLS) and backends (client-side TLS) of both protocols share one implementation.

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;

/// Plain TCP, or a TLS stream `T` over TCP.
#[derive(Debug)]
pub enum MaybeTls<T> {
    /// Plain TCP.
    Plain(TcpStream),
    /// TLS.
    Tls(Box<T>),
}

impl<T> MaybeTls<T> {
    /// True for TLS.
    pub fn is_tls(&self) -> bool {
        matches!(self, MaybeTls::Tls(_))
    }

    /// The same connection registered with the current runtime's poll (its file descriptor
    /// taken out of the poll it was in), so it can move to another event-loop thread. TLS
    /// connections are returned as they are.
    pub fn reregistered(self) -> io::Result<MaybeTls<T>> {
        match self {
            MaybeTls::Plain(tcp) => Ok(MaybeTls::Plain(TcpStream::from_std(tcp.into_std()?)?)),
            tls @ MaybeTls::Tls(_) => Ok(tls),
        }
    }

    /// Whether bytes or an end of stream are waiting on a plain connection. TLS connections
    /// say no: a peer may send TLS records (session tickets) at any time, which are not a
    /// closed socket.
    pub fn poll_peek(
        &self,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<usize>> {
        match self {
            MaybeTls::Plain(s) => s.poll_peek(cx, buf),
            MaybeTls::Tls(_) => Poll::Pending,
        }
    }
}

impl<T: AsyncRead + Unpin> AsyncRead for MaybeTls<T> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        match self.get_mut() {
            MaybeTls::Plain(s) => Pin::new(s).poll_read(cx, buf),
            MaybeTls::Tls(s) => Pin::new(s.as_mut()).poll_read(cx, buf),
        }
    }
}

impl<T: AsyncWrite + Unpin> AsyncWrite for MaybeTls<T> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            MaybeTls::Plain(s) => Pin::new(s).poll_write(cx, buf),
            MaybeTls::Tls(s) => Pin::new(s.as_mut()).poll_write(cx, buf),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            MaybeTls::Plain(s) => Pin::new(s).poll_flush(cx),
            MaybeTls::Tls(s) => Pin::new(s.as_mut()).poll_flush(cx),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            MaybeTls::Plain(s) => Pin::new(s).poll_shutdown(cx),
            MaybeTls::Tls(s) => Pin::new(s.as_mut()).poll_shutdown(cx),
        }
    }
}

//! A client socket: plain TCP or TLS over TCP, compressed or not.

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;
use tokio_rustls::server::TlsStream;

/// Plain or TLS stream from a client, compressed once the client and Sluice agreed to
/// CLIENT_COMPRESS.
pub(crate) type ClientStream = sluice_mysql_proto::compress::MaybeCompressed<ClientSocket>;

/// Plain or TLS socket from a client.
pub(crate) type ClientSocket = sluice_net::MaybeTls<TlsStream<Prefixed>>;

/// A TCP stream that first yields bytes already read from it. Clients may send the TLS
/// ClientHello right behind the SSLRequest, so those bytes can sit in the packet buffer.
#[derive(Debug)]
pub(crate) struct Prefixed {
    prefix: bytes::BytesMut,
    inner: TcpStream,
}

impl Prefixed {
    /// Wraps `inner`, replaying `prefix` first.
    pub(crate) fn new(prefix: bytes::BytesMut, inner: TcpStream) -> Self {
        // An empty prefix may still own the login's packet buffer: do not keep it.
        let prefix = if prefix.is_empty() {
            bytes::BytesMut::new()
        } else {
            prefix
        };
        Prefixed { prefix, inner }
    }
}

impl AsyncRead for Prefixed {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let me = self.get_mut();
        if !me.prefix.is_empty() {
            let n = me.prefix.len().min(buf.remaining());
            buf.put_slice(&me.prefix.split_to(n));
            if me.prefix.is_empty() {
                // The prefix was the login's packet buffer: free it rather than keep its
                // capacity for the whole session.
                me.prefix = bytes::BytesMut::new();
            }
            return Poll::Ready(Ok(()));
        }
        Pin::new(&mut me.inner).poll_read(cx, buf)
    }
}

impl AsyncWrite for Prefixed {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().inner).poll_write(cx, buf)
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_shutdown(cx)
    }
}

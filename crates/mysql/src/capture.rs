//! A writer that passes bytes to the client and keeps a copy, up to a limit, so a result can be
//! stored in the query cache exactly as the client received it.

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};
use tokio::io::AsyncWrite;

/// Tees writes into `copy` until it would exceed `limit`; then the copy is dropped.
pub(crate) struct Capture<'a, W> {
    inner: &'a mut W,
    copy: &'a mut Option<Vec<u8>>,
    limit: usize,
}

impl<'a, W> Capture<'a, W> {
    /// Wraps `inner`; `copy` must start as `Some(empty)`.
    pub(crate) fn new(inner: &'a mut W, copy: &'a mut Option<Vec<u8>>, limit: usize) -> Self {
        Capture { inner, copy, limit }
    }
}

impl<W: AsyncWrite + Unpin> AsyncWrite for Capture<'_, W> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let me = self.get_mut();
        let r = Pin::new(&mut *me.inner).poll_write(cx, buf);
        if let Poll::Ready(Ok(n)) = &r {
            let keep = me.copy.as_ref().is_some_and(|c| c.len() + *n <= me.limit);
            if keep {
                if let Some(c) = me.copy.as_mut() {
                    c.extend_from_slice(&buf[..*n]);
                }
            } else {
                *me.copy = None;
            }
        }
        r
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut *self.get_mut().inner).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut *self.get_mut().inner).poll_shutdown(cx)
    }
}

//! Helpers shared by the fuzz targets.

use std::future::Future;
use std::pin::pin;
use std::task::{Context, Poll, Waker};

/// Drives a future whose reads come from memory (a byte slice never returns `Pending`) to its
/// end; `None` if it would wait, which a reader of memory must never do.
pub fn ready<F: Future>(f: F) -> Option<F::Output> {
    let mut f = pin!(f);
    let mut cx = Context::from_waker(Waker::noop());
    match f.as_mut().poll(&mut cx) {
        Poll::Ready(v) => Some(v),
        Poll::Pending => None,
    }
}

/// Splits fuzz input into a selector byte and the rest.
pub fn split_first(data: &[u8]) -> (u8, &[u8]) {
    match data.split_first() {
        Some((b, rest)) => (*b, rest),
        None => (0, data),
    }
}

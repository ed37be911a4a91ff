//! PostgreSQL message framing: a type byte and a 4-byte length (which counts itself), read with a
//! size bound; builders for the messages Sluice writes.

use crate::Error;
use crate::tag::server;
use bytes::{Bytes, BytesMut};
use tokio::io::{AsyncRead, AsyncReadExt};

/// Largest message accepted (1 GiB, libpq's bound for queries and COPY data).
pub const MAX_MESSAGE: usize = 1 << 30;

/// Bytes read into the stack before a buffer is allocated (see [`Reader::fill`]): a message
/// header and a short query.
const FIRST_READ: usize = 64;

/// The buffer a reader allocates when bytes come after it had none (a new connection, or a
/// session woken from idle): most wake-ups are one short statement, and a session that runs one
/// and goes idle should not have taken (and left the allocator fragmented by) a full buffer.
const FIRST_BUFFER: usize = 1024;

/// The buffer of a reader that outgrew [`FIRST_BUFFER`]: reads of at least 4 KiB.
const FULL_BUFFER: usize = 16 * 1024;

/// Reads messages from a stream into a buffer.
#[derive(Debug, Default)]
pub struct Reader {
    /// Bytes received but not yet returned as messages.
    pub buf: BytesMut,
    /// The size the buffer was last reserved with: [`FIRST_BUFFER`] after a buffer-less wait,
    /// [`FULL_BUFFER`] once a read found less than a quarter of that room left.
    size: usize,
}

/// Length of the complete message at the start of `b` (type byte + length + body), if complete.
pub fn complete_len(b: &[u8]) -> Result<Option<usize>, Error> {
    if b.len() < 5 {
        return Ok(None);
    }
    let len = u32::from_be_bytes([b[1], b[2], b[3], b[4]]) as usize;
    if len < 4 {
        return Err(Error::Malformed("length below 4"));
    }
    if len > MAX_MESSAGE {
        return Err(Error::TooLarge(len));
    }
    Ok((b.len() > len).then_some(len + 1))
}

impl Reader {
    /// True when the reader holds a buffer with no unread bytes in it: one that
    /// [`Self::release_if_empty`] would free.
    pub fn has_idle_buffer(&self) -> bool {
        self.buf.is_empty() && self.buf.capacity() > 0
    }

    /// Frees the buffer when no unread bytes are in it, so an idle session costs no buffer
    /// memory; the next read allocates one again. True when it freed one.
    pub fn release_if_empty(&mut self) -> bool {
        if self.has_idle_buffer() {
            self.buf = BytesMut::new();
            return true;
        }
        false
    }

    /// Reads more bytes; `Closed` at end of stream.
    pub async fn fill<R: AsyncRead + Unpin>(&mut self, r: &mut R) -> Result<(), Error> {
        let read = if self.buf.capacity() == 0 {
            // No buffer (never read, or given back while idle): wait for the first bytes
            // without one, so an idle reader holds no memory while it waits.
            let mut first = [0u8; FIRST_READ];
            let read = r.read(&mut first).await;
            if let Ok(n @ 1..) = read {
                self.size = FIRST_BUFFER;
                self.buf.reserve(FIRST_BUFFER);
                self.buf.extend_from_slice(&first[..n]);
            }
            read
        } else {
            // Room for a quarter of the size class at least; a small buffer that ran out grows
            // to the full one (a burst, a long statement, or a busy session).
            if self.buf.capacity() - self.buf.len() < self.size.max(FIRST_BUFFER) / 4 {
                self.size = FULL_BUFFER;
                self.buf.reserve(FULL_BUFFER);
            }
            r.read_buf(&mut self.buf).await
        };
        match read {
            Ok(0) => Err(Error::Closed),
            Ok(_) => Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => Err(Error::Closed),
            Err(e) => Err(e.into()),
        }
    }

    /// Reads one whole typed message (type byte, length, body).
    pub async fn message<R: AsyncRead + Unpin>(&mut self, r: &mut R) -> Result<Bytes, Error> {
        loop {
            if let Some(n) = complete_len(&self.buf)? {
                return Ok(self.buf.split_to(n).freeze());
            }
            self.fill(r).await?;
        }
    }

    /// Reads one whole typed message no longer than `max` bytes (for unauthenticated peers,
    /// whose messages are small: a bigger one is refused before it is buffered).
    pub async fn message_within<R: AsyncRead + Unpin>(
        &mut self,
        r: &mut R,
        max: usize,
    ) -> Result<Bytes, Error> {
        loop {
            if self.buf.len() >= 5 {
                let len = u32::from_be_bytes([self.buf[1], self.buf[2], self.buf[3], self.buf[4]])
                    as usize;
                if len > max {
                    return Err(Error::TooLarge(len));
                }
            }
            if let Some(n) = complete_len(&self.buf)? {
                return Ok(self.buf.split_to(n).freeze());
            }
            self.fill(r).await?;
        }
    }

    /// Reads one untyped startup-phase packet (length + body).
    pub async fn startup<R: AsyncRead + Unpin>(&mut self, r: &mut R) -> Result<Bytes, Error> {
        loop {
            if self.buf.len() >= 4 {
                let len = u32::from_be_bytes([self.buf[0], self.buf[1], self.buf[2], self.buf[3]])
                    as usize;
                if !(8..=10_000).contains(&len) {
                    return Err(Error::Malformed("startup packet length"));
                }
                if self.buf.len() >= len {
                    return Ok(self.buf.split_to(len).freeze());
                }
            }
            self.fill(r).await?;
        }
    }
}

/// A message: type byte, length, body.
pub fn message(kind: u8, body: &[u8]) -> Vec<u8> {
    let mut v = Vec::with_capacity(body.len() + 5);
    v.push(kind);
    v.extend_from_slice(&((body.len() + 4) as u32).to_be_bytes());
    v.extend_from_slice(body);
    v
}

/// An `R` authentication message with a code and data.
pub fn auth(code: u32, data: &[u8]) -> Vec<u8> {
    let mut b = code.to_be_bytes().to_vec();
    b.extend_from_slice(data);
    message(server::AUTHENTICATION, &b)
}

/// ErrorResponse with severity, SQLSTATE and message.
pub fn error_response(severity: &str, code: &str, msg: &str) -> Vec<u8> {
    error_response_with(severity, code, msg, &[])
}

/// ErrorResponse with more fields after the message, e.g. `(b'D', detail)`, `(b'H', hint)`.
pub fn error_response_with(severity: &str, code: &str, msg: &str, more: &[(u8, &str)]) -> Vec<u8> {
    let mut b = Vec::new();
    let base = [
        (b'S', severity),
        (b'V', severity),
        (b'C', code),
        (b'M', msg),
    ];
    for (t, v) in base.iter().chain(more) {
        b.push(*t);
        // A field is a C string: an embedded NUL would end it early and shift the rest.
        b.extend(v.bytes().filter(|c| *c != 0));
        b.push(0);
    }
    b.push(0);
    message(server::ERROR_RESPONSE, &b)
}

/// ReadyForQuery with a transaction status byte.
pub fn ready(status: u8) -> Vec<u8> {
    message(server::READY_FOR_QUERY, &[status])
}

/// A ParameterStatus message (`S`) telling the client `name` is `value`.
pub fn parameter_status(name: &str, value: &str) -> Vec<u8> {
    let mut b = Vec::new();
    b.extend_from_slice(name.as_bytes());
    b.push(0);
    b.extend_from_slice(value.as_bytes());
    b.push(0);
    message(server::PARAMETER_STATUS, &b)
}

/// Reads the (code, message) of an ErrorResponse body.
pub fn parse_error(body: &[u8]) -> (String, String) {
    let (mut code, mut msg) = (String::new(), String::new());
    for field in body.split(|b| *b == 0) {
        match field.split_first() {
            Some((b'C', v)) => code = String::from_utf8_lossy(v).into_owned(),
            Some((b'M', v)) => msg = String::from_utf8_lossy(v).into_owned(),
            _ => {}
        }
    }
    (code, msg)
}

/// Splits `key\0value\0...\0` pairs (startup parameters).
pub fn parse_pairs(body: &[u8]) -> Vec<(String, String)> {
    let parts: Vec<&[u8]> = body.split(|b| *b == 0).collect();
    parts
        .chunks(2)
        .filter(|c| c.len() == 2 && !c[0].is_empty())
        .map(|c| {
            (
                String::from_utf8_lossy(c[0]).into_owned(),
                String::from_utf8_lossy(c[1]).into_owned(),
            )
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn reads_messages_and_bounds_them() {
        let mut wire = message(b'Q', b"SELECT 1\0");
        wire.extend(ready(b'I'));
        let mut r = Reader::default();
        let mut src = &wire[..];
        let m = r.message(&mut src).await.expect("query");
        assert_eq!((m[0], &m[5..]), (b'Q', &b"SELECT 1\0"[..]));
        let z = r.message(&mut src).await.expect("ready");
        assert_eq!(&z[..], &[b'Z', 0, 0, 0, 5, b'I']);
        assert!(matches!(r.message(&mut src).await, Err(Error::Closed)));
        assert!(matches!(
            complete_len(&[b'Q', 0, 0, 0, 2]),
            Err(Error::Malformed(_))
        ));
        assert!(matches!(
            complete_len(&[b'Q', 0x7f, 0, 0, 0]),
            Err(Error::TooLarge(_))
        ));
        let (c, m) = parse_error(&error_response("ERROR", "42601", "syntax")[5..]);
        assert_eq!((c.as_str(), m.as_str()), ("42601", "syntax"));
    }

    #[tokio::test]
    async fn a_released_buffer_comes_back_for_the_next_messages_whole() {
        let long = vec![b'x'; 1000];
        let mut wire = message(b'Q', b"SELECT 1\0");
        wire.extend(message(b'Q', &long));
        let mut r = Reader::default();
        assert!(!r.has_idle_buffer(), "no buffer before the first read");
        let mut src = &wire[..];
        let m = r.message(&mut src).await.expect("short");
        assert_eq!(&m[5..], b"SELECT 1\0");
        // Both messages arrived in one read: nothing is released while bytes are unread.
        assert!(!r.release_if_empty());
        let m = r.message(&mut src).await.expect("long");
        assert_eq!(&m[5..], &long[..]);
        assert!(r.release_if_empty(), "an empty buffer is given back");
        let mut more = &message(b'S', b"")[..];
        let m = r.message(&mut more).await.expect("after the release");
        assert_eq!(&m[..], &[b'S', 0, 0, 0, 4]);
    }

    /// A reader woken with a short statement takes a small buffer; one that receives more
    /// than that holds grows to the full one and still reads every message whole.
    #[tokio::test]
    async fn a_woken_reader_starts_small_and_grows_for_a_burst() {
        let (mut client, mut server) = tokio::io::duplex(64 * 1024);
        let mut r = Reader::default();
        tokio::io::AsyncWriteExt::write_all(&mut client, &message(b'Q', b"SELECT 1\0"))
            .await
            .expect("write");
        let m = r.message(&mut server).await.expect("short");
        assert_eq!(&m[5..], b"SELECT 1\0");
        drop(m);
        assert!(
            r.buf.capacity() <= FIRST_BUFFER,
            "a short statement took {} bytes of buffer",
            r.buf.capacity()
        );
        let long = vec![b'x'; 40_000];
        let mut burst = message(b'Q', &long);
        burst.extend(message(b'S', b""));
        tokio::io::AsyncWriteExt::write_all(&mut client, &burst)
            .await
            .expect("write");
        let m = r.message(&mut server).await.expect("long");
        assert_eq!(&m[5..], &long[..]);
        let s = r.message(&mut server).await.expect("sync");
        assert_eq!(&s[..], &[b'S', 0, 0, 0, 4]);
        assert_eq!(
            r.size, FULL_BUFFER,
            "a burst grows the reader to its full buffer"
        );
    }

    #[tokio::test]
    async fn a_bounded_read_refuses_from_the_header_alone() {
        // Only the header of a 1 MB password message arrives: refused without waiting for it.
        let header = [b'p', 0, 0x10, 0, 4];
        let mut r = Reader::default();
        let mut src = &header[..];
        assert!(matches!(
            r.message_within(&mut src, 65_535).await,
            Err(Error::TooLarge(1_048_580))
        ));
        let small = message(b'p', b"secret\0");
        let mut r = Reader::default();
        let mut src = &small[..];
        assert_eq!(
            r.message_within(&mut src, 64).await.expect("small")[..],
            small[..]
        );
    }
}

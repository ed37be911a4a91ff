//! Packet framing: 3-byte length + 1-byte sequence id, payloads over 16 MiB split into chunks.

use crate::Error;
use crate::consts::MAX_CHUNK;
use bytes::{Buf, Bytes, BytesMut};
use tokio::io::{AsyncRead, AsyncReadExt};

/// One logical packet as read from the wire.
#[derive(Debug, Clone)]
pub struct Packet {
    /// Sequence id of the first chunk.
    pub seq: u8,
    /// The payload (chunks joined).
    pub payload: Bytes,
    /// The frames exactly as received, for forwarding without re-encoding.
    pub raw: Bytes,
}

/// Length of the frame starting at `buf[0]` if it is complete: header + payload.
pub fn complete_frame_len(buf: &[u8]) -> Option<usize> {
    if buf.len() < 4 {
        return None;
    }
    let len = usize::from(buf[0]) | usize::from(buf[1]) << 8 | usize::from(buf[2]) << 16;
    (buf.len() >= 4 + len).then_some(4 + len)
}

/// Payload length announced by the frame header at `buf[0..3]`.
pub fn header_len(buf: &[u8]) -> usize {
    usize::from(buf[0]) | usize::from(buf[1]) << 8 | usize::from(buf[2]) << 16
}

/// Bytes read into the stack before a buffer is allocated (see [`PacketReader::fill`]): a
/// packet header and a short command.
const FIRST_READ: usize = 64;

/// The buffer a reader allocates when bytes come after it had none (a new connection, or a
/// session woken from idle): most wake-ups are one short command, and a session that runs one
/// and goes idle should not have taken (and left the allocator fragmented by) a full buffer.
const FIRST_BUFFER: usize = 1024;

/// The buffer of a reader that outgrew [`FIRST_BUFFER`]: reads of at least 4 KiB.
const FULL_BUFFER: usize = 16 * 1024;

/// One `read` into `buf`; a TLS peer that closes without close_notify reads as closed (0).
async fn read_some<R: AsyncRead + Unpin>(r: &mut R, buf: &mut [u8]) -> Result<usize, Error> {
    match r.read(buf).await {
        Ok(n) => Ok(n),
        Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => Ok(0),
        Err(e) => Err(e.into()),
    }
}

/// [`read_some`] into the spare capacity of `buf`.
async fn read_buf_some<R: AsyncRead + Unpin>(
    r: &mut R,
    buf: &mut BytesMut,
) -> Result<usize, Error> {
    match r.read_buf(buf).await {
        Ok(n) => Ok(n),
        Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => Ok(0),
        Err(e) => Err(e.into()),
    }
}

/// Reads logical packets from a stream into an internal buffer, bounded by `limit` bytes.
#[derive(Debug)]
pub struct PacketReader {
    buf: BytesMut,
    limit: usize,
    /// The size the buffer was last reserved with: [`FIRST_BUFFER`] after a buffer-less wait,
    /// [`FULL_BUFFER`] once a read found less than a quarter of that room left.
    size: usize,
}

impl PacketReader {
    /// A reader that refuses packets whose payload exceeds `limit`.
    pub fn new(limit: usize) -> Self {
        PacketReader {
            // Allocated at the first read: a session that never sends costs no buffer.
            buf: BytesMut::new(),
            limit,
            size: FIRST_BUFFER,
        }
    }

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

    /// Changes the size bound.
    pub fn set_limit(&mut self, limit: usize) {
        self.limit = limit;
    }

    /// Bytes buffered but not consumed yet.
    pub fn buffered(&self) -> usize {
        self.buf.len()
    }

    /// Takes the buffer with its unconsumed bytes and its capacity (the reply relay reads into
    /// it directly and gives it back with [`PacketReader::put_back`], so no buffer is allocated
    /// per command).
    pub fn take_buffered(&mut self) -> BytesMut {
        std::mem::take(&mut self.buf)
    }

    /// Gives back a buffer taken with [`PacketReader::take_buffered`] (its bytes are unread data).
    pub fn put_back(&mut self, buf: BytesMut) {
        self.buf = buf;
    }

    async fn fill<R: AsyncRead + Unpin>(&mut self, r: &mut R) -> Result<(), Error> {
        let n = if self.buf.capacity() == 0 {
            // No buffer (never read, or given back while idle): wait for the first bytes
            // without one, so an idle reader holds no memory while it waits.
            let mut first = [0u8; FIRST_READ];
            let n = read_some(r, &mut first).await?;
            if n > 0 {
                self.size = FIRST_BUFFER;
                self.buf.reserve(FIRST_BUFFER);
                self.buf.extend_from_slice(&first[..n]);
            }
            n
        } else {
            // Room for a quarter of the size class at least; a small buffer that ran out grows
            // to the full one (a burst, a long command, or a busy session).
            if self.buf.capacity() - self.buf.len() < self.size / 4 {
                self.size = FULL_BUFFER;
                self.buf.reserve(FULL_BUFFER);
            }
            read_buf_some(r, &mut self.buf).await?
        };
        if n == 0 {
            return Err(Error::Closed);
        }
        Ok(())
    }

    /// Reads one logical packet, joining continuation chunks.
    pub async fn read<R: AsyncRead + Unpin>(&mut self, r: &mut R) -> Result<Packet, Error> {
        // Scan chunk headers until a chunk shorter than MAX_CHUNK ends the logical packet.
        let mut offset = 0usize;
        let mut total = 0usize;
        let mut chunks = 0usize;
        loop {
            while self.buf.len() < offset + 4 {
                self.fill(r).await?;
            }
            let len = header_len(&self.buf[offset..]);
            total += len;
            if total > self.limit {
                return Err(Error::TooLarge {
                    size: total,
                    limit: self.limit,
                });
            }
            while self.buf.len() < offset + 4 + len {
                self.fill(r).await?;
            }
            offset += 4 + len;
            chunks += 1;
            if len < MAX_CHUNK {
                break;
            }
        }
        let seq = self.buf[3];
        let raw = self.buf.split_to(offset).freeze();
        let payload = if chunks == 1 {
            raw.slice(4..)
        } else {
            let mut joined = BytesMut::with_capacity(total);
            let mut rest = raw.clone();
            while rest.has_remaining() {
                let len = header_len(&rest);
                rest.advance(4);
                joined.extend_from_slice(&rest[..len]);
                rest.advance(len);
            }
            joined.freeze()
        };
        Ok(Packet { seq, payload, raw })
    }
}

/// Appends `payload` framed as packet(s) starting at sequence id `*seq`; advances `*seq`.
pub fn put_packet(out: &mut Vec<u8>, seq: &mut u8, payload: &[u8]) {
    let mut rest = payload;
    loop {
        let n = rest.len().min(MAX_CHUNK);
        out.extend_from_slice(&(n as u32).to_le_bytes()[..3]);
        out.push(*seq);
        *seq = seq.wrapping_add(1);
        out.extend_from_slice(&rest[..n]);
        rest = &rest[n..];
        if n < MAX_CHUNK {
            break;
        }
    }
}

/// Frames one payload into a fresh buffer.
pub fn packet(seq: u8, payload: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(payload.len() + 4);
    let mut s = seq;
    put_packet(&mut out, &mut s, payload);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn reads_split_and_large_packets() {
        let mut wire = packet(0, b"\x03SELECT 1");
        let big = vec![7u8; MAX_CHUNK + 10];
        wire.extend(packet(5, &big));
        wire.extend(packet(0, b""));
        let mut r = PacketReader::new(64 << 20);
        let mut src = &wire[..];
        let p = r.read(&mut src).await.expect("first");
        assert_eq!((p.seq, &p.payload[..]), (0, &b"\x03SELECT 1"[..]));
        let p = r.read(&mut src).await.expect("big");
        assert_eq!(p.seq, 5);
        assert_eq!(p.payload.len(), big.len());
        assert_eq!(p.raw.len(), big.len() + 8);
        let p = r.read(&mut src).await.expect("empty");
        assert!(p.payload.is_empty());
        assert!(matches!(r.read(&mut src).await, Err(Error::Closed)));
    }

    #[tokio::test]
    async fn a_released_buffer_comes_back_for_the_next_packets_whole() {
        // A long packet after an idle release starts in the 64-byte first read and goes on in
        // the new buffer; a short one fits in the first read; a split one is joined.
        let long = vec![b'x'; 1000];
        let mut wire = packet(0, b"\x0eping");
        wire.extend(packet(0, &long));
        wire.extend(packet(3, b"\x03SELECT 2"));
        let mut r = PacketReader::new(64 << 20);
        assert!(!r.has_idle_buffer(), "no buffer before the first read");
        let mut src = slow_reader(&wire, 7);
        let p = r.read(&mut src).await.expect("ping");
        assert_eq!(&p.payload[..], b"\x0eping");
        assert!(r.release_if_empty() || r.buffered() > 0);
        let p = r.read(&mut src).await.expect("long");
        assert_eq!(p.payload, long);
        r.release_if_empty();
        let p = r.read(&mut src).await.expect("select");
        assert_eq!((p.seq, &p.payload[..]), (3, &b"\x03SELECT 2"[..]));
        assert!(r.release_if_empty(), "an empty buffer is given back");
        assert!(!r.has_idle_buffer());
        assert!(matches!(r.read(&mut src).await, Err(Error::Closed)));
    }

    /// A reader woken with a short command takes a small buffer; one that receives more than
    /// that holds grows to the full one and still reads every packet whole.
    #[tokio::test]
    async fn a_woken_reader_starts_small_and_grows_for_a_burst() {
        let (mut client, mut server) = tokio::io::duplex(64 * 1024);
        let mut r = PacketReader::new(64 << 20);
        tokio::io::AsyncWriteExt::write_all(&mut client, &packet(0, b"\x03SELECT 1"))
            .await
            .expect("write");
        let p = r.read(&mut server).await.expect("short");
        assert_eq!(&p.payload[..], b"\x03SELECT 1");
        drop(p);
        assert!(
            r.buf.capacity() <= FIRST_BUFFER,
            "a short command took {} bytes of buffer",
            r.buf.capacity()
        );
        let long = vec![b'x'; 40_000];
        let mut burst = packet(0, &long);
        burst.extend(packet(0, b"\x0e"));
        tokio::io::AsyncWriteExt::write_all(&mut client, &burst)
            .await
            .expect("write");
        assert_eq!(r.read(&mut server).await.expect("long").payload, long);
        assert_eq!(
            &r.read(&mut server).await.expect("ping").payload[..],
            b"\x0e"
        );
        assert_eq!(
            r.size, FULL_BUFFER,
            "a burst grows the reader to its full buffer"
        );
    }

    /// A reader that hands out `wire` at most `n` bytes per read, like a slow socket.
    fn slow_reader(wire: &[u8], n: usize) -> impl AsyncRead + Unpin + use<> {
        struct Chunks(Vec<u8>, usize);
        impl AsyncRead for Chunks {
            fn poll_read(
                mut self: std::pin::Pin<&mut Self>,
                _: &mut std::task::Context<'_>,
                buf: &mut tokio::io::ReadBuf<'_>,
            ) -> std::task::Poll<std::io::Result<()>> {
                let k = self.1.min(self.0.len()).min(buf.remaining());
                let head: Vec<u8> = self.0.drain(..k).collect();
                buf.put_slice(&head);
                std::task::Poll::Ready(Ok(()))
            }
        }
        Chunks(wire.to_vec(), n)
    }

    #[tokio::test]
    async fn refuses_oversized() {
        let wire = packet(0, &[1u8; 100]);
        let mut r = PacketReader::new(99);
        let mut src = &wire[..];
        assert!(matches!(
            r.read(&mut src).await,
            Err(Error::TooLarge {
                size: 100,
                limit: 99
            })
        ));
    }

    #[tokio::test]
    async fn exact_chunk_boundary_needs_empty_tail() {
        let payload = vec![1u8; MAX_CHUNK];
        let wire = packet(0, &payload);
        assert_eq!(
            wire.len(),
            MAX_CHUNK + 8,
            "a 16 MiB payload ends with an empty chunk"
        );
        let mut r = PacketReader::new(64 << 20);
        let mut src = &wire[..];
        assert_eq!(
            r.read(&mut src).await.expect("read").payload.len(),
            MAX_CHUNK
        );
    }
}

//! The MySQL compressed protocol (CLIENT_COMPRESS, zlib) as a layer under the packet framing: a
//! stream that, once compression is switched on after the handshake, reads compressed packets
//! and yields the MySQL packets inside them, and wraps whatever is written into compressed
//! packets. Everything above it (packet reader, reply relay) sees plain MySQL packets, so each
//! leg — client or backend — compresses on its own and an uncompressed leg pays one branch.
//!
//! A compressed packet is a 7-byte header — payload length (3 bytes), sequence id, length before
//! compression (3 bytes; 0 = stored as is) — then the payload. Sequence ids count compressed
//! packets per command: a reply continues from the id of the last packet read.

use bytes::{Buf, BytesMut};
use flate2::{Compress, Compression, Decompress, FlushCompress, FlushDecompress, Status};
use std::io;
use std::pin::Pin;
use std::task::{Context, Poll, ready};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

/// Largest payload of one compressed packet, before and after compression (3-byte lengths).
const MAX_PAYLOAD: usize = 0xFF_FFFF;
/// Payloads shorter than this are sent stored, not compressed (MySQL's MIN_COMPRESS_LENGTH).
const MIN_COMPRESS: usize = 50;
/// Bytes asked of the inner stream per read.
const READ_CHUNK: usize = 16 * 1024;

/// A stream that is compressed (after [`MaybeCompressed::start_compression`]) or not.
#[derive(Debug)]
pub struct MaybeCompressed<S> {
    inner: S,
    state: Option<Box<State>>,
}

#[derive(Debug)]
struct State {
    /// Compressed bytes read and not yet unpacked.
    raw: BytesMut,
    /// Unpacked bytes not yet handed to the reader.
    plain: BytesMut,
    /// Compressed packets not yet written to the inner stream.
    out: BytesMut,
    /// Sequence id of the next compressed packet written.
    write_seq: u8,
    deflate: Compress,
    inflate: Decompress,
}

fn invalid(msg: &str) -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidData,
        format!("compressed protocol: {msg}"),
    )
}

fn u24(b: &[u8]) -> usize {
    usize::from(b[0]) | (usize::from(b[1]) << 8) | (usize::from(b[2]) << 16)
}

fn put_u24(out: &mut BytesMut, n: usize) {
    out.extend_from_slice(&[n as u8, (n >> 8) as u8, (n >> 16) as u8]);
}

impl State {
    /// Unpacks one compressed packet from `raw` into `plain`; false when `raw` holds no whole
    /// packet yet.
    fn unpack(&mut self) -> io::Result<bool> {
        if self.raw.len() < 7 {
            return Ok(false);
        }
        let clen = u24(&self.raw[..3]);
        let seq = self.raw[3];
        let ulen = u24(&self.raw[4..7]);
        if self.raw.len() < 7 + clen {
            return Ok(false);
        }
        self.raw.advance(7);
        let payload = self.raw.split_to(clen);
        self.write_seq = seq.wrapping_add(1);
        if ulen == 0 {
            self.plain.extend_from_slice(&payload);
            return Ok(true);
        }
        // The declared length bounds the output (at most 16 MiB): no zlib bomb gets further.
        let start = self.plain.len();
        self.plain.resize(start + ulen, 0);
        self.inflate.reset(true);
        let status = self
            .inflate
            .decompress(&payload, &mut self.plain[start..], FlushDecompress::Finish)
            .map_err(|e| invalid(&e.to_string()))?;
        let produced = self.inflate.total_out() as usize;
        if status != Status::StreamEnd || produced != ulen {
            return Err(invalid("payload does not inflate to its declared length"));
        }
        Ok(true)
    }

    /// Appends `chunk` (at most [`MAX_PAYLOAD`] bytes) to `out` as one compressed packet.
    fn pack(&mut self, chunk: &[u8]) -> io::Result<()> {
        let seq = self.write_seq;
        self.write_seq = seq.wrapping_add(1);
        if chunk.len() >= MIN_COMPRESS {
            let mut packed = Vec::with_capacity(chunk.len() / 2 + 64);
            self.deflate.reset();
            loop {
                packed.reserve(chunk.len() / 4 + 64);
                let before = self.deflate.total_in() as usize;
                let status = self
                    .deflate
                    .compress_vec(&chunk[before..], &mut packed, FlushCompress::Finish)
                    .map_err(|e| invalid(&e.to_string()))?;
                if status == Status::StreamEnd {
                    break;
                }
            }
            if packed.len() < chunk.len() {
                put_u24(&mut self.out, packed.len());
                self.out.extend_from_slice(&[seq]);
                put_u24(&mut self.out, chunk.len());
                self.out.extend_from_slice(&packed);
                return Ok(());
            }
        }
        put_u24(&mut self.out, chunk.len());
        self.out.extend_from_slice(&[seq]);
        put_u24(&mut self.out, 0);
        self.out.extend_from_slice(chunk);
        Ok(())
    }
}

impl<S> MaybeCompressed<S> {
    /// `inner`, uncompressed until [`MaybeCompressed::start_compression`].
    pub fn new(inner: S) -> Self {
        MaybeCompressed { inner, state: None }
    }

    /// The stream underneath.
    pub fn get_ref(&self) -> &S {
        &self.inner
    }

    /// The stream underneath, mutably (bytes written to it bypass compression).
    pub fn get_mut(&mut self) -> &mut S {
        &mut self.inner
    }

    /// The stream underneath; only while uncompressed (compressed state would be lost).
    pub fn into_inner(self) -> S {
        self.inner
    }

    /// True once compression is on.
    pub fn is_compressed(&self) -> bool {
        self.state.is_some()
    }

    /// A new command starts (on the client side of a connection): its compressed packets are
    /// numbered from 0. (On the server side numbering follows the last packet read.)
    pub fn start_command(&mut self) {
        if let Some(st) = self.state.as_mut() {
            st.write_seq = 0;
        }
    }

    /// Switches compression on: the handshake is over and both sides agreed to CLIENT_COMPRESS.
    pub fn start_compression(&mut self) {
        self.state = Some(Box::new(State {
            raw: BytesMut::new(),
            plain: BytesMut::new(),
            out: BytesMut::new(),
            write_seq: 0,
            deflate: Compress::new(Compression::default(), true),
            inflate: Decompress::new(true),
        }));
    }
}

impl<S: AsyncWrite + Unpin> MaybeCompressed<S> {
    /// Writes out pending compressed packets.
    fn poll_drain(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let Some(st) = self.state.as_mut() else {
            return Poll::Ready(Ok(()));
        };
        while !st.out.is_empty() {
            let n = ready!(Pin::new(&mut self.inner).poll_write(cx, &st.out))?;
            if n == 0 {
                return Poll::Ready(Err(io::ErrorKind::WriteZero.into()));
            }
            st.out.advance(n);
        }
        Poll::Ready(Ok(()))
    }
}

impl<S: AsyncRead + AsyncWrite + Unpin> AsyncRead for MaybeCompressed<S> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let me = self.get_mut();
        if me.state.is_none() {
            return Pin::new(&mut me.inner).poll_read(cx, buf);
        }
        // A reply still pending goes out before waiting for the next command.
        ready!(me.poll_drain(cx))?;
        let Some(st) = me.state.as_mut() else {
            return Poll::Ready(Ok(()));
        };
        loop {
            if !st.plain.is_empty() {
                let n = st.plain.len().min(buf.remaining());
                buf.put_slice(&st.plain[..n]);
                st.plain.advance(n);
                return Poll::Ready(Ok(()));
            }
            if st.unpack()? {
                continue;
            }
            let mut tmp = [0u8; READ_CHUNK];
            let mut rb = ReadBuf::new(&mut tmp);
            ready!(Pin::new(&mut me.inner).poll_read(cx, &mut rb))?;
            if rb.filled().is_empty() {
                return if st.raw.is_empty() {
                    Poll::Ready(Ok(()))
                } else {
                    Poll::Ready(Err(io::ErrorKind::UnexpectedEof.into()))
                };
            }
            st.raw.extend_from_slice(rb.filled());
        }
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for MaybeCompressed<S> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let me = self.get_mut();
        if me.state.is_none() {
            return Pin::new(&mut me.inner).poll_write(cx, buf);
        }
        ready!(me.poll_drain(cx))?;
        let chunk = &buf[..buf.len().min(MAX_PAYLOAD)];
        if let Some(st) = me.state.as_mut() {
            st.pack(chunk)?;
        }
        // Accepted; what the socket does not take now goes at the next write, flush or read.
        if let Poll::Ready(Err(e)) = me.poll_drain(cx) {
            return Poll::Ready(Err(e));
        }
        Poll::Ready(Ok(chunk.len()))
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let me = self.get_mut();
        ready!(me.poll_drain(cx))?;
        Pin::new(&mut me.inner).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let me = self.get_mut();
        ready!(me.poll_drain(cx))?;
        Pin::new(&mut me.inner).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt, duplex};

    #[tokio::test]
    async fn packets_survive_a_round_trip_large_and_small() {
        let (a, b) = duplex(1 << 20);
        let mut a = MaybeCompressed::new(a);
        let mut b = MaybeCompressed::new(b);
        a.start_compression();
        b.start_compression();
        // Small (stored), compressible, and larger than one compressed packet.
        let small = b"\x01\x00\x00\x00\x0e".to_vec();
        let text = "row,".repeat(10_000).into_bytes();
        let huge: Vec<u8> = (0..(MAX_PAYLOAD + 1000))
            .map(|i| (i * 7 % 251) as u8)
            .collect();
        let sent = [small, text, huge];
        let expected: Vec<u8> = sent.concat();
        let writer = tokio::spawn(async move {
            for s in &sent {
                a.write_all(s).await.expect("write");
            }
            a.flush().await.expect("flush");
            a
        });
        let mut got = vec![0u8; expected.len()];
        b.read_exact(&mut got).await.expect("read");
        assert!(got == expected, "bytes differ after the round trip");
        drop(writer.await);
    }

    #[tokio::test]
    async fn sequence_ids_continue_from_the_last_packet_read() {
        let (a, mut b) = duplex(1 << 16);
        let mut a = MaybeCompressed::new(a);
        a.start_compression();
        // A command arrives stored with compressed sequence id 0...
        b.write_all(&[5, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0x0e])
            .await
            .expect("write");
        let mut cmd = [0u8; 5];
        a.read_exact(&mut cmd).await.expect("read");
        assert_eq!(cmd, [1, 0, 0, 0, 0x0e]);
        // ...so the reply's compressed packets are numbered 1, 2.
        a.write_all(b"\x07\x00\x00\x01\x00\x00\x00\x02\x00\x00\x00")
            .await
            .expect("write");
        a.write_all(b"\x01\x00\x00\x02\x00").await.expect("write");
        a.flush().await.expect("flush");
        let mut head = [0u8; 7];
        b.read_exact(&mut head).await.expect("read");
        assert_eq!(head[3], 1);
        let mut skip = vec![0u8; u24(&head[..3])];
        b.read_exact(&mut skip).await.expect("read");
        b.read_exact(&mut head).await.expect("read");
        assert_eq!(head[3], 2);
    }

    #[tokio::test]
    async fn a_bomb_or_a_lie_is_an_error_not_a_crash() {
        let (a, mut b) = duplex(1 << 16);
        let mut a = MaybeCompressed::new(a);
        a.start_compression();
        // Declares 10 bytes, inflates to far more.
        let mut z = flate2::write::ZlibEncoder::new(Vec::new(), Compression::default());
        std::io::Write::write_all(&mut z, &[0u8; 100_000]).expect("deflate");
        let bomb = z.finish().expect("deflate");
        let mut pkt = BytesMut::new();
        put_u24(&mut pkt, bomb.len());
        pkt.extend_from_slice(&[0]);
        put_u24(&mut pkt, 10);
        pkt.extend_from_slice(&bomb);
        b.write_all(&pkt).await.expect("write");
        let mut out = [0u8; 10];
        assert!(a.read_exact(&mut out).await.is_err());
        // Garbage that is not zlib at all.
        let (a, mut b) = duplex(1 << 16);
        let mut a = MaybeCompressed::new(a);
        a.start_compression();
        b.write_all(&[4, 0, 0, 0, 9, 0, 0, 1, 2, 3, 4])
            .await
            .expect("write");
        assert!(a.read_exact(&mut [0u8; 9]).await.is_err());
    }
}

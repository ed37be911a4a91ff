//! Server-side TLS for client connections that holds no buffer while its client is quiet.
//!
//! tokio-rustls drives rustls's buffered connection, which keeps a 4 KiB read buffer for as long
//! as the connection lives (rustls shrinks it to one 4 KiB read when empty, never to nothing):
//! a third of what an idle MySQL TLS client costs Sluice. [`ServerTls`] drives rustls's
//! unbuffered connection instead, with buffers of its own — the TLS bytes read and not yet
//! decrypted, the TLS bytes not yet sent, the decrypted bytes a reader had no room for — and
//! gives each back once it is empty and the stream waits for its client (a read that would
//! block). An idle TLS client then costs rustls's keys and state alone. The price is one 4 KiB
//! allocation when a quiet client speaks again; rustls's buffered connection allocates per
//! record either way. The TLS itself is rustls's: this module only moves bytes between the
//! socket, rustls and the session.

use rustls::ServerConfig;
use rustls::server::UnbufferedServerConnection;
use rustls::unbuffered::{ConnectionState, EncodeError, EncryptError, UnbufferedStatus};
use std::future::poll_fn;
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, ready};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

/// Bytes read from the socket at a time (rustls's own read size).
const READ_SIZE: usize = 4096;

/// Most TLS bytes held before they make a complete record or handshake message: a handshake
/// message of up to 64 KiB (rustls's bound) and a largest record behind it. A client that
/// sends more without completing one is not speaking TLS.
const MAX_INCOMING: usize = 0xffff + 18_437;

/// TLS bytes queued for the socket beyond which a write waits for the socket to take them.
const MAX_OUTGOING: usize = 64 * 1024;

/// A TLS connection from a client over `IO`, after its handshake ([`ServerTls::accept`]).
pub struct ServerTls<IO> {
    io: IO,
    conn: UnbufferedServerConnection,
    /// TLS bytes read and not yet processed: the first `filled` bytes.
    incoming: Vec<u8>,
    filled: usize,
    /// Decrypted bytes a read had no room for, from `plain_read` on.
    plain: Vec<u8>,
    plain_read: usize,
    /// TLS bytes for the socket: `outgoing[sent..queued]` (the rest is room, zeroed once).
    outgoing: Vec<u8>,
    queued: usize,
    sent: usize,
    /// The client sent close_notify or closed its half of the socket.
    peer_closed: bool,
    /// Our close_notify is queued.
    close_queued: bool,
}

impl<IO> std::fmt::Debug for ServerTls<IO> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServerTls")
            .field("buffered", &self.buffered())
            .field("peer_closed", &self.peer_closed)
            .finish()
    }
}

/// What processing the received records came to.
enum Progress {
    /// Something was done (a record decrypted, handshake bytes queued): process again.
    Again,
    /// Nothing complete to process: more bytes from the client are needed.
    NeedBytes,
    /// Application data may be sent (and `Outgoing` was, if any).
    Writable,
    /// The client sent close_notify.
    PeerClosed,
    /// Both sides sent close_notify.
    Closed,
}

/// What to encrypt when processing reaches the point where application data may be sent.
#[derive(Clone, Copy)]
enum Outgoing<'a> {
    Nothing,
    Data(&'a [u8]),
    CloseNotify,
}

fn invalid(e: impl Into<Box<dyn std::error::Error + Send + Sync>>) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, e)
}

impl<IO: AsyncRead + AsyncWrite + Unpin> ServerTls<IO> {
    /// The TLS handshake with the client on `io` under `config`. `early` are bytes already
    /// read from `io` (a ClientHello the client sent right behind its protocol's TLS request):
    /// they are processed first. The caller bounds the time; the bytes are bounded here.
    pub async fn accept(config: Arc<ServerConfig>, io: IO, early: &[u8]) -> io::Result<Self> {
        if early.len() > MAX_INCOMING {
            return Err(invalid(
                "more bytes before the TLS handshake than a ClientHello holds",
            ));
        }
        let mut tls = ServerTls {
            io,
            conn: UnbufferedServerConnection::new(config).map_err(invalid)?,
            incoming: early.to_vec(),
            filled: early.len(),
            plain: Vec::new(),
            plain_read: 0,
            outgoing: Vec::new(),
            queued: 0,
            sent: 0,
            peer_closed: false,
            close_queued: false,
        };
        poll_fn(|cx| match tls.poll_handshake(cx) {
            Poll::Ready(Err(e)) => {
                // The client hears why (a protocol version or cipher it does not share, say)
                // rather than only a closed socket.
                tls.send_alert(cx);
                Poll::Ready(Err(e))
            }
            other => other,
        })
        .await?;
        Ok(tls)
    }

    /// After a TLS error: the alert rustls queued for the client, sent if the socket takes it
    /// at once (the connection is closed next either way).
    fn send_alert(&mut self, cx: &mut Context<'_>) {
        // rustls hands out what it queued before it looks at any received byte.
        while let Ok(ConnectionState::EncodeTlsData(mut alert)) =
            self.conn.process_tls_records(&mut []).state
        {
            let out = (&mut self.outgoing, &mut self.queued);
            if append(out, 64, |room| alert.encode(room)).is_err() {
                break;
            }
        }
        let _ = self.poll_send(cx);
    }

    fn poll_handshake(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        loop {
            match self.process(None, Outgoing::Nothing)? {
                Progress::Again => {}
                Progress::Writable if !self.conn.is_handshaking() => {
                    ready!(self.poll_send(cx))?;
                    return Poll::Ready(Ok(()));
                }
                // Our flight goes out before we wait for the client's next one.
                Progress::Writable | Progress::NeedBytes => {
                    ready!(self.poll_send(cx))?;
                    if ready!(self.poll_fill(cx))? == 0 {
                        return Poll::Ready(Err(io::Error::new(
                            io::ErrorKind::UnexpectedEof,
                            "the client closed the connection during the TLS handshake",
                        )));
                    }
                }
                Progress::PeerClosed | Progress::Closed => {
                    return Poll::Ready(Err(io::Error::new(
                        io::ErrorKind::UnexpectedEof,
                        "the client ended TLS during its handshake",
                    )));
                }
            }
        }
    }
}

impl<IO> ServerTls<IO> {
    /// The socket under the TLS.
    pub fn get_ref(&self) -> &IO {
        &self.io
    }

    /// rustls's connection: the protocol version, the cipher suite, the client's SNI.
    pub fn connection(&self) -> &UnbufferedServerConnection {
        &self.conn
    }

    /// Bytes the stream's own buffers hold (their capacity): none while its client is idle.
    pub fn buffered(&self) -> usize {
        self.incoming.capacity() + self.plain.capacity() + self.outgoing.capacity()
    }

    /// Runs rustls over the received bytes until it reaches a state that needs more than
    /// itself: decrypted data goes to `into` (what does not fit, to `plain`), handshake bytes
    /// and `out`'s encryption to `outgoing`.
    fn process(
        &mut self,
        mut into: Option<&mut ReadBuf<'_>>,
        out: Outgoing<'_>,
    ) -> io::Result<Progress> {
        let UnbufferedStatus { discard, state } = self
            .conn
            .process_tls_records(&mut self.incoming[..self.filled]);
        let progress = match state.map_err(invalid)? {
            ConnectionState::ReadTraffic(mut records) => {
                while let Some(record) = records.next_record() {
                    let payload = record.map_err(invalid)?.payload;
                    let direct = into.as_mut().map_or(0, |buf| {
                        let n = payload.len().min(buf.remaining());
                        buf.put_slice(&payload[..n]);
                        n
                    });
                    self.plain.extend_from_slice(&payload[direct..]);
                }
                Progress::Again
            }
            ConnectionState::EncodeTlsData(mut handshake) => {
                let out = (&mut self.outgoing, &mut self.queued);
                append(out, READ_SIZE, |room| handshake.encode(room))?;
                Progress::Again
            }
            // The bytes are queued in `outgoing`, which is sent, in order, before this stream
            // waits for anything: as good as transmitted for rustls.
            ConnectionState::TransmitTlsData(transmit) => {
                transmit.done();
                Progress::Again
            }
            ConnectionState::BlockedHandshake => Progress::NeedBytes,
            ConnectionState::WriteTraffic(mut writer) => {
                match out {
                    Outgoing::Nothing => {}
                    Outgoing::Data(data) => {
                        // Room for the data and each record's header and tag; rustls says
                        // how much more it needs if that is short.
                        let room = data.len() + 64 * (data.len() / 16_384 + 1);
                        let out = (&mut self.outgoing, &mut self.queued);
                        append(out, room, |room| writer.encrypt(data, room))?;
                    }
                    Outgoing::CloseNotify => {
                        let out = (&mut self.outgoing, &mut self.queued);
                        append(out, 64, |room| writer.queue_close_notify(room))?;
                    }
                }
                Progress::Writable
            }
            ConnectionState::PeerClosed => Progress::PeerClosed,
            ConnectionState::Closed => Progress::Closed,
            _ => return Err(invalid("early data, which Sluice does not accept")),
        };
        if discard > 0 {
            self.incoming.copy_within(discard..self.filled, 0);
            self.filled -= discard;
        }
        Ok(progress)
    }

    /// Gives back the buffers that are empty: the stream is about to wait for its client.
    fn release_empty_buffers(&mut self) {
        if self.filled == 0 {
            self.incoming = Vec::new();
        }
        if self.queued == 0 {
            self.outgoing = Vec::new();
        }
    }
}

impl<IO: AsyncRead + AsyncWrite + Unpin> ServerTls<IO> {
    /// Reads more TLS bytes from the client; `Ready(0)` at its end of stream.
    fn poll_fill(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<usize>> {
        if self.filled >= MAX_INCOMING {
            return Poll::Ready(Err(invalid(
                "a TLS message larger than rustls accepts (64 KiB)",
            )));
        }
        let want = (self.filled + READ_SIZE).min(MAX_INCOMING);
        if self.incoming.len() < want {
            self.incoming.resize(want, 0);
        }
        let mut buf = ReadBuf::new(&mut self.incoming[self.filled..]);
        ready!(Pin::new(&mut self.io).poll_read(cx, &mut buf))?;
        let n = buf.filled().len();
        self.filled += n;
        Poll::Ready(Ok(n))
    }

    /// Sends the queued TLS bytes; `Ready` once none is left.
    fn poll_send(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        while self.sent < self.queued {
            let pending = &self.outgoing[self.sent..self.queued];
            let n = ready!(Pin::new(&mut self.io).poll_write(cx, pending))?;
            if n == 0 {
                return Poll::Ready(Err(io::ErrorKind::WriteZero.into()));
            }
            self.sent += n;
        }
        self.queued = 0;
        self.sent = 0;
        Poll::Ready(Ok(()))
    }

    /// Processes until application data may be sent, encrypting `out` there.
    fn write_out(&mut self, out: Outgoing<'_>) -> io::Result<()> {
        loop {
            match self.process(None, out)? {
                Progress::Writable => return Ok(()),
                Progress::Again => {}
                // The client may close its half and still read ours.
                Progress::PeerClosed => self.peer_closed = true,
                Progress::NeedBytes => {
                    return Err(io::Error::other("TLS handshake not complete"));
                }
                Progress::Closed => return Err(io::ErrorKind::BrokenPipe.into()),
            }
        }
    }
}

/// Lets `write` fill room behind the `end` bytes queued in `buf` — `room` bytes, or as many as
/// it says it needs — and queues what it wrote.
fn append<E>(
    (buf, end): (&mut Vec<u8>, &mut usize),
    room: usize,
    mut write: impl FnMut(&mut [u8]) -> Result<usize, E>,
) -> io::Result<()>
where
    E: Into<WriteError>,
{
    let mut room = room;
    // Bounded: the second try has the room rustls asked for.
    for _ in 0..2 {
        if buf.len() < *end + room {
            buf.resize(*end + room, 0);
        }
        match write(&mut buf[*end..]).map_err(Into::into) {
            Ok(n) => {
                *end += n;
                return Ok(());
            }
            Err(WriteError::NeedsRoom(needed)) if needed > buf.len() - *end => room = needed,
            Err(WriteError::NeedsRoom(_)) => break,
            Err(WriteError::Other(e)) => return Err(e),
        }
    }
    Err(io::Error::other("rustls asked for more room than it said"))
}

/// rustls's encode and encrypt errors: too little room, or anything else.
enum WriteError {
    NeedsRoom(usize),
    Other(io::Error),
}

impl From<EncodeError> for WriteError {
    fn from(e: EncodeError) -> Self {
        match e {
            EncodeError::InsufficientSize(s) => WriteError::NeedsRoom(s.required_size),
            other => WriteError::Other(io::Error::other(other.to_string())),
        }
    }
}

impl From<EncryptError> for WriteError {
    fn from(e: EncryptError) -> Self {
        match e {
            EncryptError::InsufficientSize(s) => WriteError::NeedsRoom(s.required_size),
            other => WriteError::Other(io::Error::other(other.to_string())),
        }
    }
}

impl<IO: AsyncRead + AsyncWrite + Unpin> AsyncRead for ServerTls<IO> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let me = self.get_mut();
        // What is queued for the client goes first (a session ticket, the end of a reply its
        // writer did not flush); a socket that cannot take it now wakes the task later.
        if let Poll::Ready(Err(e)) = me.poll_send(cx) {
            return Poll::Ready(Err(e));
        }
        if buf.remaining() == 0 {
            return Poll::Ready(Ok(()));
        }
        if me.plain_read < me.plain.len() {
            let n = (me.plain.len() - me.plain_read).min(buf.remaining());
            buf.put_slice(&me.plain[me.plain_read..me.plain_read + n]);
            me.plain_read += n;
            if me.plain_read == me.plain.len() {
                me.plain = Vec::new();
                me.plain_read = 0;
            }
            return Poll::Ready(Ok(()));
        }
        if me.peer_closed {
            return Poll::Ready(Ok(()));
        }
        loop {
            let before = buf.filled().len();
            match me.process(Some(buf), Outgoing::Nothing)? {
                Progress::Again if buf.filled().len() > before => return Poll::Ready(Ok(())),
                Progress::Again => {}
                Progress::Writable | Progress::NeedBytes => match me.poll_fill(cx)? {
                    Poll::Pending => {
                        me.release_empty_buffers();
                        return Poll::Pending;
                    }
                    Poll::Ready(0) => {
                        me.peer_closed = true;
                        return Poll::Ready(Ok(()));
                    }
                    Poll::Ready(_) => {}
                },
                Progress::PeerClosed | Progress::Closed => {
                    me.peer_closed = true;
                    return Poll::Ready(Ok(()));
                }
            }
        }
    }
}

impl<IO: AsyncRead + AsyncWrite + Unpin> AsyncWrite for ServerTls<IO> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        data: &[u8],
    ) -> Poll<io::Result<usize>> {
        let me = self.get_mut();
        if data.is_empty() {
            return Poll::Ready(Ok(0));
        }
        if me.close_queued {
            return Poll::Ready(Err(io::ErrorKind::BrokenPipe.into()));
        }
        if me.queued - me.sent >= MAX_OUTGOING {
            ready!(me.poll_send(cx))?;
        }
        let taken = data.len().min(MAX_OUTGOING);
        me.write_out(Outgoing::Data(&data[..taken]))?;
        // Sent now if the socket takes it; otherwise by the next write, flush or read.
        if let Poll::Ready(Err(e)) = me.poll_send(cx) {
            return Poll::Ready(Err(e));
        }
        Poll::Ready(Ok(taken))
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let me = self.get_mut();
        ready!(me.poll_send(cx))?;
        Pin::new(&mut me.io).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let me = self.get_mut();
        if !me.close_queued {
            match me.write_out(Outgoing::CloseNotify) {
                // Both sides closed already: nothing to say.
                Err(e) if e.kind() == io::ErrorKind::BrokenPipe => {}
                other => other?,
            }
            me.close_queued = true;
        }
        ready!(me.poll_send(cx))?;
        Pin::new(&mut me.io).poll_shutdown(cx)
    }
}

#[cfg(test)]
#[path = "server_tls_tests.rs"]
mod tests;

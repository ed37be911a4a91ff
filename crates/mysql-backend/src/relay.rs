//! Streams a backend reply to the client as raw bytes while a [`ReplyTracker`] finds its end.
//!
//! Only packet headers and the first bytes of each payload are inspected. A packet larger than
//! [`PEEK`] is forwarded as it arrives, so a huge row never sits whole in memory.

use crate::conn::BackendConn;
use bytes::Buf;
use sluice_mysql_proto::framing::header_len;
use sluice_mysql_proto::reply::{ReplyError, ReplyKind, ReplyTracker};
use sluice_mysql_proto::session_track::strip_state;
use tokio::io::{AsyncReadExt, AsyncWrite, AsyncWriteExt};

/// Bytes of a large packet the tracker sees (OK/EOF/ERR packets are shorter and seen whole).
const PEEK: usize = 64;
/// Packets up to this size are buffered whole before being looked at.
const SMALL: usize = 32 * 1024;

/// An OK packet carrying session-state items (see [`sluice_mysql_proto::session_track`]).
struct OkWithState {
    /// Its payload length.
    len: usize,
    /// Where its session-state block starts in the payload.
    state_at: usize,
}

/// How relaying one reply ended.
#[derive(Debug)]
pub enum RelayOutcome {
    /// The whole reply reached the client; the tracker holds its status.
    Complete(ReplyTracker),
    /// The backend failed mid-reply. `forwarded` bytes already reached the client, and
    /// `next_seq` is the sequence id an error packet to the client should carry.
    BackendFailed {
        /// What happened.
        error: crate::Error,
        /// Bytes already written to the client.
        forwarded: usize,
        /// Sequence id for a synthesised ERR.
        next_seq: u8,
    },
    /// Writing to the client failed; the backend connection is mid-reply and must be dropped.
    ClientGone(std::io::Error),
    /// The server asked for a local file (LOAD DATA LOCAL INFILE) and the request reached the
    /// client: the client's file packets go to the server next, then
    /// [`BackendConn::relay_after_local_file`] relays the rest of the reply.
    LocalInfile(ReplyTracker),
}

/// Told of each GTID a reply commits, with the server's `host:port`, before the OK packet that
/// carries it reaches the client: a read the client sends next, on any connection, can count on
/// it (read-your-writes).
pub type CommitSink<'a> = &'a mut (dyn FnMut(&str, &str) + Send);

impl BackendConn {
    /// Relays the reply to a command already sent, writing raw packets to `client`; `commits`
    /// hears of each GTID the reply commits.
    pub async fn relay_reply<W: AsyncWrite + Unpin>(
        &mut self,
        kind: ReplyKind,
        client: &mut W,
        commits: CommitSink<'_>,
    ) -> RelayOutcome {
        let tracker = ReplyTracker::new(kind, self.deprecate_eof());
        self.relay_with(tracker, client, commits).await
    }

    /// Relays the rest of a reply after the client's local file went to the server.
    pub async fn relay_after_local_file<W: AsyncWrite + Unpin>(
        &mut self,
        mut tracker: ReplyTracker,
        client: &mut W,
        commits: CommitSink<'_>,
    ) -> RelayOutcome {
        tracker.local_file_sent();
        self.relay_with(tracker, client, commits).await
    }

    /// The backend sent what does not fit the reply: the connection cannot be trusted.
    fn unexpected(&self, why: &'static str, forwarded: usize, next_seq: u8) -> RelayOutcome {
        RelayOutcome::BackendFailed {
            error: crate::Error::UnexpectedReply {
                server: self.server.clone(),
                why,
            },
            forwarded,
            next_seq,
        }
    }

    async fn relay_with<W: AsyncWrite + Unpin>(
        &mut self,
        mut tracker: ReplyTracker,
        client: &mut W,
        commits: CommitSink<'_>,
    ) -> RelayOutcome {
        let mut forwarded = 0usize;
        let mut next_seq = 1u8;
        let mut skip = 0usize; // body bytes of a large packet still to pass through unseen
        let mut buf = self.reader.take_buffered();
        loop {
            let Scanned {
                pos,
                failure,
                rewrite,
            } = scan(&mut tracker, &buf, &mut skip, &mut next_seq);
            if pos > 0 {
                if let Err(e) = client.write_all(&buf[..pos]).await {
                    return RelayOutcome::ClientGone(e);
                }
                forwarded += pos;
                buf.advance(pos);
            }
            if let Some(why) = failure {
                return self.unexpected(why, forwarded, next_seq);
            }
            if let Some(ok) = rewrite {
                if let Some(gtid) = tracker.committed_gtid.take() {
                    commits(&gtid, &self.server);
                }
                // Rewritten in the read buffer (the packet is at its start now): shorter, with a
                // new length in its header, and no allocation.
                let keep = strip_state(&mut buf[4..4 + ok.len], ok.state_at);
                buf[..3].copy_from_slice(&(keep as u32).to_le_bytes()[..3]);
                if let Err(e) = client.write_all(&buf[..4 + keep]).await {
                    return RelayOutcome::ClientGone(e);
                }
                forwarded += 4 + keep;
                buf.advance(4 + ok.len);
                continue;
            }
            let pause = if tracker.wants_local_file() {
                Some("bytes after a LOCAL INFILE request")
            } else if tracker.done() && skip == 0 {
                Some("bytes after the end of the reply")
            } else {
                None
            };
            if let Some(why) = pause {
                // The server now waits (for the next command, or for the client's file): the
                // client gets everything, and nothing may be left unread.
                if let Err(e) = client.flush().await {
                    return RelayOutcome::ClientGone(e);
                }
                if !buf.is_empty() {
                    return self.unexpected(why, forwarded, next_seq);
                }
                self.reader.put_back(buf);
                return if tracker.wants_local_file() {
                    RelayOutcome::LocalInfile(tracker)
                } else {
                    RelayOutcome::Complete(tracker)
                };
            }
            if buf.capacity() - buf.len() < 4 * 1024 {
                // Reclaims the same allocation when everything before was forwarded.
                buf.reserve(32 * 1024);
            }
            let before = buf.len();
            match self.stream.read_buf(&mut buf).await {
                Ok(0) => {
                    return RelayOutcome::BackendFailed {
                        error: self.proto_err(sluice_mysql_proto::Error::Closed),
                        forwarded,
                        next_seq,
                    };
                }
                Ok(_) => self.traffic.received(buf.len() - before),
                Err(e) => {
                    return RelayOutcome::BackendFailed {
                        error: self.proto_err(e.into()),
                        forwarded,
                        next_seq,
                    };
                }
            }
        }
    }
}

/// How much of the buffered bytes [`scan`] found forwardable, and why it stopped there.
struct Scanned {
    /// Bytes at the start of the buffer that belong to the reply: they go to the client as
    /// they are.
    pos: usize,
    /// The server sent what does not fit the reply.
    failure: Option<&'static str>,
    /// An OK packet (at `pos`) whose session-state items the client must not see.
    rewrite: Option<OkWithState>,
}

/// Feeds `tracker` the packets in `buf`: a small one whole, a large one by its first
/// [`PEEK`] bytes (the rest of its body is counted in `skip`, to pass through unseen). Stops
/// at the end of the reply, at a packet not wholly read yet, at what does not fit the reply,
/// or at an OK carrying session state.
fn scan(tracker: &mut ReplyTracker, buf: &[u8], skip: &mut usize, next_seq: &mut u8) -> Scanned {
    let mut pos = 0usize;
    loop {
        if *skip > 0 {
            let n = (*skip).min(buf.len() - pos);
            pos += n;
            *skip -= n;
            if *skip > 0 {
                break;
            }
            continue;
        }
        if tracker.done() || tracker.wants_local_file() || buf.len() - pos < 4 {
            break;
        }
        let len = header_len(&buf[pos..]);
        let seq = buf[pos + 3];
        let avail = buf.len() - pos - 4;
        let fed = if len <= SMALL {
            if avail < len {
                break;
            }
            tracker.feed(&buf[pos + 4..pos + 4 + len], len)
        } else {
            if avail < PEEK {
                break;
            }
            tracker.feed(&buf[pos + 4..pos + 4 + PEEK], len)
        };
        if let Err(ReplyError::Unexpected(why)) = fed {
            return Scanned {
                pos,
                failure: Some(why),
                rewrite: None,
            };
        }
        *next_seq = seq.wrapping_add(1);
        if let Some(state_at) = tracker.take_state_offset() {
            return Scanned {
                pos,
                failure: None,
                rewrite: Some(OkWithState { len, state_at }),
            };
        }
        if len <= SMALL {
            pos += 4 + len;
        } else {
            pos += 4 + PEEK;
            *skip = len - PEEK;
        }
    }
    Scanned {
        pos,
        failure: None,
        rewrite: None,
    }
}

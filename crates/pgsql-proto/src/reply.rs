//! What a pooling session must know of a server's replies, read frame by frame without decoding
//! rows: where each frame ends; when the server is ready for the next transaction and in which
//! transaction state; which frames answer messages Sluice sent on its own ahead of the client's
//! (the handoff of a pooled connection), which the client must not see; and whether the `SET`s
//! made in a transaction were kept. Pure: no sockets, unit-tested on byte strings.

use crate::Error;
use crate::frame::{complete_len, parse_error};
use crate::tag::{server, status};

/// Whether the `SET`s of a transaction survived it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SetsVerdict {
    /// The transaction ended without error or rollback: the SETs hold.
    Kept,
    /// It failed or rolled back: PostgreSQL undid them.
    Undone,
    /// It committed after an error (savepoints): which SETs survived cannot be told.
    Unclear,
}

/// One complete server frame, as the tracker read it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Frame {
    /// Message type byte.
    pub kind: u8,
    /// Whole length (type byte, length field, body).
    pub len: usize,
    /// Part of the replies to Sluice's own handoff messages: not for the client.
    pub own: bool,
    /// The handoff's last reply arrived after one of its messages failed: (SQLSTATE, message).
    pub handoff_failed: Option<(String, String)>,
    /// A ReadyForQuery that ended a transaction with watched `SET`s: what became of them.
    pub sets: Option<SetsVerdict>,
}

/// The state of one server connection's replies while a session holds it.
#[derive(Debug, Clone)]
pub struct ReplyTracker {
    /// Query / Sync / FunctionCall messages whose ReadyForQuery has not come back.
    outstanding: u32,
    /// Transaction status of the last ReadyForQuery (`I`, `T` or `E`).
    status: u8,
    /// ReadyForQuery replies of handoff messages still to come.
    handoff_left: u8,
    /// The first error among the handoff's replies.
    handoff_error: Option<(String, String)>,
    /// `SET`s are pending in the current transaction: watch how it ends.
    watching_sets: bool,
    sets_error: bool,
    sets_rolled_back: bool,
    sets_in_transaction: bool,
}

impl Default for ReplyTracker {
    fn default() -> Self {
        ReplyTracker {
            outstanding: 0,
            status: status::IDLE,
            handoff_left: 0,
            handoff_error: None,
            watching_sets: false,
            sets_error: false,
            sets_rolled_back: false,
            sets_in_transaction: false,
        }
    }
}

impl ReplyTracker {
    /// A message that ends with a ReadyForQuery (Query, Sync, FunctionCall) went to the server.
    pub fn sent_sync(&mut self) {
        self.outstanding += 1;
    }

    /// `n` handoff Query messages were staged ahead of the session's own.
    pub fn expect_handoff(&mut self, n: u8) {
        self.handoff_left += n;
        self.handoff_error = None;
    }

    /// Whether `SET`s are pending in the current transaction (their fate is reported by the
    /// ReadyForQuery that ends it).
    pub fn watch_sets(&mut self, pending: bool) {
        if pending && !self.watching_sets {
            self.sets_error = false;
            self.sets_rolled_back = false;
            self.sets_in_transaction = false;
        }
        self.watching_sets = pending;
    }

    /// True while handoff replies are still to come.
    pub fn handoff_pending(&self) -> bool {
        self.handoff_left > 0
    }

    /// ReadyForQuery replies still to come for the session's own messages.
    pub fn outstanding(&self) -> u32 {
        self.outstanding
    }

    /// The transaction status of the last ReadyForQuery.
    pub fn status(&self) -> u8 {
        self.status
    }

    /// Nothing in flight and no transaction open: the connection may go back to the pool (as
    /// far as the replies tell).
    pub fn at_rest(&self) -> bool {
        self.outstanding == 0 && self.handoff_left == 0 && self.status == status::IDLE
    }

    /// The connection is gone: nothing more will come.
    pub fn lost(&mut self) {
        *self = ReplyTracker::default();
    }

    /// Reads the frame at the start of `buf`; `None` until it is complete.
    pub fn next(&mut self, buf: &[u8]) -> Result<Option<Frame>, Error> {
        let Some(len) = complete_len(buf)? else {
            return Ok(None);
        };
        let kind = buf[0];
        let body = &buf[5..len];
        let mut frame = Frame {
            kind,
            len,
            own: false,
            handoff_failed: None,
            sets: None,
        };
        if self.handoff_left > 0 {
            frame.own = true;
            match kind {
                server::ERROR_RESPONSE if self.handoff_error.is_none() => {
                    self.handoff_error = Some(parse_error(body));
                }
                server::READY_FOR_QUERY => {
                    self.handoff_left -= 1;
                    if self.handoff_left == 0 {
                        frame.handoff_failed = self.handoff_error.take();
                    }
                }
                _ => {}
            }
            return Ok(Some(frame));
        }
        if kind == server::READY_FOR_QUERY {
            self.outstanding = self.outstanding.saturating_sub(1);
            self.status = body.first().copied().unwrap_or(status::IDLE);
        }
        if self.watching_sets {
            match (kind, body.first()) {
                (server::ERROR_RESPONSE, _) => self.sets_error = true,
                (server::COMMAND_COMPLETE, _) if body.starts_with(b"ROLLBACK") => {
                    self.sets_rolled_back = true
                }
                (server::READY_FOR_QUERY, Some(&(status::IN_TRANSACTION | status::FAILED))) => {
                    self.sets_in_transaction = true
                }
                (server::READY_FOR_QUERY, _) => {
                    frame.sets = Some(
                        if self.sets_error && self.sets_in_transaction && !self.sets_rolled_back {
                            SetsVerdict::Unclear
                        } else if !self.sets_error && !self.sets_rolled_back {
                            SetsVerdict::Kept
                        } else {
                            SetsVerdict::Undone
                        },
                    );
                    self.watching_sets = false;
                }
                _ => {}
            }
        }
        Ok(Some(frame))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::frame::{error_response, message, ready};

    /// Feeds `wire` and returns the frames read.
    fn frames(t: &mut ReplyTracker, wire: &[u8]) -> Vec<Frame> {
        let mut out = Vec::new();
        let mut pos = 0;
        while let Some(f) = t.next(&wire[pos..]).expect("well-formed") {
            pos += f.len;
            out.push(f);
        }
        assert_eq!(pos, wire.len(), "every byte belongs to a frame");
        out
    }

    #[test]
    fn ready_for_query_ends_what_was_sent() {
        let mut t = ReplyTracker::default();
        t.sent_sync();
        t.sent_sync();
        let mut wire = message(b'C', b"BEGIN\0");
        wire.extend(ready(b'T'));
        let got = frames(&mut t, &wire);
        assert_eq!(got.len(), 2);
        assert_eq!((t.outstanding(), t.status(), t.at_rest()), (1, b'T', false));
        let mut wire = message(b'C', b"COMMIT\0");
        wire.extend(ready(b'I'));
        frames(&mut t, &wire);
        assert!(t.at_rest());
        // An incomplete frame waits for more bytes.
        assert_eq!(t.next(&ready(b'I')[..3]).expect("ok"), None);
        assert!(t.next(&[b'Z', 0, 0, 0, 1]).is_err(), "length below 4");
    }

    #[test]
    fn handoff_replies_are_own_and_report_a_failure_at_their_end() {
        let mut t = ReplyTracker::default();
        t.expect_handoff(2);
        t.sent_sync();
        let mut wire = message(b'C', b"RESET\0");
        wire.extend(ready(b'I'));
        wire.extend(error_response("ERROR", "22023", "invalid value"));
        wire.extend(ready(b'I'));
        wire.extend(message(b'C', b"SELECT 1\0"));
        wire.extend(ready(b'I'));
        let got = frames(&mut t, &wire);
        assert_eq!(
            got.iter().map(|f| f.own).collect::<Vec<_>>(),
            [true, true, true, true, false, false]
        );
        assert_eq!(
            got[3].handoff_failed,
            Some(("22023".to_string(), "invalid value".to_string()))
        );
        assert!(got.iter().take(3).all(|f| f.handoff_failed.is_none()));
        assert!(t.at_rest());
    }

    #[test]
    fn sets_are_kept_undone_or_unclear_by_how_the_transaction_ended() {
        let verdict = |wire: Vec<u8>| {
            let mut t = ReplyTracker::default();
            t.watch_sets(true);
            frames(&mut t, &wire).iter().find_map(|f| f.sets)
        };
        let mut ok = message(b'C', b"SET\0");
        ok.extend(ready(b'I'));
        assert_eq!(verdict(ok), Some(SetsVerdict::Kept));
        let mut failed = error_response("ERROR", "22023", "bad");
        failed.extend(ready(b'I'));
        assert_eq!(verdict(failed), Some(SetsVerdict::Undone));
        let mut rolled_back = ready(b'T');
        rolled_back.extend(message(b'C', b"ROLLBACK\0"));
        rolled_back.extend(ready(b'I'));
        assert_eq!(verdict(rolled_back), Some(SetsVerdict::Undone));
        let mut after_error = ready(b'T');
        after_error.extend(error_response("ERROR", "23505", "dup"));
        after_error.extend(ready(b'E'));
        after_error.extend(message(b'C', b"COMMIT\0"));
        after_error.extend(ready(b'I'));
        assert_eq!(verdict(after_error), Some(SetsVerdict::Unclear));
        // Not watching: no verdict.
        let mut t = ReplyTracker::default();
        assert!(
            frames(&mut t, &ready(b'I'))
                .iter()
                .all(|f| f.sets.is_none())
        );
    }
}

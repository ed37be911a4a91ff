//! Finds where a backend's reply to one command ends, reading only packet headers and the first
//! bytes of each payload. Rows and column definitions are never decoded.

use crate::consts::{MAX_CHUNK, status};
use crate::lenenc::Reader;
use crate::packets::{eof_status, parse_ok};

/// The shape of reply a command gets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReplyKind {
    /// COM_QUERY / COM_STMT_EXECUTE: OK, ERR, or result set(s).
    ResultSets,
    /// COM_STMT_EXECUTE that asked for a cursor: as [`ReplyKind::ResultSets`], but a result set
    /// whose column-definition EOF says `SERVER_STATUS_CURSOR_EXISTS` ends the reply there (its
    /// rows come by COM_STMT_FETCH). Any other reply may carry that flag too — a stored
    /// procedure with an open cursor sets it on the result sets it sends — and their rows follow.
    CursorResultSets,
    /// COM_STMT_PREPARE: prepare-OK with parameter and column definitions, or ERR.
    Prepare,
    /// COM_STMT_FETCH: rows until a terminator, or ERR.
    Fetch,
    /// COM_FIELD_LIST: column definitions until a terminator, or ERR.
    FieldList,
    /// One packet (OK, ERR, EOF, or COM_STATISTICS' text).
    Single,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    Start,
    Columns(u64),
    ColumnsEof,
    Rows,
    PrepParams {
        left: u64,
        columns: u64,
    },
    PrepParamsEof {
        columns: u64,
    },
    PrepColumns(u64),
    PrepColumnsEof,
    FieldList,
    Single,
    /// The server asked for a local file (LOAD DATA LOCAL INFILE): the client's file packets go
    /// to the server, then its OK/ERR follows.
    LocalInfile,
    Done,
}

/// Why a reply is not understood; the connection must not be reused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReplyError {
    /// A packet that does not fit the reply's shape.
    Unexpected(&'static str),
}

/// A state machine fed with each backend packet of one reply.
#[derive(Debug, Clone)]
pub struct ReplyTracker {
    state: State,
    deprecate_eof: bool,
    /// The command asked for a cursor ([`ReplyKind::CursorResultSets`]).
    cursor: bool,
    continuation: bool,
    /// Status flags of the last OK/EOF seen.
    pub status: u16,
    /// True once an OK/EOF carried status flags (an ERR-only reply has none).
    pub status_seen: bool,
    /// True when the reply ended with ERR.
    pub error: bool,
    /// The error number of that ERR.
    pub error_code: Option<u16>,
    /// The message of that ERR.
    pub error_message: Option<String>,
    /// Affected rows of the last OK.
    pub affected_rows: u64,
    /// Last insert id of the last OK.
    pub last_insert_id: u64,
    /// Statement id of a prepare-OK.
    pub stmt_id: Option<u32>,
    /// Result sets (and OKs) completed so far.
    pub results: u32,
    /// Rows relayed (all result sets).
    pub rows: u64,
    /// The GTID the reply's statements committed, from the OK packets' session-state items
    /// (backends track `last_gtid`; see [`crate::session_track`]).
    pub committed_gtid: Option<String>,
    /// Where the session-state block of the packet just fed starts: the relay gives the client
    /// that packet without it.
    state_at: Option<usize>,
}

impl ReplyTracker {
    /// A tracker for one reply; `deprecate_eof` is the CLIENT_DEPRECATE_EOF the backend agreed to.
    pub fn new(kind: ReplyKind, deprecate_eof: bool) -> Self {
        let state = match kind {
            ReplyKind::ResultSets | ReplyKind::CursorResultSets | ReplyKind::Prepare => {
                State::Start
            }
            ReplyKind::Fetch => State::Rows,
            ReplyKind::FieldList => State::FieldList,
            ReplyKind::Single => State::Single,
        };
        let mut t = ReplyTracker {
            state,
            deprecate_eof,
            cursor: kind == ReplyKind::CursorResultSets,
            continuation: false,
            status: 0,
            status_seen: false,
            error: false,
            error_code: None,
            error_message: None,
            affected_rows: 0,
            last_insert_id: 0,
            stmt_id: None,
            results: 0,
            rows: 0,
            committed_gtid: None,
            state_at: None,
        };
        if kind == ReplyKind::Prepare {
            t.state = State::PrepParams {
                left: u64::MAX,
                columns: 0,
            };
        }
        t
    }

    /// True once the reply is complete.
    pub fn done(&self) -> bool {
        self.state == State::Done
    }

    /// True when the server asked for a local file (0xFB, LOAD DATA LOCAL INFILE): the reply
    /// pauses until the client's file has been relayed, then [`ReplyTracker::local_file_sent`].
    pub fn wants_local_file(&self) -> bool {
        self.state == State::LocalInfile
    }

    /// The client's file went to the server: its OK/ERR (and any further results) follow.
    pub fn local_file_sent(&mut self) {
        if self.state == State::LocalInfile {
            self.state = State::Start;
        }
    }

    /// Where the session-state block of the packet just fed starts, when it has one: the packet
    /// must reach the client without it ([`crate::session_track::strip_state`]).
    pub fn take_state_offset(&mut self) -> Option<usize> {
        self.state_at.take()
    }

    /// Notes an OK packet's session-state block (only a packet seen whole can be rewritten).
    fn note_state(&mut self, status: u16, payload: &[u8], len: usize) {
        if status & status::SESSION_STATE_CHANGED == 0 || payload.len() != len {
            return;
        }
        if let Some(at) = crate::session_track::state_offset(payload) {
            if let Some(gtid) = crate::session_track::committed_gtid(&payload[at..]) {
                self.committed_gtid = Some(gtid);
            }
            self.state_at = Some(at);
        }
    }

    fn is_terminator(first: u8, len: usize) -> bool {
        first == 0xfe && len < MAX_CHUNK
    }

    fn end_of_result(&mut self, status: u16) {
        self.status = status;
        self.status_seen = true;
        self.results += 1;
        self.state = if status & status::MORE_RESULTS_EXISTS != 0 {
            State::Start
        } else {
            State::Done
        };
    }

    fn terminator_status(&self, payload: &[u8]) -> u16 {
        if self.deprecate_eof && payload.len() > 5 {
            parse_ok(payload)
                .map(|ok| ok.status)
                .unwrap_or_else(|_| eof_status(payload))
        } else {
            eof_status(payload)
        }
    }

    /// Feeds one physical packet: `len` is its payload length from the header, `payload` at least
    /// its first bytes (the whole payload for OK/EOF/ERR, which are small).
    pub fn feed(&mut self, payload: &[u8], len: usize) -> Result<(), ReplyError> {
        if self.continuation {
            self.continuation = len == MAX_CHUNK;
            return Ok(());
        }
        self.continuation = len == MAX_CHUNK;
        let Some(&first) = payload.first() else {
            return match self.state {
                State::Rows | State::Columns(_) | State::PrepColumns(_) | State::FieldList => {
                    Ok(())
                }
                State::PrepParams { left, .. } if left != u64::MAX => Ok(()),
                _ => Err(ReplyError::Unexpected("empty packet")),
            };
        };
        if first == 0xff && !matches!(self.state, State::Columns(_) | State::PrepColumns(_)) {
            self.error = true;
            self.error_code =
                (payload.len() >= 3).then(|| u16::from_le_bytes([payload[1], payload[2]]));
            self.state = State::Done;
            return Ok(());
        }
        match self.state {
            State::Done => Err(ReplyError::Unexpected("packet after the end of the reply")),
            State::LocalInfile => Err(ReplyError::Unexpected(
                "packet while a local file is awaited",
            )),
            State::Single => {
                self.single(first, payload, len);
                Ok(())
            }
            State::Start => self.start(first, payload, len),
            State::Columns(_) | State::ColumnsEof | State::Rows | State::FieldList => {
                self.result_set(first, payload, len)
            }
            State::PrepParams { .. }
            | State::PrepParamsEof { .. }
            | State::PrepColumns(_)
            | State::PrepColumnsEof => self.prepare(first, payload, len),
        }
    }

    /// A one-packet reply (OK, EOF or anything else) ends it.
    fn single(&mut self, first: u8, payload: &[u8], len: usize) {
        if first == 0x00 {
            if let Ok(ok) = parse_ok(payload) {
                self.status = ok.status;
                self.status_seen = true;
                self.note_state(ok.status, payload, len);
            }
        } else if first == 0xfe && len < 9 {
            self.status = eof_status(payload);
            self.status_seen = true;
        }
        self.state = State::Done;
    }

    /// The first packet of a result: OK, a local-file request, or a column count.
    fn start(&mut self, first: u8, payload: &[u8], len: usize) -> Result<(), ReplyError> {
        match first {
            0x00 => {
                let ok = parse_ok(payload).map_err(|_| ReplyError::Unexpected("bad OK"))?;
                self.affected_rows = ok.affected_rows;
                self.last_insert_id = ok.last_insert_id;
                self.note_state(ok.status, payload, len);
                self.end_of_result(ok.status);
            }
            0xfb => self.state = State::LocalInfile,
            _ => {
                let n = Reader::new(payload, "column count")
                    .lenenc_int()
                    .map_err(|_| ReplyError::Unexpected("bad column count"))?;
                if n == 0 {
                    return Err(ReplyError::Unexpected("zero columns"));
                }
                self.state = State::Columns(n);
            }
        }
        Ok(())
    }

    /// Column definitions, their EOF, rows and the terminator of a result set (or a field list).
    fn result_set(&mut self, first: u8, payload: &[u8], len: usize) -> Result<(), ReplyError> {
        match self.state {
            State::Columns(n) => {
                self.state = if n > 1 {
                    State::Columns(n - 1)
                } else if self.deprecate_eof {
                    State::Rows
                } else {
                    State::ColumnsEof
                };
            }
            State::ColumnsEof => {
                if !Self::is_terminator(first, len) {
                    return Err(ReplyError::Unexpected(
                        "missing EOF after column definitions",
                    ));
                }
                let st = eof_status(payload);
                self.status = st;
                self.status_seen = true;
                if self.cursor && st & status::CURSOR_EXISTS != 0 {
                    self.results += 1;
                    self.state = State::Done;
                } else {
                    self.state = State::Rows;
                }
            }
            _ if Self::is_terminator(first, len) => {
                let st = self.terminator_status(payload);
                if self.deprecate_eof && self.state != State::FieldList && payload.len() > 5 {
                    self.note_state(st, payload, len);
                }
                if self.state == State::FieldList {
                    self.status = st;
                    self.status_seen = true;
                    self.state = State::Done;
                } else {
                    self.end_of_result(st);
                }
            }
            State::Rows => self.rows += 1,
            _ => {}
        }
        Ok(())
    }

    /// The reply to COM_STMT_PREPARE: its OK, parameter and column definitions and their EOFs.
    fn prepare(&mut self, first: u8, payload: &[u8], len: usize) -> Result<(), ReplyError> {
        match self.state {
            State::PrepParams { left: u64::MAX, .. } => {
                if first != 0x00 || payload.len() < 9 {
                    return Err(ReplyError::Unexpected("bad prepare OK"));
                }
                self.stmt_id = Some(u32::from_le_bytes([
                    payload[1], payload[2], payload[3], payload[4],
                ]));
                let columns = u64::from(u16::from_le_bytes([payload[5], payload[6]]));
                let params = u64::from(u16::from_le_bytes([payload[7], payload[8]]));
                self.state = if params > 0 {
                    State::PrepParams {
                        left: params,
                        columns,
                    }
                } else {
                    self.after_params(columns)
                };
            }
            State::PrepParams { left, columns } => {
                self.state = if left > 1 {
                    State::PrepParams {
                        left: left - 1,
                        columns,
                    }
                } else if self.deprecate_eof {
                    self.after_params(columns)
                } else {
                    State::PrepParamsEof { columns }
                };
            }
            State::PrepParamsEof { columns } => {
                if !Self::is_terminator(first, len) {
                    return Err(ReplyError::Unexpected(
                        "missing EOF after parameter definitions",
                    ));
                }
                self.state = self.after_params(columns);
            }
            State::PrepColumns(n) => {
                self.state = if n > 1 {
                    State::PrepColumns(n - 1)
                } else if self.deprecate_eof {
                    State::Done
                } else {
                    State::PrepColumnsEof
                };
            }
            State::PrepColumnsEof => {
                if !Self::is_terminator(first, len) {
                    return Err(ReplyError::Unexpected(
                        "missing EOF after column definitions",
                    ));
                }
                self.state = State::Done;
            }
            _ => {}
        }
        Ok(())
    }

    fn after_params(&self, columns: u64) -> State {
        if columns > 0 {
            State::PrepColumns(columns)
        } else {
            State::Done
        }
    }
}

#[cfg(test)]
mod tests;

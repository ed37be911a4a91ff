//! Commands Sluice itself sends on a backend connection: prepare, close, small internal queries,
//! and bringing the connection to a client's session state.

use crate::conn::BackendConn;
use crate::error::Error;
use crate::state::{SessionState, plan};
use bytes::Bytes;
use sluice_mysql_proto::consts::{MAX_CHUNK, com};
use sluice_mysql_proto::framing::packet;
use sluice_mysql_proto::lenenc::Reader;
use sluice_mysql_proto::reply::{ReplyError, ReplyKind, ReplyTracker};

/// A statement prepared on the server, with its metadata.
#[derive(Debug, Clone)]
pub struct Prepared {
    /// The server's statement id.
    pub backend_id: u32,
    /// Placeholders (`?`) the statement takes; COM_STMT_EXECUTE sends this many values.
    pub num_params: u16,
    /// Columns a result of the statement has (0 for statements that return no rows).
    pub num_columns: u16,
    /// Parameter definition packets (payloads).
    pub params: Vec<Bytes>,
    /// Column definition packets (payloads).
    pub columns: Vec<Bytes>,
}

/// A server error reply (the ERR payload), for forwarding to the client.
pub type ServerErr = Bytes;

impl BackendConn {
    /// Sends a command Sluice builds (sequence id 0) without reading its reply; the caller
    /// reads it with [`BackendConn::read_payload`] (a reply read as it streams, e.g. to stop
    /// after a number of rows).
    pub async fn send_command(&mut self, payload: &[u8]) -> Result<(), Error> {
        self.send_raw(&packet(0, payload)).await
    }

    /// Reads the next reply packet's payload (bounded by the connection's packet limit).
    pub async fn read_payload(&mut self) -> Result<Bytes, Error> {
        let pk = self
            .reader
            .read(&mut self.stream)
            .await
            .map_err(|e| self.proto_err(e))?;
        self.traffic.received(pk.raw.len());
        Ok(pk.payload)
    }

    /// Sends a command Sluice builds (sequence id 0) and collects every reply packet's payload.
    pub async fn command_collect(
        &mut self,
        payload: &[u8],
        kind: ReplyKind,
    ) -> Result<(ReplyTracker, Vec<Bytes>), Error> {
        self.send_raw(&packet(0, payload)).await?;
        let mut tracker = ReplyTracker::new(kind, self.deprecate_eof());
        let mut out = Vec::new();
        while !tracker.done() {
            let pk = self
                .reader
                .read(&mut self.stream)
                .await
                .map_err(|e| self.proto_err(e))?;
            tracker
                .feed(&pk.payload, pk.payload.len().min(MAX_CHUNK - 1))
                .map_err(|ReplyError::Unexpected(why)| Error::UnexpectedReply {
                    server: self.server.clone(),
                    why,
                })?;
            if tracker.wants_local_file() {
                // Sluice's own commands (mirrors, checks) have no file to give: an empty packet
                // ends the request, and the server answers as for an empty file.
                self.send_more(&packet(pk.seq.wrapping_add(1), &[])).await?;
                tracker.local_file_sent();
                continue;
            }
            out.push(pk.payload);
        }
        Ok((tracker, out))
    }

    /// COM_STMT_PREPARE; the server's ERR comes back as `Ok(Err(payload))`.
    pub async fn prepare(&mut self, sql: &[u8]) -> Result<Result<Prepared, ServerErr>, Error> {
        let mut p = Vec::with_capacity(sql.len() + 1);
        p.push(com::STMT_PREPARE);
        p.extend_from_slice(sql);
        let (t, packets) = self.command_collect(&p, ReplyKind::Prepare).await?;
        let Some(first) = packets.first() else {
            return Err(Error::UnexpectedReply {
                server: self.server.clone(),
                why: "empty prepare reply",
            });
        };
        if t.error {
            return Ok(Err(first.clone()));
        }
        if first.len() < 9 {
            return Err(Error::UnexpectedReply {
                server: self.server.clone(),
                why: "short prepare OK",
            });
        }
        let backend_id = u32::from_le_bytes([first[1], first[2], first[3], first[4]]);
        let num_columns = u16::from_le_bytes([first[5], first[6]]);
        let num_params = u16::from_le_bytes([first[7], first[8]]);
        let defs: Vec<Bytes> = packets[1..]
            .iter()
            .filter(|p| !is_eof(p))
            .cloned()
            .collect();
        let np = usize::from(num_params).min(defs.len());
        let params = defs[..np].to_vec();
        let columns = defs[np..].to_vec();
        Ok(Ok(Prepared {
            backend_id,
            num_params,
            num_columns,
            params,
            columns,
        }))
    }

    /// COM_STMT_CLOSE (the server sends no reply).
    pub async fn close_stmt(&mut self, backend_id: u32) -> Result<(), Error> {
        let mut p = vec![com::STMT_CLOSE];
        p.extend_from_slice(&backend_id.to_le_bytes());
        self.send_raw(&packet(0, &p)).await
    }

    /// Runs SQL that returns no rows.
    pub async fn run_sql(&mut self, sql: &str) -> Result<Result<(), ServerErr>, Error> {
        let mut p = Vec::with_capacity(sql.len() + 1);
        p.push(com::QUERY);
        p.extend_from_slice(sql.as_bytes());
        let (t, packets) = self.command_collect(&p, ReplyKind::ResultSets).await?;
        if t.error {
            return Ok(Err(packets.last().cloned().unwrap_or_default()));
        }
        Ok(Ok(()))
    }

    /// Runs a query and returns its column names and rows as text (`None` for SQL NULL).
    #[allow(clippy::type_complexity)]
    pub async fn query_table(
        &mut self,
        sql: &str,
    ) -> Result<Result<(Vec<String>, Vec<Vec<Option<String>>>), ServerErr>, Error> {
        let mut p = Vec::with_capacity(sql.len() + 1);
        p.push(com::QUERY);
        p.extend_from_slice(sql.as_bytes());
        let (t, packets) = self.command_collect(&p, ReplyKind::ResultSets).await?;
        if t.error {
            return Ok(Err(packets.last().cloned().unwrap_or_default()));
        }
        let bad = || Error::UnexpectedReply {
            server: self.server.clone(),
            why: "malformed internal result set",
        };
        let Some(first) = packets.first() else {
            return Err(bad());
        };
        if first.first() == Some(&0x00) {
            return Ok(Ok((Vec::new(), Vec::new())));
        }
        let ncols = Reader::new(first, "column count")
            .lenenc_int()
            .map_err(|_| bad())?;
        let ncols = usize::try_from(ncols).map_err(|_| bad())?;
        let mut names = Vec::with_capacity(ncols);
        for def in packets.get(1..1 + ncols).ok_or_else(bad)? {
            let mut r = Reader::new(def, "column definition");
            for _ in 0..4 {
                r.lenenc_bytes().map_err(|_| bad())?;
            }
            names.push(String::from_utf8_lossy(r.lenenc_bytes().map_err(|_| bad())?).into_owned());
        }
        let skip = 1 + ncols + usize::from(!self.deprecate_eof());
        let mut rows = Vec::new();
        for row in packets
            .get(skip..packets.len().saturating_sub(1))
            .unwrap_or_default()
        {
            let mut r = Reader::new(row, "row");
            let mut values = Vec::with_capacity(ncols);
            for _ in 0..ncols {
                if r.remaining().first() == Some(&0xfb) {
                    r.u8().map_err(|_| bad())?;
                    values.push(None);
                } else {
                    let v = r.lenenc_bytes().map_err(|_| bad())?;
                    values.push(Some(String::from_utf8_lossy(v).into_owned()));
                }
            }
            rows.push(values);
        }
        Ok(Ok((names, rows)))
    }

    /// Runs a query and returns its first row as text (`None` for SQL NULL).
    pub async fn query_row(
        &mut self,
        sql: &str,
    ) -> Result<Result<Vec<Option<String>>, ServerErr>, Error> {
        let (_, rows) = match self.query_table(sql).await? {
            Ok(t) => t,
            Err(e) => return Ok(Err(e)),
        };
        rows.into_iter()
            .next()
            .map(Ok)
            .ok_or(Error::UnexpectedReply {
                server: self.server.clone(),
                why: "malformed internal result set",
            })
    }

    /// Brings the connection to `want`, sending only the differences.
    pub async fn sync_state(
        &mut self,
        want: &SessionState,
    ) -> Result<Result<(), ServerErr>, Error> {
        // The common case on the hot path: the connection already is in the client's state.
        if self.state == *want {
            return Ok(Ok(()));
        }
        let plan = plan(&self.state, want);
        if plan.is_empty() {
            return Ok(Ok(()));
        }
        if plan.reset_first && !self.reset().await? {
            return Err(Error::UnexpectedReply {
                server: self.server.clone(),
                why: "COM_RESET_CONNECTION failed",
            });
        }
        if let Some(db) = &plan.init_db
            && let Err(e) = self.init_db(db).await?
        {
            return Ok(Err(e.freeze()));
        }
        for sql in &plan.statements {
            if let Err(e) = self.run_sql(sql).await? {
                return Ok(Err(e));
            }
        }
        self.state = want.clone();
        Ok(Ok(()))
    }
}

fn is_eof(p: &[u8]) -> bool {
    p.first() == Some(&0xfe) && p.len() < 9
}

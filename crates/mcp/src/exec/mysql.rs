//! The read-only path on MySQL / MariaDB: a connection without `CLIENT_MULTI_STATEMENTS`, the
//! server's own statement timeout and `sql_select_limit`, `START TRANSACTION READ ONLY`, the
//! result read as it streams with the caps, and `COM_RESET_CONNECTION` after every call (locks,
//! user variables, temporary tables and the transaction go with it).

use super::conns::ConnKey;
use super::{Clean, Column, Conns, Limits, Origin, Place, ResultSet, integer, number};
use crate::error::Error;
use bytes::Bytes;
use serde_json::Value;
use sluice_mysql_backend::{BackendConn, BackendSecret, ConnectParams};
use sluice_mysql_proto::consts::com;
use sluice_mysql_proto::lenenc::Reader;
use sluice_mysql_proto::packets::parse_err;
use tokio_util::sync::CancellationToken;

#[path = "mysql_binary.rs"]
mod binary;

fn key(p: &Place) -> ConnKey {
    ConnKey {
        server: p.server(),
        user: p.user.clone(),
        database: String::new(),
        tls: p.tls.is_some(),
    }
}

fn params(p: &Place) -> ConnectParams {
    ConnectParams {
        host: p.host.clone(),
        port: p.port,
        user: p.user.clone(),
        secret: BackendSecret::Clear(p.password.clone()),
        schema: None,
        // utf8mb4_general_ci: values come back as UTF-8.
        charset: 45,
        client_caps: 0,
        tls: p.tls.clone(),
        compress: false,
        timeout: p.connect_timeout,
        max_packet: 64 << 20,
        multi_statements: false,
        track_gtid: false,
    }
}

/// Runs `sql` (already checked to be one read) at `place` within `limits`; `cancel` ends it
/// early (the agent went away).
pub async fn run(
    conns: &Conns,
    place: &Place,
    sql: &str,
    limits: Limits,
    cancel: &CancellationToken,
) -> Result<ResultSet, Error> {
    run_bound(conns, place, sql, &[], limits, cancel).await
}

/// [`run`] with `params` bound to the statement's `?` (a server-side prepared statement,
/// rows in the binary protocol); no parameters is a plain text query.
pub async fn run_bound(
    conns: &Conns,
    place: &Place,
    sql: &str,
    bound: &[Value],
    limits: Limits,
    cancel: &CancellationToken,
) -> Result<ResultSet, Error> {
    let key = key(place);
    let mut conn = match conns.take_mysql(&key) {
        Some(c) => c,
        None => {
            conns.note_opened();
            BackendConn::connect(&params(place)).await?
        }
    };
    let thread_id = conn.thread_id;
    let outcome = super::bounded(
        statement(&mut conn, place, sql, bound, limits),
        &limits,
        cancel,
    )
    .await;
    match outcome {
        Some(Ok((result, Clean::Yes))) => {
            if conn.reset().await.unwrap_or(false) {
                conns.put_mysql(key, conn);
            } else {
                conns.note_discarded();
            }
            Ok(result)
        }
        Some(Ok((result, Clean::No))) => {
            conns.note_discarded();
            kill_query(place, thread_id).await;
            Ok(result)
        }
        Some(Err(e)) => {
            // A server error ends the command cleanly; anything else leaves the connection in
            // doubt.
            if matches!(e, Error::Server(_) | Error::Timeout { .. })
                && conn.reset().await.unwrap_or(false)
            {
                conns.put_mysql(key, conn);
            } else {
                conns.note_discarded();
            }
            Err(e)
        }
        None => {
            conns.note_discarded();
            kill_query(place, thread_id).await;
            Err(Error::Timeout {
                timeout_ms: limits.timeout.as_millis() as u64,
            })
        }
    }
}

/// Packets read past the row cap before the connection is given up instead (the server's
/// `sql_select_limit` ends a SELECT one row past the cap; what it does not limit is cut here).
const DRAIN_MAX: usize = 16;

async fn statement(
    conn: &mut BackendConn,
    place: &Place,
    sql: &str,
    params: &[Value],
    limits: Limits,
) -> Result<(ResultSet, Clean), Error> {
    if let Some(schema) = &place.schema
        && conn.state.schema.as_deref() != Some(schema)
        && let Err(err) = conn.init_db(schema).await?
    {
        return Err(server_error(&err, limits));
    }
    let mariadb = conn.server_version.contains("MariaDB");
    let set = if mariadb {
        format!(
            "SET SESSION sql_select_limit = {}, max_statement_time = {:.3}",
            limits.max_rows.saturating_add(1),
            limits.timeout.as_secs_f64()
        )
    } else {
        format!(
            "SET SESSION sql_select_limit = {}, max_execution_time = {}",
            limits.max_rows.saturating_add(1),
            limits.timeout.as_millis()
        )
    };
    simple(conn, &set, limits).await?;
    simple(conn, "START TRANSACTION READ ONLY", limits).await?;
    if params.is_empty() {
        let mut q = Vec::with_capacity(sql.len() + 1);
        q.push(com::QUERY);
        q.extend_from_slice(sql.as_bytes());
        conn.send_command(&q).await?;
        read_result(conn, limits, Rows::Text).await
    } else {
        // The statement is deallocated by the COM_RESET_CONNECTION that ends every call.
        binary::prepare_and_execute(conn, sql, params, limits).await?;
        read_result(conn, limits, Rows::Binary).await
    }
}

/// How a result's rows are encoded.
#[derive(Clone, Copy)]
enum Rows {
    /// COM_QUERY: every value a length-encoded text.
    Text,
    /// COM_STMT_EXECUTE: a NULL bitmap, then values by type.
    Binary,
}

/// Runs one statement of Sluice's own and expects OK.
async fn simple(conn: &mut BackendConn, sql: &str, limits: Limits) -> Result<(), Error> {
    let mut q = vec![com::QUERY];
    q.extend_from_slice(sql.as_bytes());
    conn.send_command(&q).await?;
    let p = conn.read_payload().await?;
    match p.first() {
        Some(0x00) => Ok(()),
        Some(0xff) => Err(server_error(&p, limits)),
        _ => Err(Error::Backend(format!(
            "unexpected reply to {sql:?} from {}",
            conn.server
        ))),
    }
}

pub(super) fn server_error(payload: &[u8], limits: Limits) -> Error {
    match parse_err(payload) {
        // MariaDB's max_statement_time, MySQL's max_execution_time, a KILL QUERY.
        Ok(e) if matches!(e.code, 1969 | 3024 | 1317) => Error::Timeout {
            timeout_ms: limits.timeout.as_millis() as u64,
        },
        Ok(e) => Error::Server(format!("{} (errno {})", e.message, e.code)),
        Err(_) => Error::Server("an error the server sent malformed".into()),
    }
}

async fn read_result(
    conn: &mut BackendConn,
    limits: Limits,
    encoding: Rows,
) -> Result<(ResultSet, Clean), Error> {
    let first = conn.read_payload().await?;
    let mut result = ResultSet::default();
    match first.first() {
        Some(0x00) => return Ok((result, Clean::Yes)),
        Some(0xff) => return Err(server_error(&first, limits)),
        Some(0xfb) => {
            return Err(Error::Backend(
                "the server asked for a local file; the connection is dropped".into(),
            ));
        }
        _ => {}
    }
    let count = Reader::new(&first, "column count")
        .lenenc_int()
        .map_err(|e| Error::Backend(e.to_string()))?;
    if count == 0 || count > 4096 {
        return Err(Error::Backend(format!("a result with {count} columns")));
    }
    let mut types = Vec::with_capacity(count as usize);
    for _ in 0..count {
        let def = conn.read_payload().await?;
        let (column, ty) = column_def(&def)?;
        result.columns.push(column);
        types.push(ty);
    }
    if !conn.deprecate_eof() {
        conn.read_payload().await?;
    }
    let mut drained = 0;
    loop {
        let p = conn.read_payload().await?;
        match p.first() {
            Some(0xfe) if p.len() < 9 => {
                let more = p.len() >= 5 && u16::from_le_bytes([p[3], p[4]]) & 0x0008 != 0;
                return Ok((result, if more { Clean::No } else { Clean::Yes }));
            }
            Some(0xff) => return Err(server_error(&p, limits)),
            _ if result.truncated => {
                drained += 1;
                if drained > DRAIN_MAX {
                    return Ok((result, Clean::No));
                }
            }
            _ => {
                let (row, bytes) = match encoding {
                    Rows::Text => decode_row(&p, &types)?,
                    Rows::Binary => binary::decode_row(&p, &types)?,
                };
                if !result.push(row, bytes, &limits) && (result.rows.len() as u64) < limits.max_rows
                {
                    // The byte cap: the rest is not read; KILL QUERY and a dropped connection.
                    return Ok((result, Clean::No));
                }
            }
        }
    }
}

/// A column type byte and its charset (63 is binary).
#[derive(Clone, Copy)]
pub(super) struct ColType {
    pub(super) code: u8,
    pub(super) charset: u16,
    pub(super) unsigned: bool,
}

fn column_def(p: &Bytes) -> Result<(Column, ColType), Error> {
    let bad = |e: sluice_mysql_proto::Error| Error::Backend(format!("column definition: {e}"));
    let mut r = Reader::new(p, "column definition");
    let _catalog = r.lenenc_bytes().map_err(bad)?;
    let schema = text(r.lenenc_bytes().map_err(bad)?);
    let _table = r.lenenc_bytes().map_err(bad)?;
    let org_table = text(r.lenenc_bytes().map_err(bad)?);
    let name = text(r.lenenc_bytes().map_err(bad)?);
    let org_name = text(r.lenenc_bytes().map_err(bad)?);
    let _fixed = r.lenenc_int().map_err(bad)?;
    let charset = r.u16().map_err(bad)?;
    let _length = r.u32().map_err(bad)?;
    let code = r.u8().map_err(bad)?;
    let flags = r.u16().map_err(bad)?;
    let origin = (!org_table.is_empty() && !org_name.is_empty()).then_some(Origin {
        schema,
        table: org_table,
        column: org_name,
    });
    Ok((
        Column {
            name,
            type_name: type_name(code).to_string(),
            origin,
        },
        ColType {
            code,
            charset,
            unsigned: flags & 0x20 != 0,
        },
    ))
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

fn type_name(code: u8) -> &'static str {
    match code {
        0 | 246 => "DECIMAL",
        1 => "TINYINT",
        2 => "SMALLINT",
        3 => "INT",
        4 => "FLOAT",
        5 => "DOUBLE",
        6 => "NULL",
        7 => "TIMESTAMP",
        8 => "BIGINT",
        9 => "MEDIUMINT",
        10 => "DATE",
        11 => "TIME",
        12 => "DATETIME",
        13 => "YEAR",
        15 | 253 => "VARCHAR",
        16 => "BIT",
        245 => "JSON",
        247 => "ENUM",
        248 => "SET",
        249..=252 => "BLOB",
        254 => "CHAR",
        255 => "GEOMETRY",
        _ => "UNKNOWN",
    }
}

fn decode_row(p: &[u8], types: &[ColType]) -> Result<(Vec<Value>, u64), Error> {
    let mut r = Reader::new(p, "row");
    let mut row = Vec::with_capacity(types.len());
    let mut bytes = 0u64;
    for ty in types {
        if r.remaining().first() == Some(&0xfb) {
            r.u8().map_err(|e| Error::Backend(e.to_string()))?;
            row.push(Value::Null);
            continue;
        }
        let v = r
            .lenenc_bytes()
            .map_err(|e| Error::Backend(format!("row: {e}")))?;
        bytes += v.len() as u64;
        row.push(value(v, *ty));
    }
    Ok((row, bytes))
}

pub(super) fn value(v: &[u8], ty: ColType) -> Value {
    let s = String::from_utf8_lossy(v);
    match ty.code {
        1 | 2 | 3 | 8 | 9 | 13 => integer(&s).unwrap_or_else(|| Value::String(s.into_owned())),
        0 | 4 | 5 | 246 => number(&s),
        245 => serde_json::from_slice(v).unwrap_or_else(|_| Value::String(s.into_owned())),
        // BIT and binary strings: hex, so no byte is lost or mangled.
        16 => Value::String(hex(v)),
        249..=252 | 253 | 254 | 15 if ty.charset == 63 => Value::String(hex(v)),
        _ => {
            let _ = ty.unsigned;
            Value::String(s.into_owned())
        }
    }
}

fn hex(v: &[u8]) -> String {
    let mut s = String::with_capacity(2 + v.len() * 2);
    s.push_str("0x");
    for b in v {
        s.push_str(&format!("{b:02x}"));
    }
    s
}

/// Stops the statement of server thread `thread_id` with `KILL QUERY` from another connection
/// (the backstop when the server's own timeout did not, or the agent went away).
async fn kill_query(place: &Place, thread_id: u32) {
    match BackendConn::connect(&params(place)).await {
        Ok(mut c) => {
            let mut q = vec![com::QUERY];
            q.extend_from_slice(format!("KILL QUERY {thread_id}").as_bytes());
            let ok = c.send_command(&q).await.is_ok() && c.read_payload().await.is_ok();
            tracing::info!(
                server = %place.server(),
                thread_id,
                ok,
                "MCP: killed the statement of a call that ran past its timeout or lost its agent"
            );
            c.quit().await;
        }
        Err(e) => tracing::warn!(
            server = %place.server(),
            thread_id,
            "MCP: cannot open a connection to kill a statement past its timeout: {e}"
        ),
    }
}

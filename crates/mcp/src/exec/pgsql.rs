//! The read-only path on PostgreSQL: `BEGIN READ ONLY` with `SET LOCAL statement_timeout`, the
//! statement through the extended protocol (one Parse holds one statement: the server refuses
//! a second), Execute with the row cap (PortalSuspended says there was more), then `ROLLBACK`
//! and `DISCARD ALL` (advisory locks, settings, temporary tables go with it).

use super::conns::ConnKey;
use super::{Clean, Column, Conns, Limits, Origin, Place, ResultSet, integer, number};
use crate::error::Error;
use serde_json::Value;
use sluice_pgsql_backend::{ConnectParams, PgConn, query_message, send_cancel};
use sluice_pgsql_proto::frame::parse_error;
use sluice_pgsql_proto::scram::ClientSecret;
use tokio::io::AsyncWriteExt;
use tokio_util::sync::CancellationToken;

fn key(p: &Place) -> ConnKey {
    ConnKey {
        server: p.server(),
        user: p.user.clone(),
        database: p.database.clone(),
        tls: p.tls.is_some(),
    }
}

fn params(p: &Place) -> ConnectParams {
    ConnectParams {
        host: p.host.clone(),
        port: p.port,
        user: p.user.clone(),
        secret: ClientSecret::Password(p.password.clone()),
        database: p.database.clone(),
        options: vec![
            ("application_name".into(), "sluice-mcp".into()),
            ("client_encoding".into(), "UTF8".into()),
        ],
        timeout: p.connect_timeout,
        tls: p.tls.clone(),
    }
}

/// Runs `sql` (already checked to be one read) at `place` within `limits`.
pub async fn run(
    conns: &Conns,
    place: &Place,
    sql: &str,
    limits: Limits,
    cancel: &CancellationToken,
) -> Result<ResultSet, Error> {
    run_bound(conns, place, sql, &[], limits, cancel).await
}

/// [`run`] with `bound` as the statement's `$1`, `$2`, … (in text format; the server infers
/// their types from the statement).
pub async fn run_bound(
    conns: &Conns,
    place: &Place,
    sql: &str,
    bound: &[Value],
    limits: Limits,
    cancel: &CancellationToken,
) -> Result<ResultSet, Error> {
    let key = key(place);
    let mut conn = match conns.take_pgsql(&key) {
        Some(c) => c,
        None => {
            conns.note_opened();
            PgConn::connect(&params(place)).await?
        }
    };
    let (server, (pid, secret)) = (conn.server.clone(), conn.key);
    let outcome = super::bounded(
        statement(&mut conn, place, sql, bound, limits),
        &limits,
        cancel,
    )
    .await;
    let cancel_it = || async {
        let sent = send_cancel(&server, pid, secret).await;
        tracing::info!(
            server = %server,
            pid,
            sent,
            "MCP: cancelled a statement (past its timeout, cut at a cap, or its agent went away)"
        );
    };
    match outcome {
        Some(Ok((result, Clean::No))) => {
            conns.note_discarded();
            cancel_it().await;
            Ok(result)
        }
        Some(r) => {
            let at_rest = matches!(&r, Ok(_) | Err(Error::Server(_) | Error::Timeout { .. }));
            if at_rest && reset(&mut conn).await {
                conns.put_pgsql(key, conn);
            } else {
                conns.note_discarded();
            }
            r.map(|(result, _)| result)
        }
        None => {
            conns.note_discarded();
            cancel_it().await;
            Err(Error::Timeout {
                timeout_ms: limits.timeout.as_millis() as u64,
            })
        }
    }
}

/// Ends the transaction and clears the session; false when the connection cannot be reused.
async fn reset(conn: &mut PgConn) -> bool {
    let mut wire = Vec::new();
    query_message("ROLLBACK", &mut wire);
    query_message("DISCARD ALL", &mut wire);
    conn.run_messages(&wire, 2).await.is_ok()
}

fn quote_ident(s: &str) -> String {
    format!("\"{}\"", s.replace('"', "\"\""))
}

async fn statement(
    conn: &mut PgConn,
    place: &Place,
    sql: &str,
    bound: &[Value],
    limits: Limits,
) -> Result<(ResultSet, Clean), Error> {
    let mut begin = format!(
        "BEGIN READ ONLY; SET LOCAL statement_timeout = {}",
        limits.timeout.as_millis().max(1)
    );
    if let Some(schema) = &place.schema {
        begin.push_str(&format!(
            "; SET LOCAL search_path = {}",
            quote_ident(schema)
        ));
    }
    let mut wire = Vec::new();
    query_message(&begin, &mut wire);
    conn.run_messages(&wire, 1).await?;
    let mut wire = Vec::with_capacity(sql.len() + 64);
    extended(sql, bound, limits.max_rows, &mut wire)?;
    conn.stream
        .write_all(&wire)
        .await
        .map_err(|e| Error::Backend(e.to_string()))?;
    read_result(conn, limits).await
}

/// Parse, Bind (with `bound` in text format), Describe, Execute (at most `max_rows` rows) and
/// Sync, unnamed.
fn extended(sql: &str, bound: &[Value], max_rows: u64, out: &mut Vec<u8>) -> Result<(), Error> {
    if bound.len() > i16::MAX as usize {
        return Err(Error::Arguments(format!("{} parameters", bound.len())));
    }
    let mut msg = |kind: u8, body: &[u8]| {
        out.push(kind);
        out.extend_from_slice(&((body.len() + 4) as u32).to_be_bytes());
        out.extend_from_slice(body);
    };
    let mut parse = vec![0u8];
    parse.extend_from_slice(sql.as_bytes());
    parse.extend_from_slice(&[0, 0, 0]);
    msg(b'P', &parse);
    // Portal "", statement "", no parameter formats (all text), the parameters, all results
    // as text.
    let mut bind = vec![0u8, 0, 0, 0];
    bind.extend_from_slice(&(bound.len() as i16).to_be_bytes());
    for v in bound {
        let text = match v {
            Value::Null => {
                bind.extend_from_slice(&(-1i32).to_be_bytes());
                continue;
            }
            Value::String(s) => s.clone(),
            other => other.to_string(),
        };
        bind.extend_from_slice(&(text.len() as i32).to_be_bytes());
        bind.extend_from_slice(text.as_bytes());
    }
    bind.extend_from_slice(&[0, 0]);
    msg(b'B', &bind);
    msg(b'D', b"P\0");
    let mut exec = vec![0u8];
    exec.extend_from_slice(&(max_rows.min(i32::MAX as u64) as i32).to_be_bytes());
    msg(b'E', &exec);
    msg(b'S', &[]);
    Ok(())
}

async fn read_result(conn: &mut PgConn, limits: Limits) -> Result<(ResultSet, Clean), Error> {
    let mut result = ResultSet::default();
    let mut types = Vec::new();
    let mut failure = None;
    loop {
        let m = conn
            .reader
            .message(&mut conn.stream)
            .await
            .map_err(|e| Error::Backend(e.to_string()))?;
        // The reader returns whole messages: a type byte and a length of at least 4.
        let body = m.get(5..).unwrap_or_default();
        match m[0] {
            b'T' => {
                let (columns, oids) = row_description(body)?;
                result.columns = columns;
                types = oids;
            }
            b'D' if failure.is_none() => {
                let (row, bytes) = data_row(body, &types)?;
                if !result.push(row, bytes, &limits) && (result.rows.len() as u64) < limits.max_rows
                {
                    // The byte cap: the rest of the rows are not read; the statement is
                    // cancelled and the connection dropped.
                    return Ok((result, Clean::No));
                }
            }
            // More rows than Execute asked for.
            b's' => result.truncated = true,
            b'E' if failure.is_none() => {
                let (code, message) = parse_error(body);
                failure = Some(if code == "57014" {
                    Error::Timeout {
                        timeout_ms: limits.timeout.as_millis() as u64,
                    }
                } else {
                    Error::Server(format!("{message} (SQLSTATE {code})"))
                });
            }
            b'Z' => return failure.map_or(Ok((result, Clean::Yes)), Err),
            _ => {}
        }
    }
}

fn be16(b: &[u8], at: usize) -> Result<u16, Error> {
    b.get(at..at + 2)
        .map(|s| u16::from_be_bytes([s[0], s[1]]))
        .ok_or_else(|| Error::Backend("a short message".into()))
}

fn be32(b: &[u8], at: usize) -> Result<u32, Error> {
    b.get(at..at + 4)
        .map(|s| u32::from_be_bytes([s[0], s[1], s[2], s[3]]))
        .ok_or_else(|| Error::Backend("a short message".into()))
}

fn row_description(body: &[u8]) -> Result<(Vec<Column>, Vec<u32>), Error> {
    let n = be16(body, 0)? as usize;
    let mut at = 2;
    let (mut columns, mut oids) = (Vec::with_capacity(n), Vec::with_capacity(n));
    for _ in 0..n {
        let end = body
            .get(at..)
            .unwrap_or_default()
            .iter()
            .position(|&b| b == 0)
            .ok_or_else(|| Error::Backend("a column name without its end".into()))?;
        let name = String::from_utf8_lossy(&body[at..at + end]).into_owned();
        at += end + 1;
        let table_oid = be32(body, at)?;
        let attnum = be16(body, at + 4)?;
        let type_oid = be32(body, at + 6)?;
        at += 18;
        columns.push(Column {
            name,
            type_name: pg_type_name(type_oid),
            origin: (table_oid != 0 && attnum > 0).then(|| Origin {
                schema: String::new(),
                table: format!("oid:{table_oid}"),
                column: format!("attnum:{attnum}"),
            }),
        });
        oids.push(type_oid);
    }
    Ok((columns, oids))
}

fn pg_type_name(oid: u32) -> String {
    match oid {
        16 => "bool",
        17 => "bytea",
        18 => "char",
        19 => "name",
        20 => "int8",
        21 => "int2",
        23 => "int4",
        25 => "text",
        26 => "oid",
        114 => "json",
        700 => "float4",
        701 => "float8",
        1042 => "bpchar",
        1043 => "varchar",
        1082 => "date",
        1083 => "time",
        1114 => "timestamp",
        1184 => "timestamptz",
        1186 => "interval",
        1700 => "numeric",
        2950 => "uuid",
        3802 => "jsonb",
        _ => return format!("oid:{oid}"),
    }
    .to_string()
}

fn data_row(body: &[u8], types: &[u32]) -> Result<(Vec<Value>, u64), Error> {
    let n = be16(body, 0)? as usize;
    let mut at = 2;
    let mut row = Vec::with_capacity(n);
    let mut bytes = 0u64;
    for i in 0..n {
        let len = be32(body, at)? as i32;
        at += 4;
        if len < 0 {
            row.push(Value::Null);
            continue;
        }
        let len = len as usize;
        let v = body
            .get(at..at + len)
            .ok_or_else(|| Error::Backend("a value past the end of its row".into()))?;
        at += len;
        bytes += len as u64;
        row.push(pg_value(v, types.get(i).copied().unwrap_or(25)));
    }
    Ok((row, bytes))
}

fn pg_value(v: &[u8], oid: u32) -> Value {
    let s = String::from_utf8_lossy(v);
    match oid {
        16 => Value::Bool(s == "t"),
        20 | 21 | 23 | 26 => integer(&s).unwrap_or_else(|| Value::String(s.into_owned())),
        700 | 701 | 1700 => number(&s),
        114 | 3802 => serde_json::from_slice(v).unwrap_or_else(|_| Value::String(s.into_owned())),
        _ => Value::String(s.into_owned()),
    }
}

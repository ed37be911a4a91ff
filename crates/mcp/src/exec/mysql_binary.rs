//! Bound parameters on MySQL / MariaDB: `COM_STMT_PREPARE`, `COM_STMT_EXECUTE` with each
//! parameter typed (integers as `LONGLONG`, everything else as a string the server converts,
//! NULL in the bitmap), and the binary rows the result comes in.

use super::{ColType, server_error, value};
use crate::error::Error;
use crate::exec::Limits;
use serde_json::Value;
use sluice_mysql_backend::BackendConn;
use sluice_mysql_proto::lenenc::{Reader, put_lenenc_bytes};

const COM_STMT_PREPARE: u8 = 0x16;
const COM_STMT_EXECUTE: u8 = 0x17;
const TYPE_LONGLONG: u8 = 0x08;
const TYPE_VAR_STRING: u8 = 0xfd;
const UNSIGNED: u8 = 0x80;
/// Parameters of one statement at most (the protocol's own bound is 65,535).
const MAX_PARAMS: usize = 4096;

/// Prepares `sql` and sends its execution with `params`; the result is read next.
pub(super) async fn prepare_and_execute(
    conn: &mut BackendConn,
    sql: &str,
    params: &[Value],
    limits: Limits,
) -> Result<(), Error> {
    if params.len() > MAX_PARAMS {
        return Err(Error::Arguments(format!("{} parameters", params.len())));
    }
    let mut q = Vec::with_capacity(sql.len() + 1);
    q.push(COM_STMT_PREPARE);
    q.extend_from_slice(sql.as_bytes());
    conn.send_command(&q).await?;
    let ok = conn.read_payload().await?;
    if ok.first() == Some(&0xff) {
        return Err(server_error(&ok, limits));
    }
    let bad = |e: sluice_mysql_proto::Error| Error::Backend(format!("prepare reply: {e}"));
    let mut r = Reader::new(&ok, "prepare reply");
    if r.u8().map_err(bad)? != 0 {
        return Err(Error::Backend(
            "an unexpected reply to COM_STMT_PREPARE".into(),
        ));
    }
    let id = r.u32().map_err(bad)?;
    let columns = r.u16().map_err(bad)?;
    let count = r.u16().map_err(bad)? as usize;
    if count != params.len() {
        return Err(Error::Arguments(format!(
            "the statement has {count} parameters, {} were given",
            params.len()
        )));
    }
    for n in [count, columns as usize] {
        if n > 0 {
            for _ in 0..n {
                conn.read_payload().await?;
            }
            if !conn.deprecate_eof() {
                conn.read_payload().await?;
            }
        }
    }
    conn.send_command(&execute(id, params)).await?;
    Ok(())
}

/// The COM_STMT_EXECUTE of statement `id` with `params`.
fn execute(id: u32, params: &[Value]) -> Vec<u8> {
    let mut out = vec![COM_STMT_EXECUTE];
    out.extend_from_slice(&id.to_le_bytes());
    // No cursor; one iteration.
    out.push(0);
    out.extend_from_slice(&1u32.to_le_bytes());
    if params.is_empty() {
        return out;
    }
    let mut nulls = vec![0u8; params.len().div_ceil(8)];
    for (i, p) in params.iter().enumerate() {
        if p.is_null() {
            nulls[i / 8] |= 1 << (i % 8);
        }
    }
    out.extend_from_slice(&nulls);
    // The types follow.
    out.push(1);
    for p in params {
        match p {
            Value::Number(n) if n.is_i64() => out.extend_from_slice(&[TYPE_LONGLONG, 0]),
            Value::Number(n) if n.is_u64() => out.extend_from_slice(&[TYPE_LONGLONG, UNSIGNED]),
            _ => out.extend_from_slice(&[TYPE_VAR_STRING, 0]),
        }
    }
    for p in params {
        match p {
            Value::Null => {}
            Value::Number(n) if n.is_i64() => {
                out.extend_from_slice(&n.as_i64().unwrap_or(0).to_le_bytes())
            }
            Value::Number(n) if n.is_u64() => {
                out.extend_from_slice(&n.as_u64().unwrap_or(0).to_le_bytes())
            }
            Value::String(s) => put_lenenc_bytes(&mut out, s.as_bytes()),
            Value::Bool(b) => put_lenenc_bytes(&mut out, if *b { b"1" } else { b"0" }),
            other => put_lenenc_bytes(&mut out, other.to_string().as_bytes()),
        }
    }
    out
}

/// A binary row: the 0x00 header, the NULL bitmap (offset by 2), then each non-NULL value.
pub(super) fn decode_row(p: &[u8], types: &[ColType]) -> Result<(Vec<Value>, u64), Error> {
    let bad = |e: sluice_mysql_proto::Error| Error::Backend(format!("binary row: {e}"));
    let mut r = Reader::new(p, "binary row");
    r.u8().map_err(bad)?;
    let bitmap = r.bytes((types.len() + 9) / 8).map_err(bad)?;
    let mut row = Vec::with_capacity(types.len());
    let mut bytes = 0u64;
    for (i, ty) in types.iter().enumerate() {
        let bit = i + 2;
        if bitmap[bit / 8] & (1 << (bit % 8)) != 0 {
            row.push(Value::Null);
            continue;
        }
        let before = r.remaining().len();
        row.push(binary_value(&mut r, *ty).map_err(bad)?);
        bytes += (before - r.remaining().len()) as u64;
    }
    Ok((row, bytes))
}

fn fixed<const N: usize>(r: &mut Reader<'_>) -> Result<[u8; N], sluice_mysql_proto::Error> {
    let b = r.bytes(N)?;
    let mut a = [0u8; N];
    a.copy_from_slice(b);
    Ok(a)
}

fn binary_value(r: &mut Reader<'_>, ty: ColType) -> Result<Value, sluice_mysql_proto::Error> {
    let u = ty.unsigned;
    Ok(match ty.code {
        1 if u => Value::from(r.u8()?),
        1 => Value::from(r.u8()? as i8),
        2 | 13 if u => Value::from(r.u16()?),
        2 | 13 => Value::from(r.u16()? as i16),
        3 | 9 if u => Value::from(r.u32()?),
        3 | 9 => Value::from(r.u32()? as i32),
        8 if u => Value::from(u64::from_le_bytes(fixed(r)?)),
        8 => Value::from(i64::from_le_bytes(fixed(r)?)),
        4 => float(f64::from(f32::from_le_bytes(fixed(r)?))),
        5 => float(f64::from_le_bytes(fixed(r)?)),
        6 => Value::Null,
        7 | 10 | 12 => Value::String(datetime(r, ty.code == 10)?),
        11 => Value::String(time(r)?),
        _ => value(r.lenenc_bytes()?, ty),
    })
}

fn float(f: f64) -> Value {
    serde_json::Number::from_f64(f)
        .map(Value::Number)
        .unwrap_or_else(|| Value::String(f.to_string()))
}

/// DATE, DATETIME, TIMESTAMP: a length (0, 4, 7 or 11), then the parts present.
fn datetime(r: &mut Reader<'_>, date_only: bool) -> Result<String, sluice_mysql_proto::Error> {
    let len = r.u8()?;
    let (mut y, mut mo, mut d, mut h, mut mi, mut s, mut us) =
        (0u16, 0u8, 0u8, 0u8, 0u8, 0u8, 0u32);
    if len >= 4 {
        y = r.u16()?;
        mo = r.u8()?;
        d = r.u8()?;
    }
    if len >= 7 {
        h = r.u8()?;
        mi = r.u8()?;
        s = r.u8()?;
    }
    if len >= 11 {
        us = r.u32()?;
    }
    let date = format!("{y:04}-{mo:02}-{d:02}");
    Ok(match (date_only, us) {
        (true, _) => date,
        (false, 0) => format!("{date} {h:02}:{mi:02}:{s:02}"),
        (false, us) => format!("{date} {h:02}:{mi:02}:{s:02}.{us:06}"),
    })
}

/// TIME: a length (0, 8 or 12), sign, days, then the clock.
fn time(r: &mut Reader<'_>) -> Result<String, sluice_mysql_proto::Error> {
    let len = r.u8()?;
    if len < 8 {
        return Ok("00:00:00".into());
    }
    let neg = r.u8()? == 1;
    let days = r.u32()?;
    let (h, m, s) = (r.u8()?, r.u8()?, r.u8()?);
    let us = if len >= 12 { r.u32()? } else { 0 };
    let hours = u64::from(days) * 24 + u64::from(h);
    let sign = if neg { "-" } else { "" };
    Ok(match us {
        0 => format!("{sign}{hours:02}:{m:02}:{s:02}"),
        us => format!("{sign}{hours:02}:{m:02}:{s:02}.{us:06}"),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parameters_are_typed_and_nulls_in_the_bitmap() {
        let p = execute(7, &[Value::from(-5), Value::Null, Value::from("x")]);
        assert_eq!(&p[..10], &[COM_STMT_EXECUTE, 7, 0, 0, 0, 0, 1, 0, 0, 0]);
        assert_eq!(p[10], 0b010, "the NULL bitmap");
        assert_eq!(p[11], 1, "types follow");
        assert_eq!(
            &p[12..18],
            &[TYPE_LONGLONG, 0, TYPE_VAR_STRING, 0, TYPE_VAR_STRING, 0]
        );
        assert_eq!(&p[18..26], &(-5i64).to_le_bytes());
        assert_eq!(&p[26..], &[1, b'x']);
    }

    #[test]
    fn binary_rows_decode_by_type() {
        let ty = |code, unsigned| ColType {
            code,
            charset: 45,
            unsigned,
        };
        let types = [ty(8, false), ty(12, false), ty(253, false), ty(3, true)];
        // Header, bitmap (column 2 NULL: bit 4), BIGINT -2, DATETIME 2026-12-03 10:20:30.5, INT 7.
        let mut p = vec![0x00, 0b0001_0000];
        p.extend_from_slice(&(-2i64).to_le_bytes());
        p.extend_from_slice(&[11, 0xea, 0x07, 12, 3, 10, 20, 30]);
        p.extend_from_slice(&500_000u32.to_le_bytes());
        p.extend_from_slice(&7u32.to_le_bytes());
        let (row, _) = decode_row(&p, &types).expect("row");
        assert_eq!(
            row,
            vec![
                Value::from(-2),
                Value::from("2026-12-03 10:20:30.500000"),
                Value::Null,
                Value::from(7u32)
            ]
        );
        assert!(
            decode_row(&p[..12], &types).is_err(),
            "a cut row is an error"
        );
    }
}

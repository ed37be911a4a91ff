//! OK, ERR, EOF and auth-switch packets: builders for what Sluice answers itself, parsers for the
//! few fields it reads from backend replies.

use crate::Error;
use crate::lenenc::{Reader, put_lenenc_int};

/// Builds an OK packet payload (protocol 4.1 form).
pub fn ok_payload(affected_rows: u64, last_insert_id: u64, status: u16, warnings: u16) -> Vec<u8> {
    let mut p = Vec::with_capacity(11);
    p.push(0x00);
    put_lenenc_int(&mut p, affected_rows);
    put_lenenc_int(&mut p, last_insert_id);
    p.extend_from_slice(&status.to_le_bytes());
    p.extend_from_slice(&warnings.to_le_bytes());
    p
}

/// Builds an ERR packet payload with an error number, SQLSTATE and message.
pub fn err_payload(code: u16, sqlstate: &str, message: &str) -> Vec<u8> {
    let mut p = Vec::with_capacity(9 + message.len());
    p.push(0xff);
    p.extend_from_slice(&code.to_le_bytes());
    p.push(b'#');
    let state = sqlstate.as_bytes();
    let mut s = [b'H', b'Y', b'0', b'0', b'0'];
    for (d, b) in s.iter_mut().zip(state) {
        *d = *b;
    }
    p.extend_from_slice(&s);
    p.extend_from_slice(message.as_bytes());
    p
}

/// Builds an EOF packet payload.
pub fn eof_payload(status: u16, warnings: u16) -> Vec<u8> {
    let mut p = vec![0xfe];
    p.extend_from_slice(&warnings.to_le_bytes());
    p.extend_from_slice(&status.to_le_bytes());
    p
}

/// The fields of an OK packet Sluice reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct OkInfo {
    /// Rows the statement changed (for UPDATE: rows matched or changed, per CLIENT_FOUND_ROWS).
    pub affected_rows: u64,
    /// Last insert id.
    pub last_insert_id: u64,
    /// Server status flags.
    pub status: u16,
    /// Warnings the statement raised (`SHOW WARNINGS` lists them).
    pub warnings: u16,
}

/// Parses an OK packet (header 0x00, or 0xFE when it ends a result set with CLIENT_DEPRECATE_EOF).
pub fn parse_ok(payload: &[u8]) -> Result<OkInfo, Error> {
    let mut r = Reader::new(payload, "OK");
    let h = r.u8()?;
    if h != 0x00 && h != 0xfe {
        return Err(Error::malformed("OK", "bad header"));
    }
    let affected_rows = r.lenenc_int()?;
    let last_insert_id = r.lenenc_int()?;
    let status = r.u16()?;
    let warnings = r.u16().unwrap_or(0);
    Ok(OkInfo {
        affected_rows,
        last_insert_id,
        status,
        warnings,
    })
}

/// Status flags of a classic EOF packet (0xFE, warnings, status); 0 when absent.
pub fn eof_status(payload: &[u8]) -> u16 {
    if payload.len() >= 5 {
        u16::from_le_bytes([payload[3], payload[4]])
    } else {
        0
    }
}

/// The fields of an ERR packet.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ErrInfo {
    /// MySQL error number (e.g. 1045 access denied, 1064 syntax error).
    pub code: u16,
    /// SQLSTATE (five characters, "HY000" when the packet has none).
    pub sqlstate: String,
    /// The human-readable message the client shows.
    pub message: String,
}

/// Parses an ERR packet.
pub fn parse_err(payload: &[u8]) -> Result<ErrInfo, Error> {
    let mut r = Reader::new(payload, "ERR");
    if r.u8()? != 0xff {
        return Err(Error::malformed("ERR", "bad header"));
    }
    let code = r.u16()?;
    let mut sqlstate = "HY000".to_string();
    if r.remaining().first() == Some(&b'#') {
        r.u8()?;
        sqlstate = String::from_utf8_lossy(r.bytes(5)?).into_owned();
    }
    let message = String::from_utf8_lossy(r.remaining()).into_owned();
    Ok(ErrInfo {
        code,
        sqlstate,
        message,
    })
}

/// Builds an AuthSwitchRequest payload: 0xFE, plugin name, auth data (+NUL).
pub fn auth_switch_payload(plugin: &str, data: &[u8]) -> Vec<u8> {
    let mut p = Vec::with_capacity(2 + plugin.len() + data.len() + 1);
    p.push(0xfe);
    p.extend_from_slice(plugin.as_bytes());
    p.push(0);
    p.extend_from_slice(data);
    p.push(0);
    p
}

/// Parses an AuthSwitchRequest payload into (plugin, auth data without a trailing NUL).
pub fn parse_auth_switch(payload: &[u8]) -> Result<(String, Vec<u8>), Error> {
    let mut r = Reader::new(payload, "AuthSwitchRequest");
    if r.u8()? != 0xfe {
        return Err(Error::malformed("AuthSwitchRequest", "bad header"));
    }
    let plugin = String::from_utf8_lossy(r.null_str()?).into_owned();
    let mut data = r.remaining().to_vec();
    if data.last() == Some(&0) {
        data.pop();
    }
    Ok((plugin, data))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ok_roundtrip() {
        let p = ok_payload(300, 70000, 0x0002, 1);
        let ok = parse_ok(&p).expect("ok");
        assert_eq!(
            ok,
            OkInfo {
                affected_rows: 300,
                last_insert_id: 70000,
                status: 2,
                warnings: 1
            }
        );
    }

    #[test]
    fn err_roundtrip() {
        let p = err_payload(1045, "28000", "Access denied");
        let e = parse_err(&p).expect("err");
        assert_eq!(
            (e.code, e.sqlstate.as_str(), e.message.as_str()),
            (1045, "28000", "Access denied")
        );
        assert!(parse_err(&[0xff]).is_err());
    }

    #[test]
    fn auth_switch_roundtrip() {
        let p = auth_switch_payload("mysql_native_password", &[1; 20]);
        let (plugin, data) = parse_auth_switch(&p).expect("switch");
        assert_eq!((plugin.as_str(), data.len()), ("mysql_native_password", 20));
    }
}

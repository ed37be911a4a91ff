//! Session-state items in OK packets (`CLIENT_SESSION_TRACK`): the GTID a statement committed,
//! and the OK packet as a client that did not ask for tracking expects it.
//!
//! Sluice's pooled connections to MariaDB ask it to track `last_gtid`, so each write's OK
//! carries its GTID: read-your-writes tokens at no extra round trip. Clients are not offered
//! tracking, so the relay gives them the OK without the items. (MySQL's `session_track_gtids`
//! item is read too, for servers that send it.)
//!
//! ```
//! use sluice_mysql_proto::session_track::{committed_gtid, state_offset, strip_state};
//! // OK: 1 row, autocommit + state changed, info "", then a SYSTEM_VARIABLES item last_gtid.
//! let mut ok = vec![0x00, 1, 0, 0x02, 0x40, 0, 0, 0];
//! let item = [&[9u8][..], b"last_gtid", &[8], b"0-1-1001"].concat();
//! ok.extend([(item.len() + 2) as u8, 0, item.len() as u8]);
//! ok.extend(&item);
//! let at = state_offset(&ok).expect("state follows");
//! assert_eq!(committed_gtid(&ok[at..]).as_deref(), Some("0-1-1001"));
//! let len = strip_state(&mut ok, at);
//! assert_eq!(ok[..len], [0x00, 1, 0, 0x02, 0, 0, 0]);
//! ```

use crate::consts::status::SESSION_STATE_CHANGED;
use crate::lenenc::Reader;

/// `SESSION_TRACK_SYSTEM_VARIABLES`: a variable's new value (MariaDB's `last_gtid`).
const TRACK_SYSTEM_VARIABLES: u8 = 0;
/// `SESSION_TRACK_GTIDS`: MySQL's `session_track_gtids`.
const TRACK_GTIDS: u8 = 3;

/// Where the info string of an OK packet (`0x00`, or `0xFE` ending a result set under
/// `CLIENT_DEPRECATE_EOF`) starts, and the packet's status.
fn info_start(payload: &[u8]) -> Option<(usize, u16)> {
    let mut r = Reader::new(payload, "OK");
    let header = r.u8().ok()?;
    if header != 0x00 && header != 0xfe {
        return None;
    }
    r.lenenc_int().ok()?;
    r.lenenc_int().ok()?;
    let status = r.u16().ok()?;
    r.u16().ok()?;
    Some((payload.len() - r.remaining().len(), status))
}

/// Where the session-state block of an OK packet starts (after its length-encoded info), when
/// its status says one follows; `None` for any other packet or a malformed one.
pub fn state_offset(payload: &[u8]) -> Option<usize> {
    let (info, status) = info_start(payload)?;
    if status & SESSION_STATE_CHANGED == 0 {
        return None;
    }
    let mut r = Reader::new(&payload[info..], "OK info");
    r.lenenc_bytes().ok()?;
    Some(payload.len() - r.remaining().len())
}

/// The GTID the statement committed, from a session-state block (`state_offset` onwards):
/// MariaDB's `last_gtid` variable (`0-1-1001`) or MySQL's GTIDs item. `None` when the block
/// holds neither, an empty one (the statement wrote no binlog) or is malformed.
pub fn committed_gtid(state: &[u8]) -> Option<String> {
    let mut block = Reader::new(state, "session state");
    let mut items = Reader::new(block.lenenc_bytes().ok()?, "session state items");
    let mut found = None;
    while !items.is_empty() {
        let kind = items.u8().ok()?;
        let mut data = Reader::new(items.lenenc_bytes().ok()?, "session state item");
        let value = match kind {
            TRACK_SYSTEM_VARIABLES => {
                let name = data.lenenc_bytes().ok()?;
                let value = data.lenenc_bytes().ok()?;
                if !name.eq_ignore_ascii_case(b"last_gtid") {
                    continue;
                }
                value
            }
            TRACK_GTIDS => {
                data.u8().ok()?;
                data.lenenc_bytes().ok()?
            }
            _ => continue,
        };
        if !value.is_empty() {
            found = Some(String::from_utf8_lossy(value).into_owned());
        }
    }
    found
}

/// Turns an OK packet, in place, into what a client without `CLIENT_SESSION_TRACK` gets from a
/// server that does not track: the state flag cleared, the block (`at` = [`state_offset`]) and
/// an empty info cut off. Returns the payload's new length (no allocation: the relay rewrites
/// the packet in its read buffer).
pub fn strip_state(payload: &mut [u8], at: usize) -> usize {
    let Some((info, status)) = info_start(payload) else {
        return payload.len();
    };
    let keep = if payload.get(info) == Some(&0) {
        info
    } else {
        at.min(payload.len())
    };
    // The status sits right before the two warning bytes, which end at `info`.
    payload[info - 4..info - 2].copy_from_slice(&(status & !SESSION_STATE_CHANGED).to_le_bytes());
    keep
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ok_with_state(info: &[u8], items: &[(u8, Vec<u8>)]) -> Vec<u8> {
        let mut p = vec![0x00, 1, 5, 0x03, 0x40, 0, 0];
        crate::lenenc::put_lenenc_bytes(&mut p, info);
        let mut block = Vec::new();
        for (kind, data) in items {
            block.push(*kind);
            crate::lenenc::put_lenenc_bytes(&mut block, data);
        }
        crate::lenenc::put_lenenc_bytes(&mut p, &block);
        p
    }

    fn var(name: &str, value: &str) -> (u8, Vec<u8>) {
        let mut d = Vec::new();
        crate::lenenc::put_lenenc_bytes(&mut d, name.as_bytes());
        crate::lenenc::put_lenenc_bytes(&mut d, value.as_bytes());
        (TRACK_SYSTEM_VARIABLES, d)
    }

    #[test]
    fn mariadb_last_gtid_among_other_items() {
        let mut p = ok_with_state(
            b"",
            &[
                var("autocommit", "ON"),
                (1, b"\x04shop".to_vec()),
                var("last_gtid", "0-1-7"),
            ],
        );
        let at = state_offset(&p).expect("state");
        assert_eq!(committed_gtid(&p[at..]).as_deref(), Some("0-1-7"));
        let len = strip_state(&mut p, at);
        assert_eq!(p[..len], [0x00, 1, 5, 0x03, 0x00, 0, 0]);
    }

    #[test]
    fn mysql_gtids_item_and_info_kept() {
        let mut gtids = vec![0u8];
        crate::lenenc::put_lenenc_bytes(&mut gtids, b"3e11fa47-71ca-11e1-9e33-c80aa9429562:23");
        let mut p = ok_with_state(b"Rows matched: 1", &[(TRACK_GTIDS, gtids)]);
        let at = state_offset(&p).expect("state");
        assert_eq!(
            committed_gtid(&p[at..]).as_deref(),
            Some("3e11fa47-71ca-11e1-9e33-c80aa9429562:23")
        );
        let len = strip_state(&mut p, at);
        assert_eq!(&p[..7], &[0x00, 1, 5, 0x03, 0x00, 0, 0]);
        assert_eq!(&p[8..len], b"Rows matched: 1");
    }

    #[test]
    fn no_state_no_gtid_and_garbage_is_refused() {
        assert_eq!(state_offset(&[0x00, 0, 0, 0x02, 0, 0, 0]), None);
        let empty = ok_with_state(b"", &[var("last_gtid", "")]);
        let at = state_offset(&empty).expect("state");
        assert_eq!(committed_gtid(&empty[at..]), None);
        for cut in 0..empty.len() {
            let mut p = empty[..cut].to_vec();
            if let Some(at) = state_offset(&p) {
                let _ = committed_gtid(&p[at..]);
                assert!(strip_state(&mut p, at) <= cut);
            }
        }
        assert_eq!(state_offset(&[0xff, 1, 2]), None);
        assert_eq!(committed_gtid(&[5, 0, 9, 9]), None);
    }
}

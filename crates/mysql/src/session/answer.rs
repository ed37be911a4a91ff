//! Replies Sluice builds itself: one-row result sets for `SELECT @@version`, `VERSION()`,
//! `@@version_comment` and `LAST_INSERT_ID()`.

use super::{Next, Session};
use crate::sql::classify::ProxyAnswer;
use sluice_mysql_proto::consts::cap;
use sluice_mysql_proto::framing::put_packet;
use sluice_mysql_proto::lenenc::{put_lenenc_bytes, put_lenenc_int};
use sluice_mysql_proto::packets::{eof_payload, ok_payload};
use tokio::io::AsyncWriteExt;

/// `@@version_comment` as Sluice reports it (ProxySQL says "(ProxySQL)").
pub const VERSION_COMMENT: &str = "(Sluice)";

/// Column types used by Sluice's own result sets.
#[derive(Debug, Clone, Copy)]
pub enum ColType {
    /// VAR_STRING, utf8mb4.
    Text,
    /// BIGINT UNSIGNED NOT NULL.
    UnsignedBigint,
}

fn column_def(name: &str, ty: ColType) -> Vec<u8> {
    let mut p = Vec::with_capacity(32 + name.len());
    put_lenenc_bytes(&mut p, b"def");
    for _ in 0..3 {
        put_lenenc_bytes(&mut p, b""); // schema, table, org_table
    }
    put_lenenc_bytes(&mut p, name.as_bytes());
    put_lenenc_bytes(&mut p, b""); // org_name
    p.push(0x0c);
    let (charset, length, type_byte, flags): (u16, u32, u8, u16) = match ty {
        ColType::Text => (45, 1024, 0xfd, 0),
        ColType::UnsignedBigint => (63, 21, 0x08, 0x0001 | 0x0020 | 0x0080),
    };
    p.extend_from_slice(&charset.to_le_bytes());
    p.extend_from_slice(&length.to_le_bytes());
    p.push(type_byte);
    p.extend_from_slice(&flags.to_le_bytes());
    p.push(0); // decimals
    p.extend_from_slice(&[0, 0]);
    p
}

/// Encodes a one-column, one-row text result set starting at sequence id `seq`.
pub fn one_value_result(
    seq: u8,
    deprecate_eof: bool,
    status: u16,
    name: &str,
    ty: ColType,
    value: &str,
) -> Vec<u8> {
    let mut out = Vec::with_capacity(128);
    let mut s = seq;
    let mut count = Vec::new();
    put_lenenc_int(&mut count, 1);
    put_packet(&mut out, &mut s, &count);
    put_packet(&mut out, &mut s, &column_def(name, ty));
    if !deprecate_eof {
        put_packet(&mut out, &mut s, &eof_payload(status, 0));
    }
    let mut row = Vec::new();
    put_lenenc_bytes(&mut row, value.as_bytes());
    put_packet(&mut out, &mut s, &row);
    if deprecate_eof {
        let mut end = ok_payload(0, 0, status, 0);
        end[0] = 0xfe;
        put_packet(&mut out, &mut s, &end);
    } else {
        put_packet(&mut out, &mut s, &eof_payload(status, 0));
    }
    out
}

impl Session {
    pub(super) async fn answer(&mut self, seq: u8, a: &ProxyAnswer) -> super::Next {
        let version = self.fe.config.load().mysql.variables.server_version.clone();
        let (name, ty, value) = match a {
            ProxyAnswer::Version(n) => (n.as_str(), ColType::Text, version),
            ProxyAnswer::VersionComment(n) => {
                (n.as_str(), ColType::Text, VERSION_COMMENT.to_string())
            }
            ProxyAnswer::LastInsertId(n) => (
                n.as_str(),
                ColType::UnsignedBigint,
                self.last_insert_id.to_string(),
            ),
        };
        let dep = self.login.capabilities & cap::DEPRECATE_EOF != 0;
        let bytes = one_value_result(seq, dep, self.pins.status, name, ty, &value);
        match self.io.stream.write_all(&bytes).await {
            Ok(()) => Next::Continue,
            Err(_) => Next::Close,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sluice_mysql_proto::reply::{ReplyKind, ReplyTracker};

    #[test]
    fn result_sets_are_well_formed_for_both_eof_modes() {
        for dep in [false, true] {
            let bytes = one_value_result(1, dep, 2, "@@version", ColType::Text, "8.0.36");
            let mut t = ReplyTracker::new(ReplyKind::ResultSets, dep);
            let mut rest = &bytes[..];
            let mut seqs = Vec::new();
            while !rest.is_empty() {
                let len =
                    usize::from(rest[0]) | usize::from(rest[1]) << 8 | usize::from(rest[2]) << 16;
                seqs.push(rest[3]);
                t.feed(&rest[4..4 + len], len).expect("valid");
                rest = &rest[4 + len..];
            }
            assert!(t.done(), "dep={dep}");
            assert_eq!(seqs, (1..=seqs.len() as u8).collect::<Vec<_>>());
        }
    }
}

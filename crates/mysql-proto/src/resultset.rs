//! Encoding text result sets Sluice produces itself (admin answers, proxy-answered queries).

use crate::framing::put_packet;
use crate::lenenc::{put_lenenc_bytes, put_lenenc_int};
use crate::packets::{eof_payload, ok_payload};

/// Column types Sluice uses in its own result sets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ColType {
    /// VAR_STRING, utf8mb4.
    Text,
    /// BIGINT UNSIGNED NOT NULL.
    UnsignedBigint,
}

/// What shapes the bytes of a result set besides its contents: the capabilities the client
/// negotiated that change them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ResultShape {
    /// `CLIENT_DEPRECATE_EOF`: an OK packet (0xFE) ends the rows, and no EOF follows the columns.
    pub deprecate_eof: bool,
    /// MariaDB's `MARIADB_CLIENT_EXTENDED_METADATA`: each column definition carries an extended
    /// type-information block (empty in Sluice's own).
    pub extended_metadata: bool,
}

impl ResultShape {
    /// The shape for a client with these `CLIENT_*` and MariaDB extended capabilities.
    pub fn of(capabilities: u32, mariadb_capabilities: u32) -> ResultShape {
        ResultShape {
            deprecate_eof: capabilities & crate::consts::cap::DEPRECATE_EOF != 0,
            extended_metadata: mariadb_capabilities & crate::consts::mariadb_cap::EXTENDED_METADATA
                != 0,
        }
    }
}

/// A column definition payload.
pub fn column_def(name: &str, ty: ColType, shape: ResultShape) -> Vec<u8> {
    let mut p = Vec::with_capacity(32 + name.len());
    put_lenenc_bytes(&mut p, b"def");
    for _ in 0..3 {
        put_lenenc_bytes(&mut p, b""); // schema, table, org_table
    }
    put_lenenc_bytes(&mut p, name.as_bytes());
    put_lenenc_bytes(&mut p, b""); // org_name
    if shape.extended_metadata {
        put_lenenc_bytes(&mut p, b""); // no extended type information
    }
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

/// Encodes a text result set starting at sequence id `seq`; `None` cells are SQL NULL.
pub fn text_result(
    seq: u8,
    shape: ResultShape,
    status: u16,
    columns: &[(&str, ColType)],
    rows: &[Vec<Option<String>>],
) -> Vec<u8> {
    let mut out = Vec::with_capacity(128 + rows.len() * 32);
    let mut s = seq;
    let mut count = Vec::new();
    put_lenenc_int(&mut count, columns.len() as u64);
    put_packet(&mut out, &mut s, &count);
    for (name, ty) in columns {
        put_packet(&mut out, &mut s, &column_def(name, *ty, shape));
    }
    let deprecate_eof = shape.deprecate_eof;
    if !deprecate_eof {
        put_packet(&mut out, &mut s, &eof_payload(status, 0));
    }
    let mut row = Vec::new();
    for r in rows {
        row.clear();
        for cell in r {
            match cell {
                Some(v) => put_lenenc_bytes(&mut row, v.as_bytes()),
                None => row.push(0xfb),
            }
        }
        put_packet(&mut out, &mut s, &row);
    }
    if deprecate_eof {
        let mut end = ok_payload(0, 0, status, 0);
        end[0] = 0xfe;
        put_packet(&mut out, &mut s, &end);
    } else {
        put_packet(&mut out, &mut s, &eof_payload(status, 0));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::reply::{ReplyKind, ReplyTracker};

    #[test]
    fn result_sets_are_well_formed_for_both_eof_modes() {
        for (dep, extended_metadata) in [(false, false), (true, false), (true, true)] {
            let shape = ResultShape {
                deprecate_eof: dep,
                extended_metadata,
            };
            let rows = vec![
                vec![Some("a".to_string()), None],
                vec![Some("b".into()), Some("c".into())],
            ];
            let bytes = text_result(
                1,
                shape,
                2,
                &[("x", ColType::Text), ("y", ColType::Text)],
                &rows,
            );
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

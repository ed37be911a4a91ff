//! The SQL keywords the digest folds to upper case, and their lookup: every word of every
//! statement is looked up, in a hash table of packed integers built at compile time.

/// Keywords whose case is folded to upper case in the digest.
pub(crate) const KEYWORDS: &[&str] = &[
    "ADD",
    "ALL",
    "ALTER",
    "AND",
    "ANY",
    "AS",
    "ASC",
    "BEGIN",
    "BETWEEN",
    "BY",
    "CALL",
    "CASE",
    "CAST",
    "COMMIT",
    "CREATE",
    "CROSS",
    "DATABASE",
    "DEFAULT",
    "DELETE",
    "DESC",
    "DISTINCT",
    "DROP",
    "DUPLICATE",
    "ELSE",
    "END",
    "EXISTS",
    "EXPLAIN",
    "FALSE",
    "FOR",
    "FROM",
    "FULL",
    "GROUP",
    "HAVING",
    "IF",
    "IGNORE",
    "IN",
    "INDEX",
    "INNER",
    "INSERT",
    "INTERVAL",
    "INTO",
    "IS",
    "JOIN",
    "KEY",
    "LEFT",
    "LIKE",
    "LIMIT",
    "LOCK",
    "MODE",
    "NOT",
    "NULL",
    "OFFSET",
    "ON",
    "OR",
    "ORDER",
    "OUTER",
    "REPLACE",
    "RETURNING",
    "RIGHT",
    "ROLLBACK",
    "SELECT",
    "SET",
    "SHARE",
    "SHOW",
    "START",
    "TABLE",
    "THEN",
    "TRANSACTION",
    "TRUE",
    "TRUNCATE",
    "UNION",
    "UPDATE",
    "USE",
    "USING",
    "VALUES",
    "VIEW",
    "WHEN",
    "WHERE",
    "WITH",
];

/// Slots of the keyword hash table: a power of two, about three times the keywords, so a
/// lookup mostly ends at its first slot.
const SLOTS: usize = 256;

/// [`KEYWORDS`] by hash of their packed form ([`pack_upper`]), linear probing; a slot holds
/// the packed keyword (0 = empty) and its index in [`KEYWORDS`]. Every word of every statement is
/// looked up: one multiply and an integer compare, where a binary search cost seven
/// unpredictable branches.
const TABLE: [(u128, u8); SLOTS] = {
    assert!(KEYWORDS.len() < SLOTS / 2 && KEYWORDS.len() < 256);
    let mut t = [(0u128, 0u8); SLOTS];
    let mut i = 0;
    while i < KEYWORDS.len() {
        let v = pack_upper(KEYWORDS[i].as_bytes());
        let mut slot = slot_of(v);
        while t[slot].0 != 0 {
            slot = (slot + 1) % SLOTS;
        }
        t[slot] = (v, i as u8);
        i += 1;
    }
    t
};

/// The first slot to probe for a packed word.
const fn slot_of(v: u128) -> usize {
    let folded = (v as u64) ^ ((v >> 64) as u64);
    (folded.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 56) as usize % SLOTS
}

/// Up to 16 bytes of `w`, upper-cased, packed big-endian and zero-padded.
const fn pack_upper(w: &[u8]) -> u128 {
    let mut v: u128 = 0;
    let mut i = 0;
    while i < 16 {
        v <<= 8;
        if i < w.len() {
            v |= w[i].to_ascii_uppercase() as u128;
        }
        i += 1;
    }
    v
}

/// Sixteen packed bytes upper-cased, `None` when one is not ASCII (no keyword is). Each byte is
/// below 0x80, so adding to it never carries into the next: a byte's top bit after adding
/// 0x80 − `a` says it is ≥ `a`, after adding 0x80 − (`z` + 1) that it is > `z`; the lower-case
/// letters lose their 0x20 bit.
fn upper_ascii_packed(v: u128) -> Option<u128> {
    const EACH: u128 = u128::MAX / 0xFF; // 0x0101…01
    const TOP: u128 = EACH * 0x80;
    if v & TOP != 0 {
        return None;
    }
    let at_least_a = v + EACH * (0x80 - u128::from(b'a'));
    let above_z = v + EACH * (0x80 - u128::from(b'z') - 1);
    let lower = at_least_a & !above_z & TOP;
    Some(v ^ (lower >> 2))
}

/// The longest keyword's length: longer words (most identifiers) are not looked up.
const MAX_KEYWORD_LEN: usize = {
    let mut max = 0;
    let mut i = 0;
    while i < KEYWORDS.len() {
        if KEYWORDS[i].len() > max {
            max = KEYWORDS[i].len();
        }
        i += 1;
    }
    max
};

// A keyword is packed into sixteen bytes.
const _: () = assert!(MAX_KEYWORD_LEN <= 16);

/// The keyword `w` is, in any case.
pub(super) fn keyword(w: &[u8]) -> Option<&'static str> {
    if w.is_empty() || w.len() > MAX_KEYWORD_LEN {
        return None;
    }
    // The same packing as `pack_upper`: one copy, then all sixteen bytes upper-cased at once.
    let mut buf = [0u8; 16];
    buf[..w.len()].copy_from_slice(w);
    let v = upper_ascii_packed(u128::from_be_bytes(buf))?;
    let mut slot = slot_of(v);
    loop {
        let (k, i) = TABLE[slot];
        if k == v {
            return Some(KEYWORDS[usize::from(i)]);
        }
        if k == 0 {
            return None;
        }
        slot = (slot + 1) % SLOTS;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn packed_upper_case_is_bytewise_upper_case() {
        // Every ASCII byte in every position, beside neighbours that would carry if any did.
        for b in 0u8..0x80 {
            for pos in 0..16 {
                let mut bytes = [b'z'; 16];
                bytes[pos] = b;
                let want = u128::from_be_bytes(bytes.map(|c| c.to_ascii_uppercase()));
                assert_eq!(
                    upper_ascii_packed(u128::from_be_bytes(bytes)),
                    Some(want),
                    "{b:#x}"
                );
            }
        }
        let mut bytes = [b'a'; 16];
        bytes[3] = 0xC3;
        assert_eq!(upper_ascii_packed(u128::from_be_bytes(bytes)), None);
    }

    #[test]
    fn every_keyword_in_any_case_and_nothing_else() {
        for k in KEYWORDS {
            assert_eq!(keyword(k.as_bytes()), Some(*k));
            assert_eq!(keyword(k.to_ascii_lowercase().as_bytes()), Some(*k));
        }
        for w in [
            "selec",
            "selects",
            "abalance",
            "pgbench_accounts",
            "sélect",
            "",
            "_select",
        ] {
            assert_eq!(keyword(w.as_bytes()), None, "{w}");
        }
    }
}

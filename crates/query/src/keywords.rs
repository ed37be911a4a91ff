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

/// The keyword `w` is, in any case.
pub(super) fn keyword(w: &[u8]) -> Option<&'static str> {
    if w.is_empty() || w.len() > MAX_KEYWORD_LEN {
        return None;
    }
    // The same packing as `pack_upper`, with one load instead of sixteen shifts.
    let mut buf = [0u8; 16];
    for (d, s) in buf.iter_mut().zip(w) {
        *d = s.to_ascii_uppercase();
    }
    let v = u128::from_be_bytes(buf);
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

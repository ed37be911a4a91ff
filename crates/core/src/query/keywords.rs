//! The SQL keywords the digest folds to upper case, and their lookup: every word of every
//! statement is looked up, so the table is searched with integer compares.

/// Keywords whose case is folded to upper case in the digest. Sorted (binary search).
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

/// [`KEYWORDS`] packed by [`pack_upper`], in the same order: the lookup for every word of every
/// statement compares integers instead of calling `memcmp` per probe.
const PACKED_KEYWORDS: [u128; KEYWORDS.len()] = {
    let mut out = [0u128; KEYWORDS.len()];
    let mut i = 0;
    while i < KEYWORDS.len() {
        out[i] = pack_upper(KEYWORDS[i].as_bytes());
        i += 1;
    }
    out
};

/// Up to 16 bytes of `w`, upper-cased, packed big-endian and zero-padded: packed values order
/// like the words (a zero pad sorts before any letter), so a sorted word list packs sorted.
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

/// The keyword `w` is, in any case.
pub(super) fn keyword(w: &[u8]) -> Option<&'static str> {
    PACKED_KEYWORDS
        .binary_search(&pack_upper(w))
        .ok()
        .map(|p| KEYWORDS[p])
}

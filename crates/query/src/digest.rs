//! Query digests: one pass over the SQL text that replaces literals with `?`, collapses value
//! lists, drops comments (remembering where the first one is, for hints), folds whitespace and
//! keyword case, and notes what routing and the cache need: the statement kind, whether it is a
//! locking read, and the tables it names. The output is written into one buffer; nothing is
//! allocated per token, and no input makes it fail.

use super::keywords::keyword;
use notes::TableState;

mod literals;
mod notes;
mod numbers;

pub(crate) use numbers::{NumberSpans, shape_key};

/// The SQL dialect: the two differ in quoting, comments and parameters.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Dialect {
    /// MySQL / MariaDB: backticks, `#` comments, `"` strings, `0x`/`X''`/`b''` literals.
    Mysql,
    /// PostgreSQL: `$1` parameters, `$tag$` quotes, `E''` strings, `"` identifiers.
    Pgsql,
}

/// What a statement does, from its first word.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum StatementKind {
    /// SELECT (or WITH … SELECT, or a parenthesised SELECT).
    Select,
    /// INSERT.
    Insert,
    /// UPDATE.
    Update,
    /// DELETE.
    Delete,
    /// REPLACE (MySQL).
    Replace,
    /// CREATE / ALTER / DROP / TRUNCATE / RENAME.
    Ddl,
    /// COPY (PostgreSQL) or LOAD DATA (MySQL).
    Copy,
    /// Anything else (SET, SHOW, BEGIN, CALL, ...).
    #[default]
    Other,
}

impl StatementKind {
    /// True when the statement may change table contents (cache invalidation).
    pub fn writes(self) -> bool {
        matches!(
            self,
            StatementKind::Insert
                | StatementKind::Update
                | StatementKind::Delete
                | StatementKind::Replace
                | StatementKind::Ddl
                | StatementKind::Copy
        )
    }
}

/// Most table names remembered per statement; beyond it [`Digest::tables_complete`] is false.
pub const MAX_TABLES: usize = 8;

/// The result of [`digest`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Digest {
    /// The normalised text (`digest_text`), at most the requested length.
    pub text: String,
    /// A stable 64-bit hash of `text` (FNV-1a).
    pub hash: u64,
    /// Byte range of the first comment's body in the query, for hints.
    pub first_comment: Option<(usize, usize)>,
    /// What the (first) statement does.
    pub kind: StatementKind,
    /// `SELECT … FOR UPDATE / FOR SHARE / LOCK IN SHARE MODE`.
    pub locking_read: bool,
    /// Tables named after FROM / JOIN / UPDATE / INTO / TABLE, unqualified and lower-cased.
    pub tables: Vec<String>,
    /// False when more tables were named than [`MAX_TABLES`].
    pub tables_complete: bool,
}

impl Digest {
    /// `0x` + 16 upper-case hex digits, the way ProxySQL shows a digest.
    pub fn hex(&self) -> String {
        format!("0x{:016X}", self.hash)
    }

    /// Makes this digest a copy of `other`, reusing this one's buffers (no allocation once they
    /// are large enough, unlike `clone`).
    pub fn assign_from(&mut self, other: &Digest) {
        self.text.clone_from(&other.text);
        self.tables.clone_from(&other.tables);
        self.hash = other.hash;
        self.first_comment = other.first_comment;
        self.kind = other.kind;
        self.locking_read = other.locking_read;
        self.tables_complete = other.tables_complete;
    }

    /// The first comment's body within `sql` (the text this digest was made from).
    pub fn first_comment<'a>(&self, sql: &'a str) -> Option<&'a str> {
        self.first_comment.and_then(|(s, e)| sql.get(s..e))
    }
}

/// FNV-1a over `bytes`: stable across processes and versions, unlike std's hasher.
pub fn fnv1a(bytes: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in bytes {
        h ^= u64::from(*b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h
}

/// Normalises `sql`. `max_len` bounds the digest text (ProxySQL's
/// `query_digests_max_digest_length`); the whole query is still scanned for tables and kind.
pub fn digest(sql: &str, dialect: Dialect, max_len: usize) -> Digest {
    digest_reusing(sql, dialect, max_len, Digest::default())
}

/// [`digest`] written into the buffers of an earlier digest, `old` (its text and table names
/// are overwritten): a session that hands its last digest back digests the next statement
/// without allocating.
pub fn digest_reusing(sql: &str, dialect: Dialect, max_len: usize, old: Digest) -> Digest {
    tokenize(sql, dialect, max_len, old, None).0
}

/// [`digest_reusing`], also noting where `sql`'s plain numeric literals lie (see
/// [`NumberSpans`]): the session memo's key for texts that differ only in those values.
pub(crate) fn digest_noting_numbers(
    sql: &str,
    dialect: Dialect,
    max_len: usize,
    old: Digest,
) -> (Digest, NumberSpans) {
    let (d, numbers) = tokenize(sql, dialect, max_len, old, Some(NumberSpans::default()));
    // A first comment's offsets are the text's own: only the same text may reuse them.
    let numbers = match (numbers, d.first_comment) {
        (Some(n), None) => n,
        _ => NumberSpans::exact(),
    };
    (d, numbers)
}

/// The one caller of the tokenizer's scan, so that the compiler keeps it in one piece (with two
/// callers it called its hot functions instead of inlining them: ~60 instructions more per
/// MySQL text statement in `cargo xtask bench instructions`).
fn tokenize(
    sql: &str,
    dialect: Dialect,
    max_len: usize,
    old: Digest,
    numbers: Option<NumberSpans>,
) -> (Digest, Option<NumberSpans>) {
    let mut t = Tokenizer::new(sql.as_bytes(), dialect, max_len, old);
    t.numbers = numbers;
    t.run();
    t.finish()
}

/// Nesting depth up to which value lists are collapsed; deeper groups are kept as they are.
const MAX_DEPTH: usize = 32;

struct Tokenizer<'a> {
    src: &'a [u8],
    i: usize,
    dialect: Dialect,
    max: usize,
    out: Vec<u8>,
    space: bool,
    last_keyword: bool,
    first_comment: Option<(usize, usize)>,
    depth: usize,
    opens: [usize; MAX_DEPTH],
    last_group: [(usize, usize); MAX_DEPTH],
    ellipsis_end: [usize; MAX_DEPTH],
    kind: Option<StatementKind>,
    after_with: bool,
    prev_kw: &'static str,
    locking: bool,
    table_state: TableState,
    in_from: bool,
    /// Table names; the first `n_tables` are this statement's, the rest are an earlier
    /// statement's strings kept for their capacity.
    tables: Vec<String>,
    n_tables: usize,
    tables_complete: bool,
    /// The plain numeric literals' spans, when the caller asked for them.
    numbers: Option<NumberSpans>,
}

/// Bytes that continue an identifier or keyword: ASCII letters and digits, `_`, `$`, and every
/// byte of a multi-byte UTF-8 character. A table: one load per byte in the scanner's hottest
/// loop instead of five range tests.
static IDENT_BYTES: [bool; 256] = {
    let mut table = [false; 256];
    let mut b = 0;
    while b < 256 {
        let c = b as u8;
        table[b] = c.is_ascii_alphanumeric() || c == b'_' || c == b'$' || c >= 0x80;
        b += 1;
    }
    table
};

#[inline]
fn is_ident_byte(b: u8) -> bool {
    IDENT_BYTES[usize::from(b)]
}

impl<'a> Tokenizer<'a> {
    fn new(src: &'a [u8], dialect: Dialect, max: usize, reuse: Digest) -> Self {
        let mut out = reuse.text.into_bytes();
        out.clear();
        out.reserve(src.len().min(max) + 8);
        Tokenizer {
            src,
            i: 0,
            dialect,
            max,
            out,
            space: false,
            last_keyword: true,
            first_comment: None,
            depth: 0,
            opens: [0; MAX_DEPTH],
            last_group: [(0, 0); MAX_DEPTH],
            ellipsis_end: [0; MAX_DEPTH],
            kind: None,
            after_with: false,
            prev_kw: "",
            locking: false,
            table_state: TableState::Idle,
            in_from: false,
            tables: reuse.tables,
            n_tables: 0,
            tables_complete: true,
            numbers: None,
        }
    }

    fn peek(&self, off: usize) -> u8 {
        self.src.get(self.i + off).copied().unwrap_or(0)
    }

    /// Writes the pending separator before a token that starts with `next`.
    fn sep(&mut self, next: u8) {
        if self.space
            && let Some(&last) = self.out.last()
            && !matches!(last, b'(' | b',')
            && !matches!(next, b')' | b',')
        {
            self.push(b" ");
        } else if next.is_ascii_digit() && self.out.last() == Some(&b'.') {
            // `...` then `0x` must not read as `.0` when digested again.
            self.push(b" ");
        }
        self.space = false;
    }

    fn push(&mut self, bytes: &[u8]) {
        if self.out.len() < self.max {
            self.out.extend_from_slice(bytes);
        }
    }

    fn run(&mut self) {
        while self.i < self.src.len() {
            let b = self.src[self.i];
            match b {
                b' ' | b'\t' | b'\n' | b'\r' | 0x0b | 0x0c => {
                    self.space = true;
                    self.i += 1;
                }
                b'/' if self.peek(1) == b'*' => self.block_comment(),
                b'-' if self.peek(1) == b'-' && self.dash_comment_starts() => self.line_comment(),
                b'#' if self.dialect == Dialect::Mysql => self.line_comment(),
                b'\'' => {
                    let escapes = self.dialect == Dialect::Mysql;
                    self.skip_quoted(b'\'', escapes);
                    self.literal();
                }
                b'"' if self.dialect == Dialect::Mysql => {
                    self.skip_quoted(b'"', true);
                    self.literal();
                }
                b'"' | b'`' => self.quoted_identifier(b),
                b'0'..=b'9' => {
                    if !self.number() {
                        self.word();
                    }
                }
                b'.' if self.peek(1).is_ascii_digit() => {
                    self.number();
                }
                b'-' | b'+' if self.sign_starts_number() => {
                    self.i += 1;
                    if !self.number() {
                        // Not a number after all (`-1abc`): the sign is an operator.
                        self.i -= 1;
                        self.punct(b);
                    }
                }
                b'$' if self.dialect == Dialect::Pgsql => self.dollar(),
                b'?' => {
                    self.i += 1;
                    self.literal();
                }
                b'(' => {
                    self.sep(b'(');
                    if self.depth < MAX_DEPTH {
                        self.opens[self.depth] = self.out.len();
                    }
                    self.push(b"(");
                    self.depth += 1;
                    self.i += 1;
                    self.last_keyword = true;
                    if self.table_state == TableState::Expect {
                        self.table_state = TableState::Idle;
                    }
                }
                b')' => {
                    self.sep(b')');
                    self.push(b")");
                    self.i += 1;
                    self.close_group();
                    self.last_keyword = false;
                }
                b',' => {
                    self.sep(b',');
                    self.push(b",");
                    self.i += 1;
                    self.last_keyword = true;
                    if self.in_from
                        && matches!(self.table_state, TableState::Got | TableState::Alias)
                    {
                        self.table_state = TableState::Expect;
                    }
                }
                b';' => {
                    self.sep(b';');
                    self.push(b";");
                    self.i += 1;
                    self.last_keyword = true;
                    self.table_state = TableState::Idle;
                    self.in_from = false;
                }
                b'.' => {
                    self.sep(b'.');
                    self.push(b".");
                    self.i += 1;
                    if self.table_state == TableState::Got {
                        self.table_state = TableState::Qualified;
                    }
                }
                _ if is_ident_byte(b) => self.word(),
                _ => self.punct(b),
            }
        }
    }

    /// Any other single byte (operators, `@`, ...).
    fn punct(&mut self, b: u8) {
        self.sep(b);
        // `--` or `/*` formed by two separate tokens would read as a comment when the digest
        // is digested again.
        if (b == b'-' && self.out.last() == Some(&b'-'))
            || (b == b'*' && self.out.last() == Some(&b'/'))
        {
            self.push(b" ");
        }
        self.push(&[b]);
        self.i += 1;
        self.last_keyword = true;
        if self.table_state != TableState::Qualified {
            self.table_state = TableState::Idle;
        }
    }

    /// MySQL needs whitespace (or the end) after `--`; PostgreSQL does not.
    fn dash_comment_starts(&self) -> bool {
        match self.dialect {
            Dialect::Pgsql => true,
            Dialect::Mysql => matches!(self.peek(2), 0 | b' ' | b'\t' | b'\n' | b'\r'),
        }
    }

    fn note_comment(&mut self, start: usize, end: usize) {
        if self.first_comment.is_none() {
            self.first_comment = Some((start, end.max(start)));
        }
    }

    fn block_comment(&mut self) {
        let body = self.i + 2;
        let mut j = body;
        while j + 1 < self.src.len() && !(self.src[j] == b'*' && self.src[j + 1] == b'/') {
            j += 1;
        }
        // An unterminated comment runs to the end of the text (the scan stops one byte short).
        let closed = j + 1 < self.src.len();
        let end = if closed { j } else { self.src.len() };
        self.note_comment(body.min(end), end);
        self.i = (j + 2).min(self.src.len());
        self.space = true;
    }

    fn line_comment(&mut self) {
        let body = self.i + if self.src[self.i] == b'#' { 1 } else { 2 };
        let mut j = body.min(self.src.len());
        while j < self.src.len() && self.src[j] != b'\n' {
            j += 1;
        }
        self.note_comment(body.min(j), j);
        self.i = j;
        self.space = true;
    }

    /// Emits `?`, collapsing `?,?,?` into `?,...`.
    fn literal(&mut self) {
        self.sep(b'?');
        if self.out.ends_with(b"?,...,") {
            self.out.pop();
        } else if self.out.ends_with(b"?,") {
            self.push(b"...");
        } else {
            self.push(b"?");
        }
        self.last_keyword = false;
        if self.table_state != TableState::Qualified {
            self.table_state = TableState::Idle;
        }
    }

    /// After `)`: a group equal to the one just before it (`(?,?),(?,?)`) becomes `...`.
    fn close_group(&mut self) {
        if self.depth == 0 {
            return;
        }
        self.depth -= 1;
        let d = self.depth;
        if d >= MAX_DEPTH || self.out.len() >= self.max {
            return;
        }
        let s = self.opens[d];
        let e = self.out.len();
        let (ps, pe) = self.last_group[d];
        let same = |out: &[u8]| pe > ps && out.get(ps..pe) == out.get(s..e);
        if pe + 1 == s && self.out.get(pe) == Some(&b',') && same(&self.out) {
            self.out.truncate(s);
            self.out.extend_from_slice(b"...");
            self.ellipsis_end[d] = self.out.len();
        } else if self.ellipsis_end[d] > 0
            && self.ellipsis_end[d] + 1 == s
            && self.out.get(self.ellipsis_end[d]) == Some(&b',')
            && same(&self.out)
        {
            self.out.truncate(self.ellipsis_end[d]);
        } else {
            self.last_group[d] = (s, e);
            self.ellipsis_end[d] = 0;
        }
    }

    fn word(&mut self) {
        let s = self.src;
        let start = self.i;
        // `position` over the slice: no bounds check per byte.
        let j = s[start..]
            .iter()
            .position(|&b| !is_ident_byte(b))
            .map_or(s.len(), |n| start + n);
        let w = &s[start..j];
        // Prefixed strings: X'..', B'..', N'..', E'..' (PG), _charset'..' (MySQL).
        if s.get(j) == Some(&b'\'') {
            let prefixed = matches!(w, [b'x' | b'X' | b'b' | b'B' | b'n' | b'N'])
                || (self.dialect == Dialect::Pgsql && matches!(w, [b'e' | b'E']))
                || (self.dialect == Dialect::Mysql && w.first() == Some(&b'_'));
            if prefixed {
                self.i = j;
                let escapes = self.dialect == Dialect::Mysql || matches!(w, [b'e' | b'E']);
                self.skip_quoted(b'\'', escapes);
                self.literal();
                return;
            }
        }
        if self.dialect == Dialect::Pgsql
            && matches!(w, [b'u' | b'U'])
            && s.get(j) == Some(&b'&')
            && s.get(j + 1) == Some(&b'\'')
        {
            self.i = j + 1;
            self.skip_quoted(b'\'', false);
            self.literal();
            return;
        }
        self.i = j;
        self.sep(w[0]);
        let kw = if w.len() <= 16 { keyword(w) } else { None };
        match kw {
            Some(k) => {
                self.push(k.as_bytes());
                self.keyword(k);
                self.last_keyword = true;
            }
            None => {
                if self.out.len() < self.max {
                    self.out.extend_from_slice(w);
                }
                self.identifier_for_tables(w);
                self.first_word(w);
                self.last_keyword = false;
            }
        }
    }

    fn finish(mut self) -> (Digest, Option<NumberSpans>) {
        if self.out.len() > self.max {
            let mut cut = self.max;
            while cut > 0 && (self.out[cut] & 0xC0) == 0x80 {
                cut -= 1;
            }
            self.out.truncate(cut);
        }
        while self.out.last() == Some(&b';') || self.out.last() == Some(&b' ') {
            self.out.pop();
        }
        let text = match String::from_utf8(self.out) {
            Ok(t) => t,
            Err(e) => String::from_utf8_lossy(e.as_bytes()).into_owned(),
        };
        let hash = fnv1a(text.as_bytes());
        let mut tables = self.tables;
        tables.truncate(self.n_tables);
        tables.dedup();
        let digest = Digest {
            text,
            hash,
            first_comment: self.first_comment,
            kind: self.kind.unwrap_or_default(),
            locking_read: self.locking,
            tables,
            tables_complete: self.tables_complete,
        };
        (digest, self.numbers)
    }
}

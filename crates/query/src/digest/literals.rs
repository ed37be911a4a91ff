//! The tokenizer's quoted runs and literals: strings, quoted identifiers, numbers and
//! PostgreSQL's dollar quotes.

use super::{Tokenizer, is_ident_byte};

impl Tokenizer<'_> {
    /// Skips a quoted run starting at `self.i` (the opening quote); doubled quotes and, when
    /// `escapes`, backslash escapes stay inside. An unterminated run ends at the end of input.
    pub(super) fn skip_quoted(&mut self, q: u8, escapes: bool) {
        let mut j = self.i + 1;
        while j < self.src.len() {
            let c = self.src[j];
            if escapes && c == b'\\' {
                j += 2;
                continue;
            }
            if c == q {
                if self.src.get(j + 1) == Some(&q) {
                    j += 2;
                    continue;
                }
                j += 1;
                break;
            }
            j += 1;
        }
        self.i = j.min(self.src.len());
    }

    pub(super) fn quoted_identifier(&mut self, q: u8) {
        let start = self.i;
        self.skip_quoted(q, false);
        let end = self.i;
        self.sep(q);
        let bytes = &self.src[start..end];
        if self.out.len() < self.max {
            self.out.extend_from_slice(bytes);
        }
        let inner = bytes
            .get(1..bytes.len().saturating_sub(1))
            .unwrap_or_default();
        self.identifier_for_tables(inner);
        self.last_keyword = false;
    }

    /// A `-`/`+` directly before a number is part of the literal when it cannot be a binary
    /// operator (after an operator, `(`, `,`, a keyword or at the start).
    pub(super) fn sign_starts_number(&self) -> bool {
        let next = self.peek(1);
        let digit = next.is_ascii_digit() || (next == b'.' && self.peek(2).is_ascii_digit());
        digit && self.last_keyword
    }

    /// A numeric literal at `self.i`; false (nothing consumed) when the run is a word that
    /// starts with digits (`1st_table`).
    pub(super) fn number(&mut self) -> bool {
        let start = self.i;
        let mut j = self.i;
        let s = self.src;
        if s[j] == b'0' && matches!(s.get(j + 1), Some(b'x' | b'X' | b'b' | b'B')) {
            let mut k = j + 2;
            while k < s.len() && s[k].is_ascii_hexdigit() {
                k += 1;
            }
            if k > j + 2 && !s.get(k).is_some_and(|c| is_ident_byte(*c)) {
                self.i = k;
                self.literal();
                return true;
            }
        }
        while j < s.len() && s[j].is_ascii_digit() {
            j += 1;
        }
        let digits_end = j;
        if j < s.len() && is_ident_byte(s[j]) && !matches!(s[j], b'e' | b'E') {
            // MySQL identifiers may start with digits (`1st_table`).
            self.i = start;
            return false;
        }
        if s.get(j) == Some(&b'.') {
            j += 1;
            while j < s.len() && s[j].is_ascii_digit() {
                j += 1;
            }
        }
        if matches!(s.get(j), Some(b'e' | b'E')) {
            let mut k = j + 1;
            if matches!(s.get(k), Some(b'+' | b'-')) {
                k += 1;
            }
            if s.get(k).is_some_and(u8::is_ascii_digit) {
                while k < s.len() && s[k].is_ascii_digit() {
                    k += 1;
                }
                j = k;
            }
        }
        self.i = j.max(start + 1);
        if j == digits_end && j > start {
            self.note_number(start, j);
        }
        self.literal();
        true
    }

    pub(super) fn dollar(&mut self) {
        let s = self.src;
        let mut j = self.i + 1;
        if s.get(j).is_some_and(u8::is_ascii_digit) {
            while j < s.len() && s[j].is_ascii_digit() {
                j += 1;
            }
            self.i = j;
            self.literal();
            return;
        }
        while j < s.len() && (s[j].is_ascii_alphanumeric() || s[j] == b'_' || s[j] >= 0x80) {
            j += 1;
        }
        if s.get(j) == Some(&b'$') {
            let tag = &s[self.i..=j];
            let body = j + 1;
            let close = s[body..]
                .windows(tag.len())
                .position(|w| w == tag)
                .map_or(s.len(), |p| body + p + tag.len());
            self.i = close;
            self.literal();
            return;
        }
        self.sep(b'$');
        self.push(b"$");
        self.i += 1;
    }
}

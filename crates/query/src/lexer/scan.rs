//! The byte-level pieces of the lexer: runs, quoted sections, comments, dollar quotes.

use super::LexError;

/// Whitespace as SQL servers take it (space, tab, newline, carriage return, vertical tab,
/// form feed).
pub(super) fn is_space(c: u8) -> bool {
    matches!(c, b' ' | b'\t' | b'\n' | b'\r' | 0x0b | 0x0c)
}

/// Letters, digits, `_` and every non-ASCII byte (names may hold them; a multi-byte character
/// is never split).
pub(super) fn is_word_byte(c: u8) -> bool {
    c.is_ascii_alphanumeric() || c == b'_' || c >= 0x80
}

/// The end of the run of bytes from `i` that `keep` accepts.
pub(super) fn scan_while(b: &[u8], mut i: usize, keep: impl Fn(u8) -> bool) -> usize {
    while i < b.len() && keep(b[i]) {
        i += 1;
    }
    i
}

/// Past the end of the line `i` is on (its newline included).
pub(super) fn line_end(b: &[u8], i: usize) -> usize {
    b[i..]
        .iter()
        .position(|&c| c == b'\n')
        .map_or(b.len(), |p| i + p + 1)
}

/// Past the `/* … */` comment starting at `i` (nested ones too when `nests`).
pub(super) fn block_comment_end(b: &[u8], i: usize, nests: bool) -> Result<usize, LexError> {
    let mut depth = 0usize;
    let mut j = i;
    while j + 1 < b.len() {
        if b[j] == b'/' && b[j + 1] == b'*' && (nests || depth == 0) {
            depth += 1;
            j += 2;
        } else if b[j] == b'*' && b[j + 1] == b'/' {
            depth -= 1;
            j += 2;
            if depth == 0 {
                return Ok(j);
            }
        } else {
            j += 1;
        }
    }
    Err(LexError::Unterminated("comment"))
}

/// Past the quoted section whose opening quote is at `i`: a doubled quote stays inside, and
/// so does a backslash-escaped character when `backslash`.
pub(super) fn quoted_end(b: &[u8], i: usize, backslash: bool) -> Result<usize, LexError> {
    let q = b[i];
    let mut j = i + 1;
    while j < b.len() {
        let c = b[j];
        if backslash && c == b'\\' {
            j += 2;
            continue;
        }
        if c == q {
            if b.get(j + 1) == Some(&q) {
                j += 2;
                continue;
            }
            return Ok(j + 1);
        }
        j += 1;
    }
    Err(LexError::Unterminated(match q {
        b'\'' => "string",
        b'"' => "quoted string or identifier",
        _ => "backquoted identifier",
    }))
}

/// Past the `$tag$ … $tag$` string starting at `i`, or `None` when `$` does not open one
/// (`$1` is a placeholder).
pub(super) fn dollar_quote_end(b: &[u8], i: usize) -> Result<Option<usize>, LexError> {
    if b.get(i + 1).is_some_and(u8::is_ascii_digit) {
        return Ok(None);
    }
    let j = scan_while(b, i + 1, |c| c.is_ascii_alphanumeric() || c == b'_');
    if b.get(j) != Some(&b'$') {
        return Ok(None);
    }
    let tag = &b[i..=j];
    let body = j + 1;
    match b[body..].windows(tag.len()).position(|w| w == tag) {
        Some(p) => Ok(Some(body + p + tag.len())),
        None => Err(LexError::Unterminated("dollar-quoted string")),
    }
}

/// A quoted section's body read: `qq` → `q`, and `\x` → `x` when `backslash`.
pub(super) fn unescape(body: &str, q: u8, backslash: bool) -> String {
    let mut out = String::with_capacity(body.len());
    let mut chars = body.chars().peekable();
    while let Some(c) = chars.next() {
        if backslash && c == '\\' {
            if let Some(n) = chars.next() {
                out.push(n);
            }
        } else if c == q as char && chars.peek() == Some(&(q as char)) {
            chars.next();
            out.push(c);
        } else {
            out.push(c);
        }
    }
    out
}

//! Small helpers every crate used to carry its own copy of, and the process facts the metrics
//! report (resident memory, open file descriptors).

/// `bytes` as text: borrowed when they are UTF-8 (statement texts are: the servers check), else
/// with U+FFFD for the invalid parts. `str::from_utf8` checks ASCII a word at a time, where
/// `String::from_utf8_lossy` walks byte by byte; this runs on every statement.
pub fn text(bytes: &[u8]) -> std::borrow::Cow<'_, str> {
    match std::str::from_utf8(bytes) {
        Ok(t) => std::borrow::Cow::Borrowed(t),
        Err(_) => String::from_utf8_lossy(bytes),
    }
}

pub use sluice_query::util::{lock, unix_now};

/// The process's resident memory in bytes (Linux `/proc/self/statm`); `None` elsewhere.
pub fn rss_bytes() -> Option<u64> {
    let statm = std::fs::read_to_string("/proc/self/statm").ok()?;
    let pages: u64 = statm.split_whitespace().nth(1)?.parse().ok()?;
    Some(pages * 4096)
}

/// File descriptors the process has open (Linux `/proc/self/fd`); `None` elsewhere.
pub fn open_fds() -> Option<u64> {
    Some(std::fs::read_dir("/proc/self/fd").ok()?.count() as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_borrows_utf8_and_replaces_what_is_not() {
        assert!(matches!(
            text(b"SELECT 'h\xc3\xa9'"),
            std::borrow::Cow::Borrowed("SELECT 'h\u{e9}'")
        ));
        assert_eq!(text(b"SELECT '\xff'"), "SELECT '\u{fffd}'");
    }
}

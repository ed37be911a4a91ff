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

/// One clock reading shared by everything one event does: read the first time it is asked for
/// (or handed in by a caller that already read the clock), the same instant after that. A
/// statement's start, its connection checkout and its send happen within microseconds of each
/// other; each reading its own clock cost ~30 instructions and each subtraction ~55.
#[derive(Debug, Clone, Copy, Default)]
pub struct EventClock(Option<std::time::Instant>);

impl EventClock {
    /// A clock already read at `now`.
    pub fn at(now: std::time::Instant) -> Self {
        EventClock(Some(now))
    }

    /// The event's instant: the first call reads the clock.
    pub fn now(&mut self) -> std::time::Instant {
        *self.0.get_or_insert_with(std::time::Instant::now)
    }

    /// Forgets the reading (the event waited: the next `now` reads the clock again).
    pub fn reset(&mut self) {
        self.0 = None;
    }
}

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

    #[test]
    fn an_event_clock_reads_once_until_reset() {
        let mut clock = EventClock::default();
        let first = clock.now();
        std::thread::sleep(std::time::Duration::from_millis(2));
        assert_eq!(clock.now(), first);
        clock.reset();
        assert!(clock.now() > first);
        let given = std::time::Instant::now();
        assert_eq!(EventClock::at(given).now(), given);
    }
}

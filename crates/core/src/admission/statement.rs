//! Which statements admission control lets through without a slot.

/// First words of statements that never wait or get shed: they end a transaction, change
/// session state or name a savepoint, and hold nothing on the server worth limiting.
const NEVER_WAIT: [&str; 13] = [
    "commit",
    "rollback",
    "set",
    "reset",
    "release",
    "savepoint",
    "use",
    "discard",
    "deallocate",
    "end",
    "abort",
    "unlisten",
    "close",
];

/// Whether `sql` (one statement, or the first of a multi-statement) passes without a slot:
/// COMMIT, ROLLBACK, SET and the like never queue.
pub fn never_waits(sql: &str) -> bool {
    let word = first_word(sql);
    NEVER_WAIT.iter().any(|w| w.eq_ignore_ascii_case(word))
}

/// The first word after whitespace and comments (`/* */`, `-- `, `#`).
fn first_word(sql: &str) -> &str {
    let mut rest = sql;
    loop {
        rest = rest.trim_start();
        if let Some(after) = rest.strip_prefix("/*") {
            rest = after.split_once("*/").map_or("", |(_, r)| r);
        } else if rest.starts_with("--") || rest.starts_with('#') {
            rest = rest.split_once('\n').map_or("", |(_, r)| r);
        } else {
            break;
        }
    }
    let end = rest
        .find(|c: char| !c.is_ascii_alphabetic())
        .unwrap_or(rest.len());
    &rest[..end]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn transaction_ends_and_settings_never_wait() {
        for sql in [
            "COMMIT",
            " rollback to x",
            "/* workload=vector */ SET a=1",
            "-- c\nset @x=1",
            "END;",
        ] {
            assert!(never_waits(sql), "{sql}");
        }
        for sql in [
            "SELECT 1",
            "BEGIN",
            "/* set */ SELECT 1",
            "CALL p()",
            "settle()",
            "",
        ] {
            assert!(!never_waits(sql), "{sql}");
        }
    }
}

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

/// Whether `class` (a statement's class, or [`crate::config::DEFAULT_CLASS`]) is one of the
/// configured `classes`: only then can the statement wait or be refused. Asked before
/// [`never_waits`], so a statement of an unconfigured class costs a few name compares.
pub fn governs(classes: &[crate::config::WorkloadClass], class: &str) -> bool {
    classes.iter().any(|c| c.name == class)
}

/// Whether `sql` (one statement, or the first of a multi-statement) passes without a slot:
/// COMMIT, ROLLBACK, SET and the like never queue. Asked for every statement while a class is
/// configured, so on bytes: a first word of another length or first letter costs one compare.
pub fn never_waits(sql: &str) -> bool {
    let word = first_word(sql.as_bytes());
    let Some(first) = word.first().map(u8::to_ascii_lowercase) else {
        return false;
    };
    NEVER_WAIT.iter().any(|w| {
        w.len() == word.len() && w.as_bytes()[0] == first && w.as_bytes().eq_ignore_ascii_case(word)
    })
}

/// The first word after whitespace and comments (`/* */`, `-- `, `#`).
fn first_word(sql: &[u8]) -> &[u8] {
    let mut rest = sql;
    loop {
        rest = rest.trim_ascii_start();
        if let Some(after) = rest.strip_prefix(b"/*") {
            rest = after
                .windows(2)
                .position(|w| w == b"*/")
                .map_or(&[][..], |at| &after[at + 2..]);
        } else if rest.starts_with(b"--") || rest.starts_with(b"#") {
            rest = rest
                .iter()
                .position(|&c| c == b'\n')
                .map_or(&[][..], |at| &rest[at + 1..]);
        } else {
            break;
        }
    }
    let end = rest
        .iter()
        .position(|c| !c.is_ascii_alphabetic())
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
            "# note\ncommit",
            "\t\nDISCARD ALL",
        ] {
            assert!(never_waits(sql), "{sql}");
        }
        for sql in [
            "SELECT 1",
            "BEGIN",
            "/* set */ SELECT 1",
            "CALL p()",
            "settle()",
            "commits",
            "/* never closed COMMIT",
            "-- COMMIT",
            "",
        ] {
            assert!(!never_waits(sql), "{sql}");
        }
    }
}

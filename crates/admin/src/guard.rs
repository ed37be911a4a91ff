//! What the admin's SQLite will not run for a user: statements that reach the filesystem or load
//! code — `ATTACH`/`DETACH` (open or create any file), `VACUUM … INTO` (write any file),
//! `load_extension()` (load a shared library) — and PRAGMAs that change the engine's behaviour.
//! PRAGMAs that only read (`PRAGMA table_info(t)`, `PRAGMA database_list`, …) stay allowed, as
//! ProxySQL's admin documents them. Read from tokens, so comments, quoting and case do not hide
//! anything, in every statement of a multi-statement string.

/// PRAGMAs that only report, allowed with an argument (`PRAGMA table_info(mysql_servers)`).
const READ_PRAGMAS: [&str; 12] = [
    "table_info",
    "table_xinfo",
    "table_list",
    "index_list",
    "index_info",
    "index_xinfo",
    "foreign_key_list",
    "database_list",
    "collation_list",
    "function_list",
    "pragma_list",
    "compile_options",
];

/// One token: a word (keyword or identifier, lower-cased) or a punctuation byte.
#[derive(Debug, PartialEq, Eq)]
enum Tok {
    Word(String),
    Punct(u8),
}

/// Splits `sql` into statements of tokens; string literals and comments are skipped, quoted
/// identifiers become words.
fn statements(sql: &str) -> Vec<Vec<Tok>> {
    let b = sql.as_bytes();
    let mut out = vec![Vec::new()];
    let mut i = 0;
    while i < b.len() {
        let c = b[i];
        match c {
            b'\'' => i = skip_quoted(b, i, b'\''),
            b'"' | b'`' | b'[' => {
                let close = if c == b'[' { b']' } else { c };
                let end = skip_quoted(b, i, close);
                let inner = sql.get(i + 1..end.saturating_sub(1)).unwrap_or("");
                push(&mut out, Tok::Word(inner.to_ascii_lowercase()));
                i = end;
            }
            b'-' if b.get(i + 1) == Some(&b'-') => {
                while i < b.len() && b[i] != b'\n' {
                    i += 1;
                }
            }
            b'/' if b.get(i + 1) == Some(&b'*') => {
                i += 2;
                while i + 1 < b.len() && !(b[i] == b'*' && b[i + 1] == b'/') {
                    i += 1;
                }
                i += 2;
            }
            b';' => {
                out.push(Vec::new());
                i += 1;
            }
            c if c.is_ascii_alphanumeric() || c == b'_' || c >= 0x80 => {
                let start = i;
                while i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == b'_' || b[i] >= 0x80)
                {
                    i += 1;
                }
                push(&mut out, Tok::Word(sql[start..i].to_ascii_lowercase()));
            }
            c if c.is_ascii_whitespace() => i += 1,
            c => {
                push(&mut out, Tok::Punct(c));
                i += 1;
            }
        }
    }
    out.retain(|s| !s.is_empty());
    out
}

fn push(out: &mut [Vec<Tok>], t: Tok) {
    if let Some(last) = out.last_mut() {
        last.push(t);
    }
}

/// The index after the quoted section starting at `start` (doubled quotes stay inside).
fn skip_quoted(b: &[u8], start: usize, close: u8) -> usize {
    let mut i = start + 1;
    while i < b.len() {
        if b[i] == close {
            if b.get(i + 1) == Some(&close) {
                i += 2;
                continue;
            }
            return i + 1;
        }
        i += 1;
    }
    b.len()
}

fn is_word(t: Option<&Tok>, w: &str) -> bool {
    matches!(t, Some(Tok::Word(x)) if x == w)
}

/// Why the admin refuses `sql`, or `None` when it may run.
pub(crate) fn refused(sql: &str) -> Option<String> {
    for stmt in statements(sql) {
        let first = stmt.first();
        for verb in ["attach", "detach"] {
            if is_word(first, verb) {
                return Some(format!(
                    "{} is refused by Sluice's admin: it opens or creates files",
                    verb.to_ascii_uppercase()
                ));
            }
        }
        if is_word(first, "vacuum")
            && stmt
                .iter()
                .any(|t| matches!(t, Tok::Word(w) if w == "into"))
        {
            return Some("VACUUM INTO is refused by Sluice's admin: it writes a file".into());
        }
        let calls_load = stmt.windows(2).any(|w| {
            matches!(&w[0], Tok::Word(x) if x == "load_extension") && w[1] == Tok::Punct(b'(')
        });
        if calls_load {
            return Some("load_extension() is refused by Sluice's admin: it loads code".into());
        }
        if is_word(first, "pragma") {
            // PRAGMA [schema.]name [= value | (arg)]
            let mut rest = &stmt[1..];
            if rest.get(1) == Some(&Tok::Punct(b'.')) {
                rest = &rest[2..];
            }
            let name = match rest.first() {
                Some(Tok::Word(n)) => n.as_str(),
                _ => "",
            };
            let writes = match rest.get(1) {
                None => false,
                Some(Tok::Punct(b'(')) => !READ_PRAGMAS.contains(&name),
                Some(_) => true,
            };
            if writes {
                return Some(format!(
                    "PRAGMA {name} with a value is refused by Sluice's admin: only reading PRAGMAs run"
                ));
            }
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refuses_what_reaches_files_or_loads_code_however_it_is_written() {
        for sql in [
            "ATTACH DATABASE '/tmp/x.db' AS x",
            "attach '/tmp/x.db' as x",
            "/* hi */ ATTACH '/tmp/x.db' AS x",
            "SELECT 1; ATTACH '/tmp/x.db' AS x",
            "DETACH disk",
            "VACUUM INTO '/tmp/copy.db'",
            "vacuum main into '/tmp/copy.db'",
            "SELECT load_extension('/tmp/evil.so')",
            "select LOAD_EXTENSION ('/tmp/evil.so')",
            "PRAGMA writable_schema = 1",
            "PRAGMA main.journal_mode = OFF",
            "PRAGMA journal_mode(MEMORY)",
            "pragma \"writable_schema\"=ON",
        ] {
            assert!(refused(sql).is_some(), "{sql} was allowed");
        }
    }

    #[test]
    fn allows_reads_and_ordinary_statements() {
        for sql in [
            "SELECT * FROM mysql_servers",
            "SELECT 'ATTACH DATABASE x', \"attach\" FROM t",
            "SELECT 1 -- ATTACH 'x' AS y",
            "UPDATE mysql_servers SET comment = 'vacuum into the night' WHERE hostgroup_id = 1",
            "PRAGMA table_info(mysql_servers)",
            "PRAGMA database_list",
            "PRAGMA main.table_info('mysql_users')",
            "VACUUM",
            "INSERT INTO mysql_query_rules (rule_id, match_pattern) VALUES (1, 'load_extension(')",
        ] {
            assert_eq!(refused(sql), None, "{sql} was refused");
        }
    }
}

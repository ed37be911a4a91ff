//! PgBouncer's ini files (`pgbouncer.ini`) and `userlist.txt`: the parts of their syntax
//! PgBouncer's own loader accepts, each entry with its line.

use crate::ImportError;

/// `key = value` in a section.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Entry {
    pub(crate) section: String,
    pub(crate) key: String,
    pub(crate) value: String,
    pub(crate) line: usize,
}

/// Every entry in file order; sections lower-cased (PgBouncer's are case-insensitive), keys as
/// written (database names are case-sensitive).
pub(crate) fn parse(text: &str) -> Result<Vec<Entry>, ImportError> {
    let mut section = String::new();
    let mut out = Vec::new();
    for (line, l) in content_lines(text) {
        if l.starts_with("%include") {
            return Err(ImportError::Syntax {
                line,
                message: "%include is not supported: inline the included file".into(),
            });
        }
        if let Some(rest) = l.strip_prefix('[') {
            let name = rest.strip_suffix(']').ok_or_else(|| ImportError::Syntax {
                line,
                message: "a section header needs its closing ']'".into(),
            })?;
            section = name.trim().to_ascii_lowercase();
            continue;
        }
        let (key, value) = l.split_once('=').ok_or_else(|| ImportError::Syntax {
            line,
            message: format!("expected key = value, found {l:?}"),
        })?;
        if section.is_empty() {
            return Err(ImportError::Syntax {
                line,
                message: "a setting before any [section]".into(),
            });
        }
        out.push(Entry {
            section: section.clone(),
            key: unquote_key(key.trim()),
            value: value.trim().to_string(),
            line,
        });
    }
    Ok(out)
}

/// The lines that are neither blank nor `;`/`#` comments, trimmed, with their 1-based numbers.
fn content_lines(text: &str) -> impl Iterator<Item = (usize, &str)> {
    text.lines()
        .enumerate()
        .map(|(i, l)| (i + 1, l.trim()))
        .filter(|(_, l)| !(l.is_empty() || l.starts_with(';') || l.starts_with('#')))
}

/// Database names may be double-quoted in `[databases]`.
fn unquote_key(k: &str) -> String {
    k.strip_prefix('"')
        .and_then(|k| k.strip_suffix('"'))
        .map(|k| k.replace("\"\"", "\""))
        .unwrap_or_else(|| k.to_string())
}

/// A libpq-style connection string: `host=a port=5432 dbname='my db'`, values optionally in single
/// quotes with `\'` or `''` inside.
pub(crate) fn conninfo(s: &str, line: usize) -> Result<Vec<(String, String)>, ImportError> {
    let b = s.as_bytes();
    let mut at = 0;
    let mut out = Vec::new();
    let err = |message: String| ImportError::Syntax { line, message };
    loop {
        while at < b.len() && b[at].is_ascii_whitespace() {
            at += 1;
        }
        if at == b.len() {
            return Ok(out);
        }
        let start = at;
        while at < b.len() && b[at] != b'=' && !b[at].is_ascii_whitespace() {
            at += 1;
        }
        let key = s[start..at].to_string();
        while at < b.len() && b[at].is_ascii_whitespace() {
            at += 1;
        }
        if b.get(at) != Some(&b'=') {
            return Err(err(format!(
                "expected {key}=value in the connection string"
            )));
        }
        at += 1;
        while at < b.len() && b[at].is_ascii_whitespace() {
            at += 1;
        }
        let mut value = Vec::new();
        if b.get(at) == Some(&b'\'') {
            at += 1;
            loop {
                match (b.get(at), b.get(at + 1)) {
                    (None, _) => return Err(err(format!("{key}: unterminated quote"))),
                    (Some(b'\\'), Some(c)) | (Some(b'\''), Some(c @ b'\'')) => {
                        value.push(*c);
                        at += 2;
                    }
                    (Some(b'\''), _) => {
                        at += 1;
                        break;
                    }
                    (Some(c), _) => {
                        value.push(*c);
                        at += 1;
                    }
                }
            }
        } else {
            while at < b.len() && !b[at].is_ascii_whitespace() {
                value.push(b[at]);
                at += 1;
            }
        }
        out.push((key, String::from_utf8_lossy(&value).into_owned()));
    }
}

/// `userlist.txt`: `"user" "password"` per line (`""` inside quotes is one `"`); `;` comments.
pub(crate) fn userlist(text: &str) -> Result<Vec<(String, String, usize)>, ImportError> {
    let mut out = Vec::new();
    for (line, l) in content_lines(text) {
        let mut rest = l;
        let mut fields = Vec::new();
        while fields.len() < 2 {
            rest = rest.trim_start();
            let body = rest.strip_prefix('"').ok_or_else(|| ImportError::Syntax {
                line,
                message: "userlist entries are \"user\" \"password\"".into(),
            })?;
            let mut value = String::new();
            let mut chars = body.char_indices();
            let end = loop {
                match chars.next() {
                    None => {
                        return Err(ImportError::Syntax {
                            line,
                            message: "unterminated quote".into(),
                        });
                    }
                    Some((i, '"')) if body[i + 1..].starts_with('"') => {
                        value.push('"');
                        chars.next();
                    }
                    Some((i, '"')) => break i + 1,
                    Some((_, c)) => value.push(c),
                }
            };
            fields.push(value);
            rest = &body[end..];
        }
        let password = fields.pop().unwrap_or_default();
        let user = fields.pop().unwrap_or_default();
        out.push((user, password, line));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sections_conninfo_and_userlist() {
        let e = parse("; c\n[databases]\n\"My DB\" = host=h dbname='a b' password='it''s'\n[PgBouncer]\nlisten_port = 6432\n").unwrap();
        assert_eq!(e[0].key, "My DB");
        assert_eq!(e[1].section, "pgbouncer");
        assert_eq!(e[1].line, 5);
        let c = conninfo(&e[0].value, 3).unwrap();
        assert_eq!(
            c,
            [
                ("host".into(), "h".into()),
                ("dbname".into(), "a b".into()),
                ("password".into(), "it's".into())
            ]
        );
        assert!(conninfo("host='x", 1).is_err());
        let u = userlist("\"a\" \"p\"\"q\"\n;x\n\"b\" \"SCRAM-SHA-256$4096:abc\"\n").unwrap();
        assert_eq!(u[0], ("a".into(), "p\"q".into(), 1));
        assert_eq!(u[1].2, 3);
        assert!(userlist("a b\n").is_err());
        assert!(parse("x = 1\n").is_err());
    }
}

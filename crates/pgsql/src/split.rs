//! Splitting a simple-query string into statements on `;` outside quotes and comments.

/// The non-empty statements of `sql`, in order.
pub(crate) fn statements(sql: &str) -> Vec<&str> {
    let b = sql.as_bytes();
    let mut out = Vec::new();
    let (mut start, mut i) = (0, 0);
    while i < b.len() {
        match b[i] {
            q @ (b'\'' | b'"') => {
                i += 1;
                while i < b.len() && b[i] != q {
                    i += 1;
                }
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
                i += 1;
            }
            b';' => {
                push(&mut out, &sql[start..i]);
                start = i + 1;
            }
            _ => {}
        }
        i += 1;
    }
    push(&mut out, sql.get(start..).unwrap_or(""));
    out
}

fn push<'a>(out: &mut Vec<&'a str>, s: &'a str) {
    let t = s.trim();
    if !t.is_empty() {
        out.push(t);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splits_outside_quotes_and_comments() {
        assert_eq!(
            statements("SELECT 1; SELECT ';' -- x;\n; UPDATE t SET a='b;c';"),
            vec!["SELECT 1", "SELECT ';' -- x;", "UPDATE t SET a='b;c'"]
        );
        assert!(statements(" ; ").is_empty());
        assert_eq!(statements("/* a; */ SELECT 2"), vec!["/* a; */ SELECT 2"]);
    }
}

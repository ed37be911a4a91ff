//! MySQL functions ProxySQL's admin accepts (it runs on SQLite with extensions) that SQLite
//! lacks, rewritten to SQLite equivalents before a statement runs. Runbooks use them, e.g.
//! `SELECT from_unixtime(time_start_us/1000/1000), * FROM monitor.pgsql_server_ping_log`.

/// `from_unixtime(x)` → `datetime(x, 'unixepoch')`, outside string literals, any case.
pub(crate) fn rewrite_mysql_functions(sql: &str) -> std::borrow::Cow<'_, str> {
    const NAME: &str = "from_unixtime(";
    if !sql.to_ascii_lowercase().contains(NAME) {
        return std::borrow::Cow::Borrowed(sql);
    }
    let b = sql.as_bytes();
    let mut out = String::with_capacity(sql.len() + 16);
    let mut i = 0;
    let mut quote: Option<u8> = None;
    while i < b.len() {
        let c = b[i];
        if let Some(q) = quote {
            if c == q {
                quote = None;
            }
        } else if c == b'\'' || c == b'"' {
            quote = Some(c);
        } else if b.len() - i >= NAME.len()
            && sql.is_char_boundary(i)
            && sql[i..i + NAME.len()].eq_ignore_ascii_case(NAME)
            && (i == 0 || !(b[i - 1].is_ascii_alphanumeric() || b[i - 1] == b'_'))
            && let Some(close) = matching_paren(b, i + NAME.len())
        {
            let inner = &sql[i + NAME.len()..close];
            out.push_str("datetime(");
            out.push_str(&rewrite_mysql_functions(inner));
            out.push_str(", 'unixepoch')");
            i = close + 1;
            continue;
        }
        let ch_len = sql[i..].chars().next().map_or(1, char::len_utf8);
        out.push_str(&sql[i..i + ch_len]);
        i += ch_len;
    }
    std::borrow::Cow::Owned(out)
}

/// Index of the `)` closing a parenthesis opened just before `from`.
fn matching_paren(b: &[u8], from: usize) -> Option<usize> {
    let mut depth = 1usize;
    let mut quote: Option<u8> = None;
    for (j, &c) in b.iter().enumerate().skip(from) {
        match quote {
            Some(q) if c == q => quote = None,
            Some(_) => {}
            None => match c {
                b'\'' | b'"' => quote = Some(c),
                b'(' => depth += 1,
                b')' => {
                    depth -= 1;
                    if depth == 0 {
                        return Some(j);
                    }
                }
                _ => {}
            },
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn from_unixtime_becomes_datetime() {
        assert_eq!(
            rewrite_mysql_functions("SELECT from_unixtime(time_start_us/1000/1000),* FROM t"),
            "SELECT datetime(time_start_us/1000/1000, 'unixepoch'),* FROM t"
        );
        assert_eq!(
            rewrite_mysql_functions("select FROM_UNIXTIME((a+1)*2) x, 'from_unixtime(' y"),
            "select datetime((a+1)*2, 'unixepoch') x, 'from_unixtime(' y"
        );
        assert_eq!(rewrite_mysql_functions("SELECT 1"), "SELECT 1");
        assert_eq!(
            rewrite_mysql_functions("SELECT from_unixtime(1"),
            "SELECT from_unixtime(1"
        );
        assert_eq!(
            rewrite_mysql_functions("SELECT my_from_unixtime(1)"),
            "SELECT my_from_unixtime(1)"
        );
    }
}

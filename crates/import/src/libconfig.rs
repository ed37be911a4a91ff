//! A reader for libconfig, the format of `proxysql.cnf`: settings `name = value;` (or `:`, the
//! `;`/`,` optional), groups `{ … }`, lists `( … )`, arrays `[ … ]`, strings with C escapes
//! (adjacent strings join), integers (decimal, hex, an `L` suffix), floats, booleans, and `#`,
//! `//` and `/* */` comments. Every value keeps the line it starts on. Nesting is bounded.

use crate::ImportError;

/// How deep groups and lists may nest; ProxySQL's files use three levels.
const MAX_DEPTH: usize = 32;

/// A setting: `name = value`.
#[derive(Debug, Clone, PartialEq)]
pub struct Setting {
    /// The setting's name.
    pub name: String,
    /// Its value.
    pub value: Value,
    /// The line the name is on (1-based).
    pub line: usize,
}

/// A libconfig value.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    /// `true` / `false` (any case).
    Bool(bool),
    /// A decimal or hexadecimal integer.
    Int(i64),
    /// A floating-point number.
    Float(f64),
    /// A string, escapes resolved.
    Str(String),
    /// `[ … ]` (scalars) or `( … )` (any values), with each element's line.
    List(Vec<(usize, Value)>),
    /// `{ … }`: named settings.
    Group(Vec<Setting>),
}

/// Parses a whole file: the top-level settings in order.
pub fn parse(text: &str) -> Result<Vec<Setting>, ImportError> {
    let mut p = Parser {
        s: text.as_bytes(),
        at: 0,
        line: 1,
    };
    let settings = p.settings(0, None)?;
    Ok(settings)
}

struct Parser<'a> {
    s: &'a [u8],
    at: usize,
    line: usize,
}

impl Parser<'_> {
    fn error(&self, what: impl Into<String>) -> ImportError {
        ImportError::Syntax {
            line: self.line,
            message: what.into(),
        }
    }

    fn peek(&self) -> Option<u8> {
        self.s.get(self.at).copied()
    }

    fn bump(&mut self) -> Option<u8> {
        let b = self.peek()?;
        self.at += 1;
        if b == b'\n' {
            self.line += 1;
        }
        Some(b)
    }

    /// Skips whitespace and comments.
    fn skip(&mut self) -> Result<(), ImportError> {
        loop {
            match (self.peek(), self.s.get(self.at + 1).copied()) {
                (Some(b' ' | b'\t' | b'\r' | b'\n'), _) => {
                    self.bump();
                }
                (Some(b'#'), _) | (Some(b'/'), Some(b'/')) => {
                    while !matches!(self.peek(), None | Some(b'\n')) {
                        self.bump();
                    }
                }
                (Some(b'/'), Some(b'*')) => {
                    let start = self.line;
                    self.at += 2;
                    loop {
                        match self.bump() {
                            None => {
                                return Err(ImportError::Syntax {
                                    line: start,
                                    message: "unterminated /* comment".into(),
                                });
                            }
                            Some(b'*') if self.peek() == Some(b'/') => {
                                self.bump();
                                break;
                            }
                            Some(_) => {}
                        }
                    }
                }
                _ => return Ok(()),
            }
        }
    }

    /// Settings until `close` (or the end of the file at the top level).
    fn settings(&mut self, depth: usize, close: Option<u8>) -> Result<Vec<Setting>, ImportError> {
        let mut out = Vec::new();
        loop {
            self.skip()?;
            match (self.peek(), close) {
                (None, None) => return Ok(out),
                (None, Some(c)) => return Err(self.error(format!("missing '{}'", c as char))),
                (Some(b), Some(c)) if b == c => {
                    self.bump();
                    return Ok(out);
                }
                (Some(b'@'), _) => {
                    return Err(self.error("@include is not supported: inline the included file"));
                }
                _ => {}
            }
            let line = self.line;
            let name = self.name()?;
            self.skip()?;
            match self.bump() {
                Some(b'=' | b':') => {}
                _ => return Err(self.error(format!("expected '=' or ':' after {name}"))),
            }
            self.skip()?;
            let value = self.value(depth)?;
            self.skip()?;
            if matches!(self.peek(), Some(b';' | b',')) {
                self.bump();
            }
            if let Some(first) = out.iter().find(|s| s.name == name) {
                return Err(ImportError::Syntax {
                    line,
                    message: format!(
                        "{name} is set twice in this group (first on line {})",
                        first.line
                    ),
                });
            }
            out.push(Setting { name, value, line });
        }
    }

    fn name(&mut self) -> Result<String, ImportError> {
        let start = self.at;
        while let Some(b) = self.peek() {
            let ok = b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'*');
            if !ok || (self.at == start && (b.is_ascii_digit() || b == b'-')) {
                break;
            }
            self.bump();
        }
        if self.at == start {
            let found = self
                .peek()
                .map(|b| (b as char).to_string())
                .unwrap_or_default();
            return Err(self.error(format!("expected a setting name, found {found:?}")));
        }
        Ok(String::from_utf8_lossy(&self.s[start..self.at]).into_owned())
    }

    fn value(&mut self, depth: usize) -> Result<Value, ImportError> {
        if depth >= MAX_DEPTH {
            return Err(self.error(format!("nested deeper than {MAX_DEPTH} levels")));
        }
        match self.peek() {
            Some(b'{') => {
                self.bump();
                Ok(Value::Group(self.settings(depth + 1, Some(b'}'))?))
            }
            Some(b'(') => {
                self.bump();
                Ok(Value::List(self.elements(depth + 1, b')')?))
            }
            Some(b'[') => {
                self.bump();
                let items = self.elements(depth + 1, b']')?;
                if items
                    .iter()
                    .any(|(_, v)| matches!(v, Value::List(_) | Value::Group(_)))
                {
                    return Err(self.error("an array [ ] holds scalars only"));
                }
                Ok(Value::List(items))
            }
            Some(b'"') => self.string(),
            _ => self.scalar(),
        }
    }

    fn elements(&mut self, depth: usize, close: u8) -> Result<Vec<(usize, Value)>, ImportError> {
        let mut out = Vec::new();
        loop {
            self.skip()?;
            match self.peek() {
                None => return Err(self.error(format!("missing '{}'", close as char))),
                Some(b) if b == close => {
                    self.bump();
                    return Ok(out);
                }
                _ => {}
            }
            let line = self.line;
            out.push((line, self.value(depth)?));
            self.skip()?;
            match self.peek() {
                Some(b',') => {
                    self.bump();
                }
                Some(b) if b == close => {}
                _ => return Err(self.error(format!("expected ',' or '{}'", close as char))),
            }
        }
    }

    /// One or more adjacent `"…"` literals, joined.
    fn string(&mut self) -> Result<Value, ImportError> {
        let mut out = Vec::new();
        while self.peek() == Some(b'"') {
            let start = self.line;
            self.bump();
            loop {
                match self.bump() {
                    None => {
                        return Err(ImportError::Syntax {
                            line: start,
                            message: "unterminated string".into(),
                        });
                    }
                    Some(b'"') => break,
                    Some(b'\\') => out.push(self.escape()?),
                    Some(b) => out.push(b),
                }
            }
            self.skip()?;
        }
        String::from_utf8(out)
            .map(Value::Str)
            .map_err(|_| self.error("string is not UTF-8"))
    }

    fn escape(&mut self) -> Result<u8, ImportError> {
        Ok(match self.bump() {
            Some(b'n') => b'\n',
            Some(b'r') => b'\r',
            Some(b't') => b'\t',
            Some(b'f') => 0x0c,
            Some(b'\\') => b'\\',
            Some(b'"') => b'"',
            Some(b'x') => {
                let hex = self.s.get(self.at..self.at + 2).unwrap_or_default();
                let v = std::str::from_utf8(hex)
                    .ok()
                    .filter(|h| h.len() == 2 && h.bytes().all(|b| b.is_ascii_hexdigit()))
                    .and_then(|h| u8::from_str_radix(h, 16).ok())
                    .ok_or_else(|| self.error("\\x needs two hex digits"))?;
                self.at += 2;
                v
            }
            other => {
                let c = other.map(|b| b as char).unwrap_or(' ');
                return Err(self.error(format!("unknown escape \\{c}")));
            }
        })
    }

    fn scalar(&mut self) -> Result<Value, ImportError> {
        let start = self.at;
        while let Some(b) = self.peek() {
            if b.is_ascii_alphanumeric() || matches!(b, b'+' | b'-' | b'.' | b'_') {
                self.bump();
            } else {
                break;
            }
        }
        let word = std::str::from_utf8(&self.s[start..self.at]).unwrap_or_default();
        scalar_of(word).ok_or_else(|| {
            if word.is_empty() {
                let found = self
                    .peek()
                    .map(|b| (b as char).to_string())
                    .unwrap_or_default();
                self.error(format!("expected a value, found {found:?}"))
            } else {
                self.error(format!(
                    "{word:?} is not a value (strings need double quotes)"
                ))
            }
        })
    }
}

fn scalar_of(word: &str) -> Option<Value> {
    if word.eq_ignore_ascii_case("true") {
        return Some(Value::Bool(true));
    }
    if word.eq_ignore_ascii_case("false") {
        return Some(Value::Bool(false));
    }
    let digits = word
        .strip_suffix("LL")
        .or_else(|| word.strip_suffix('L'))
        .unwrap_or(word);
    let (neg, body) = match digits.strip_prefix('-') {
        Some(b) => (true, b),
        None => (false, digits.strip_prefix('+').unwrap_or(digits)),
    };
    let digits_only = |t: &str, hex: bool| {
        !t.is_empty()
            && t.bytes().all(|b| {
                if hex {
                    b.is_ascii_hexdigit()
                } else {
                    b.is_ascii_digit()
                }
            })
    };
    let magnitude = match body.strip_prefix("0x").or_else(|| body.strip_prefix("0X")) {
        Some(hex) if digits_only(hex, true) => i128::from_str_radix(hex, 16).ok(),
        Some(_) => None,
        None if digits_only(body, false) => body.parse::<i128>().ok(),
        None => None,
    };
    if let Some(m) = magnitude {
        return i64::try_from(if neg { -m } else { m }).ok().map(Value::Int);
    }
    let looks_float = word.bytes().any(|b| matches!(b, b'.' | b'e' | b'E'))
        && word
            .bytes()
            .next()
            .is_some_and(|b| b.is_ascii_digit() || matches!(b, b'-' | b'+' | b'.'));
    looks_float
        .then(|| word.parse().ok().map(Value::Float))
        .flatten()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn groups_lists_strings_and_comments() {
        let text = r#"
# comment
datadir="/var/lib/proxysql"   // trailing
admin_variables =
{
    admin_credentials="admin:admin;" "radmin:radmin"
    mysql_ifaces: "0.0.0.0:6032";
    refresh_interval=2000L
    ok=TRUE
}
/* block
   comment */
mysql_servers = ( { address="127.0.0.1", port=3306, hostgroup=0, weight=0x10 }, { address="db\x32" } );
ratio = 1.5e1
flags = [1, 2, 3]
"#;
        let s = parse(text).unwrap();
        assert_eq!(s[0].name, "datadir");
        assert_eq!(s[0].value, Value::Str("/var/lib/proxysql".into()));
        assert_eq!(s[0].line, 3);
        let Value::Group(admin) = &s[1].value else {
            panic!()
        };
        assert_eq!(
            admin[0].value,
            Value::Str("admin:admin;radmin:radmin".into())
        );
        assert_eq!(admin[2].value, Value::Int(2000));
        assert_eq!(admin[3].value, Value::Bool(true));
        let Value::List(servers) = &s[2].value else {
            panic!()
        };
        assert_eq!(servers[0].0, 13);
        let Value::Group(second) = &servers[1].1 else {
            panic!()
        };
        assert_eq!(second[0].value, Value::Str("db2".into()));
        let Value::Group(first) = &servers[0].1 else {
            panic!()
        };
        assert_eq!(first[3].value, Value::Int(16));
        assert_eq!(s[3].value, Value::Float(15.0));
        assert_eq!(
            s[4].value,
            Value::List(vec![
                (15, Value::Int(1)),
                (15, Value::Int(2)),
                (15, Value::Int(3))
            ])
        );
    }

    #[test]
    fn errors_name_the_line() {
        for (text, line) in [
            ("a = 1;\nb = \"open\n", 2),
            ("a = {\n b = 1;\n", 3),
            ("a = 1;\n\nb = bare;", 3),
            ("x = /* never closed", 1),
            ("@include \"other.cnf\"", 1),
        ] {
            match parse(text) {
                Err(ImportError::Syntax { line: l, .. }) => assert_eq!(l, line, "{text:?}"),
                other => panic!("{text:?}: {other:?}"),
            }
        }
        // libconfig refuses a name set twice in one group.
        match parse("g = {\n a = 1;\n a = 2;\n}") {
            Err(ImportError::Syntax { line: 3, message }) => {
                assert!(message.contains("line 2"), "{message}")
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(
            parse("m = -9223372036854775808").unwrap()[0].value,
            Value::Int(i64::MIN)
        );
        assert!(parse("h = 0x-5").is_err());
        assert!(parse("s = \"\\x+f\"").is_err());
        let deep = "a = ".to_string() + &"(".repeat(100) + &")".repeat(100);
        assert!(matches!(parse(&deep), Err(ImportError::Syntax { .. })));
    }
}

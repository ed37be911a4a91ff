//! The `SET` statement parser: which session state a `SET` changes, in a form that can be
//! replayed on another backend connection. Anything it cannot read with certainty is reported as
//! [`SetParse::Unknown`], and the session is then pinned to its connection (never silently
//! routed elsewhere).

use super::lexer::{Lexer, Tok};

/// The value assigned to a session variable.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum SetValue {
    /// A literal (number, quoted string, word such as `ON`, `DEFAULT`), as SQL text to replay.
    Literal(String),
    /// An expression: the resulting value must be read back from the server.
    Expression,
}

/// One assignment of a `SET`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum SetItem {
    /// `SET [SESSION] name = value` (lower-cased name).
    Session {
        /// Variable name.
        name: String,
        /// Value.
        value: SetValue,
    },
    /// `SET GLOBAL ...` / `SET PERSIST ...`: server-wide, no session state.
    Global,
    /// `SET @user = ...`.
    UserVar,
    /// `SET NAMES cs [COLLATE coll]`; `None` charset means `DEFAULT`.
    Names {
        /// Character set.
        charset: Option<String>,
        /// Collation.
        collation: Option<String>,
    },
    /// `SET CHARACTER SET cs` / `SET CHARSET cs`.
    CharacterSet(Option<String>),
    /// `SET SESSION TRANSACTION ...`: isolation and/or access mode for the session.
    SessionTransaction {
        /// `READ COMMITTED`, ... (upper case, words separated by one space).
        isolation: Option<String>,
        /// `Some(true)` for READ ONLY.
        read_only: Option<bool>,
    },
    /// `SET TRANSACTION ...` without a scope: applies to the next transaction only.
    NextTransaction,
}

/// The outcome of parsing a `SET`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum SetParse {
    /// Not a SET statement.
    NotSet,
    /// Parsed with certainty.
    Items(Vec<SetItem>),
    /// A SET Sluice cannot read with certainty (`SET PASSWORD`, `SET STATEMENT ... FOR`, ...).
    Unknown,
}

fn unquote(s: &str) -> String {
    let t = s.trim();
    ['\'', '"']
        .iter()
        .find_map(|q| t.strip_prefix(*q).and_then(|r| r.strip_suffix(*q)))
        .unwrap_or(t)
        .to_string()
}

/// Parses `sql` as a SET statement.
pub(crate) fn parse_set(sql: &str) -> SetParse {
    let toks: Vec<Tok<'_>> = Lexer::new(sql).collect();
    let mut toks = toks.as_slice();
    if toks.last().is_some_and(|t| t.is_punct(";")) {
        toks = &toks[..toks.len() - 1];
    }
    let Some((first, rest)) = toks.split_first() else {
        return SetParse::NotSet;
    };
    if !first.is_keyword("SET") {
        return SetParse::NotSet;
    }
    match parse_items(rest) {
        Some(items) => SetParse::Items(items),
        None => SetParse::Unknown,
    }
}

fn parse_items(mut t: &[Tok<'_>]) -> Option<Vec<SetItem>> {
    if t.first().is_some_and(|x| {
        x.is_keyword("PASSWORD")
            || x.is_keyword("ROLE")
            || x.is_keyword("STATEMENT")
            || x.is_keyword("DEFAULT")
    }) {
        return None;
    }
    let mut items = Vec::new();
    // A leading scope applies to the first assignment and, per MySQL, to those without their own.
    let mut scope = Scope::Session;
    if let Some(s) = t.first().and_then(scope_of) {
        scope = s;
        t = &t[1..];
        if t.first().is_some_and(|x| x.is_keyword("TRANSACTION")) {
            return transaction(&t[1..], scope).map(|i| vec![i]);
        }
    } else if t.first().is_some_and(|x| x.is_keyword("TRANSACTION")) {
        return transaction(&t[1..], Scope::Next).map(|i| vec![i]);
    }
    loop {
        let (item, rest) = assignment(t, scope)?;
        items.push(item);
        match rest.split_first() {
            None => return Some(items),
            Some((c, r)) if c.is_punct(",") => t = r,
            _ => return None,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Scope {
    Session,
    Global,
    Next,
}

fn scope_of(t: &Tok<'_>) -> Option<Scope> {
    if t.is_keyword("SESSION") || t.is_keyword("LOCAL") {
        Some(Scope::Session)
    } else if t.is_keyword("GLOBAL") || t.is_keyword("PERSIST") || t.is_keyword("PERSIST_ONLY") {
        Some(Scope::Global)
    } else {
        None
    }
}

fn transaction(t: &[Tok<'_>], scope: Scope) -> Option<SetItem> {
    let mut isolation = None;
    let mut read_only = None;
    let mut i = 0;
    while i < t.len() {
        if t[i].is_keyword("ISOLATION") && t.get(i + 1)?.is_keyword("LEVEL") {
            let a = t.get(i + 2)?;
            let level = if a.is_keyword("READ") {
                let b = t.get(i + 3)?;
                i += 4;
                if b.is_keyword("COMMITTED") {
                    "READ COMMITTED"
                } else if b.is_keyword("UNCOMMITTED") {
                    "READ UNCOMMITTED"
                } else {
                    return None;
                }
            } else if a.is_keyword("REPEATABLE") && t.get(i + 3)?.is_keyword("READ") {
                i += 4;
                "REPEATABLE READ"
            } else if a.is_keyword("SERIALIZABLE") {
                i += 3;
                "SERIALIZABLE"
            } else {
                return None;
            };
            isolation = Some(level.to_string());
        } else if t[i].is_keyword("READ") {
            let b = t.get(i + 1)?;
            read_only = Some(if b.is_keyword("ONLY") {
                true
            } else if b.is_keyword("WRITE") {
                false
            } else {
                return None;
            });
            i += 2;
        } else {
            return None;
        }
        if i < t.len() {
            if !t[i].is_punct(",") {
                return None;
            }
            i += 1;
        }
    }
    if isolation.is_none() && read_only.is_none() {
        return None;
    }
    Some(match scope {
        Scope::Session => SetItem::SessionTransaction {
            isolation,
            read_only,
        },
        Scope::Global => SetItem::Global,
        Scope::Next => SetItem::NextTransaction,
    })
}

/// Splits off one value expression: tokens up to a top-level `,`.
fn value<'t, 'a>(t: &'t [Tok<'a>]) -> Option<(SetValue, &'t [Tok<'a>])> {
    let mut depth = 0i32;
    let mut end = t.len();
    for (i, tok) in t.iter().enumerate() {
        if tok.is_punct("(") {
            depth += 1;
        } else if tok.is_punct(")") {
            depth -= 1;
        } else if tok.is_punct(",") && depth == 0 {
            end = i;
            break;
        }
    }
    let expr = &t[..end];
    let v = match expr {
        [] => return None,
        [Tok::Num(n)] => SetValue::Literal(n.to_string()),
        [Tok::Punct("-"), Tok::Num(n)] => SetValue::Literal(format!("-{n}")),
        [Tok::Str(s)] => SetValue::Literal(s.to_string()),
        [Tok::Word(w)] => SetValue::Literal(w.to_string()),
        _ => SetValue::Expression,
    };
    Some((v, &t[end..]))
}

fn assignment<'t, 'a>(t: &'t [Tok<'a>], default_scope: Scope) -> Option<(SetItem, &'t [Tok<'a>])> {
    let (first, rest) = t.split_first()?;
    if first.is_keyword("NAMES") {
        let (cs, mut rest) = rest.split_first()?;
        let charset = if cs.is_keyword("DEFAULT") {
            None
        } else {
            Some(unquote(cs_text(cs)?))
        };
        let mut collation = None;
        if rest.first().is_some_and(|x| x.is_keyword("COLLATE")) {
            let c = rest.get(1)?;
            collation = Some(unquote(cs_text(c)?));
            rest = &rest[2..];
        }
        return Some((SetItem::Names { charset, collation }, rest));
    }
    if first.is_keyword("CHARSET")
        || (first.is_keyword("CHARACTER") && rest.first().is_some_and(|x| x.is_keyword("SET")))
    {
        let rest = if first.is_keyword("CHARSET") {
            rest
        } else {
            &rest[1..]
        };
        let (cs, rest) = rest.split_first()?;
        let charset = if cs.is_keyword("DEFAULT") {
            None
        } else {
            Some(unquote(cs_text(cs)?))
        };
        return Some((SetItem::CharacterSet(charset), rest));
    }
    // Scope keyword before this assignment's name.
    let (scope, t) = match scope_of(first) {
        Some(s) if rest.first().is_some_and(|x| x.name().is_some()) => (s, rest),
        _ => (default_scope, t),
    };
    let (target, rest) = t.split_first()?;
    let (is_user, scope, name) = match target {
        Tok::UserVar(_) => (true, scope, String::new()),
        Tok::SysVar(v) => {
            let lower = v.to_ascii_lowercase();
            if let Some(n) = lower.strip_prefix("global.") {
                (false, Scope::Global, n.to_string())
            } else if let Some(n) = lower
                .strip_prefix("session.")
                .or_else(|| lower.strip_prefix("local."))
            {
                (false, Scope::Session, n.to_string())
            } else {
                (false, scope, lower)
            }
        }
        t => (false, scope, t.name()?.to_ascii_lowercase()),
    };
    let (op, rest) = rest.split_first()?;
    if !(op.is_punct("=") || op.is_punct(":=")) {
        return None;
    }
    let (v, rest) = value(rest)?;
    let item = if is_user {
        SetItem::UserVar
    } else if scope == Scope::Global {
        SetItem::Global
    } else {
        if name.is_empty() || name.contains('.') {
            return None;
        }
        SetItem::Session { name, value: v }
    };
    Some((item, rest))
}

fn cs_text<'a>(t: &Tok<'a>) -> Option<&'a str> {
    match t {
        Tok::Str(w) => Some(w),
        _ => t.name(),
    }
}

#[cfg(test)]
mod tests;

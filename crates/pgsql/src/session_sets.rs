//! Session state under transaction pooling: which statements pin a session to its server
//! connection, and the `SET`/`RESET` values Sluice replays (only the differences) when the
//! session's next transaction lands on another connection.

use std::collections::BTreeMap;

/// One change to session variables.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Change {
    /// `SET name TO value` (value as the client wrote it).
    Set(String, String),
    /// `RESET name` / `SET name TO DEFAULT`.
    Reset(String),
    /// `RESET ALL`.
    ResetAll,
}

/// What a client statement means for pooling.
#[derive(Debug, PartialEq, Eq)]
pub enum Effect {
    /// Nothing beyond its transaction.
    None,
    /// Session state Sluice cannot move: keep the connection (the reason is shown to admins).
    Pin(&'static str),
    /// A session variable change Sluice tracks and replays.
    Track(Change),
}

fn is_name(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 63
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'.')
}

/// Classifies the SQL text of a Query (or a Parse, with `trackable` false: an extended-protocol
/// statement may run any number of times later, so its SETs pin instead).
pub fn classify(sql: &[u8], trackable: bool) -> Effect {
    // Only SET, RESET and DISCARD matter: anything else is decided without allocating.
    let first = sql
        .iter()
        .position(|b| !b.is_ascii_whitespace())
        .unwrap_or(sql.len());
    let verb = sql.get(first..first + 3).unwrap_or(&[]);
    if !(verb.eq_ignore_ascii_case(b"set")
        || verb.eq_ignore_ascii_case(b"res")
        || verb.eq_ignore_ascii_case(b"dis"))
    {
        return Effect::None;
    }
    let head = &sql[..sql.len().min(512)];
    let text = String::from_utf8_lossy(head);
    let trimmed = text.trim_start();
    let lower = trimmed.to_ascii_lowercase();
    let starts = |w: &str| lower.starts_with(w);
    if starts("set local") || starts("set transaction") || starts("set constraints") {
        return Effect::None;
    }
    if trackable && single_statement(trimmed).is_some_and(|s| s.eq_ignore_ascii_case("discard all"))
    {
        return Effect::Track(Change::ResetAll);
    }
    let session_sql = starts("set ") || starts("set\t") || starts("reset");
    if !session_sql {
        return Effect::None;
    }
    match (trackable, single_statement(&String::from_utf8_lossy(sql))) {
        (true, Some(stmt)) => {
            parse_change(stmt).map_or(Effect::Pin("session state"), Effect::Track)
        }
        _ => Effect::Pin("session state"),
    }
}

/// The statement when `sql` holds exactly one (a trailing `;` allowed, no others anywhere).
fn single_statement(sql: &str) -> Option<&str> {
    let s = sql
        .trim_end_matches('\0')
        .trim()
        .trim_end_matches(';')
        .trim_end();
    (!s.contains(';')).then_some(s)
}

fn parse_change(stmt: &str) -> Option<Change> {
    let mut words = stmt.split_whitespace();
    let first = words.next()?.to_ascii_lowercase();
    if first == "reset" {
        let name = words.next()?.to_ascii_lowercase();
        if words.next().is_some() {
            return None;
        }
        return match name.as_str() {
            "all" => Some(Change::ResetAll),
            "role" | "session" => None,
            n if is_name(n) => Some(Change::Reset(n.to_string())),
            _ => None,
        };
    }
    // SET [SESSION] name { TO | = } value | SET [SESSION] TIME ZONE value
    let rest = stmt[first.len()..].trim_start();
    let rest = match rest.get(..8) {
        Some(w) if w.eq_ignore_ascii_case("session ") => rest[8..].trim_start(),
        _ => rest,
    };
    let lower = rest.to_ascii_lowercase();
    let (name, value) = if lower.starts_with("time zone") {
        ("timezone".to_string(), rest[9..].trim())
    } else {
        let end = rest
            .find(|c: char| c.is_whitespace() || c == '=')
            .unwrap_or(rest.len());
        let name = rest[..end].to_ascii_lowercase();
        let after = rest[end..].trim_start();
        let value = if let Some(v) = after.strip_prefix('=') {
            v
        } else if after
            .get(..3)
            .is_some_and(|w| w.eq_ignore_ascii_case("to "))
        {
            &after[3..]
        } else {
            return None;
        };
        (name, value.trim())
    };
    // Role and authorization changes are security state: pin rather than replay.
    if !is_name(&name) || matches!(name.as_str(), "role" | "session" | "authorization") {
        return None;
    }
    if value.is_empty() {
        return None;
    }
    if value.eq_ignore_ascii_case("default") {
        return Some(Change::Reset(name));
    }
    Some(Change::Set(name, value.to_string()))
}

/// Applies a change to a set of variables.
pub fn apply(vars: &mut BTreeMap<String, String>, change: &Change) {
    match change {
        Change::Set(n, v) => {
            vars.insert(n.clone(), v.clone());
        }
        Change::Reset(n) => {
            vars.remove(n);
        }
        Change::ResetAll => vars.clear(),
    }
}

/// The SQL that turns a connection's variables `conn` into the session's `want`; None when
/// they already match.
pub fn replay_sql(
    want: &BTreeMap<String, String>,
    conn: &BTreeMap<String, String>,
) -> Option<String> {
    let mut parts = Vec::new();
    for n in conn.keys().filter(|n| !want.contains_key(*n)) {
        parts.push(format!("RESET {n}"));
    }
    for (n, v) in want.iter().filter(|(n, v)| conn.get(*n) != Some(*v)) {
        parts.push(format!("SET {n} TO {v}"));
    }
    (!parts.is_empty()).then(|| parts.join("; "))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(n: &str, v: &str) -> Effect {
        Effect::Track(Change::Set(n.into(), v.into()))
    }

    #[test]
    fn classifies_session_statements() {
        assert_eq!(
            classify(b"SET search_path TO a, b;\0", true),
            set("search_path", "a, b")
        );
        assert_eq!(
            classify(b"set SESSION work_mem = '8MB'\0", true),
            set("work_mem", "'8MB'")
        );
        assert_eq!(
            classify(b"SET TIME ZONE 'UTC'", true),
            set("timezone", "'UTC'")
        );
        assert_eq!(
            classify(b"SET x.y TO DEFAULT", true),
            Effect::Track(Change::Reset("x.y".into()))
        );
        assert_eq!(
            classify(b"RESET ALL", true),
            Effect::Track(Change::ResetAll)
        );
        assert_eq!(
            classify(b"DISCARD ALL;\0", true),
            Effect::Track(Change::ResetAll)
        );
        assert_eq!(
            classify(b"reset work_mem", true),
            Effect::Track(Change::Reset("work_mem".into()))
        );
        assert_eq!(classify(b"SET LOCAL work_mem = 1", true), Effect::None);
        assert_eq!(classify(b"SELECT 1", true), Effect::None);
        assert_eq!(
            classify(b"SET a = 1; SELECT 2", true),
            Effect::Pin("session state")
        );
        assert_eq!(
            classify(b"SET ROLE admin", true),
            Effect::Pin("session state")
        );
        assert_eq!(
            classify(b"SET work_mem = 1", false),
            Effect::Pin("session state")
        );
        // LISTEN, temporary tables, advisory locks, cursors: `PinSet` follows those.
        assert_eq!(classify(b"LISTEN ch", true), Effect::None);
        // Multi-byte text right after the name must not split a character.
        assert_eq!(
            classify("SET x éé".as_bytes(), true),
            Effect::Pin("session state")
        );
        assert_eq!(classify("SET x = 'é'".as_bytes(), true), set("x", "'é'"));
        assert_eq!(classify(b"CREATE TEMP TABLE t (a int)", true), Effect::None);
    }

    #[test]
    fn replays_only_differences() {
        let mut want = BTreeMap::new();
        apply(&mut want, &Change::Set("a".into(), "1".into()));
        apply(&mut want, &Change::Set("b".into(), "2".into()));
        let mut conn = BTreeMap::new();
        apply(&mut conn, &Change::Set("b".into(), "2".into()));
        apply(&mut conn, &Change::Set("c".into(), "3".into()));
        assert_eq!(
            replay_sql(&want, &conn).as_deref(),
            Some("RESET c; SET a TO 1")
        );
        assert_eq!(replay_sql(&want, &want), None);
        apply(&mut want, &Change::ResetAll);
        assert!(want.is_empty());
    }
}

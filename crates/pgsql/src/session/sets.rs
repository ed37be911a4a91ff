//! Session state under transaction pooling: which statements pin a session to its server
//! connection, and the `SET`/`RESET` values Sluice replays (only the differences) when the
//! session's next transaction lands on another connection.

use std::collections::BTreeMap;

/// One change to session variables.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Change {
    /// `SET name TO value` (value as the client wrote it).
    Set(String, String),
    /// `RESET name` / `SET name TO DEFAULT`.
    Reset(String),
    /// `RESET ALL`.
    ResetAll,
}

/// What a client statement means for pooling.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Effect {
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

/// Classifies the SQL text of a Query or an unnamed Parse; with `trackable` false (a named
/// Parse: the statement may run any number of times later) its SETs pin instead.
pub(crate) fn classify(sql: &[u8], trackable: bool) -> Effect {
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
        let mut name = words.next()?.to_ascii_lowercase();
        // `RESET TIME ZONE` is `RESET timezone`.
        if name == "time" && words.next().is_some_and(|w| w.eq_ignore_ascii_case("zone")) {
            name = "timezone".into();
        }
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
    // `SET TIME ZONE LOCAL` is `SET TIME ZONE DEFAULT`, which is `RESET timezone`.
    if value.eq_ignore_ascii_case("default")
        || (name == "timezone" && value.eq_ignore_ascii_case("local"))
    {
        return Some(Change::Reset(name));
    }
    Some(Change::Set(name, value.to_string()))
}

/// The statement a `SET name TO value` replays as (value as the client wrote it).
fn set_statement(name: &str, value: &str) -> String {
    // `SET TIME ZONE` takes what `SET timezone TO` does not: `INTERVAL '-08:00' HOUR TO MINUTE`
    // (pg_regress horology), `LOCAL`.
    if name == "timezone" {
        return format!("SET TIME ZONE {value}");
    }
    format!("SET {name} TO {value}")
}

/// GUCs whose list values `SET name TO 'a,b'` would quote as one element (GUC_LIST_QUOTE).
const LIST_QUOTED: [&str; 4] = [
    "search_path",
    "temp_tablespaces",
    "session_preload_libraries",
    "local_preload_libraries",
];

/// The statement that gives `name` the raw string `value`, as a startup parameter does. `SET`
/// (a utility statement, cheaper than a query) for plain names; `set_config`, which takes the
/// value as it is, for the list GUCs `SET` would re-quote and for names that are not plain
/// identifiers. `E''` literals read the same whatever `standard_conforming_strings` is.
pub(crate) fn config_statement(name: &str, value: &str) -> String {
    fn literal(s: &str) -> String {
        let mut out = String::with_capacity(s.len() + 3);
        out.push_str("E'");
        for c in s.chars() {
            match c {
                '\\' => out.push_str("\\\\"),
                '\'' => out.push_str("''"),
                c => out.push(c),
            }
        }
        out.push('\'');
        out
    }
    if is_name(name) && !LIST_QUOTED.contains(&name) {
        return format!("SET {name} TO {}", literal(value));
    }
    format!(
        "SELECT pg_catalog.set_config({}, {}, false)",
        literal(name),
        literal(value)
    )
}

/// Applies a change to the variables a server connection carries (name → the statement that
/// set it; a name absent is at the connection's neutral startup value).
pub(crate) fn apply(vars: &mut BTreeMap<String, String>, change: &Change) {
    match change {
        Change::Set(n, v) => {
            vars.insert(n.clone(), set_statement(n, v));
        }
        Change::Reset(n) => {
            vars.remove(n);
        }
        Change::ResetAll => vars.clear(),
    }
}

/// A session's variables: the settings of its startup parameters (what `RESET` returns to, as
/// on a direct connection) and what it wants now, each as name → the statement that sets it.
#[derive(Debug, Clone, Default)]
pub(crate) struct SessionVars {
    defaults: BTreeMap<String, String>,
    want: BTreeMap<String, String>,
}

impl SessionVars {
    /// A session whose startup parameters asked for `settings` (raw values).
    pub(crate) fn new(settings: &BTreeMap<String, String>) -> Self {
        let defaults: BTreeMap<String, String> = settings
            .iter()
            .map(|(n, v)| (n.clone(), config_statement(n, v)))
            .collect();
        SessionVars {
            want: defaults.clone(),
            defaults,
        }
    }

    /// What the session's server connection must carry: name → statement.
    pub(crate) fn want(&self) -> &BTreeMap<String, String> {
        &self.want
    }

    /// Applies a committed change; `RESET` returns to the startup value, if there was one.
    pub(crate) fn apply(&mut self, change: &Change) {
        match change {
            Change::Set(n, v) => {
                self.want.insert(n.clone(), set_statement(n, v));
            }
            Change::Reset(n) => match self.defaults.get(n) {
                Some(d) => {
                    self.want.insert(n.clone(), d.clone());
                }
                None => {
                    self.want.remove(n);
                }
            },
            Change::ResetAll => self.want.clone_from(&self.defaults),
        }
    }
}

/// The SQL that turns a connection's variables `conn` into the session's `want`; None when
/// they already match.
pub(crate) fn replay_sql(
    want: &BTreeMap<String, String>,
    conn: &BTreeMap<String, String>,
) -> Option<String> {
    let mut parts = Vec::new();
    for n in conn.keys().filter(|n| !want.contains_key(*n)) {
        parts.push(format!("RESET {n}"));
    }
    for (_, statement) in want.iter().filter(|(n, v)| conn.get(*n) != Some(*v)) {
        parts.push(statement.clone());
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
        // Replayed in the form that accepts every value `SET TIME ZONE` does.
        let interval = "SET TIME ZONE INTERVAL '-08:00' HOUR TO MINUTE";
        match classify(interval.as_bytes(), true) {
            Effect::Track(c) => {
                let mut conn = BTreeMap::new();
                apply(&mut conn, &c);
                assert_eq!(conn["timezone"], interval);
            }
            other => panic!("{other:?}"),
        }
        // pg_regress horology: these return to the session's startup time zone, not the
        // server's, and do not pin.
        for reset in [
            "RESET TIME ZONE",
            "reset time zone;",
            "SET TIME ZONE DEFAULT",
            "SET TIME ZONE LOCAL",
        ] {
            assert_eq!(
                classify(reset.as_bytes(), true),
                Effect::Track(Change::Reset("timezone".into())),
                "{reset}"
            );
        }
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
        let mut want = SessionVars::default();
        want.apply(&Change::Set("a".into(), "1".into()));
        want.apply(&Change::Set("b".into(), "2".into()));
        let mut conn = BTreeMap::new();
        apply(&mut conn, &Change::Set("b".into(), "2".into()));
        apply(&mut conn, &Change::Set("c".into(), "3".into()));
        assert_eq!(
            replay_sql(want.want(), &conn).as_deref(),
            Some("RESET c; SET a TO 1")
        );
        assert_eq!(replay_sql(want.want(), want.want()), None);
        want.apply(&Change::ResetAll);
        assert!(want.want().is_empty());
    }

    #[test]
    fn reset_returns_to_the_startup_value() {
        let startup = BTreeMap::from([
            ("search_path".to_string(), "foo,public".to_string()),
            ("application_name".to_string(), "it's\\mine".to_string()),
        ]);
        let mut vars = SessionVars::new(&startup);
        let search_path = "SELECT pg_catalog.set_config(E'search_path', E'foo,public', false)";
        assert_eq!(
            vars.want().get("search_path").map(String::as_str),
            Some(search_path)
        );
        assert_eq!(
            vars.want().get("application_name").map(String::as_str),
            Some("SET application_name TO E'it''s\\\\mine'")
        );
        // A name that is not a plain identifier is never spliced into SQL.
        let odd = config_statement("x;drop", "v");
        assert_eq!(odd, "SELECT pg_catalog.set_config(E'x;drop', E'v', false)");
        vars.apply(&Change::Set("search_path".into(), "bar".into()));
        vars.apply(&Change::Set("work_mem".into(), "'8MB'".into()));
        assert_eq!(
            vars.want().get("search_path").map(String::as_str),
            Some("SET search_path TO bar")
        );
        vars.apply(&Change::Reset("search_path".into()));
        assert_eq!(
            vars.want().get("search_path").map(String::as_str),
            Some(search_path)
        );
        vars.apply(&Change::ResetAll);
        assert_eq!(vars.want().len(), 2);
        assert!(!vars.want().contains_key("work_mem"));
        // A fresh (neutral) connection gets every startup setting.
        let sql = replay_sql(vars.want(), &BTreeMap::new()).expect("replay");
        assert!(sql.contains(search_path), "{sql}");
    }
}

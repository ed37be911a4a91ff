//! Replayable session state: what a client has set (schema, character set, session variables,
//! transaction characteristics) and what a backend connection currently has. Bringing a
//! connection to a client's state sends only the differences.

use std::collections::BTreeMap;

/// Session state that can be applied to any backend connection.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SessionState {
    /// The schema the session selected (`USE`, COM_INIT_DB), replayed on a connection that has
    /// another.
    pub schema: Option<String>,
    /// The last `SET NAMES ...` / `SET CHARACTER SET ...`, as SQL to replay.
    pub charset_cmd: Option<String>,
    /// Session variables: lower-case name → SQL literal (`'TRADITIONAL'`, `500`, `DEFAULT`).
    pub vars: BTreeMap<String, String>,
    /// `SET SESSION TRANSACTION ISOLATION LEVEL ...` level, e.g. `READ COMMITTED`.
    pub isolation: Option<String>,
    /// `SET SESSION TRANSACTION READ ONLY|WRITE`.
    pub read_only: Option<bool>,
    /// SQL-level prepared statements (`PREPARE name FROM '...'`): lower-case name → the
    /// statement's string literal as the client wrote it, re-prepared on a connection that
    /// lacks it, deallocated on one that has a name the session does not.
    pub prepared: BTreeMap<String, String>,
}

/// Variables a `SET NAMES` / `SET CHARACTER SET` overwrites.
const CHARSET_VARS: &[&str] = &[
    "character_set_client",
    "character_set_results",
    "character_set_connection",
    "collation_connection",
];

impl SessionState {
    /// Records `SET NAMES` / `SET CHARACTER SET` (replacing the variables it overwrites).
    pub fn set_charset_cmd(&mut self, sql: String) {
        for v in CHARSET_VARS {
            self.vars.remove(*v);
        }
        self.charset_cmd = Some(sql);
    }

    /// Records a session variable; `DEFAULT` forgets it (the server's global value applies).
    pub fn set_var(&mut self, name: &str, literal: &str) {
        if literal.eq_ignore_ascii_case("DEFAULT") {
            self.vars.remove(name);
        } else {
            self.vars.insert(name.to_string(), literal.to_string());
        }
    }

    /// The state without a schema (what `COM_RESET_CONNECTION` leaves behind, schema aside).
    pub fn reset_keep_schema(&self) -> SessionState {
        SessionState {
            schema: self.schema.clone(),
            ..SessionState::default()
        }
    }
}

/// How to bring a connection from one state to another.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct StatePlan {
    /// Reset the connection first (something must go back to its default that no SET can).
    pub reset_first: bool,
    /// `COM_INIT_DB` to this schema.
    pub init_db: Option<String>,
    /// SQL statements to run, in order.
    pub statements: Vec<String>,
}

impl StatePlan {
    /// True when nothing has to be sent.
    pub(crate) fn is_empty(&self) -> bool {
        !self.reset_first && self.init_db.is_none() && self.statements.is_empty()
    }
}

/// Plans the commands that turn a connection in state `have` into state `want`.
pub(crate) fn plan(have: &SessionState, want: &SessionState) -> StatePlan {
    let mut p = StatePlan::default();
    // Going back to "never set" for the character set or transaction characteristics needs the
    // connection's defaults: a reset gives exactly those.
    let base = if (have.charset_cmd.is_some() && want.charset_cmd.is_none())
        || (have.isolation.is_some() && want.isolation.is_none())
        || (have.read_only.is_some() && want.read_only.is_none())
    {
        p.reset_first = true;
        have.reset_keep_schema()
    } else {
        have.clone()
    };
    if want.schema.is_some() && want.schema != base.schema {
        p.init_db = want.schema.clone();
    }
    if want.charset_cmd.is_some() && want.charset_cmd != base.charset_cmd {
        p.statements.extend(want.charset_cmd.clone());
    }
    let mut assigns: Vec<String> = Vec::new();
    for (k, v) in &want.vars {
        if base.vars.get(k) != Some(v) {
            assigns.push(format!("{k} = {v}"));
        }
    }
    for k in base.vars.keys() {
        if !want.vars.contains_key(k) {
            assigns.push(format!("{k} = DEFAULT"));
        }
    }
    if !assigns.is_empty() {
        p.statements
            .push(format!("SET SESSION {}", assigns.join(", ")));
    }
    let mut txn = Vec::new();
    if want.isolation.is_some() && want.isolation != base.isolation {
        txn.push(format!(
            "ISOLATION LEVEL {}",
            want.isolation.as_deref().unwrap_or_default()
        ));
    }
    if want.read_only.is_some() && want.read_only != base.read_only {
        txn.push(if want.read_only == Some(true) {
            "READ ONLY".into()
        } else {
            "READ WRITE".into()
        });
    }
    if !txn.is_empty() {
        p.statements
            .push(format!("SET SESSION TRANSACTION {}", txn.join(", ")));
    }
    // After the schema and the character set, which the statement's text is read under.
    for name in base.prepared.keys() {
        if !want.prepared.contains_key(name) {
            p.statements.push(format!("DEALLOCATE PREPARE `{name}`"));
        }
    }
    for (name, text) in &want.prepared {
        if base.prepared.get(name) != Some(text) {
            p.statements.push(format!("PREPARE `{name}` FROM {text}"));
        }
    }
    p
}

#[cfg(test)]
mod tests {
    use super::*;

    fn st(schema: &str) -> SessionState {
        SessionState {
            schema: Some(schema.into()),
            ..Default::default()
        }
    }

    #[test]
    fn sql_prepared_statements_follow_the_session() {
        let mut have = st("app");
        have.prepared.insert("old".into(), "'SELECT 1'".into());
        have.prepared.insert("s1".into(), "'SELECT 2'".into());
        let mut want = st("app");
        want.prepared.insert("s1".into(), "'SELECT 41 + 1'".into());
        want.prepared.insert("s2".into(), "'SELECT ?'".into());
        assert_eq!(
            plan(&have, &want).statements,
            vec![
                "DEALLOCATE PREPARE `old`".to_string(),
                "PREPARE `s1` FROM 'SELECT 41 + 1'".into(),
                "PREPARE `s2` FROM 'SELECT ?'".into(),
            ]
        );
        assert!(plan(&want, &want.clone()).is_empty());
        // A reset forgets them (COM_RESET_CONNECTION deallocates).
        assert!(want.reset_keep_schema().prepared.is_empty());
    }

    #[test]
    fn equal_states_need_nothing() {
        let mut a = st("app");
        a.set_var("sql_mode", "'ANSI'");
        assert!(plan(&a, &a.clone()).is_empty());
    }

    #[test]
    fn only_differences_are_sent() {
        let mut have = st("app");
        have.set_var("sql_mode", "'ANSI'");
        have.set_var("time_zone", "'+00:00'");
        let mut want = st("shop");
        want.set_var("time_zone", "'+00:00'");
        want.set_var("max_execution_time", "500");
        let p = plan(&have, &want);
        assert!(!p.reset_first);
        assert_eq!(p.init_db.as_deref(), Some("shop"));
        assert_eq!(
            p.statements,
            vec!["SET SESSION max_execution_time = 500, sql_mode = DEFAULT"]
        );
    }

    #[test]
    fn charset_and_transaction_characteristics() {
        let have = st("app");
        let mut want = st("app");
        want.set_var("character_set_results", "NULL");
        want.set_charset_cmd("SET NAMES 'latin1'".into());
        want.isolation = Some("READ COMMITTED".into());
        want.read_only = Some(true);
        let p = plan(&have, &want);
        assert_eq!(
            p.statements,
            vec![
                "SET NAMES 'latin1'".to_string(),
                "SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED, READ ONLY".to_string()
            ]
        );
        // Undoing SET NAMES needs the connection's defaults back: reset, then re-apply the rest.
        let mut back = st("app");
        back.set_var("sql_mode", "'ANSI'");
        let p = plan(&want, &back);
        assert!(p.reset_first);
        assert_eq!(p.statements, vec!["SET SESSION sql_mode = 'ANSI'"]);
        assert_eq!(p.init_db, None, "the reset keeps the schema");
    }

    #[test]
    fn default_forgets_a_variable() {
        let mut s = st("a");
        s.set_var("sql_mode", "'ANSI'");
        s.set_var("sql_mode", "default");
        assert!(s.vars.is_empty());
    }
}

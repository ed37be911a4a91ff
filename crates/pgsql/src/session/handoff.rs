//! Handing a pooled server connection to a session: the connection must carry exactly the
//! session's settings (its startup parameters and the `SET`s it made) and nothing another
//! session left behind.
//!
//! Connections are opened with neutral startup parameters (user and database only). When a
//! connection last served another session, `RESET ALL` goes first: state changed without a
//! visible `SET` (`set_config(…, false)` in a query, a function, a `DO` block) is cleared before
//! anyone else runs a statement. Then the session's settings that differ from what the
//! connection carries are applied. Both go in the same write as the session's own first
//! message, so the handoff costs no extra round trip; their replies are cut out of the stream.

use crate::pids::SessionSignals;
use crate::session::sets::replay_sql;
use crate::session::sql_prepare::SqlPrepared;
use sluice_pgsql_backend::Error as PgError;
use sluice_pgsql_backend::{PgConn, query_message};
use std::collections::BTreeMap;
use tracing::warn;

/// Stages in `out` the Query messages that make `conn` carry the settings `want` of session
/// `owner`, and records them on the connection; `reset_all` (`pgsql-handoff_reset_all`) clears
/// what another session left first. Returns how many ReadyForQuery replies they produce (0:
/// nothing to send).
pub(crate) fn stage(
    conn: &mut PgConn,
    (owner, want, sql): (u64, &BTreeMap<String, String>, &SqlPrepared),
    reset_all: bool,
    signals: &SessionSignals,
    out: &mut Vec<u8>,
) -> u8 {
    let mut replies = 0;
    if conn.owner != Some(owner) {
        // Notifications sent from this connection now name this session's pid.
        signals.note_owner(&conn.server, conn.key.0, (owner >> 32) as u32);
    }
    if reset_all && conn.owner.is_some_and(|o| o != owner) {
        // A Query of its own: if the settings that follow failed, the reset still holds (one
        // Query with both would roll it back with them).
        query_message("RESET ALL", out);
        conn.session_vars.clear();
        replies += 1;
    }
    conn.owner = Some(owner);
    if let Some(sql) = replay_sql(want, &conn.session_vars) {
        query_message(&sql, out);
        conn.session_vars.clone_from(want);
        replies += 1;
    }
    // The session's SQL-level prepared statements, and none of another's.
    if let Some(replay) = sql.replay(&conn.sql_prepared) {
        query_message(&replay, out);
        conn.sql_prepared.clone_from(sql.statements());
        replies += 1;
    }
    replies
}

/// Applies a new session's startup settings to its first server connection and waits for the
/// answer: the server validates each one (a rejected value fails the login with the server's
/// error, as on a direct connection) and reports the ParameterStatus values they changed.
pub(crate) async fn at_login(
    conn: &mut PgConn,
    owner: u64,
    want: &BTreeMap<String, String>,
    signals: &SessionSignals,
) -> Result<Vec<(String, String)>, PgError> {
    let mut wire = Vec::new();
    // At login the connection's ParameterStatus values must be its neutral ones: always reset.
    let none = SqlPrepared::default();
    match stage(conn, (owner, want, &none), true, signals, &mut wire) {
        0 => Ok(Vec::new()),
        n => conn.run_messages(&wire, usize::from(n)).await,
    }
}

/// The ParameterStatus values a client is told at login: the connection's, as changed by
/// `reported` (later reports win).
pub(crate) fn login_parameters(
    conn_params: &[(String, String)],
    reported: Vec<(String, String)>,
) -> Vec<(String, String)> {
    let mut params = conn_params.to_vec();
    for (name, value) in reported {
        match params.iter_mut().find(|(n, _)| *n == name) {
            Some(p) => p.1 = value,
            None => params.push((name, value)),
        }
    }
    params
}

/// Logs a handoff that failed on `server`: the session cannot be sure its settings hold there.
pub(crate) fn log_failure(user: &str, server: &str, code: &str, message: &str) {
    warn!(user = %user, server = %server, "pgsql: applying the session's settings to a server connection failed ({code}: {message}); the session is closed and the connection discarded");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn login_parameters_take_the_reported_values() {
        let conn = vec![
            ("TimeZone".to_string(), "UTC".to_string()),
            ("DateStyle".to_string(), "ISO, MDY".to_string()),
        ];
        let reported = vec![
            ("TimeZone".to_string(), "Europe/Paris".to_string()),
            ("application_name".to_string(), "a".to_string()),
            ("application_name".to_string(), "b".to_string()),
        ];
        assert_eq!(
            login_parameters(&conn, reported),
            [
                ("TimeZone".to_string(), "Europe/Paris".to_string()),
                ("DateStyle".to_string(), "ISO, MDY".to_string()),
                ("application_name".to_string(), "b".to_string()),
            ]
        );
    }
}

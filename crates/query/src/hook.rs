//! The seam for services that embed a Sluice frontend: a [`StatementHook`] sees each statement
//! before the query rules and may answer it in-process, send it to a hostgroup of its choosing,
//! or let Sluice carry on as configured. It knows no wire bytes; each frontend encodes a
//! [`LocalReply`] in its own protocol.
//!
//! ```
//! use sluice_query::hook::{HookDecision, HookStatement, LocalReply, StatementHook};
//!
//! /// Answers `SELECT app_version()` itself; sends reports to hostgroup 2.
//! struct AppHook;
//!
//! impl StatementHook for AppHook {
//!     fn on_statement(&self, stmt: &HookStatement<'_>) -> HookDecision {
//!         if stmt.sql.trim().eq_ignore_ascii_case("SELECT app_version()") {
//!             return HookDecision::Reply(LocalReply::rows(&["app_version()"], [["1.4.2"]]));
//!         }
//!         if stmt.sql.contains("/* report */") {
//!             return HookDecision::Route { hostgroup: 2 };
//!         }
//!         HookDecision::Continue
//!     }
//! }
//!
//! let stmt = HookStatement { session: 1, user: "app", schema: "shop", sql: "SELECT app_version()" };
//! assert!(matches!(AppHook.on_statement(&stmt), HookDecision::Reply(_)));
//! ```

/// One statement a client sent, as the hook sees it.
#[derive(Debug, Clone, Copy)]
pub struct HookStatement<'a> {
    /// The session's id as the admin's processlist shows it (`stats_*_processlist.SessionID`;
    /// on MySQL also the client's `CONNECTION_ID()`).
    pub session: u64,
    /// The user the client logged in as.
    pub user: &'a str,
    /// The session's current schema (MySQL) or database (PostgreSQL); empty when none.
    pub schema: &'a str,
    /// The statement's text as the client sent it (before any rule rewrote it).
    pub sql: &'a str,
}

/// What a [`StatementHook`] decided about a statement.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HookDecision {
    /// Go on as configured: query rules, hints, the user's default hostgroup.
    Continue,
    /// Send the statement to this hostgroup. The query rules still apply their other actions
    /// (rewrite, cache, timeout, mirror) but not their destination. A session pinned to a
    /// connection (open transaction, session state that cannot be replayed) stays on it.
    Route {
        /// The hostgroup to take a server connection from.
        hostgroup: u32,
    },
    /// Answer the client without a server.
    Reply(LocalReply),
}

/// A reply Sluice sends on a hook's behalf.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LocalReply {
    /// A result set of text columns; `None` cells are SQL NULL.
    Rows {
        /// Column names, in order.
        columns: Vec<String>,
        /// Rows, each with one cell per column.
        rows: Vec<Vec<Option<String>>>,
    },
    /// A statement that returns no rows succeeded.
    Done {
        /// PostgreSQL's command tag (`"SET"`, `"INSERT 0 1"`); MySQL clients get an OK packet
        /// and do not see it.
        tag: String,
        /// Rows the statement affected (MySQL's OK packet).
        affected_rows: u64,
    },
    /// The statement failed.
    Error {
        /// MySQL error number (PostgreSQL clients do not see it).
        code: u16,
        /// Five-character SQLSTATE, sent to both protocols' clients.
        sqlstate: String,
        /// The message the client shows.
        message: String,
    },
}

impl LocalReply {
    /// A result set from column names and rows of text cells (none of them NULL).
    pub fn rows<R, C>(columns: &[&str], rows: R) -> LocalReply
    where
        R: IntoIterator<Item = C>,
        C: IntoIterator,
        C::Item: Into<String>,
    {
        LocalReply::Rows {
            columns: columns.iter().map(|c| c.to_string()).collect(),
            rows: rows
                .into_iter()
                .map(|r| r.into_iter().map(|v| Some(v.into())).collect())
                .collect(),
        }
    }

    /// A failure with MySQL error `code`, `sqlstate` and `message`.
    pub fn error(code: u16, sqlstate: &str, message: impl Into<String>) -> LocalReply {
        LocalReply::Error {
            code,
            sqlstate: sqlstate.to_string(),
            message: message.into(),
        }
    }
}

/// Sees statements before the query rules. Installed on a frontend with its `with_hook`
/// builder method; without one the frontend costs nothing extra.
///
/// Which statements a hook sees: every MySQL `COM_QUERY`, and on PostgreSQL the statement that
/// begins each transaction (the point where Sluice routes; autocommit statements each begin
/// one). Prepared statements (`COM_STMT_*`, named Parse) are not shown. In PostgreSQL's
/// extended protocol only [`LocalReply::Error`] can be sent in-process; other replies are
/// refused with an error that names the hook, since the client expects a reply per message.
///
/// The hook runs on the session's event loop: it must return quickly and must not block.
pub trait StatementHook: Send + Sync {
    /// Decides what happens to `stmt`.
    fn on_statement(&self, stmt: &HookStatement<'_>) -> HookDecision;
}

impl<F> StatementHook for F
where
    F: Fn(&HookStatement<'_>) -> HookDecision + Send + Sync,
{
    fn on_statement(&self, stmt: &HookStatement<'_>) -> HookDecision {
        self(stmt)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn closures_are_hooks_and_rows_are_built_from_text() {
        let hook = |s: &HookStatement<'_>| {
            if s.sql == "ping" {
                HookDecision::Reply(LocalReply::rows(&["a", "b"], [["1", "2"], ["3", "4"]]))
            } else {
                HookDecision::Continue
            }
        };
        let stmt = HookStatement {
            session: 7,
            user: "u",
            schema: "",
            sql: "ping",
        };
        let LocalReply::Rows { columns, rows } = (match hook.on_statement(&stmt) {
            HookDecision::Reply(r) => r,
            other => panic!("{other:?}"),
        }) else {
            panic!("rows expected")
        };
        assert_eq!(columns, ["a", "b"]);
        assert_eq!(rows[1], [Some("3".to_string()), Some("4".to_string())]);
        let other = HookStatement { sql: "x", ..stmt };
        assert_eq!(hook.on_statement(&other), HookDecision::Continue);
    }
}

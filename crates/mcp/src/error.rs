//! What can go wrong in a tool call, mapped once to the agent's answer (a tool error with a
//! message that says what to do) at the handler.

use crate::readonly::Refusal;

/// A tool call's failure.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The SQL is not one read (the lexer layer).
    #[error("refused: {0}")]
    Refused(#[from] Refusal),
    /// An MCP query rule refused the call.
    #[error("refused by MCP query rule {rule_id}: {message}")]
    RuleBlocked {
        /// The rule.
        rule_id: u32,
        /// Its `error_msg`.
        message: String,
    },
    /// A `mysql_query_rules`/`pgsql_query_rules` rule refused the SQL.
    #[error("refused by {table} rule: {message}")]
    QueryRuleBlocked {
        /// Which table.
        table: &'static str,
        /// Its `error_msg`.
        message: String,
    },
    /// The caller may not use this target or tool.
    #[error("not allowed: {0}")]
    NotAllowed(String),
    /// No such target, or it cannot be used (and why).
    #[error("target {target:?}: {why}")]
    Target {
        /// The id asked for.
        target: String,
        /// Why it cannot be used.
        why: String,
    },
    /// Bad tool arguments.
    #[error("invalid arguments: {0}")]
    Arguments(String),
    /// The statement ran into the call's timeout.
    #[error("the statement was stopped at the call's {timeout_ms} ms timeout")]
    Timeout {
        /// The timeout.
        timeout_ms: u64,
    },
    /// The plan estimates more rows than `mcp-max_estimated_rows`.
    #[error(
        "refused by the cost guard: the plan estimates {estimated} rows, over mcp-max_estimated_rows = {limit}; narrow the query (a WHERE on an indexed column, a LIMIT)"
    )]
    TooCostly {
        /// The plan's estimate.
        estimated: u64,
        /// The limit.
        limit: u64,
    },
    /// The result has a masked column's value in a form Sluice cannot mask.
    #[error("refused: {0}")]
    Masked(String),
    /// The server answered with an error.
    #[error("the server answered: {0}")]
    Server(String),
    /// The server could not be reached or spoke out of turn.
    #[error("backend: {0}")]
    Backend(String),
    /// Too many calls.
    #[error("rate limited: {0}")]
    RateLimited(String),
    /// The discovery catalog failed.
    #[error("catalog: {0}")]
    Catalog(String),
    /// The RAG index or an embedding model failed.
    #[error("rag: {0}")]
    Rag(#[from] sluice_rag::Error),
}

impl Error {
    /// The outcome label for stats and metrics.
    pub fn outcome(&self) -> &'static str {
        match self {
            Error::Refused(_) | Error::Masked(_) | Error::TooCostly { .. } => "refused",
            Error::RuleBlocked { .. } | Error::QueryRuleBlocked { .. } => "blocked",
            Error::NotAllowed(_) | Error::Target { .. } => "denied",
            Error::Arguments(_) => "bad_arguments",
            Error::Timeout { .. } => "timeout",
            Error::RateLimited(_) => "rate_limited",
            Error::Server(_) => "server_error",
            Error::Backend(_) | Error::Catalog(_) | Error::Rag(_) => "backend_error",
        }
    }
}

impl From<sluice_mysql_backend::Error> for Error {
    fn from(e: sluice_mysql_backend::Error) -> Self {
        Error::Backend(e.to_string())
    }
}

impl From<sluice_pgsql_backend::Error> for Error {
    fn from(e: sluice_pgsql_backend::Error) -> Self {
        match e {
            sluice_pgsql_backend::Error::Server { code, message } => {
                Error::Server(format!("{message} (SQLSTATE {code})"))
            }
            other => Error::Backend(other.to_string()),
        }
    }
}

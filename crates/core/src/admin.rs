//! The admin interface as the protocol frontends see it: an executor that takes one SQL
//! statement and returns rows or a count (the live state its tables show is [`crate::live`]).
//! The SQLite-backed implementation lives in `sluice-admin`; the MySQL and PostgreSQL frontends
//! serve it on their admin ports.

use std::future::Future;
use std::pin::Pin;

/// What an admin login may do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AdminRole {
    /// Full access (`admin-admin_credentials`).
    Admin,
    /// Read-only access to the stats schema (`admin-stats_credentials`).
    Stats,
}

/// One admin login.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AdminCredential {
    /// The admin account's name.
    pub user: String,
    /// Its password in clear, as `admin-admin_credentials` holds it.
    pub password: String,
    /// What the account may do: everything, or read the stats tables only.
    pub role: AdminRole,
}

/// A result set: column names and rows of text values (`None` = NULL).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AdminRows {
    /// Column names, in order.
    pub columns: Vec<String>,
    /// Rows, each with one cell per column; `None` is SQL NULL.
    pub rows: Vec<Vec<Option<String>>>,
}

/// The outcome of one admin statement.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AdminReply {
    /// Rows to show.
    Rows(AdminRows),
    /// Done; rows affected and an optional message (e.g. "restart required").
    Done {
        /// Rows affected.
        affected: u64,
        /// Info text.
        message: Option<String>,
    },
}

/// A failed admin statement.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AdminError {
    /// MySQL error number (1045, 1064, 1105, ...).
    pub code: u16,
    /// The five-character SQLSTATE the client gets.
    pub sqlstate: &'static str,
    /// What went wrong, for a person.
    pub message: String,
}

impl AdminError {
    /// A generic error (1105, HY000).
    pub fn new(message: impl Into<String>) -> Self {
        AdminError {
            code: 1105,
            sqlstate: "HY000",
            message: message.into(),
        }
    }
}

impl std::fmt::Display for AdminError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for AdminError {}

/// A boxed future, so the executor can be used as a trait object.
pub type AdminFuture<'a> =
    Pin<Box<dyn Future<Output = Result<AdminReply, AdminError>> + Send + 'a>>;

/// Runs admin statements.
pub trait AdminExecutor: Send + Sync {
    /// Executes one statement with the rights of `role`.
    fn execute<'a>(&'a self, role: AdminRole, sql: &'a str) -> AdminFuture<'a>;
    /// The current admin logins (from `admin-admin_credentials` / `admin-stats_credentials`).
    fn credentials(&self) -> Vec<AdminCredential>;
}

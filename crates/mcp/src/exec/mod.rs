//! The read-only path: one statement on a connection of the MCP endpoint's own (never a
//! client's), inside a READ ONLY transaction that is rolled back, with the row cap, the byte
//! cap and the timeout enforced while the result streams, and values typed for JSON.
//!
//! This is the server-side half of the read-only layers, usable on its own by a service that
//! checks statements itself (the MCP endpoint runs [`crate::readonly::check_read`] first):
//!
//! ```no_run
//! # async fn demo() -> Result<(), sluice_mcp::Error> {
//! use sluice_mcp::exec::{Conns, Limits, Place, run_mysql};
//! use std::time::Duration;
//! let conns = Conns::new(Default::default());
//! let place = Place {
//!     host: "127.0.0.1".into(),
//!     port: 3307,
//!     user: "app".into(),
//!     password: "app".into(),
//!     database: String::new(),
//!     schema: Some("shop".into()),
//!     connect_timeout: Duration::from_secs(2),
//!     tls: None,
//! };
//! let limits = Limits { max_rows: 100, max_bytes: 1 << 20, timeout: Duration::from_secs(5) };
//! let cancel = tokio_util::sync::CancellationToken::new();
//! let rows = run_mysql(&conns, &place, "SELECT id, name FROM customers", limits, &cancel).await?;
//! println!("{} rows, truncated: {}", rows.rows.len(), rows.truncated);
//! # Ok(()) }
//! ```

mod conns;
mod mysql;
mod pgsql;

pub use conns::{ConnKey, Conns};
pub use mysql::{run as run_mysql, run_bound as run_mysql_bound};
pub use pgsql::{run as run_pgsql, run_bound as run_pgsql_bound};

use serde::Serialize;
use serde_json::Value;
use std::time::Duration;

/// Where and as whom a call runs.
#[derive(Debug, Clone)]
pub struct Place {
    /// The server's host.
    pub host: String,
    /// Its port.
    pub port: u16,
    /// The login.
    pub user: String,
    /// Its cleartext password.
    pub password: String,
    /// PostgreSQL: the database to connect to (MySQL: unused, see `schema`).
    pub database: String,
    /// MySQL: the schema to select; PostgreSQL: the schema to search first (`search_path`).
    pub schema: Option<String>,
    /// Connect timeout.
    pub connect_timeout: Duration,
    /// TLS towards the server (its row has `use_ssl=1`), with the configuration the data
    /// path's pool would use for it.
    pub tls: Option<std::sync::Arc<rustls::ClientConfig>>,
}

impl Place {
    fn server(&self) -> String {
        format!("{}:{}", self.host, self.port)
    }
}

/// What one call may take.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Rows returned at most (more set `truncated`).
    pub max_rows: u64,
    /// Bytes of values returned at most (more set `truncated`).
    pub max_bytes: u64,
    /// The server stops the statement after this; Sluice cancels it shortly after as backstop.
    pub timeout: Duration,
}

/// Where a result column's values come from, as the wire says.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Origin {
    /// Schema (MySQL) or namespace (PostgreSQL).
    pub schema: String,
    /// The table's real name (not its alias).
    pub table: String,
    /// The column's real name (not its alias).
    pub column: String,
}

/// A result column.
#[derive(Debug, Clone, Serialize)]
pub struct Column {
    /// The name the result gives it.
    pub name: String,
    /// The server's type name.
    #[serde(rename = "type")]
    pub type_name: String,
    /// Where its values come from; `None` for an expression.
    #[serde(skip)]
    pub origin: Option<Origin>,
}

/// A statement's result, capped.
#[derive(Debug, Clone, Default, Serialize)]
pub struct ResultSet {
    /// The columns.
    pub columns: Vec<Column>,
    /// The rows, values typed (numbers as numbers, NULL as null).
    pub rows: Vec<Vec<Value>>,
    /// Rows or bytes were cut at the call's caps.
    pub truncated: bool,
    /// Bytes of values read.
    #[serde(skip)]
    pub bytes: u64,
}

impl ResultSet {
    /// Adds a row unless a cap is reached; returns false once the result is truncated.
    pub fn push(&mut self, row: Vec<Value>, row_bytes: u64, limits: &Limits) -> bool {
        if self.truncated {
            return false;
        }
        if self.rows.len() as u64 >= limits.max_rows
            || self.bytes.saturating_add(row_bytes) > limits.max_bytes
        {
            self.truncated = true;
            return false;
        }
        self.bytes += row_bytes;
        self.rows.push(row);
        true
    }
}

/// Whether the connection ended a call at rest (its reply read to the end) or must be
/// dropped, its statement stopped.
enum Clean {
    Yes,
    No,
}

/// How long past the server's own timeout Sluice waits before it stops the statement itself
/// (KILL QUERY / CancelRequest).
const BACKSTOP_GRACE: Duration = Duration::from_millis(1500);

/// Runs `call` until it ends (`Some`), or until the call's timeout plus the grace passes or
/// `cancel` fires (`None`: the caller stops the statement and drops the connection).
async fn bounded<F: Future>(
    call: F,
    limits: &Limits,
    cancel: &tokio_util::sync::CancellationToken,
) -> Option<F::Output> {
    tokio::select! {
        r = call => Some(r),
        _ = tokio::time::sleep(limits.timeout + BACKSTOP_GRACE) => None,
        _ = cancel.cancelled() => None,
    }
}

/// A JSON number for an integer text, else `None`.
pub fn integer(text: &str) -> Option<Value> {
    if let Ok(i) = text.parse::<i64>() {
        return Some(Value::from(i));
    }
    text.parse::<u64>().ok().map(Value::from)
}

/// A JSON number for a decimal or float text (an integer when it is one), else the text.
pub fn number(text: &str) -> Value {
    if let Some(v) = integer(text) {
        return v;
    }
    match text.parse::<f64>() {
        Ok(f) if f.is_finite() => serde_json::Number::from_f64(f)
            .map(Value::Number)
            .unwrap_or_else(|| Value::String(text.to_string())),
        _ => Value::String(text.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn caps_cut_rows_and_bytes() {
        let limits = Limits {
            max_rows: 2,
            max_bytes: 10,
            timeout: Duration::from_secs(1),
        };
        let mut r = ResultSet::default();
        assert!(r.push(vec![Value::from(1)], 4, &limits));
        assert!(r.push(vec![Value::from(2)], 4, &limits));
        assert!(!r.push(vec![Value::from(3)], 1, &limits));
        assert!(r.truncated && r.rows.len() == 2);
        let mut b = ResultSet::default();
        assert!(b.push(vec![], 8, &limits));
        assert!(!b.push(vec![], 8, &limits), "bytes cap");
        assert!(b.truncated);
    }

    #[test]
    fn numbers_are_numbers() {
        assert_eq!(number("42"), Value::from(42));
        assert_eq!(number("18446744073709551615"), Value::from(u64::MAX));
        assert_eq!(number("1.5"), Value::from(1.5));
        assert_eq!(number("NaN"), Value::String("NaN".into()));
    }
}

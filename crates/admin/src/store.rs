//! The SQLite connection: one connection (admin traffic is low-rate and must see one consistent
//! in-memory database), statements run as text, results as text cells.

use sluice_core::admin::{AdminError, AdminRows};
use sqlx::sqlite::{SqliteConnectOptions, SqliteConnection, SqliteRow};
use sqlx::{AssertSqlSafe, Column, ConnectOptions, Connection, Row, TypeInfo, ValueRef};
use std::path::Path;
use tokio::sync::Mutex;

/// The admin database.
pub(crate) struct Store {
    conn: Mutex<SqliteConnection>,
}

/// SQLite's error as the admin client gets it. SQLite has no code of its own for a syntax
/// error (it is `SQLITE_ERROR` with a message), so its message is read here, once: the client
/// gets MySQL's parse error (1064, 42000; 42601 on the PostgreSQL admin port).
fn err(e: sqlx::Error) -> AdminError {
    let message = match &e {
        sqlx::Error::Database(d) => d.message().to_string(),
        other => other.to_string(),
    };
    if message.contains("syntax error") {
        return AdminError {
            code: 1064,
            sqlstate: "42000",
            message,
        };
    }
    AdminError::new(message)
}

fn quote_path(p: &str) -> String {
    format!("'{}'", p.replace('\'', "''"))
}

impl Store {
    /// Opens the in-memory `main` schema and attaches `disk` (`disk_path`, or memory when
    /// `None`), `stats` and `monitor`.
    pub(crate) async fn open(disk_path: Option<&Path>) -> Result<Store, AdminError> {
        // `main` is SQLite's ":memory:" database; SQLITE_OPEN_CREATE (and not SQLITE_OPEN_MEMORY) lets
        // ATTACH create the disk file.
        let opts = SqliteConnectOptions::new().create_if_missing(true);
        let mut conn = opts.connect().await.map_err(err)?;
        let disk = disk_path
            .map(|p| p.display().to_string())
            .unwrap_or_else(|| ":memory:".into());
        for sql in [
            format!("ATTACH DATABASE {} AS disk", quote_path(&disk)),
            "ATTACH DATABASE ':memory:' AS stats".to_string(),
            "ATTACH DATABASE ':memory:' AS monitor".to_string(),
        ] {
            sqlx::raw_sql(AssertSqlSafe(sql))
                .execute(&mut conn)
                .await
                .map_err(err)?;
        }
        Ok(Store {
            conn: Mutex::new(conn),
        })
    }

    /// Runs statements that return no rows; returns rows affected.
    pub(crate) async fn exec(&self, sql: &str) -> Result<u64, AdminError> {
        let mut c = self.conn.lock().await;
        let r = sqlx::raw_sql(AssertSqlSafe(sql.to_string()))
            .execute(&mut *c)
            .await
            .map_err(err)?;
        Ok(r.rows_affected())
    }

    /// Runs statements inside one transaction (all or nothing).
    pub(crate) async fn exec_all(&self, statements: &[String]) -> Result<(), AdminError> {
        let mut c = self.conn.lock().await;
        let mut tx = c.begin().await.map_err(err)?;
        for s in statements {
            sqlx::raw_sql(AssertSqlSafe(s.clone()))
                .execute(&mut *tx)
                .await
                .map_err(err)?;
        }
        tx.commit().await.map_err(err)
    }

    /// Runs a query and returns its rows as text.
    pub(crate) async fn query(&self, sql: &str) -> Result<AdminRows, AdminError> {
        let mut c = self.conn.lock().await;
        let rows: Vec<SqliteRow> = sqlx::query(AssertSqlSafe(sql.to_string()))
            .fetch_all(&mut *c)
            .await
            .map_err(err)?;
        let columns = match rows.first() {
            Some(r) => r.columns().iter().map(|c| c.name().to_string()).collect(),
            None => {
                // No rows: still report the columns, which `describe` knows.
                let stmt = sqlx::Executor::prepare(
                    &mut *c,
                    sqlx::SqlSafeStr::into_sql_str(AssertSqlSafe(sql.to_string())),
                )
                .await
                .map_err(err)?;
                sqlx::Statement::columns(&stmt)
                    .iter()
                    .map(|c| c.name().to_string())
                    .collect()
            }
        };
        let rows = rows.iter().map(row_text).collect();
        Ok(AdminRows { columns, rows })
    }

    /// Runs a query with bound text parameters (never spliced into the SQL).
    pub(crate) async fn query_bound(
        &self,
        sql: &'static str,
        params: &[&str],
    ) -> Result<AdminRows, AdminError> {
        let mut c = self.conn.lock().await;
        let mut q = sqlx::query(sql);
        for p in params {
            q = q.bind(p.to_string());
        }
        let rows: Vec<SqliteRow> = q.fetch_all(&mut *c).await.map_err(err)?;
        let columns = rows
            .first()
            .map(|r| r.columns().iter().map(|c| c.name().to_string()).collect())
            .unwrap_or_default();
        Ok(AdminRows {
            columns,
            rows: rows.iter().map(row_text).collect(),
        })
    }

    /// Runs a statement with bound text parameters.
    pub(crate) async fn exec_bound(
        &self,
        sql: &'static str,
        params: &[&str],
    ) -> Result<u64, AdminError> {
        let mut c = self.conn.lock().await;
        let mut q = sqlx::query(sql);
        for p in params {
            q = q.bind(p.to_string());
        }
        Ok(q.execute(&mut *c).await.map_err(err)?.rows_affected())
    }
}

fn row_text(r: &SqliteRow) -> Vec<Option<String>> {
    (0..r.len())
        .map(|i| {
            let Ok(raw) = r.try_get_raw(i) else {
                return None;
            };
            if raw.is_null() {
                return None;
            }
            match raw.type_info().name() {
                "INTEGER" => r.try_get::<i64, _>(i).ok().map(|v| v.to_string()),
                "REAL" => r.try_get::<f64, _>(i).ok().map(|v| v.to_string()),
                "BLOB" => r
                    .try_get::<Vec<u8>, _>(i)
                    .ok()
                    .map(|v| String::from_utf8_lossy(&v).into_owned()),
                _ => r.try_get::<String, _>(i).ok(),
            }
        })
        .collect()
}

//! The discovery catalog's storage: SQLite in the datadir (`mcp_catalog.db`, ProxySQL 4.0's
//! name) with FTS5 indexes over objects and saved SQL templates. One connection, statements
//! with bound parameters only.

use crate::error::Error;
use serde_json::Value;
use sqlx::sqlite::{SqliteConnectOptions, SqliteConnection};
use sqlx::{ConnectOptions, Row};
use std::path::Path;
use tokio::sync::Mutex;

pub(super) fn err(e: sqlx::Error) -> Error {
    Error::Catalog(e.to_string())
}

const SCHEMA: &[&str] = &[
    "CREATE TABLE IF NOT EXISTS runs (run_id INTEGER PRIMARY KEY AUTOINCREMENT, target_id TEXT NOT NULL, \
     protocol TEXT NOT NULL, started_at INTEGER NOT NULL, finished_at INTEGER, schemas TEXT NOT NULL DEFAULT '', \
     objects INTEGER NOT NULL DEFAULT 0, notes TEXT NOT NULL DEFAULT '')",
    "CREATE TABLE IF NOT EXISTS objects (target_id TEXT NOT NULL, schema_name TEXT NOT NULL, object_name TEXT NOT NULL, \
     object_type TEXT NOT NULL, run_id INTEGER NOT NULL, definition TEXT NOT NULL, stale INTEGER NOT NULL DEFAULT 0, \
     harvested_at INTEGER NOT NULL, PRIMARY KEY (target_id, schema_name, object_name))",
    "CREATE TABLE IF NOT EXISTS relationships (target_id TEXT NOT NULL, schema_name TEXT NOT NULL, object_name TEXT NOT NULL, \
     name TEXT NOT NULL, columns TEXT NOT NULL, ref_table TEXT NOT NULL, ref_columns TEXT NOT NULL, kind TEXT NOT NULL, \
     confidence REAL NOT NULL)",
    "CREATE INDEX IF NOT EXISTS relationships_of ON relationships (target_id, schema_name, object_name)",
    "CREATE VIRTUAL TABLE IF NOT EXISTS fts_objects USING fts5(target_id UNINDEXED, object_key UNINDEXED, name, comment, columns, tokenize='porter unicode61')",
    "CREATE TABLE IF NOT EXISTS templates (template_id INTEGER PRIMARY KEY AUTOINCREMENT, target_id TEXT NOT NULL, \
     question TEXT NOT NULL, sql TEXT NOT NULL, notes TEXT NOT NULL DEFAULT '', created_by TEXT NOT NULL, created_at INTEGER NOT NULL)",
    "CREATE VIRTUAL TABLE IF NOT EXISTS fts_templates USING fts5(template_id UNINDEXED, target_id UNINDEXED, question, sql, notes, tokenize='porter unicode61')",
    // Objects' embeddings for semantic search (`semantic.rs`): the hash covers model and text.
    "CREATE TABLE IF NOT EXISTS object_vectors (target_id TEXT NOT NULL, object_key TEXT NOT NULL, \
     text_hash TEXT NOT NULL, vector BLOB NOT NULL, PRIMARY KEY (target_id, object_key))",
];

/// A harvested table or view, for the store.
#[derive(Debug, Clone)]
pub(crate) struct Harvested {
    /// Schema.
    pub schema: String,
    /// Name.
    pub name: String,
    /// `BASE TABLE`, `VIEW`, …
    pub kind: String,
    /// Comment (for search).
    pub comment: String,
    /// Column names (for search).
    pub columns: Vec<String>,
    /// The whole description (describe_table's shape).
    pub definition: Value,
    /// (name, columns, "schema.table", ref columns, kind, confidence).
    pub relationships: Vec<Relationship>,
}

/// A relationship between tables: a declared foreign key or one inferred from names.
#[derive(Debug, Clone, serde::Serialize, schemars::JsonSchema)]
pub(crate) struct Relationship {
    /// The foreign key's name, or `inferred:<column>`.
    pub name: String,
    /// Columns of this table.
    pub columns: Vec<String>,
    /// The referenced `schema.table`.
    pub references_table: String,
    /// The referenced columns.
    pub references_columns: Vec<String>,
    /// `foreign_key` or `inferred`.
    pub kind: String,
    /// 1 for a declared key; below for an inference.
    pub confidence: f64,
}

/// A search hit.
#[derive(Debug, Clone, serde::Serialize, schemars::JsonSchema)]
pub(crate) struct Hit {
    /// The target.
    pub target_id: String,
    /// `schema.name`.
    pub object_key: String,
    /// The matching text with the terms marked.
    pub snippet: String,
}

/// A saved template.
#[derive(Debug, Clone, serde::Serialize, schemars::JsonSchema)]
pub(crate) struct Template {
    /// Its id.
    pub template_id: i64,
    /// The target it was written for.
    pub target_id: String,
    /// The question it answers.
    pub question: String,
    /// The SQL.
    pub sql: String,
    /// Notes.
    pub notes: String,
    /// The MCP user who saved it.
    pub created_by: String,
}

fn now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0)
}

/// Every term of `q` quoted, so FTS5 operators in an agent's text cannot break the query.
pub(crate) fn fts_query(q: &str) -> String {
    q.split_whitespace()
        .filter(|t| !t.is_empty())
        .map(|t| format!("\"{}\"", t.replace('"', "\"\"")))
        .collect::<Vec<_>>()
        .join(" OR ")
}

/// The catalog database.
pub(crate) struct Store {
    pub(super) conn: Mutex<SqliteConnection>,
}

impl Store {
    /// Opens (creating) the catalog at `path`, or in memory.
    pub(crate) async fn open(path: Option<&Path>) -> Result<Store, Error> {
        let opts = match path {
            Some(p) => SqliteConnectOptions::new()
                .filename(p)
                .create_if_missing(true),
            None => SqliteConnectOptions::new().in_memory(true),
        };
        let mut conn = opts.connect().await.map_err(err)?;
        for sql in SCHEMA {
            sqlx::query(*sql).execute(&mut conn).await.map_err(err)?;
        }
        Ok(Store {
            conn: Mutex::new(conn),
        })
    }

    /// Starts a run; its id.
    pub(crate) async fn begin_run(&self, target: &str, protocol: &str) -> Result<i64, Error> {
        let mut c = self.conn.lock().await;
        let r =
            sqlx::query("INSERT INTO runs (target_id, protocol, started_at) VALUES (?1, ?2, ?3)")
                .bind(target)
                .bind(protocol)
                .bind(now())
                .execute(&mut *c)
                .await
                .map_err(err)?;
        Ok(r.last_insert_rowid())
    }

    /// Replaces what the catalog holds of `schemas` on `target` with `objects` (or, with
    /// `only`, of those tables alone), and closes the run.
    pub(crate) async fn store(
        &self,
        target: &str,
        run_id: i64,
        schemas: &[String],
        only: Option<&[String]>,
        objects: &[Harvested],
    ) -> Result<(), Error> {
        let mut c = self.conn.lock().await;
        let mut tx = sqlx::Connection::begin(&mut *c).await.map_err(err)?;
        for s in schemas {
            let names: Vec<String> = match only {
                Some(list) => list.to_vec(),
                None => sqlx::query(
                    "SELECT object_name FROM objects WHERE target_id = ?1 AND schema_name = ?2",
                )
                .bind(target)
                .bind(s)
                .fetch_all(&mut *tx)
                .await
                .map_err(err)?
                .iter()
                .map(|r| r.get::<String, _>(0))
                .collect(),
            };
            for n in names {
                for sql in [
                    "DELETE FROM objects WHERE target_id = ?1 AND schema_name = ?2 AND object_name = ?3",
                    "DELETE FROM relationships WHERE target_id = ?1 AND schema_name = ?2 AND object_name = ?3",
                ] {
                    sqlx::query(sql)
                        .bind(target)
                        .bind(s)
                        .bind(&n)
                        .execute(&mut *tx)
                        .await
                        .map_err(err)?;
                }
                sqlx::query("DELETE FROM fts_objects WHERE target_id = ?1 AND object_key = ?2")
                    .bind(target)
                    .bind(format!("{s}.{n}"))
                    .execute(&mut *tx)
                    .await
                    .map_err(err)?;
            }
        }
        for o in objects {
            insert_object(&mut tx, target, run_id, o).await?;
        }
        sqlx::query(
            "UPDATE runs SET finished_at = ?2, schemas = ?3, objects = ?4 WHERE run_id = ?1",
        )
        .bind(run_id)
        .bind(now())
        .bind(schemas.join(","))
        .bind(objects.len() as i64)
        .execute(&mut *tx)
        .await
        .map_err(err)?;
        tx.commit().await.map_err(err)
    }

    /// FTS5 search over objects.
    pub(crate) async fn search(
        &self,
        target: Option<&str>,
        q: &str,
        limit: u32,
    ) -> Result<Vec<Hit>, Error> {
        let mut c = self.conn.lock().await;
        let rows = sqlx::query(
            "SELECT target_id, object_key, snippet(fts_objects, -1, '[', ']', '…', 12) FROM fts_objects \
             WHERE fts_objects MATCH ?1 AND (?2 IS NULL OR target_id = ?2) ORDER BY rank LIMIT ?3",
        )
        .bind(fts_query(q))
        .bind(target)
        .bind(i64::from(limit))
        .fetch_all(&mut *c)
        .await
        .map_err(err)?;
        Ok(rows
            .iter()
            .map(|r| Hit {
                target_id: r.get(0),
                object_key: r.get(1),
                snippet: r.get(2),
            })
            .collect())
    }

    /// One object's description and staleness.
    pub(crate) async fn object(
        &self,
        target: &str,
        schema: &str,
        name: &str,
    ) -> Result<Option<(Value, bool)>, Error> {
        let mut c = self.conn.lock().await;
        let row = sqlx::query("SELECT definition, stale FROM objects WHERE target_id = ?1 AND schema_name = ?2 AND object_name = ?3")
            .bind(target)
            .bind(schema)
            .bind(name)
            .fetch_optional(&mut *c)
            .await
            .map_err(err)?;
        Ok(row.map(|r| {
            let def: String = r.get(0);
            (
                serde_json::from_str(&def).unwrap_or(Value::Null),
                r.get::<i64, _>(1) != 0,
            )
        }))
    }

    /// A page of objects: (schema, name, type, stale).
    pub(crate) async fn list(
        &self,
        target: &str,
        schema: Option<&str>,
        limit: u32,
        offset: u64,
    ) -> Result<Vec<(String, String, String, bool)>, Error> {
        let mut c = self.conn.lock().await;
        let rows = sqlx::query(
            "SELECT schema_name, object_name, object_type, stale FROM objects WHERE target_id = ?1 \
             AND (?2 IS NULL OR schema_name = ?2) ORDER BY schema_name, object_name LIMIT ?3 OFFSET ?4",
        )
        .bind(target)
        .bind(schema)
        .bind(i64::from(limit))
        .bind(offset as i64)
        .fetch_all(&mut *c)
        .await
        .map_err(err)?;
        Ok(rows
            .iter()
            .map(|r| (r.get(0), r.get(1), r.get(2), r.get::<i64, _>(3) != 0))
            .collect())
    }

    /// Relationships of an object: its own and those that reference it.
    pub(crate) async fn relationships(
        &self,
        target: &str,
        schema: &str,
        name: &str,
    ) -> Result<(Vec<Relationship>, Vec<(String, Relationship)>), Error> {
        let mut c = self.conn.lock().await;
        let read = |r: &sqlx::sqlite::SqliteRow| Relationship {
            name: r.get(0),
            columns: r
                .get::<String, _>(1)
                .split(',')
                .map(str::to_string)
                .collect(),
            references_table: r.get(2),
            references_columns: r
                .get::<String, _>(3)
                .split(',')
                .map(str::to_string)
                .collect(),
            kind: r.get(4),
            confidence: r.get(5),
        };
        let own = sqlx::query(
            "SELECT name, columns, ref_table, ref_columns, kind, confidence FROM relationships \
             WHERE target_id = ?1 AND schema_name = ?2 AND object_name = ?3 ORDER BY kind, name",
        )
        .bind(target)
        .bind(schema)
        .bind(name)
        .fetch_all(&mut *c)
        .await
        .map_err(err)?
        .iter()
        .map(read)
        .collect();
        let incoming = sqlx::query(
            "SELECT name, columns, ref_table, ref_columns, kind, confidence, schema_name || '.' || object_name FROM relationships \
             WHERE target_id = ?1 AND ref_table = ?2 ORDER BY kind, name",
        )
        .bind(target)
        .bind(format!("{schema}.{name}"))
        .fetch_all(&mut *c)
        .await
        .map_err(err)?
        .iter()
        .map(|r| (r.get::<String, _>(6), read(r)))
        .collect();
        Ok((own, incoming))
    }

    /// Marks `target`'s objects named `name` (in `schema`, or in any schema) stale; the
    /// (target, schema, name) marked.
    pub(crate) async fn mark_stale(
        &self,
        target: &str,
        schema: Option<&str>,
        name: &str,
    ) -> Result<Vec<(String, String, String)>, Error> {
        let mut c = self.conn.lock().await;
        let rows = sqlx::query(
            "UPDATE objects SET stale = 1 WHERE target_id = ?3 AND lower(object_name) = lower(?2) \
             AND (?1 IS NULL OR schema_name = ?1) RETURNING target_id, schema_name, object_name",
        )
        .bind(schema)
        .bind(name)
        .bind(target)
        .fetch_all(&mut *c)
        .await
        .map_err(err)?;
        Ok(rows
            .iter()
            .map(|r| (r.get(0), r.get(1), r.get(2)))
            .collect())
    }

    /// The targets whose catalog covers `schema` (a new table there is harvested too).
    pub(crate) async fn targets_with_schema(&self, schema: &str) -> Result<Vec<String>, Error> {
        let mut c = self.conn.lock().await;
        let rows = sqlx::query("SELECT DISTINCT target_id FROM objects WHERE schema_name = ?1")
            .bind(schema)
            .fetch_all(&mut *c)
            .await
            .map_err(err)?;
        Ok(rows.iter().map(|r| r.get(0)).collect())
    }

    /// Saves a template; its id.
    pub(crate) async fn save_template(&self, t: &Template) -> Result<i64, Error> {
        let mut c = self.conn.lock().await;
        let id = sqlx::query("INSERT INTO templates (target_id, question, sql, notes, created_by, created_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6)")
            .bind(&t.target_id)
            .bind(&t.question)
            .bind(&t.sql)
            .bind(&t.notes)
            .bind(&t.created_by)
            .bind(now())
            .execute(&mut *c)
            .await
            .map_err(err)?
            .last_insert_rowid();
        sqlx::query("INSERT INTO fts_templates (template_id, target_id, question, sql, notes) VALUES (?1, ?2, ?3, ?4, ?5)")
            .bind(id)
            .bind(&t.target_id)
            .bind(&t.question)
            .bind(&t.sql)
            .bind(&t.notes)
            .execute(&mut *c)
            .await
            .map_err(err)?;
        Ok(id)
    }

    /// FTS5 search over templates.
    pub(crate) async fn search_templates(
        &self,
        target: Option<&str>,
        q: &str,
        limit: u32,
    ) -> Result<Vec<Template>, Error> {
        let mut c = self.conn.lock().await;
        let rows = sqlx::query(
            "SELECT t.template_id, t.target_id, t.question, t.sql, t.notes, t.created_by FROM fts_templates f \
             JOIN templates t ON t.template_id = f.template_id WHERE fts_templates MATCH ?1 \
             AND (?2 IS NULL OR t.target_id = ?2) ORDER BY f.rank LIMIT ?3",
        )
        .bind(fts_query(q))
        .bind(target)
        .bind(i64::from(limit))
        .fetch_all(&mut *c)
        .await
        .map_err(err)?;
        Ok(rows
            .iter()
            .map(|r| Template {
                template_id: r.get(0),
                target_id: r.get(1),
                question: r.get(2),
                sql: r.get(3),
                notes: r.get(4),
                created_by: r.get(5),
            })
            .collect())
    }
}

/// One harvested object into the catalog: its row, its search entry, its relationships.
async fn insert_object(
    tx: &mut sqlx::SqliteConnection,
    target: &str,
    run_id: i64,
    o: &Harvested,
) -> Result<(), Error> {
    sqlx::query(
        "INSERT INTO objects (target_id, schema_name, object_name, object_type, run_id, definition, harvested_at) \
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
    )
    .bind(target)
    .bind(&o.schema)
    .bind(&o.name)
    .bind(&o.kind)
    .bind(run_id)
    .bind(o.definition.to_string())
    .bind(now())
    .execute(&mut *tx)
    .await
    .map_err(err)?;
    sqlx::query("INSERT INTO fts_objects (target_id, object_key, name, comment, columns) VALUES (?1, ?2, ?3, ?4, ?5)")
        .bind(target)
        .bind(format!("{}.{}", o.schema, o.name))
        .bind(o.name.replace('_', " ") + " " + &o.name)
        .bind(&o.comment)
        .bind(o.columns.iter().map(|c| c.replace('_', " ") + " " + c).collect::<Vec<_>>().join(" "))
        .execute(&mut *tx)
        .await
        .map_err(err)?;
    for r in &o.relationships {
        sqlx::query(
            "INSERT INTO relationships (target_id, schema_name, object_name, name, columns, ref_table, ref_columns, kind, confidence) \
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
        )
        .bind(target)
        .bind(&o.schema)
        .bind(&o.name)
        .bind(&r.name)
        .bind(r.columns.join(","))
        .bind(&r.references_table)
        .bind(r.references_columns.join(","))
        .bind(&r.kind)
        .bind(r.confidence)
        .execute(&mut *tx)
        .await
        .map_err(err)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn harvested(name: &str, cols: &[&str]) -> Harvested {
        Harvested {
            schema: "shop".into(),
            name: name.into(),
            kind: "BASE TABLE".into(),
            comment: format!("{name} of the shop"),
            columns: cols.iter().map(|c| c.to_string()).collect(),
            definition: serde_json::json!({"table": name}),
            relationships: Vec::new(),
        }
    }

    #[tokio::test]
    async fn harvests_replace_search_finds_and_ddl_marks_stale() {
        let s = Store::open(None).await.expect("open");
        let run = s.begin_run("t1", "mysql").await.expect("run");
        let objects = [
            harvested("customers", &["id", "phone_number"]),
            harvested("orders", &["id", "customer_id"]),
        ];
        s.store("t1", run, &["shop".into()], None, &objects)
            .await
            .expect("store");
        let hits = s.search(Some("t1"), "phone", 10).await.expect("search");
        assert_eq!(hits[0].object_key, "shop.customers");
        // Operators in an agent's text are only words.
        assert!(s.search(None, "phone) OR NEAR(\"", 10).await.is_ok());
        assert!(
            s.mark_stale("t2", None, "orders")
                .await
                .expect("stale")
                .is_empty()
        );
        let marked = s.mark_stale("t1", None, "ORDERS").await.expect("stale");
        assert_eq!(marked, [("t1".into(), "shop".into(), "orders".into())]);
        assert!(
            s.object("t1", "shop", "orders")
                .await
                .expect("get")
                .expect("there")
                .1
        );
        // A re-harvest of one table replaces it alone and clears its staleness.
        let run = s.begin_run("t1", "mysql").await.expect("run");
        s.store(
            "t1",
            run,
            &["shop".into()],
            Some(&["orders".into()]),
            &[harvested("orders", &["id"])],
        )
        .await
        .expect("store");
        assert!(
            !s.object("t1", "shop", "orders")
                .await
                .expect("get")
                .expect("there")
                .1
        );
        assert!(
            s.object("t1", "shop", "customers")
                .await
                .expect("get")
                .is_some()
        );
        assert_eq!(
            s.search(Some("t1"), "customer", 10)
                .await
                .expect("search")
                .len(),
            1
        );
    }
}

//! Reading tables' structure from a target: four statements per schema (tables, columns,
//! indexes, foreign keys), for one table (`describe_table`) or all of them
//! (`discovery.run_static`). Each goes through the same layers as an agent's SQL.

use super::args::{ColumnInfo, ForeignKeyInfo, IndexInfo, TableDescription};
use super::query::{Cx, internal};
use super::sql_text::literal;
use crate::error::Error;
use crate::service::CallTrace;
use crate::targets::Target;
use serde_json::Value;
use sluice_core::Protocol;
use sluice_core::query::Dialect;

/// Rows a harvest statement may return (a schema larger than this is refused, not cut).
const MAX_HARVEST_ROWS: u64 = 200_000;

fn text(v: Option<&Value>) -> Option<String> {
    match v? {
        Value::Null => None,
        Value::String(s) => Some(s.clone()),
        other => Some(other.to_string()),
    }
}

fn int(v: Option<&Value>) -> Option<i64> {
    match v? {
        Value::Number(n) => n.as_i64().or_else(|| n.as_f64().map(|f| f as i64)),
        Value::String(s) => s.parse().ok(),
        _ => None,
    }
}

fn truthy(v: Option<&Value>) -> bool {
    match v {
        Some(Value::Bool(b)) => *b,
        Some(Value::Number(n)) => n.as_i64() == Some(1),
        Some(Value::String(s)) => matches!(s.as_str(), "YES" | "t" | "1" | "true"),
        _ => false,
    }
}

/// The four statements for `schema` (and only `table`, when given); each row starts with the
/// table's name.
fn harvest_sql(d: Dialect, schema: &str, table: Option<&str>) -> Result<[String; 4], Error> {
    let s = literal(d, schema)?;
    Ok(match d {
        Dialect::Mysql => {
            let t = match table {
                Some(t) => format!(" AND table_name = {}", literal(d, t)?),
                None => String::new(),
            };
            [
                format!(
                    "SELECT table_name, table_type, table_rows, table_comment FROM information_schema.tables WHERE table_schema = {s}{t} ORDER BY table_name"
                ),
                format!(
                    "SELECT table_name, column_name, column_type, is_nullable, column_default, column_comment FROM information_schema.columns WHERE table_schema = {s}{t} ORDER BY table_name, ordinal_position"
                ),
                format!(
                    "SELECT table_name, index_name, non_unique = 0, index_name = 'PRIMARY', column_name FROM information_schema.statistics WHERE table_schema = {s}{t} ORDER BY table_name, index_name = 'PRIMARY' DESC, index_name, seq_in_index"
                ),
                format!(
                    "SELECT table_name, constraint_name, column_name, referenced_table_schema, referenced_table_name, referenced_column_name FROM information_schema.key_column_usage WHERE table_schema = {s}{t} AND referenced_table_name IS NOT NULL ORDER BY table_name, constraint_name, ordinal_position"
                ),
            ]
        }
        Dialect::Pgsql => {
            let t = match table {
                Some(t) => format!(" AND c.relname = {}", literal(d, t)?),
                None => String::new(),
            };
            let rels = format!(
                "SELECT c.oid, c.relname FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = {s} AND c.relkind IN ('r', 'v', 'm', 'p', 'f'){t}"
            );
            [
                format!(
                    "SELECT c.relname, CASE c.relkind WHEN 'r' THEN 'BASE TABLE' WHEN 'v' THEN 'VIEW' WHEN 'm' THEN 'MATERIALIZED VIEW' WHEN 'p' THEN 'PARTITIONED TABLE' ELSE 'FOREIGN TABLE' END, c.reltuples::bigint, obj_description(c.oid, 'pg_class') FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = {s} AND c.relkind IN ('r', 'v', 'm', 'p', 'f'){t} ORDER BY c.relname"
                ),
                format!(
                    "WITH r AS ({rels}) SELECT r.relname, a.attname, format_type(a.atttypid, a.atttypmod), NOT a.attnotnull, pg_get_expr(d.adbin, d.adrelid), col_description(a.attrelid, a.attnum) FROM r JOIN pg_catalog.pg_attribute a ON a.attrelid = r.oid LEFT JOIN pg_catalog.pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum WHERE a.attnum > 0 AND NOT a.attisdropped ORDER BY r.relname, a.attnum"
                ),
                format!(
                    "WITH r AS ({rels}) SELECT r.relname, i.relname, ix.indisunique, ix.indisprimary, a.attname FROM r JOIN pg_catalog.pg_index ix ON ix.indrelid = r.oid JOIN pg_catalog.pg_class i ON i.oid = ix.indexrelid CROSS JOIN LATERAL unnest(ix.indkey) WITH ORDINALITY AS k(attnum, ord) JOIN pg_catalog.pg_attribute a ON a.attrelid = r.oid AND a.attnum = k.attnum ORDER BY r.relname, ix.indisprimary DESC, i.relname, k.ord"
                ),
                format!(
                    "WITH r AS ({rels}) SELECT r.relname, con.conname, a.attname, fn.nspname, ft.relname, fa.attname FROM r JOIN pg_catalog.pg_constraint con ON con.conrelid = r.oid AND con.contype = 'f' JOIN pg_catalog.pg_class ft ON ft.oid = con.confrelid JOIN pg_catalog.pg_namespace fn ON fn.oid = ft.relnamespace CROSS JOIN LATERAL unnest(con.conkey, con.confkey) WITH ORDINALITY AS k(att, fatt, ord) JOIN pg_catalog.pg_attribute a ON a.attrelid = r.oid AND a.attnum = k.att JOIN pg_catalog.pg_attribute fa ON fa.attrelid = ft.oid AND fa.attnum = k.fatt ORDER BY r.relname, con.conname, k.ord"
                ),
            ]
        }
    })
}

/// The tables of `schema` on `t` (only `table`, when given), described.
pub(crate) async fn read_tables(
    cx: Cx<'_>,
    tool: &'static str,
    t: &Target,
    schema: &str,
    table: Option<&str>,
    trace: &mut CallTrace,
) -> Result<Vec<TableDescription>, Error> {
    let d = match t.protocol {
        Protocol::Mysql => Dialect::Mysql,
        Protocol::Pgsql => Dialect::Pgsql,
    };
    let [tables_sql, columns_sql, index_sql, fk_sql] = harvest_sql(d, schema, table)?;
    let mut sets = Vec::with_capacity(4);
    for sql in [tables_sql, columns_sql, index_sql, fk_sql] {
        let rs = internal(cx, tool, t, sql, MAX_HARVEST_ROWS, trace).await?;
        if rs.truncated {
            return Err(Error::Arguments(format!(
                "schema {schema} is too large to read at once; name the tables to read"
            )));
        }
        sets.push(rs.rows);
    }
    Ok(describe(t, schema, &sets))
}

/// The tables' descriptions from the four row sets `harvest_sql` asks for (tables, columns,
/// indexes, foreign keys).
fn describe(t: &Target, schema: &str, sets: &[Vec<Vec<Value>>]) -> Vec<TableDescription> {
    let mut out: Vec<TableDescription> = sets[0]
        .iter()
        .map(|r| TableDescription {
            target_id: t.id.clone(),
            schema: schema.to_string(),
            table: text(r.first()).unwrap_or_default(),
            kind: text(r.get(1)).unwrap_or_default(),
            rows_estimate: int(r.get(2)).filter(|n| *n >= 0),
            comment: text(r.get(3)).filter(|c| !c.is_empty()),
            columns: Vec::new(),
            primary_key: Vec::new(),
            indexes: Vec::new(),
            foreign_keys: Vec::new(),
        })
        .collect();
    for r in &sets[1] {
        let Some(i) = find(&out, r) else { continue };
        out[i].columns.push(ColumnInfo {
            name: text(r.get(1)).unwrap_or_default(),
            type_name: text(r.get(2)).unwrap_or_default(),
            nullable: truthy(r.get(3)),
            default: text(r.get(4)),
            comment: text(r.get(5)).filter(|c| !c.is_empty()),
        });
    }
    add_indexes(&mut out, &sets[2]);
    add_foreign_keys(&mut out, &sets[3]);
    for t in &mut out {
        t.primary_key = t
            .indexes
            .iter()
            .find(|i| i.primary)
            .map(|i| i.columns.clone())
            .unwrap_or_default();
    }
    out
}

/// Where `name` (a row's first cell) is among the tables read.
fn find(out: &[TableDescription], r: &[Value]) -> Option<usize> {
    let name = text(r.first()).unwrap_or_default();
    out.iter().position(|t| t.table == name)
}

/// The index rows (table, index, unique, primary, column), one per indexed column.
fn add_indexes(out: &mut [TableDescription], rows: &[Vec<Value>]) {
    for r in rows {
        let Some(i) = find(out, r) else { continue };
        let name = text(r.get(1)).unwrap_or_default();
        let column = text(r.get(4)).unwrap_or_default();
        let indexes = &mut out[i].indexes;
        match indexes.iter_mut().find(|x| x.name == name) {
            Some(x) => x.columns.push(column),
            None => indexes.push(IndexInfo {
                name,
                columns: vec![column],
                unique: truthy(r.get(2)),
                primary: truthy(r.get(3)),
            }),
        }
    }
}

/// The foreign-key rows (table, key, column, target schema, target table, target column).
fn add_foreign_keys(out: &mut [TableDescription], rows: &[Vec<Value>]) {
    for r in rows {
        let Some(i) = find(out, r) else { continue };
        let name = text(r.get(1)).unwrap_or_default();
        let (column, target_column) = (
            text(r.get(2)).unwrap_or_default(),
            text(r.get(5)).unwrap_or_default(),
        );
        let fks = &mut out[i].foreign_keys;
        match fks.iter_mut().find(|f| f.name == name) {
            Some(f) => {
                f.columns.push(column);
                f.references_columns.push(target_column);
            }
            None => fks.push(ForeignKeyInfo {
                name,
                columns: vec![column],
                references_table: format!(
                    "{}.{}",
                    text(r.get(3)).unwrap_or_default(),
                    text(r.get(4)).unwrap_or_default()
                ),
                references_columns: vec![target_column],
            }),
        }
    }
}

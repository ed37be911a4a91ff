//! Column masks (`mcp_users.masked_columns`): values of listed `schema.table.column`s come back
//! as `"[masked]"`. Which result column holds what is read from the wire — MySQL's column
//! definitions carry the real table and column (`org_table`, `org_name`), PostgreSQL's
//! RowDescription the table OID and attribute number — so an alias (`phone AS remark`) is
//! masked too. A result column whose origin the wire does not give (an expression) while the
//! statement names a masked column is refused: its value might be derived from the masked one.

use crate::error::Error;
use crate::exec::{Origin, ResultSet};
use serde_json::Value;

/// What a masked value becomes.
pub(crate) const MASKED: &str = "[masked]";

/// One masked column, lower-cased.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct MaskedColumn {
    pub schema: String,
    pub table: String,
    pub column: String,
}

/// Parses `schema.table.column, …`; malformed entries are skipped (the caller logs them).
pub(crate) fn parse(list: &str) -> Vec<MaskedColumn> {
    list.split(',')
        .filter_map(|e| {
            let mut p = e.trim().splitn(3, '.');
            let (s, t, c) = (p.next()?, p.next()?, p.next()?);
            (!s.is_empty() && !t.is_empty() && !c.is_empty()).then(|| MaskedColumn {
                schema: s.to_ascii_lowercase(),
                table: t.to_ascii_lowercase(),
                column: c.to_ascii_lowercase(),
            })
        })
        .collect()
}

/// A PostgreSQL column's identity on the wire: (table OID, attribute number) with its name.
pub(crate) type PgOrigins = Vec<(u32, u16, MaskedColumn)>;

fn matches(origin: &Origin, masks: &[MaskedColumn], pg: Option<&PgOrigins>) -> bool {
    if let Some(pg) = pg {
        let oid = origin
            .table
            .strip_prefix("oid:")
            .and_then(|v| v.parse::<u32>().ok());
        let att = origin
            .column
            .strip_prefix("attnum:")
            .and_then(|v| v.parse::<u16>().ok());
        return pg
            .iter()
            .any(|(o, a, m)| Some(*o) == oid && Some(*a) == att && masks.contains(m));
    }
    masks.iter().any(|m| {
        m.schema.eq_ignore_ascii_case(&origin.schema)
            && m.table.eq_ignore_ascii_case(&origin.table)
            && m.column.eq_ignore_ascii_case(&origin.column)
    })
}

/// Masks `result` for `masks`; `named` is every identifier the statement holds (lower-cased)
/// and `pg` the masked columns' wire identities on a PostgreSQL target.
pub(crate) fn apply(
    result: &mut ResultSet,
    masks: &[MaskedColumn],
    named: &[String],
    pg: Option<&PgOrigins>,
) -> Result<(), Error> {
    if masks.is_empty() {
        return Ok(());
    }
    let mentioned: Vec<&MaskedColumn> =
        masks.iter().filter(|m| named.contains(&m.column)).collect();
    let mut masked = Vec::new();
    for (i, c) in result.columns.iter().enumerate() {
        match &c.origin {
            Some(o) if matches(o, masks, pg) => masked.push(i),
            Some(_) => {}
            None => {
                if let Some(m) = mentioned.first() {
                    return Err(Error::Masked(format!(
                        "result column {:?} is computed and the statement names {}.{}.{}, which is masked for you: select the column itself (it comes back masked) or leave it out",
                        c.name, m.schema, m.table, m.column
                    )));
                }
            }
        }
    }
    for row in &mut result.rows {
        for &i in &masked {
            if let Some(v) = row.get_mut(i)
                && !v.is_null()
            {
                *v = Value::String(MASKED.into());
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::exec::Column;

    fn col(name: &str, origin: Option<(&str, &str, &str)>) -> Column {
        Column {
            name: name.into(),
            type_name: "VARCHAR".into(),
            origin: origin.map(|(s, t, c)| Origin {
                schema: s.into(),
                table: t.into(),
                column: c.into(),
            }),
        }
    }

    #[test]
    fn aliases_are_masked_and_expressions_refused() {
        let masks = parse("shop.customers.phone, bad-entry");
        assert_eq!(masks.len(), 1);
        let mut r = ResultSet {
            columns: vec![
                col("remark", Some(("shop", "customers", "phone"))),
                col("name", Some(("shop", "customers", "name"))),
            ],
            rows: vec![
                vec![Value::from("555-1234"), Value::from("Ann")],
                vec![Value::Null, Value::from("Bo")],
            ],
            ..ResultSet::default()
        };
        let named = vec![
            "phone".to_string(),
            "remark".to_string(),
            "customers".to_string(),
        ];
        apply(&mut r, &masks, &named, None).expect("masked");
        assert_eq!(r.rows[0], vec![Value::from(MASKED), Value::from("Ann")]);
        assert_eq!(r.rows[1][0], Value::Null);
        let mut e = ResultSet {
            columns: vec![col("concat(phone,'')", None)],
            rows: vec![vec![Value::from("555-1234")]],
            ..ResultSet::default()
        };
        assert!(apply(&mut e, &masks, &named, None).is_err());
        // An expression in a statement that names no masked column is fine.
        let mut ok = e.clone();
        apply(&mut ok, &masks, &["name".to_string()], None).expect("no masked column named");
    }
}

//! The statements a sync sends to a source: keyset pages on (change column, primary key) with
//! bound parameters (`?` for MySQL, `$n` for PostgreSQL), and the key-only pages of the delete
//! sweep. Identifiers are checked names (`RagSource::check`), quoted for the dialect.

use serde_json::Value;
use sluice_core::config::{RagSource, TemplatePart, parse_template};

/// The source's SQL dialect.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dialect {
    /// MySQL and MariaDB.
    Mysql,
    /// PostgreSQL.
    Pgsql,
}

/// Where a page starts.
#[derive(Debug, Clone, PartialEq)]
pub enum Bound {
    /// From the first row.
    Start,
    /// From the rows whose change value is at least this (a run's re-scan window).
    AtLeast(Value),
    /// After this (change value, primary key).
    After(Value, Value),
}

/// A source's statements.
#[derive(Debug, Clone)]
pub struct SourceSql {
    dialect: Dialect,
    from: String,
    filter: String,
    pk: String,
    change: String,
    select: String,
    /// The columns selected, in order: primary key, change column, then the others.
    pub columns: Vec<String>,
}

fn quote(d: Dialect, name: &str) -> String {
    match d {
        Dialect::Mysql => format!("`{}`", name.replace('`', "``")),
        Dialect::Pgsql => format!("\"{}\"", name.replace('"', "\"\"")),
    }
}

impl SourceSql {
    /// The statements of `s` (a row that passed `check`).
    pub fn new(s: &RagSource) -> SourceSql {
        let dialect = if s.protocol == "pgsql" {
            Dialect::Pgsql
        } else {
            Dialect::Mysql
        };
        let mut columns = vec![s.pk_column.clone(), s.change_column.clone()];
        let mut add = |c: &str| {
            if !columns.iter().any(|x| x.eq_ignore_ascii_case(c)) {
                columns.push(c.to_string());
            }
        };
        if !s.title_column.is_empty() {
            add(&s.title_column);
        }
        for part in parse_template(&s.text_template).unwrap_or_default() {
            if let TemplatePart::Column(c) = part {
                add(&c);
            }
        }
        for m in s.metadata() {
            add(&m);
        }
        let q = |n: &str| quote(dialect, n);
        let from = if s.query.trim().is_empty() {
            s.table_name.split('.').map(q).collect::<Vec<_>>().join(".")
        } else {
            format!(
                "({}) AS sluice_rag_source",
                s.query.trim().trim_end_matches(';')
            )
        };
        let filter = if s.where_sql.trim().is_empty() {
            String::new()
        } else {
            format!("({}) AND ", s.where_sql.trim())
        };
        SourceSql {
            dialect,
            select: columns.iter().map(|c| q(c)).collect::<Vec<_>>().join(", "),
            pk: q(&s.pk_column),
            change: q(&s.change_column),
            from,
            filter,
            columns,
        }
    }

    fn param(&self, n: usize) -> String {
        match self.dialect {
            Dialect::Mysql => "?".into(),
            Dialect::Pgsql => format!("${n}"),
        }
    }

    /// The dialect.
    pub fn dialect(&self) -> Dialect {
        self.dialect
    }

    /// A page of at most `limit` rows from `bound`, with its parameters.
    pub fn page(&self, bound: &Bound, limit: u32) -> (String, Vec<Value>) {
        let (cond, params) = match bound {
            Bound::Start => ("TRUE".to_string(), vec![]),
            Bound::AtLeast(c) => (
                format!("{} >= {}", self.change, self.param(1)),
                vec![c.clone()],
            ),
            Bound::After(c, p) => (
                format!(
                    "({ch} > {a} OR ({ch} = {b} AND {pk} > {c}))",
                    ch = self.change,
                    pk = self.pk,
                    a = self.param(1),
                    b = self.param(2),
                    c = self.param(3)
                ),
                vec![c.clone(), c.clone(), p.clone()],
            ),
        };
        (
            format!(
                "SELECT {} FROM {} WHERE {}{cond} ORDER BY {}, {} LIMIT {limit}",
                self.select, self.from, self.filter, self.change, self.pk
            ),
            params,
        )
    }

    /// The row whose primary key is `pk`, as a page of at most one row.
    pub fn row(&self, pk: &Value) -> (String, Vec<Value>) {
        (
            format!(
                "SELECT {} FROM {} WHERE {}{} = {} LIMIT 1",
                self.select,
                self.from,
                self.filter,
                self.pk,
                self.param(1)
            ),
            vec![pk.clone()],
        )
    }

    /// A page of the delete sweep: at most `limit` primary keys after `after`.
    pub fn keys(&self, after: Option<&Value>, limit: u32) -> (String, Vec<Value>) {
        let (cond, params) = match after {
            None => ("TRUE".to_string(), vec![]),
            Some(p) => (format!("{} > {}", self.pk, self.param(1)), vec![p.clone()]),
        };
        (
            format!(
                "SELECT {pk} FROM {} WHERE {}{cond} ORDER BY {pk} LIMIT {limit}",
                self.from,
                self.filter,
                pk = self.pk
            ),
            params,
        )
    }
}

/// `v` moved back by `window`: a number minus the window, a date-time text minus that many
/// seconds (a date minus whole days); any other value as it is.
pub fn minus_window(v: &Value, window: u64) -> Value {
    match v {
        Value::Number(n) if n.is_i64() => {
            Value::from(n.as_i64().unwrap_or(0).saturating_sub(window as i64))
        }
        Value::Number(n) if n.is_u64() => {
            Value::from(n.as_u64().unwrap_or(0).saturating_sub(window))
        }
        Value::Number(n) => serde_json::Number::from_f64(n.as_f64().unwrap_or(0.0) - window as f64)
            .map(Value::Number)
            .unwrap_or_else(|| v.clone()),
        Value::String(s) => datetime_minus(s, window)
            .map(Value::String)
            .unwrap_or_else(|| v.clone()),
        _ => v.clone(),
    }
}

fn num(s: &str) -> Option<i64> {
    (!s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()))
        .then(|| s.parse().ok())
        .flatten()
}

/// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's algorithm).
fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let doy = (153 * (if m > 2 { m - 3 } else { m + 9 }) + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

fn civil_from_days(z: i64) -> (i64, i64, i64) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    (yoe + era * 400 + i64::from(m <= 2), m, d)
}

fn datetime_minus(s: &str, secs: u64) -> Option<String> {
    let date = s.get(..10)?;
    let mut p = date.split('-');
    let (y, m, d) = (num(p.next()?)?, num(p.next()?)?, num(p.next()?)?);
    if p.next().is_some() || !(1..=12).contains(&m) || !(1..=31).contains(&d) {
        return None;
    }
    let days = days_from_civil(y, m, d);
    let rest = &s[10..];
    if rest.is_empty() {
        let (y, m, d) = civil_from_days(days - secs.div_ceil(86_400) as i64);
        return Some(format!("{y:04}-{m:02}-{d:02}"));
    }
    let sep = rest.get(..1)?;
    if sep != " " && sep != "T" {
        return None;
    }
    let time = rest.get(1..9)?;
    let mut t = time.split(':');
    let (h, mi, se) = (num(t.next()?)?, num(t.next()?)?, num(t.next()?)?);
    // The fraction is dropped (the bound only moves earlier); a zone suffix is kept.
    let tail = rest[9..].trim_start_matches(|c: char| c == '.' || c.is_ascii_digit());
    let total = days * 86_400 + h * 3600 + mi * 60 + se - secs as i64;
    let (y, m, d) = civil_from_days(total.div_euclid(86_400));
    let r = total.rem_euclid(86_400);
    Some(format!(
        "{y:04}-{m:02}-{d:02} {:02}:{:02}:{:02}{tail}",
        r / 3600,
        r % 3600 / 60,
        r % 60
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn source(protocol: &str) -> RagSource {
        let text = format!(
            "[[rag_sources]]\nsource_id = 1\nname = \"docs\"\nprotocol = \"{protocol}\"\nhostgroup_id = 1\nusername = \"app\"\n\
             table_name = \"app.docs\"\npk_column = \"id\"\nchange_column = \"updated_at\"\ntitle_column = \"title\"\n\
             text_template = \"{{title}}: {{body}}\"\nmetadata_columns = \"lang, id\"\nembedding_base_url = \"http://127.0.0.1:1/v1\"\n"
        );
        sluice_core::config::Config::parse(&text)
            .expect("config")
            .rag_sources
            .remove(0)
    }

    #[test]
    fn pages_are_keyset_with_bound_parameters() {
        let my = SourceSql::new(&source("mysql"));
        assert_eq!(my.columns, ["id", "updated_at", "title", "body", "lang"]);
        let (sql, p) = my.page(
            &Bound::After(Value::from("2026-01-01 00:00:00"), Value::from(7)),
            100,
        );
        assert_eq!(
            sql,
            "SELECT `id`, `updated_at`, `title`, `body`, `lang` FROM `app`.`docs` WHERE (`updated_at` > ? OR (`updated_at` = ? AND `id` > ?)) ORDER BY `updated_at`, `id` LIMIT 100"
        );
        assert_eq!(p.len(), 3);
        let pg = SourceSql::new(&source("pgsql"));
        let (sql, _) = pg.page(&Bound::AtLeast(Value::from(5)), 10);
        assert!(sql.contains("WHERE \"updated_at\" >= $1 ORDER BY"), "{sql}");
        let (sql, p) = pg.keys(Some(&Value::from(9)), 50);
        assert_eq!(
            sql,
            "SELECT \"id\" FROM \"app\".\"docs\" WHERE \"id\" > $1 ORDER BY \"id\" LIMIT 50"
        );
        assert_eq!(p, vec![Value::from(9)]);
    }

    #[test]
    fn the_window_moves_numbers_and_times_back() {
        assert_eq!(minus_window(&Value::from(100), 60), Value::from(40));
        assert_eq!(
            minus_window(&Value::from("2026-03-01 00:00:30.123456"), 60),
            Value::from("2026-02-28 23:59:30")
        );
        assert_eq!(
            minus_window(&Value::from("2024-03-01T00:00:00+00"), 86_400),
            Value::from("2024-02-29 00:00:00+00")
        );
        assert_eq!(
            minus_window(&Value::from("2026-01-01"), 60),
            Value::from("2025-12-31")
        );
        assert_eq!(minus_window(&Value::from("abc"), 60), Value::from("abc"));
        for days in [-800_000i64, -1, 0, 1, 19_000, 2_000_000] {
            let (y, m, d) = civil_from_days(days);
            assert_eq!(days_from_civil(y, m, d), days);
        }
    }
}

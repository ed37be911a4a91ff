use super::*;

fn items(sql: &str) -> Vec<SetItem> {
    match parse_set(sql) {
        SetParse::Items(v) => v,
        other => panic!("{sql}: {other:?}"),
    }
}

fn lit(name: &str, v: &str) -> SetItem {
    SetItem::Session {
        name: name.into(),
        value: SetValue::Literal(v.into()),
    }
}

#[test]
fn session_forms() {
    assert_eq!(
        items("SET sql_mode = 'TRADITIONAL'"),
        vec![lit("sql_mode", "'TRADITIONAL'")]
    );
    assert_eq!(
        items("set SESSION sql_select_limit=10"),
        vec![lit("sql_select_limit", "10")]
    );
    assert_eq!(
        items("SET @@session.autocommit = 0;"),
        vec![lit("autocommit", "0")]
    );
    assert_eq!(
        items("SET @@autocommit := OFF"),
        vec![lit("autocommit", "OFF")]
    );
    assert_eq!(
        items("SET LOCAL max_execution_time = 500"),
        vec![lit("max_execution_time", "500")]
    );
    assert_eq!(
        items(
            "SET time_zone = 'America/Argentina/Buenos_Aires', sql_auto_is_null=0, wait_timeout=-1"
        ),
        vec![
            lit("time_zone", "'America/Argentina/Buenos_Aires'"),
            lit("sql_auto_is_null", "0"),
            lit("wait_timeout", "-1")
        ]
    );
    assert_eq!(
        items("SET time_zone='America/Port-au-Prince'"),
        vec![lit("time_zone", "'America/Port-au-Prince'")]
    );
    assert_eq!(
        items("SET time_zone = '-03:00'"),
        vec![lit("time_zone", "'-03:00'")]
    );
    assert_eq!(
        items("SET `sql_mode` = DEFAULT"),
        vec![lit("sql_mode", "DEFAULT")]
    );
}

#[test]
fn expressions_need_read_back() {
    assert_eq!(
        items("SET sql_mode = CONCAT(@@sql_mode, ',STRICT_TRANS_TABLES'), x = 1"),
        vec![
            SetItem::Session {
                name: "sql_mode".into(),
                value: SetValue::Expression
            },
            lit("x", "1")
        ]
    );
    assert_eq!(
        items("SET SESSION sql_mode = (SELECT 'ANSI')"),
        vec![SetItem::Session {
            name: "sql_mode".into(),
            value: SetValue::Expression
        }]
    );
}

#[test]
fn names_and_character_set() {
    assert_eq!(
        items("SET NAMES utf8mb4 COLLATE utf8mb4_unicode_ci"),
        vec![SetItem::Names {
            charset: Some("utf8mb4".into()),
            collation: Some("utf8mb4_unicode_ci".into())
        }]
    );
    assert_eq!(
        items("SET NAMES 'latin1'"),
        vec![SetItem::Names {
            charset: Some("latin1".into()),
            collation: None
        }]
    );
    assert_eq!(
        items("SET NAMES DEFAULT"),
        vec![SetItem::Names {
            charset: None,
            collation: None
        }]
    );
    assert_eq!(
        items("SET CHARACTER SET utf8"),
        vec![SetItem::CharacterSet(Some("utf8".into()))]
    );
    assert_eq!(
        items("SET CHARSET 'utf8mb4'"),
        vec![SetItem::CharacterSet(Some("utf8mb4".into()))]
    );
    assert_eq!(
        items("/*!40101 SET NAMES utf8mb4 */"),
        vec![SetItem::Names {
            charset: Some("utf8mb4".into()),
            collation: None
        }]
    );
}

#[test]
fn transactions_globals_and_user_vars() {
    assert_eq!(
        items("SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED"),
        vec![SetItem::SessionTransaction {
            isolation: Some("READ COMMITTED".into()),
            read_only: None
        }]
    );
    assert_eq!(
        items("SET SESSION TRANSACTION READ ONLY, ISOLATION LEVEL SERIALIZABLE"),
        vec![SetItem::SessionTransaction {
            isolation: Some("SERIALIZABLE".into()),
            read_only: Some(true)
        }]
    );
    assert_eq!(
        items("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ"),
        vec![SetItem::NextTransaction]
    );
    assert_eq!(
        items("SET GLOBAL max_connections = 10"),
        vec![SetItem::Global]
    );
    assert_eq!(
        items("SET @@global.x = 1, @@session.y = 2"),
        vec![SetItem::Global, lit("y", "2")]
    );
    assert_eq!(
        items("SET @a = 1, @b := (SELECT 2)"),
        vec![SetItem::UserVar, SetItem::UserVar]
    );
}

#[test]
fn unknown_and_not_set() {
    assert_eq!(parse_set("SELECT 1"), SetParse::NotSet);
    assert_eq!(parse_set(""), SetParse::NotSet);
    for q in [
        "SET PASSWORD = 'x'",
        "SET ROLE r",
        "SET STATEMENT max_statement_time=1 FOR SELECT 1",
        "SET x",
        "SET x = ",
        "SET TRANSACTION FOO",
        "SET a.b.c = 1",
        "SET NAMES",
        "SET x = 1,",
    ] {
        assert_eq!(parse_set(q), SetParse::Unknown, "{q}");
    }
}

/// Found by the `mysql_sql` fuzz target: an unterminated quote ending in a multi-byte character
/// sliced the text inside that character and panicked the session.
#[test]
fn unterminated_quote_before_a_multibyte_character() {
    for q in [
        "SET NAMES 'U\u{fffd}",
        "SET NAMES \"\u{e9}",
        "SET CHARACTER SET '\u{fffd}",
    ] {
        let _ = parse_set(q);
    }
    assert!(matches!(
        parse_set("SET NAMES 'utf8mb4'"),
        SetParse::Items(_)
    ));
}

mod fuzz {
    use super::*;
    use proptest::prelude::*;
    proptest! {
        #[test]
        fn never_panics(s in "(SET|set|@@|@|NAMES|,|=|:=|'x'|1|a|\\(|\\)| )*") {
            let _ = parse_set(&s);
        }
    }
}

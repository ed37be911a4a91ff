use super::*;
use proptest::prelude::*;

fn tokens(sql: &str, syntax: Syntax) -> Vec<Token<'_>> {
    Lexer::new(sql, syntax).map_while(Result::ok).collect()
}

fn word_tokens(sql: &str, syntax: Syntax) -> Vec<&str> {
    tokens(sql, syntax)
        .into_iter()
        .filter_map(|t| match t {
            Token::Word(w) => Some(w),
            _ => None,
        })
        .collect()
}

#[test]
fn mysql_tokens_with_variables_and_operators() {
    let t = tokens(
        "SET @@session.sql_mode = 'A,B', @x := 5, time_zone=\"America/Port-au-Prince\" -- c\n",
        Syntax::Mysql,
    );
    assert_eq!(
        t,
        vec![
            Token::Word("SET"),
            Token::SysVar("session.sql_mode"),
            Token::Punct("="),
            Token::Str("'A,B'"),
            Token::Punct(","),
            Token::UserVar("x"),
            Token::Punct(":="),
            Token::Num("5"),
            Token::Punct(","),
            Token::Word("time_zone"),
            Token::Punct("="),
            Token::Str("\"America/Port-au-Prince\""),
        ]
    );
    assert_eq!(
        tokens("a<=>b <> c != d >= e", Syntax::Mysql)
            .iter()
            .filter(|t| matches!(t, Token::Punct(_)))
            .map(Token::text)
            .collect::<Vec<_>>(),
        ["<=", ">", "<>", "!=", ">="]
    );
    assert_eq!(
        tokens("SET @'my var' = 1", Syntax::Mysql)[1],
        Token::UserVar("my var")
    );
}

#[test]
fn strings_comments_and_quoted_names_hide_their_words() {
    let sql = "SELECT 'DROP '' x', `delete`, /* UPDATE */ a -- INSERT\n FROM t # DROP";
    assert_eq!(
        word_tokens(sql, Syntax::Mysql),
        ["SELECT", "a", "FROM", "t"]
    );
    let pg = "SELECT $$ DROP $$, $x$ a $y$ b $x$, E'\\' DELETE', \"update\" /* a /* b */ c */";
    assert_eq!(word_tokens(pg, Syntax::Pgsql), ["SELECT"]);
    let lite = "SELECT [attach], `detach`, \"vacuum\", 'pragma' -- x\n FROM t";
    assert_eq!(word_tokens(lite, Syntax::Sqlite), ["SELECT", "FROM", "t"]);
}

#[test]
fn executable_comments_are_code_in_mysql() {
    let mut lx = Lexer::new(
        "/*!40101 SET NAMES utf8 */; /*M!100100 SELECT 1 */",
        Syntax::Mysql,
    );
    let t: Vec<_> = lx.by_ref().map_while(Result::ok).collect();
    assert_eq!(
        t.iter().map(Token::text).collect::<Vec<_>>(),
        ["SET", "NAMES", "utf8", ";", "SELECT", "1"]
    );
    assert!(lx.saw_executable_comment());
    let mut plain = Lexer::new("/* 1 */ SELECT 1", Syntax::Mysql);
    assert_eq!(plain.by_ref().count(), 2);
    assert!(!plain.saw_executable_comment());
    // Elsewhere `/*!` is an ordinary comment.
    assert_eq!(word_tokens("/*! DROP */ SELECT", Syntax::Pgsql), ["SELECT"]);
}

#[test]
fn open_strings_and_comments_are_errors_that_end_the_tokens() {
    for (sql, syntax, what) in [
        ("SELECT 'abc", Syntax::Mysql, "string"),
        ("SELECT $a$ abc", Syntax::Pgsql, "dollar-quoted string"),
        ("SELECT /* a /* b */", Syntax::Pgsql, "comment"),
        ("SELECT [abc", Syntax::Sqlite, "quoted identifier"),
        // In MySQL a backslash escapes the quote: this string never ends.
        (r"SELECT 'a\'; DROP TABLE t", Syntax::Mysql, "string"),
    ] {
        let mut lx = Lexer::new(sql, syntax);
        let last = lx.by_ref().last();
        assert_eq!(last, Some(Err(LexError::Unterminated(what))), "{sql}");
        assert_eq!(lx.next(), None, "nothing after an error");
    }
    // In PostgreSQL it does not: the string ends and a second statement follows.
    let t = tokens(r"SELECT 'a\'; DROP TABLE t", Syntax::Pgsql);
    assert!(t.contains(&Token::Punct(";")));
    // Nor in SQLite.
    assert!(tokens(r"SELECT 'a\'; DROP TABLE t", Syntax::Sqlite).contains(&Token::Punct(";")));
}

#[test]
fn mysql_double_dash_needs_a_space() {
    // `1--1` is 1 minus minus 1 in MySQL, not a comment.
    assert_eq!(
        word_tokens("SELECT 1--1 FROM t", Syntax::Mysql),
        ["SELECT", "FROM", "t"]
    );
    assert_eq!(word_tokens("SELECT 1 --x\n", Syntax::Pgsql), ["SELECT"]);
}

#[test]
fn placeholders_per_syntax() {
    let kinds = |sql, syntax| {
        tokens(sql, syntax)
            .into_iter()
            .filter(|t| matches!(t, Token::Placeholder(_)))
            .map(|t| t.text())
            .collect::<Vec<_>>()
    };
    assert_eq!(
        kinds("SELECT $1, ?, $2::int", Syntax::Pgsql),
        ["$1", "?", "$2"]
    );
    assert_eq!(
        kinds("SELECT ?3, :a, @b, $c", Syntax::Sqlite),
        ["?3", ":a", "@b", "$c"]
    );
    assert_eq!(
        word_tokens("SELECT $c FROM t", Syntax::Mysql),
        ["SELECT", "$c", "FROM", "t"]
    );
}

#[test]
fn values_of_strings_and_names() {
    let t = tokens(
        r#"SELECT 'it''s', "a\"b", _utf8mb4'x', `a``b`"#,
        Syntax::Mysql,
    );
    let values: Vec<_> = t[1..]
        .iter()
        .filter_map(|t| t.string_value(Syntax::Mysql))
        .collect();
    assert_eq!(values, ["it's", "a\"b", "x"]);
    assert_eq!(t.last().and_then(Token::name), Some("a``b"));
    assert_eq!(t.last().and_then(Token::identifier).as_deref(), Some("a`b"));
    let pg = tokens(r#"SELECT E'a\'b', 'c\', $q$d$q$, "x""y""#, Syntax::Pgsql);
    let values: Vec<_> = pg
        .iter()
        .filter_map(|t| t.string_value(Syntax::Pgsql))
        .collect();
    assert_eq!(values, ["a'b", "c\\", "d"]);
    assert_eq!(
        pg.last().and_then(Token::identifier).as_deref(),
        Some("x\"y")
    );
    let lite = tokens("SELECT [a b]", Syntax::Sqlite);
    assert_eq!(lite[1].identifier().as_deref(), Some("a b"));
}

#[test]
fn splits_statements_where_the_server_would() {
    assert_eq!(
        split_statements("SELECT ';'; SET a=1 ;  ", Syntax::Mysql),
        ["SELECT ';'", "SET a=1"]
    );
    assert_eq!(
        split_statements(
            "SELECT 1; SELECT ';' -- x;\n; UPDATE t SET a='b;c';",
            Syntax::Pgsql
        ),
        ["SELECT 1", "SELECT ';' -- x;", "UPDATE t SET a='b;c'"]
    );
    assert!(split_statements(" ; ", Syntax::Pgsql).is_empty());
    assert_eq!(
        split_statements("/* a; */ SELECT 2", Syntax::Pgsql),
        ["/* a; */ SELECT 2"]
    );
    // A function body in dollar quotes is one statement, however many `;` it holds.
    assert_eq!(
        split_statements(
            "CREATE FUNCTION f() RETURNS int AS $body$ BEGIN RETURN 1; END; $body$ LANGUAGE plpgsql; SELECT f()",
            Syntax::Pgsql
        )
        .len(),
        2
    );
    assert_eq!(
        split_statements("SELECT 1; SELECT 'open", Syntax::Mysql),
        ["SELECT 1", "SELECT 'open"]
    );
}

#[test]
fn words_are_runs_of_tokens_written_together() {
    assert_eq!(
        words(
            "LOAD /* x */ MYSQL USERS TO RUNTIME -- y",
            Syntax::Sqlite,
            &[]
        ),
        ["LOAD", "MYSQL", "USERS", "TO", "RUNTIME"]
    );
    assert_eq!(
        words("SELECT version(), 'a b';", Syntax::Mysql, &[]),
        ["SELECT", "version(),", "'a b';"]
    );
    assert_eq!(
        words("DROP TABLE pg_temp.t, \"x y\"(", Syntax::Pgsql, &[",", "("]),
        ["DROP", "TABLE", "pg_temp.t", "\"x y\""]
    );
}

proptest! {
    #[test]
    fn never_panics_and_every_token_is_a_slice_of_the_text(s in ".{0,80}") {
        for syntax in [Syntax::Mysql, Syntax::Pgsql, Syntax::Sqlite] {
            let mut last_end = 0;
            for t in Lexer::new(&s, syntax).map_while(Result::ok) {
                let text = t.text();
                let at = text.as_ptr() as usize - s.as_ptr() as usize;
                prop_assert!(at >= last_end && at + text.len() <= s.len());
                last_end = at + text.len();
                let _ = (t.string_value(syntax), t.identifier());
            }
            let _ = split_statements(&s, syntax);
            let _ = words(&s, syntax, &[","]);
        }
    }
}

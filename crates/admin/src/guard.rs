//! What the admin's SQLite will not run for a user: statements that reach the filesystem or load
//! code — `ATTACH`/`DETACH` (open or create any file), `VACUUM … INTO` (write any file),
//! `load_extension()` (load a shared library) — and PRAGMAs that change the engine's behaviour.
//! PRAGMAs that only read (`PRAGMA table_info(t)`, `PRAGMA database_list`, …) stay allowed, as
//! ProxySQL's admin documents them. Read from tokens, so comments, quoting and case do not hide
//! anything, in every statement of a multi-statement string.

use sluice_core::query::lexer::{Lexer, Syntax, Token};
use std::borrow::Cow;

/// PRAGMAs that only report, allowed with an argument (`PRAGMA table_info(mysql_servers)`).
const READ_PRAGMAS: [&str; 12] = [
    "table_info",
    "table_xinfo",
    "table_list",
    "index_list",
    "index_info",
    "index_xinfo",
    "foreign_key_list",
    "database_list",
    "collation_list",
    "function_list",
    "pragma_list",
    "compile_options",
];

/// One token: a word (keyword, identifier or quoted name, lower-cased), a string literal's
/// value (lower-cased: SQLite takes `FROM 'name'` as a table name) or a punctuation byte.
#[derive(Debug, PartialEq, Eq)]
enum Tok {
    Word(String),
    Str(String),
    Punct(u8),
}

/// Splits `sql` into statements of tokens, read by `sluice-query`'s lexer in SQLite's syntax
/// (`"…"`, `` `…` `` and `[…]` names; no backslash escapes): comments are skipped, quoted
/// names become words. A text that stops lexing (an open string) is read up to there: SQLite
/// runs nothing of a statement it cannot parse.
fn statements(sql: &str) -> Vec<Vec<Tok>> {
    let mut out = vec![Vec::new()];
    for token in Lexer::new(sql, Syntax::Sqlite).map_while(Result::ok) {
        let Some(stmt) = out.last_mut() else {
            break;
        };
        match token {
            Token::Punct(";") => out.push(Vec::new()),
            Token::Punct(p) | Token::Placeholder(p) => stmt.extend(p.bytes().map(Tok::Punct)),
            Token::Str(_) => {
                let value = token.string_value(Syntax::Sqlite).unwrap_or_default();
                stmt.push(Tok::Str(value.to_ascii_lowercase()));
            }
            _ => {
                let name = token.identifier().unwrap_or(Cow::Borrowed(token.text()));
                stmt.push(Tok::Word(name.to_ascii_lowercase()));
            }
        }
    }
    out.retain(|s| !s.is_empty());
    out
}

fn is_word(t: Option<&Tok>, w: &str) -> bool {
    matches!(t, Some(Tok::Word(x)) if x == w)
}

/// Why the admin refuses `sql`, or `None` when it may run.
pub(crate) fn refused(sql: &str) -> Option<String> {
    for stmt in statements(sql) {
        let first = stmt.first();
        for verb in ["attach", "detach"] {
            if is_word(first, verb) {
                return Some(format!(
                    "{} is refused by Sluice's admin: it opens or creates files",
                    verb.to_ascii_uppercase()
                ));
            }
        }
        if is_word(first, "vacuum")
            && stmt
                .iter()
                .any(|t| matches!(t, Tok::Word(w) if w == "into"))
        {
            return Some("VACUUM INTO is refused by Sluice's admin: it writes a file".into());
        }
        let calls_load = stmt.windows(2).any(|w| {
            matches!(&w[0], Tok::Word(x) if x == "load_extension") && w[1] == Tok::Punct(b'(')
        });
        if calls_load {
            return Some("load_extension() is refused by Sluice's admin: it loads code".into());
        }
        if is_word(first, "pragma") {
            // PRAGMA [schema.]name [= value | (arg)]
            let mut rest = &stmt[1..];
            if rest.get(1) == Some(&Tok::Punct(b'.')) {
                rest = &rest[2..];
            }
            let name = match rest.first() {
                Some(Tok::Word(n)) => n.as_str(),
                _ => "",
            };
            let writes = match rest.get(1) {
                None => false,
                Some(Tok::Punct(b'(')) => !READ_PRAGMAS.contains(&name),
                Some(_) => true,
            };
            if writes {
                return Some(format!(
                    "PRAGMA {name} with a value is refused by Sluice's admin: only reading PRAGMAs run"
                ));
            }
        }
    }
    None
}

/// Tables the stats account may not read although they are not configuration: the runtime
/// copies that hold passwords.
const SECRET_RUNTIME_TABLES: [&str; 5] = [
    "runtime_mysql_users",
    "runtime_mcp_users",
    "runtime_pgsql_users",
    "runtime_global_variables",
    "runtime_proxysql_servers",
];

/// Why the stats account (`admin-stats_credentials`) may not run `sql`, or `None`: it may run
/// one `SELECT` (or `WITH … SELECT`) that names no configuration table (`mysql_servers`,
/// `mysql_users`, … in any schema), no runtime table holding passwords and nothing of SQLite's
/// own (`sqlite_master`, `pragma_*` functions). Names are checked however they are written:
/// quoted, qualified, as string literals, in subqueries.
pub(crate) fn stats_refusal(sql: &str) -> Option<String> {
    let stmts = statements(sql);
    let [stmt] = stmts.as_slice() else {
        return Some("the stats user may run one SELECT at a time".into());
    };
    if !(is_word(stmt.first(), "select") || is_word(stmt.first(), "with")) {
        return Some("the stats user may only read (SELECT)".into());
    }
    let config = crate::schema_defs::CONFIG_TABLES
        .iter()
        .map(|(name, _)| *name);
    for t in stmt {
        let (Tok::Word(name) | Tok::Str(name)) = t else {
            continue;
        };
        let secret = config.clone().any(|c| c == name)
            || SECRET_RUNTIME_TABLES.contains(&name.as_str())
            || name.starts_with("sqlite_")
            || name.starts_with("pragma_");
        if secret {
            return Some(format!(
                "the stats user may not read {name}: only stats_*, monitor.* and runtime_* \
                 tables without passwords"
            ));
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refuses_what_reaches_files_or_loads_code_however_it_is_written() {
        for sql in [
            "ATTACH DATABASE '/tmp/x.db' AS x",
            "attach '/tmp/x.db' as x",
            "/* hi */ ATTACH '/tmp/x.db' AS x",
            "SELECT 1; ATTACH '/tmp/x.db' AS x",
            "DETACH disk",
            "VACUUM INTO '/tmp/copy.db'",
            "vacuum main into '/tmp/copy.db'",
            "SELECT load_extension('/tmp/evil.so')",
            "select LOAD_EXTENSION ('/tmp/evil.so')",
            "PRAGMA writable_schema = 1",
            "PRAGMA main.journal_mode = OFF",
            "PRAGMA journal_mode(MEMORY)",
            "pragma \"writable_schema\"=ON",
        ] {
            assert!(refused(sql).is_some(), "{sql} was allowed");
        }
    }

    #[test]
    fn allows_reads_and_ordinary_statements() {
        for sql in [
            "SELECT * FROM mysql_servers",
            "SELECT 'ATTACH DATABASE x', \"attach\" FROM t",
            "SELECT 1 -- ATTACH 'x' AS y",
            "UPDATE mysql_servers SET comment = 'vacuum into the night' WHERE hostgroup_id = 1",
            "PRAGMA table_info(mysql_servers)",
            "PRAGMA database_list",
            "PRAGMA main.table_info('mysql_users')",
            "VACUUM",
            "INSERT INTO mysql_query_rules (rule_id, match_pattern) VALUES (1, 'load_extension(')",
        ] {
            assert_eq!(refused(sql), None, "{sql} was refused");
        }
    }

    #[test]
    fn the_stats_account_reads_stats_monitor_and_runtime_tables_only() {
        for sql in [
            "SELECT * FROM stats_mysql_connection_pool",
            "select hostname, status from runtime_mysql_servers",
            "SELECT * FROM stats.stats_mysql_query_digest WHERE digest_text LIKE '%mysql_users%'",
            "SELECT * FROM monitor.mysql_server_ping_log ORDER BY time_start_us DESC LIMIT 3",
            "WITH x AS (SELECT * FROM stats_mysql_global) SELECT * FROM x",
        ] {
            assert_eq!(stats_refusal(sql), None, "{sql} was refused");
        }
        for sql in [
            "SELECT * FROM mysql_users",
            "SELECT password FROM disk.mysql_users",
            "SELECT * FROM \"MYSQL_USERS\"",
            "SELECT * FROM 'mysql_users'",
            "SELECT * FROM stats_mysql_global, [global_variables]",
            "SELECT (SELECT password FROM pgsql_users LIMIT 1) FROM stats_mysql_global",
            "SELECT * FROM runtime_mysql_users",
            "SELECT * FROM runtime_global_variables",
            "SELECT sql FROM sqlite_master",
            "SELECT * FROM pragma_table_info('mysql_users')",
            "SELECT 1; SELECT * FROM stats_mysql_global",
            "DELETE FROM stats_mysql_global",
            "PRAGMA table_info(mysql_users)",
        ] {
            assert!(stats_refusal(sql).is_some(), "{sql} was allowed");
        }
    }
}

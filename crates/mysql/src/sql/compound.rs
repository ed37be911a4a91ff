//! Compound statements and stored-program definitions. What looks like statements inside them
//! is not the session's: `SET x = …` in a `BEGIN NOT ATOMIC … END` block or a procedure body
//! assigns a local variable, and must not be tracked and replayed as a session variable
//! (mariadb-test `cast`, `sp-big`: error 1193 "Unknown system variable" on the next connection).

use super::lexer::{Lexer, Tok};

/// What a statement that holds other statements is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Compound {
    /// `CREATE [OR REPLACE] [DEFINER=…] {PROCEDURE|FUNCTION|TRIGGER|EVENT|PACKAGE} …` or
    /// `ALTER EVENT …`: the body is stored, not run; nothing of the session changes.
    Definition,
    /// A block run now (`BEGIN NOT ATOMIC`, `IF`, `CASE`, `LOOP`, `WHILE`, `REPEAT`, `FOR`, a
    /// labelled block): it may change the session in ways Sluice cannot follow.
    Block,
}

/// Words after `CREATE` that say the object is not a stored program.
const OTHER_OBJECTS: [&str; 12] = [
    "TABLE",
    "VIEW",
    "INDEX",
    "DATABASE",
    "SCHEMA",
    "USER",
    "ROLE",
    "SEQUENCE",
    "SERVER",
    "TABLESPACE",
    "TEMPORARY",
    "UNIQUE",
];
/// Stored programs.
const PROGRAMS: [&str; 5] = ["PROCEDURE", "FUNCTION", "TRIGGER", "EVENT", "PACKAGE"];
/// Statements that open a block.
const BLOCKS: [&str; 6] = ["IF", "CASE", "LOOP", "WHILE", "REPEAT", "FOR"];

/// Whether `sql` (a whole COM_QUERY text) is a compound statement or a stored-program definition.
pub(crate) fn compound(sql: &str) -> Option<Compound> {
    let toks: Vec<Tok<'_>> = Lexer::new(sql).take(16).collect();
    let first = toks.first()?;
    let kw = |i: usize, k: &str| toks.get(i).is_some_and(|t| t.is_keyword(k));
    if first.is_keyword("CREATE") {
        for t in &toks[1..] {
            if t.is_punct("(") || OTHER_OBJECTS.iter().any(|k| t.is_keyword(k)) {
                return None;
            }
            if PROGRAMS.iter().any(|k| t.is_keyword(k)) {
                return Some(Compound::Definition);
            }
        }
        return None;
    }
    if first.is_keyword("ALTER") && kw(1, "EVENT") {
        return Some(Compound::Definition);
    }
    if first.is_keyword("BEGIN") && kw(1, "NOT") && kw(2, "ATOMIC") {
        return Some(Compound::Block);
    }
    if BLOCKS.iter().any(|k| first.is_keyword(k)) {
        return Some(Compound::Block);
    }
    // `label: BEGIN …`, `label: LOOP …`.
    let labelled = matches!(first, Tok::Word(_))
        && toks.get(1).is_some_and(|t| t.is_punct(":"))
        && (kw(2, "BEGIN") || BLOCKS.iter().any(|k| kw(2, k)));
    labelled.then_some(Compound::Block)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn definitions_and_blocks_are_told_apart_from_plain_statements() {
        use Compound::*;
        for (sql, want) in [
            (
                "CREATE PROCEDURE p() BEGIN DECLARE x INT; SET x = 5; END",
                Some(Definition),
            ),
            (
                "create or replace definer=`root`@`%` function f() returns int return 1",
                Some(Definition),
            ),
            (
                "CREATE TRIGGER t BEFORE INSERT ON a FOR EACH ROW SET NEW.x = 1",
                Some(Definition),
            ),
            ("ALTER EVENT e DO SET @a = 1", Some(Definition)),
            (
                "BEGIN NOT ATOMIC DECLARE a INT; SET a = 1; END",
                Some(Block),
            ),
            ("IF 1 THEN SELECT 1; END IF", Some(Block)),
            ("lbl: LOOP LEAVE lbl; END LOOP", Some(Block)),
            ("BEGIN", None),
            ("BEGIN WORK", None),
            ("CREATE TABLE event (procedure int)", None),
            (
                "CREATE TABLE t (a int); CREATE PROCEDURE p() SELECT 1",
                None,
            ),
            ("SET a = 1", None),
            ("SELECT 1", None),
        ] {
            assert_eq!(compound(sql), want, "{sql}");
        }
    }
}

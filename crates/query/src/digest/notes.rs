//! What the tokenizer notes for routing and the cache besides the digest text: the
//! statement kind, locking reads, and the tables a statement names.

use super::{MAX_TABLES, StatementKind, Tokenizer};

#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum TableState {
    Idle,
    /// A table name comes next (after FROM, JOIN, ...).
    Expect,
    /// A name was read; `.` qualifies it, `,` (in FROM) expects another, a word is an alias.
    Got,
    /// After `name.`: the next word replaces the name.
    Qualified,
    /// After an alias.
    Alias,
}

impl Tokenizer<'_> {
    pub(super) fn first_word(&mut self, w: &[u8]) {
        if self.kind.is_some() && !self.after_with {
            return;
        }
        let kind = if w.eq_ignore_ascii_case(b"copy") {
            self.table_state = TableState::Expect;
            StatementKind::Copy
        } else if w.eq_ignore_ascii_case(b"load") {
            StatementKind::Copy
        } else if w.eq_ignore_ascii_case(b"rename") {
            StatementKind::Ddl
        } else if self.after_with {
            return;
        } else {
            StatementKind::Other
        };
        self.kind = Some(kind);
        self.after_with = false;
    }

    pub(super) fn keyword(&mut self, k: &'static str) {
        let verb = match k {
            "SELECT" => Some(StatementKind::Select),
            "INSERT" => Some(StatementKind::Insert),
            "UPDATE" => Some(StatementKind::Update),
            "DELETE" => Some(StatementKind::Delete),
            "REPLACE" => Some(StatementKind::Replace),
            "CREATE" | "ALTER" | "DROP" | "TRUNCATE" => Some(StatementKind::Ddl),
            _ => None,
        };
        if self.kind.is_none() || (self.after_with && self.depth == 0) {
            if k == "WITH" && self.kind.is_none() {
                self.kind = Some(StatementKind::Select);
                self.after_with = true;
            } else if let Some(v) = verb {
                self.kind = Some(v);
                self.after_with = false;
            } else if self.kind.is_none() {
                self.kind = Some(StatementKind::Other);
            }
        }
        if (self.prev_kw == "FOR" && (k == "UPDATE" || k == "SHARE"))
            || (self.prev_kw == "LOCK" && k == "IN")
        {
            self.locking = true;
        }
        self.prev_kw = k;
        match k {
            "FROM" | "JOIN" | "UPDATE" | "INTO" | "TABLE" | "TRUNCATE" => {
                self.table_state = TableState::Expect;
                self.in_from = k == "FROM";
            }
            "AS" if matches!(self.table_state, TableState::Got) => {}
            "WHERE" | "SET" | "VALUES" | "ON" | "USING" | "GROUP" | "ORDER" | "LIMIT"
            | "SELECT" | "UNION" => {
                self.table_state = TableState::Idle;
                self.in_from = false;
            }
            _ if self.table_state == TableState::Expect => {}
            _ => self.table_state = TableState::Idle,
        }
    }

    pub(super) fn identifier_for_tables(&mut self, name: &[u8]) {
        match self.table_state {
            TableState::Expect => {
                if self.n_tables < MAX_TABLES {
                    match self.tables.get_mut(self.n_tables) {
                        Some(kept) => lower_into(kept, name),
                        None => {
                            let mut t = String::new();
                            lower_into(&mut t, name);
                            self.tables.push(t);
                        }
                    }
                    self.n_tables += 1;
                } else {
                    self.tables_complete = false;
                }
                self.table_state = TableState::Got;
            }
            TableState::Qualified => {
                if let Some(last) = self.n_tables.checked_sub(1)
                    && let Some(t) = self.tables.get_mut(last)
                {
                    lower_into(t, name);
                }
                self.table_state = TableState::Got;
            }
            TableState::Got => self.table_state = TableState::Alias,
            TableState::Alias | TableState::Idle => self.table_state = TableState::Idle,
        }
    }
}

/// Writes `name` lower-cased into `out` (reusing its capacity for the usual ASCII names).
fn lower_into(out: &mut String, name: &[u8]) {
    out.clear();
    match std::str::from_utf8(name) {
        Ok(t) if t.is_ascii() => {
            out.push_str(t);
            out.make_ascii_lowercase();
        }
        _ => out.push_str(&String::from_utf8_lossy(name).to_lowercase()),
    }
}

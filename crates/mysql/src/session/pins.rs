//! What keeps a session on its backend connection, and why — the multiplexing decision.
//! Pure data: the session feeds it statement effects and reply status flags.

use crate::sql::classify::Effects;
use hashbrown::HashSet;
use sluice_core::advisory::AdvisoryLocks;
use sluice_mysql_proto::consts::status;

/// The session-scoped things a backend connection holds for one client.
#[derive(Debug, Clone, Default)]
pub(crate) struct Pins {
    /// Server status flags of the last reply that carried them.
    pub status: u16,
    /// Temporary tables created and not dropped.
    pub temp_tables: HashSet<String>,
    /// GET_LOCK() locks not released, per name.
    pub user_locks: AdvisoryLocks,
    /// LOCK TABLES / FLUSH TABLES WITH READ LOCK in effect.
    pub lock_tables: bool,
    /// SQL-level PREPARE names not deallocated.
    pub sql_prepared: HashSet<String>,
    /// SQL_CALC_FOUND_ROWS seen, FOUND_ROWS() not yet.
    pub calc_found_rows: bool,
    /// A user variable was assigned (kept until the session is reset).
    pub user_vars: bool,
    /// A SET Sluice could not parse with certainty.
    pub unparsed_set: bool,
    /// `SET TRANSACTION ...` for the next transaction, not started yet.
    pub next_transaction: bool,
    /// Something untrackable ran (XA, HANDLER, ...).
    pub untrackable: Option<&'static str>,
    /// Statements left to keep the connection after one that generated an auto-increment id.
    pub auto_increment_left: u32,
    /// When that hold ends regardless (`mysql-auto_increment_delay_multiplex_timeout_ms`).
    pub auto_increment_until: Option<std::time::Instant>,
    /// Statements with long data sent and not executed yet (client statement ids).
    pub long_data: HashSet<u32>,
    /// Statements with an open cursor (client statement ids).
    pub cursors: HashSet<u32>,
    /// Multiplexing is turned off for this session (globally, for its user or its hostgroup).
    pub disabled: bool,
    /// A query rule with `multiplex=0` or `sticky_conn=1` matched (until one with `multiplex=1`).
    pub rule_pinned: bool,
}

impl Pins {
    /// Inside a transaction (the server's last status said so).
    pub(crate) fn in_transaction(&self) -> bool {
        self.status & status::IN_TRANS != 0
    }

    /// Why the session is pinned to its backend connection, or `None` when it can be multiplexed.
    pub(crate) fn reason(&self) -> Option<&'static str> {
        Some(if self.disabled {
            "multiplexing disabled"
        } else if self.rule_pinned {
            "query rule (multiplex=0)"
        } else if self.status & status::IN_TRANS != 0 {
            "transaction"
        } else if self.status & status::AUTOCOMMIT == 0 {
            "autocommit=0"
        } else if let Some(what) = self.untrackable {
            what
        } else if self.unparsed_set {
            "unparsed SET"
        } else if !self.temp_tables.is_empty() {
            "temporary table"
        } else if self.lock_tables {
            "LOCK TABLES"
        } else if self.user_locks.held() {
            "GET_LOCK"
        } else if !self.sql_prepared.is_empty() {
            "SQL PREPARE"
        } else if self.user_vars {
            "user variable"
        } else if self.calc_found_rows {
            "SQL_CALC_FOUND_ROWS"
        } else if self.next_transaction {
            "SET TRANSACTION"
        } else if !self.long_data.is_empty() {
            "prepared statement long data"
        } else if !self.cursors.is_empty() {
            "prepared statement cursor"
        } else if self.auto_increment_left > 0 {
            "auto_increment (LAST_INSERT_ID)"
        } else {
            return None;
        })
    }

    /// State a connection reset cannot undo: an XA transaction (a prepared one stays attached
    /// to the server session through COM_RESET_CONNECTION). Such a connection is closed when the
    /// session ends — a prepared XA transaction then survives, detached, as for a direct client
    /// that disconnects (`XA RECOVER`, `XA COMMIT` from any connection).
    pub(crate) fn outlives_reset(&self) -> bool {
        self.untrackable == Some("XA transaction")
    }

    /// True when the connection holds state a `COM_RESET_CONNECTION` must clear before another
    /// client may use it (everything except the replayable session state).
    pub(crate) fn dirty(&self) -> bool {
        let transient = self.auto_increment_left > 0 || self.disabled;
        self.reason().is_some() && !(transient && self.clone_without_transient().reason().is_none())
    }

    fn clone_without_transient(&self) -> Pins {
        Pins {
            auto_increment_left: 0,
            auto_increment_until: None,
            disabled: false,
            ..self.clone()
        }
    }

    /// Applies the effects of a statement that ran successfully.
    pub(crate) fn apply(&mut self, e: &Effects) {
        for t in &e.temp_created {
            self.temp_tables.insert(t.clone());
        }
        for t in &e.dropped {
            self.temp_tables.remove(t);
        }
        for call in &e.user_locks {
            self.user_locks.apply(call);
        }
        if e.lock_tables {
            self.lock_tables = true;
        }
        if e.unlock_tables {
            self.lock_tables = false;
        }
        // A statement prepared from a literal follows the session instead (replayed with its
        // session state); one from a user variable pins.
        if let Some(n) = &e.sql_prepare {
            if e.sql_prepare_text.is_some() {
                self.sql_prepared.remove(n);
            } else {
                self.sql_prepared.insert(n.clone());
            }
        }
        if let Some(n) = &e.sql_deallocate {
            self.sql_prepared.remove(n);
        }
        if e.calc_found_rows {
            self.calc_found_rows = true;
        } else if e.found_rows {
            self.calc_found_rows = false;
        }
        if e.assigns_user_var {
            self.user_vars = true;
        }
        if e.untrackable.is_some() {
            self.untrackable = e.untrackable;
        }
    }

    /// Records the status flags of a reply; a transaction ending also ends `SET TRANSACTION`.
    pub(crate) fn observe_status(&mut self, st: u16) {
        if self.next_transaction
            && self.status & status::IN_TRANS != 0
            && st & status::IN_TRANS == 0
        {
            self.next_transaction = false;
        }
        self.status = st;
    }

    /// Counts one statement against the auto-increment hold.
    pub(crate) fn tick_statement(&mut self) {
        self.auto_increment_left = self.auto_increment_left.saturating_sub(1);
    }

    /// Ends the auto-increment hold once its time is up.
    pub(crate) fn expire_holds(&mut self, now: std::time::Instant) {
        if self.auto_increment_until.is_some_and(|u| now >= u) {
            self.auto_increment_left = 0;
            self.auto_increment_until = None;
        }
    }

    /// When a time-bounded hold ends, if one is active.
    pub(crate) fn hold_deadline(&self) -> Option<std::time::Instant> {
        if self.auto_increment_left > 0 {
            self.auto_increment_until
        } else {
            None
        }
    }

    /// Forgets everything the backend connection held (after a reset or a change of user).
    pub(crate) fn clear(&mut self) {
        let disabled = self.disabled;
        *self = Pins {
            disabled,
            status: status::AUTOCOMMIT,
            ..Pins::default()
        };
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sql::classify::classify;

    fn pins() -> Pins {
        Pins {
            status: status::AUTOCOMMIT,
            ..Pins::default()
        }
    }

    #[test]
    fn each_cause_pins_and_its_end_unpins() {
        let cases: &[(&str, &str, &str)] = &[
            (
                "CREATE TEMPORARY TABLE t (a int)",
                "DROP TEMPORARY TABLE t",
                "temporary table",
            ),
            (
                "SELECT GET_LOCK('x', 1)",
                "SELECT RELEASE_LOCK('x')",
                "GET_LOCK",
            ),
            ("LOCK TABLES t READ", "UNLOCK TABLES", "LOCK TABLES"),
            ("PREPARE s FROM @q", "DEALLOCATE PREPARE s", "SQL PREPARE"),
            (
                "SELECT SQL_CALC_FOUND_ROWS * FROM t LIMIT 1",
                "SELECT FOUND_ROWS()",
                "SQL_CALC_FOUND_ROWS",
            ),
        ];
        for (start, end, reason) in cases {
            let mut p = pins();
            assert_eq!(p.reason(), None);
            p.apply(&classify(start));
            assert_eq!(p.reason(), Some(*reason), "{start}");
            assert!(p.dirty());
            p.apply(&classify(end));
            assert_eq!(p.reason(), None, "{end}");
        }
    }

    #[test]
    fn a_statement_prepared_from_a_literal_never_pins() {
        let mut p = pins();
        p.apply(&classify("PREPARE s FROM @q"));
        assert_eq!(p.reason(), Some("SQL PREPARE"));
        // Prepared again from a literal: replayable now, the pin ends.
        p.apply(&classify("PREPARE s FROM 'SELECT 1'"));
        assert_eq!(p.reason(), None);
    }

    #[test]
    fn status_flags_pin_transactions_and_autocommit_off() {
        let mut p = pins();
        p.observe_status(status::AUTOCOMMIT | status::IN_TRANS);
        assert_eq!(p.reason(), Some("transaction"));
        p.observe_status(status::AUTOCOMMIT);
        assert_eq!(p.reason(), None);
        p.observe_status(0);
        assert_eq!(p.reason(), Some("autocommit=0"));
        p.observe_status(status::AUTOCOMMIT);
        p.next_transaction = true;
        assert_eq!(p.reason(), Some("SET TRANSACTION"));
        p.observe_status(status::AUTOCOMMIT | status::IN_TRANS);
        p.observe_status(status::AUTOCOMMIT);
        assert_eq!(p.reason(), None, "the next transaction ended");
    }

    #[test]
    fn user_locks_are_counted_per_name() {
        let mut p = pins();
        p.apply(&classify("SELECT GET_LOCK('a', 1), GET_LOCK('a', 1)"));
        p.apply(&classify("SELECT RELEASE_LOCK('b')"));
        p.apply(&classify("SELECT RELEASE_LOCK('a')"));
        assert_eq!(
            p.reason(),
            Some("GET_LOCK"),
            "'a' taken twice, released once"
        );
        p.apply(&classify("SELECT RELEASE_LOCK('a')"));
        assert_eq!(p.reason(), None);
        p.apply(&classify("SELECT GET_LOCK('a', 1), GET_LOCK('b', 1)"));
        p.apply(&classify("DO RELEASE_ALL_LOCKS()"));
        assert_eq!(p.reason(), None, "RELEASE_ALL_LOCKS releases both");
    }

    #[test]
    fn user_variables_stay_until_clear() {
        let mut p = pins();
        p.apply(&classify("SET @a = 1"));
        assert_eq!(p.reason(), Some("user variable"));
        p.clear();
        assert_eq!(p.reason(), None);
    }

    #[test]
    fn transient_holds_are_not_dirty() {
        let mut p = pins();
        p.auto_increment_left = 3;
        assert_eq!(p.reason(), Some("auto_increment (LAST_INSERT_ID)"));
        assert!(!p.dirty());
        p.tick_statement();
        p.tick_statement();
        p.tick_statement();
        assert_eq!(p.reason(), None);
        p.disabled = true;
        assert_eq!(p.reason(), Some("multiplexing disabled"));
        assert!(!p.dirty());
    }
}

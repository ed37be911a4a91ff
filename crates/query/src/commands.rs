//! Counters the admin's stats tables read: per-command counts and latency histograms
//! (`stats_{mysql,pgsql}_commands_counters`) and backend errors (`stats_mysql_errors`).

use crate::counters::PerThread;
use crate::util::lock;
use crate::util::unix_now;
use std::collections::HashMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// Command names as ProxySQL reports them; the last one is for everything else.
pub const COMMANDS: &[&str] = &[
    "ALTER_TABLE",
    "BEGIN",
    "CALL",
    "COMMIT",
    "CREATE_DATABASE",
    "CREATE_INDEX",
    "CREATE_TABLE",
    "CREATE_TEMPORARY",
    "DELETE",
    "DESCRIBE",
    "DROP_DATABASE",
    "DROP_TABLE",
    "EXECUTE",
    "EXPLAIN",
    "GRANT",
    "INSERT",
    "KILL",
    "LOCK_TABLE",
    "PREPARE",
    "REPLACE",
    "ROLLBACK",
    "SAVEPOINT",
    "SELECT",
    "SELECT_FOR_UPDATE",
    "SET",
    "SHOW",
    "START_TRANSACTION",
    "TRUNCATE_TABLE",
    "UNLOCK_TABLES",
    "UPDATE",
    "USE",
    "UNKNOWN",
];

/// Upper bounds (µs) of the histogram buckets, as the `cnt_*` columns name them.
pub const BUCKETS_US: [u64; 12] = [
    100,
    500,
    1_000,
    5_000,
    10_000,
    50_000,
    100_000,
    500_000,
    1_000_000,
    5_000_000,
    10_000_000,
    u64::MAX,
];

#[derive(Debug, Default)]
struct CommandRow {
    total_us: AtomicU64,
    total_cnt: AtomicU64,
    buckets: [AtomicU64; 12],
}

/// One row of `stats_mysql_commands_counters`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommandCount {
    /// The command as ProxySQL names it (`SELECT`, `INSERT`, `BEGIN`, ...).
    pub command: &'static str,
    /// Total time (µs).
    pub total_time_us: u64,
    /// How many ran.
    pub total_cnt: u64,
    /// Counts per latency bucket ([`BUCKETS_US`]).
    pub buckets: [u64; 12],
}

/// One row of `stats_mysql_errors`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ErrorCount {
    /// The hostgroup of the server that failed.
    pub hostgroup: u32,
    /// The server's host name.
    pub hostname: String,
    /// The server's port.
    pub port: u16,
    /// The account the statement ran as.
    pub username: String,
    /// The client's address.
    pub client_address: String,
    /// The schema (database) selected when it failed.
    pub schemaname: String,
    /// Error number (MySQL) or SQLSTATE (PostgreSQL).
    pub errno: String,
    /// How many times this error was seen.
    pub count_star: u64,
    /// When it was first seen (Unix seconds).
    pub first_seen: u64,
    /// When it was last seen (Unix seconds).
    pub last_seen: u64,
    /// The server's message the last time.
    pub last_error: String,
}

type ErrKey = (u32, String, u16, String, String, String, String);

/// Per-command counts and latency buckets, and server errors, for `stats_*_commands_counters` and
/// `stats_*_errors`.
#[derive(Debug)]
pub struct CommandCounters {
    /// Per thread slot, one row per command: counted without sharing a cache line across cores.
    rows: PerThread<Vec<CommandRow>>,
    errors: Mutex<HashMap<ErrKey, ErrorCount>>,
}

impl Default for CommandCounters {
    fn default() -> Self {
        CommandCounters {
            rows: PerThread::new_with(|| COMMANDS.iter().map(|_| CommandRow::default()).collect()),
            errors: Mutex::default(),
        }
    }
}

/// Skips whitespace, comments (`/* */`, `-- `, `#`) and opening parentheses from `i`.
fn skip_noise(sql: &[u8], mut i: usize) -> usize {
    while let Some(&b) = sql.get(i) {
        match b {
            b' ' | b'\t' | b'\n' | b'\r' | b'(' => i += 1,
            b'/' if sql.get(i + 1) == Some(&b'*') => {
                i = match sql[i + 2..].windows(2).position(|w| w == b"*/") {
                    Some(p) => i + 2 + p + 2,
                    None => sql.len(),
                };
            }
            b'-' if sql.get(i + 1) == Some(&b'-') => i = line_end(sql, i),
            b'#' => i = line_end(sql, i),
            _ => break,
        }
    }
    i
}

/// Just past the newline ending the line that `i` is on.
fn line_end(sql: &[u8], i: usize) -> usize {
    sql[i..]
        .iter()
        .position(|b| *b == b'\n')
        .map_or(sql.len(), |p| i + p + 1)
}

/// The word (letters and `_`) starting at `i`, and where it ends.
fn word_at(sql: &[u8], i: usize) -> (&[u8], usize) {
    let rest = sql.get(i..).unwrap_or_default();
    let n = rest
        .iter()
        .take_while(|b| b.is_ascii_alphabetic() || **b == b'_')
        .count();
    (&rest[..n], i + n)
}

/// The longest first word a command row is named by, with room to spare (`SAVEPOINT` is 9).
const LONGEST_VERB: usize = 16;

/// The command a query counts as. It runs for every statement, so it reads the first word in
/// place (past comments), upper-cases it into a small stack buffer and looks it up with exact
/// comparisons; a second word is read only after `ALTER`, `CREATE` and `DROP`.
pub fn query_command(sql: &[u8]) -> usize {
    let unknown = COMMANDS.len() - 1;
    let (first, end) = word_at(sql, skip_noise(sql, 0));
    let mut buf = [0u8; LONGEST_VERB];
    let Some(verb) = buf.get_mut(..first.len()).filter(|v| !v.is_empty()) else {
        return unknown;
    };
    verb.copy_from_slice(first);
    verb.make_ascii_uppercase();
    let name = match &*verb {
        b"ALTER" | b"CREATE" | b"DROP" => {
            let (second, _) = word_at(sql, skip_noise(sql, end));
            match compound(verb, second) {
                Some(name) => name,
                None => return unknown,
            }
        }
        b"LOCK" => "LOCK_TABLE",
        b"UNLOCK" => "UNLOCK_TABLES",
        b"TRUNCATE" => "TRUNCATE_TABLE",
        b"START" => "START_TRANSACTION",
        b"DESC" => "DESCRIBE",
        // The statements of a busy server, without the search below.
        b"SELECT" => return const { named("SELECT") },
        b"INSERT" => return const { named("INSERT") },
        b"UPDATE" => return const { named("UPDATE") },
        b"DELETE" => return const { named("DELETE") },
        // Any other first word counts under its own name when it has a row (SET, BEGIN, ...).
        _ => {
            let verb = &*verb;
            return COMMANDS
                .iter()
                .position(|c| c.as_bytes() == verb)
                .unwrap_or(unknown);
        }
    };
    named(name)
}

/// The row of `ALTER`, `CREATE` or `DROP` (`verb`, upper case) followed by `second`, if it has
/// one.
fn compound(verb: &[u8], second: &[u8]) -> Option<&'static str> {
    let is = |name: &str| second.eq_ignore_ascii_case(name.as_bytes());
    let create = verb == b"CREATE";
    match verb {
        b"ALTER" if is("TABLE") => Some("ALTER_TABLE"),
        b"CREATE" | b"DROP" if is("DATABASE") || is("SCHEMA") => Some(if create {
            "CREATE_DATABASE"
        } else {
            "DROP_DATABASE"
        }),
        b"CREATE" | b"DROP" if is("TABLE") => {
            Some(if create { "CREATE_TABLE" } else { "DROP_TABLE" })
        }
        b"CREATE" if is("INDEX") || is("UNIQUE") => Some("CREATE_INDEX"),
        b"CREATE" if is("TEMPORARY") => Some("CREATE_TEMPORARY"),
        _ => None,
    }
}

/// Index of a command row by name (COM_STMT_EXECUTE counts as EXECUTE); the `UNKNOWN` row for
/// a name without one. A `const fn`, so the statement path can look its row up at compile time
/// (`const { named("EXECUTE") }`).
pub const fn named(name: &str) -> usize {
    let mut i = 0;
    while i < COMMANDS.len() {
        let (c, n) = (COMMANDS[i].as_bytes(), name.as_bytes());
        if c.len() == n.len() {
            let mut j = 0;
            while j < n.len() && c[j] == n[j] {
                j += 1;
            }
            if j == n.len() {
                return i;
            }
        }
        i += 1;
    }
    COMMANDS.len() - 1
}

impl CommandCounters {
    /// Counts one command that took `elapsed`.
    pub fn record(&self, command: usize, elapsed: Duration) {
        let Some(row) = self.rows.local().get(command) else {
            return;
        };
        let us = u64::try_from(elapsed.as_micros()).unwrap_or(u64::MAX);
        row.total_us.fetch_add(us, Ordering::Relaxed);
        row.total_cnt.fetch_add(1, Ordering::Relaxed);
        let b = BUCKETS_US
            .iter()
            .position(|lim| us <= *lim)
            .unwrap_or(BUCKETS_US.len() - 1);
        row.buckets[b].fetch_add(1, Ordering::Relaxed);
    }

    /// Counts a backend error.
    pub fn record_error(
        &self,
        key: (u32, String, u16, String, String, String),
        errno: &str,
        message: &str,
    ) {
        let now = unix_now();
        let (hg, host, port, user, client, schema) = key;
        let mut g = lock(&self.errors);
        let e = g
            .entry((
                hg,
                host.clone(),
                port,
                user.clone(),
                client.clone(),
                schema.clone(),
                errno.to_string(),
            ))
            .or_insert(ErrorCount {
                hostgroup: hg,
                hostname: host,
                port,
                username: user,
                client_address: client,
                schemaname: schema,
                errno: errno.to_string(),
                count_star: 0,
                first_seen: now,
                last_seen: now,
                last_error: String::new(),
            });
        e.count_star += 1;
        e.last_seen = now;
        e.last_error = message.to_string();
    }

    /// The command rows.
    pub fn commands(&self) -> Vec<CommandCount> {
        COMMANDS
            .iter()
            .enumerate()
            .map(|(i, c)| {
                let mut row = CommandCount {
                    command: c,
                    total_time_us: 0,
                    total_cnt: 0,
                    buckets: [0; 12],
                };
                for r in self.rows.iter().filter_map(|rows| rows.get(i)) {
                    row.total_time_us += r.total_us.load(Ordering::Relaxed);
                    row.total_cnt += r.total_cnt.load(Ordering::Relaxed);
                    for (sum, b) in row.buckets.iter_mut().zip(&r.buckets) {
                        *sum += b.load(Ordering::Relaxed);
                    }
                }
                row
            })
            .collect()
    }

    /// The error rows.
    pub fn errors(&self) -> Vec<ErrorCount> {
        let g = lock(&self.errors);
        let mut v: Vec<ErrorCount> = g.values().cloned().collect();
        v.sort_by(|a, b| {
            (a.hostgroup, &a.hostname, a.port, &a.errno).cmp(&(
                b.hostgroup,
                &b.hostname,
                b.port,
                &b.errno,
            ))
        });
        v
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classifies_and_buckets() {
        assert_eq!(COMMANDS[query_command(b"  select 1")], "SELECT");
        assert_eq!(
            COMMANDS[query_command(b"/* x */ CREATE TEMPORARY TABLE t (a int)")],
            "CREATE_TEMPORARY"
        );
        assert_eq!(
            COMMANDS[query_command(b"start transaction")],
            "START_TRANSACTION"
        );
        assert_eq!(COMMANDS[query_command(b"frobnicate")], "UNKNOWN");
        let cases: &[(&[u8], &str)] = &[
            (b"-- note\n# other\n  (SELECT 1) UNION (SELECT 2)", "SELECT"),
            (b"/* unterminated", "UNKNOWN"),
            (b"", "UNKNOWN"),
            (b"drop /* x */ schema s", "DROP_DATABASE"),
            (b"Create Unique Index i ON t (a)", "CREATE_INDEX"),
            (b"CREATE VIEW v AS SELECT 1", "UNKNOWN"),
            (b"alter table t add c int", "ALTER_TABLE"),
            (b"ALTER USER u", "UNKNOWN"),
            (b"desc t", "DESCRIBE"),
            (b"lock tables t write", "LOCK_TABLE"),
            (b"insert into t values (1)", "INSERT"),
            (b"select_x from t", "UNKNOWN"),
            (b"SET x = 1", "SET"),
            (b"sElEcT 1", "SELECT"),
            (b"Drop Table t", "DROP_TABLE"),
            (b"create database d", "CREATE_DATABASE"),
            (b"SAVEPOINT a", "SAVEPOINT"),
            (b"abcdefghijklmnopqrstuvwxyz", "UNKNOWN"),
            (b"   ", "UNKNOWN"),
        ];
        for (sql, want) in cases {
            let got = COMMANDS[query_command(sql)];
            assert_eq!(got, *want, "{}", String::from_utf8_lossy(sql));
        }
        let c = CommandCounters::default();
        c.record(query_command(b"SELECT 1"), Duration::from_micros(700));
        c.record(query_command(b"SELECT 1"), Duration::from_secs(20));
        let sel = c
            .commands()
            .into_iter()
            .find(|r| r.command == "SELECT")
            .expect("row");
        assert_eq!((sel.total_cnt, sel.buckets[2], sel.buckets[11]), (2, 1, 1));
        c.record_error(
            (0, "h".into(), 1, "u".into(), "c".into(), "s".into()),
            "1064",
            "syntax",
        );
        c.record_error(
            (0, "h".into(), 1, "u".into(), "c".into(), "s".into()),
            "1064",
            "syntax 2",
        );
        assert_eq!(c.errors()[0].count_star, 2);
        assert_eq!(c.errors()[0].last_error, "syntax 2");
    }
}

//! Read-your-writes through the read/write split ("causal reads"), without sockets: the
//! position a write reached (a token), the scopes tokens are kept in, what each replica is
//! known to have applied, and the counters. The frontends capture tokens from their servers'
//! replies and run the waits.
//!
//! ```
//! use sluice_core::causal::{CausalReads, Position};
//! use sluice_core::config::CausalMode;
//!
//! let reads = CausalReads::default();
//! let wrote = Position::parse("0-1-100").expect("a MariaDB GTID");
//! reads.wrote("app", 0, "10.0.0.1:3306", &wrote);
//! // Another session of the same user must see that write; a stranger need not.
//! let token = reads.shared_token(CausalMode::User, "app", 0).expect("the user's token");
//! assert_eq!(token.to_string(), "0-1-100");
//! assert!(reads.shared_token(CausalMode::User, "batch", 0).is_none());
//! // A replica known to have applied 0-1-120 serves the read at once.
//! reads.applied("10.0.0.2:3306", &Position::parse("0-1-120").expect("gtid"));
//! assert!(reads.known_past("10.0.0.2:3306", &token));
//! ```

use crate::config::CausalMode;
use crate::metrics::LatencyHistogram;
use std::collections::HashMap;
use std::fmt;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::Duration;

/// Replication domains a position keeps at most (a bound on what a server or a hint sends).
const MAX_DOMAINS: usize = 64;

/// A MariaDB GTID position: per replication domain, the last transaction (server id and
/// sequence number), as `@@last_gtid`, `@@gtid_slave_pos` and `MASTER_GTID_WAIT` write it
/// (`0-1-100,1-2-7`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct GtidPosition {
    /// (domain, server id, sequence), sorted by domain, one entry per domain.
    domains: Vec<(u32, u32, u64)>,
}

impl GtidPosition {
    /// Parses a GTID list; `None` when any element is not `domain-server-sequence` or there are
    /// more than 64 domains. The empty string is the empty position.
    pub fn parse(text: &str) -> Option<GtidPosition> {
        let mut p = GtidPosition::default();
        for part in text.split(',').map(str::trim).filter(|s| !s.is_empty()) {
            let mut it = part.splitn(3, '-');
            let domain = it.next()?.parse().ok()?;
            let server = it.next()?.parse().ok()?;
            let seq = it.next()?.parse().ok()?;
            p.raise(domain, server, seq);
            if p.domains.len() > MAX_DOMAINS {
                return None;
            }
        }
        Some(p)
    }

    fn raise(&mut self, domain: u32, server: u32, seq: u64) {
        match self.domains.binary_search_by_key(&domain, |d| d.0) {
            Ok(i) if self.domains[i].2 < seq => self.domains[i] = (domain, server, seq),
            Ok(_) => {}
            Err(i) => self.domains.insert(i, (domain, server, seq)),
        }
    }

    /// Takes the later transaction of each domain from `other`.
    pub fn merge(&mut self, other: &GtidPosition) {
        for &(d, s, n) in &other.domains {
            self.raise(d, s, n);
        }
    }

    /// True when this position includes every transaction of `token` (per domain, a sequence
    /// at least as high: MariaDB's strict mode keeps sequences monotone within a domain).
    pub fn covers(&self, token: &GtidPosition) -> bool {
        token.domains.iter().all(|&(d, _, n)| {
            self.domains
                .binary_search_by_key(&d, |x| x.0)
                .is_ok_and(|i| self.domains[i].2 >= n)
        })
    }

    /// True for the empty position.
    pub fn is_empty(&self) -> bool {
        self.domains.is_empty()
    }
}

impl fmt::Display for GtidPosition {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, (d, s, n)) in self.domains.iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            write!(f, "{d}-{s}-{n}")?;
        }
        Ok(())
    }
}

/// A PostgreSQL WAL position (`pg_current_wal_insert_lsn()`, `pg_last_wal_replay_lsn()`),
/// written `X/Y` in hexadecimal.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord)]
pub struct Lsn(pub u64);

impl Lsn {
    /// Parses `X/Y` (PostgreSQL's `pg_lsn` text form).
    pub fn parse(text: &str) -> Option<Lsn> {
        let (hi, lo) = text.trim().split_once('/')?;
        let hi = u32::from_str_radix(hi, 16).ok()?;
        let lo = u32::from_str_radix(lo, 16).ok()?;
        Some(Lsn((u64::from(hi) << 32) | u64::from(lo)))
    }
}

impl fmt::Display for Lsn {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:X}/{:X}", self.0 >> 32, self.0 & 0xffff_ffff)
    }
}

/// A position a read must see: a MariaDB GTID list or a PostgreSQL LSN.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Position {
    /// MariaDB.
    Gtid(GtidPosition),
    /// PostgreSQL.
    Lsn(Lsn),
}

impl Position {
    /// Parses `X/Y` as an LSN, anything else as a GTID list (`min_gtid=` / `min_lsn=` hints).
    pub fn parse(text: &str) -> Option<Position> {
        if text.contains('/') {
            Lsn::parse(text).map(Position::Lsn)
        } else {
            GtidPosition::parse(text).map(Position::Gtid)
        }
    }

    /// Takes the later of the two (per domain for GTIDs); a position of the other kind replaces
    /// this one.
    pub fn merge(&mut self, other: &Position) {
        match (self, other) {
            (Position::Gtid(a), Position::Gtid(b)) => a.merge(b),
            (Position::Lsn(a), Position::Lsn(b)) => *a = (*a).max(*b),
            (me, other) => *me = other.clone(),
        }
    }

    /// True when this position includes `token` (never across kinds).
    pub fn covers(&self, token: &Position) -> bool {
        match (self, token) {
            (Position::Gtid(a), Position::Gtid(b)) => a.covers(b),
            (Position::Lsn(a), Position::Lsn(b)) => a >= b,
            _ => false,
        }
    }

    /// True for a position nothing is behind.
    pub fn is_empty(&self) -> bool {
        match self {
            Position::Gtid(g) => g.is_empty(),
            Position::Lsn(l) => l.0 == 0,
        }
    }
}

impl fmt::Display for Position {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Position::Gtid(g) => g.fmt(f),
            Position::Lsn(l) => l.fmt(f),
        }
    }
}

/// How a gated read was served.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CausalOutcome {
    /// The replica was known (or found at once) to be past the token.
    Ready,
    /// The replica caught up while the read waited on it.
    Waited,
    /// No replica caught up in time: the writer answered.
    Fallback,
    /// No replica caught up in time: the client got an error.
    Error,
}

impl CausalOutcome {
    /// The `outcome` label of `sluice_causal_reads_total`.
    pub fn as_str(self) -> &'static str {
        match self {
            CausalOutcome::Ready => "ready",
            CausalOutcome::Waited => "waited",
            CausalOutcome::Fallback => "fallback",
            CausalOutcome::Error => "error",
        }
    }
}

/// Counters of one protocol side's causal reads.
#[derive(Debug, Default)]
pub struct CausalStats {
    outcomes: [AtomicU64; 4],
    /// Tokens taken from servers' replies (ProxySQL's `GTID_session_collected`).
    pub collected: AtomicU64,
    /// Time gated reads spent waiting on a replica.
    pub wait: LatencyHistogram,
}

impl CausalStats {
    /// Counts one gated read.
    pub fn count(&self, outcome: CausalOutcome, waited: Duration) {
        self.outcomes[outcome as usize].fetch_add(1, Relaxed);
        if outcome != CausalOutcome::Ready {
            self.wait
                .observe_us(u64::try_from(waited.as_micros()).unwrap_or(u64::MAX));
        }
    }

    /// Gated reads per outcome.
    pub fn outcomes(&self) -> [(CausalOutcome, u64); 4] {
        [
            CausalOutcome::Ready,
            CausalOutcome::Waited,
            CausalOutcome::Fallback,
            CausalOutcome::Error,
        ]
        .map(|o| (o, self.outcomes[o as usize].load(Relaxed)))
    }
}

/// Whose writes a read must see ([`CausalReads::token_for`]).
#[derive(Debug, Clone, Copy)]
pub struct TokenQuery<'a> {
    /// `mysql` or `pgsql`, for the log.
    pub protocol: &'static str,
    /// The scope (the rule's, the hint's or the variable's).
    pub mode: CausalMode,
    /// The session's user.
    pub user: &'a str,
    /// The user's default hostgroup: where its writes go.
    pub writer_hostgroup: u32,
    /// That hostgroup's servers (`host:port`) now.
    pub writers: &'a [String],
    /// A position the statement names (`min_gtid=` / `min_lsn=`).
    pub min: Option<&'a Position>,
}

/// The writes of one writer hostgroup, and the server that took them.
#[derive(Debug, Default)]
struct WriterTokens {
    writer: String,
    global: Option<Position>,
    by_user: HashMap<String, Position>,
}

/// One protocol side's causal-read state: the shared scopes' tokens and the positions
/// replicas are known to have applied.
#[derive(Debug, Default)]
pub struct CausalReads {
    writers: Mutex<HashMap<u32, WriterTokens>>,
    applied: Mutex<HashMap<String, Position>>,
    /// Outcomes, tokens collected, wait times.
    pub stats: CausalStats,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

impl CausalReads {
    /// Records a write of `user` that reached `position` on `server` of `hostgroup`. A new
    /// writer for the hostgroup (a failover) starts its tokens afresh.
    pub fn wrote(&self, user: &str, hostgroup: u32, server: &str, position: &Position) {
        self.stats.collected.fetch_add(1, Relaxed);
        let mut writers = lock(&self.writers);
        let w = writers.entry(hostgroup).or_default();
        if w.writer != server {
            *w = WriterTokens {
                writer: server.to_string(),
                ..WriterTokens::default()
            };
        }
        match &mut w.global {
            Some(p) => p.merge(position),
            None => w.global = Some(position.clone()),
        }
        match w.by_user.get_mut(user) {
            Some(p) => p.merge(position),
            None => {
                w.by_user.insert(user.to_string(), position.clone());
            }
        }
    }

    /// The token a read must see in a shared scope (`user` or `global`) for writes through
    /// `hostgroup`; `None` for the other modes or when nothing was written.
    pub fn shared_token(&self, mode: CausalMode, user: &str, hostgroup: u32) -> Option<Position> {
        let writers = lock(&self.writers);
        let w = writers.get(&hostgroup)?;
        match mode {
            CausalMode::User => w.by_user.get(user).cloned(),
            CausalMode::Global => w.global.clone(),
            CausalMode::None | CausalMode::Local => None,
        }
    }

    /// The token a read must see, routed away from `read.writer_hostgroup`: the session's own
    /// (`local`, with the hostgroup its writes went to), the user's or everyone's, plus a
    /// position the statement names (`read.min`). When the hostgroup's writer is no longer among
    /// `read.writers` (a failover), its tokens and the session's are dropped first, with a log
    /// line: the new writer's replicas may never reach them. `None`: nothing to wait for.
    pub fn token_for(
        &self,
        read: &TokenQuery<'_>,
        local: &mut Option<(u32, Position)>,
    ) -> Option<Position> {
        let hostgroup = read.writer_hostgroup;
        if let Some(writer) = self.writer_of(hostgroup)
            && !read.writers.contains(&writer)
        {
            tracing::info!(protocol = read.protocol, hostgroup, old_writer = %writer,
                "the writer of hostgroup {hostgroup} changed; read-your-writes tokens of {writer} are dropped");
            self.forget(hostgroup);
            *local = None;
        }
        let mut token = match read.mode {
            CausalMode::None => None,
            CausalMode::Local => local
                .as_ref()
                .filter(|(hg, _)| *hg == hostgroup)
                .map(|(_, t)| t.clone()),
            CausalMode::User | CausalMode::Global => {
                self.shared_token(read.mode, read.user, hostgroup)
            }
        };
        if let Some(min) = read.min {
            match &mut token {
                Some(t) => t.merge(min),
                None => token = Some(min.clone()),
            }
        }
        token.filter(|t| !t.is_empty())
    }

    /// The server that took the writes of `hostgroup` last.
    pub fn writer_of(&self, hostgroup: u32) -> Option<String> {
        lock(&self.writers)
            .get(&hostgroup)
            .map(|w| w.writer.clone())
    }

    /// Forgets the tokens of `hostgroup` (its writer changed: old tokens may never be reached).
    pub fn forget(&self, hostgroup: u32) {
        lock(&self.writers).remove(&hostgroup);
    }

    /// Records that `server` has applied `position` (a wait returned, or a position read).
    pub fn applied(&self, server: &str, position: &Position) {
        let mut applied = lock(&self.applied);
        match applied.get_mut(server) {
            Some(p) => p.merge(position),
            None => {
                applied.insert(server.to_string(), position.clone());
            }
        }
    }

    /// True when `server` is known to have applied `token`.
    pub fn known_past(&self, server: &str, token: &Position) -> bool {
        lock(&self.applied)
            .get(server)
            .is_some_and(|p| p.covers(token))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gl(s: &str) -> GtidPosition {
        GtidPosition::parse(s).expect("gtid")
    }

    fn g(s: &str) -> Position {
        Position::parse(s).expect("position")
    }

    #[test]
    fn positions_parse_merge_and_compare_per_domain() {
        let mut p = gl("0-1-100, 1-2-7");
        assert_eq!(p.to_string(), "0-1-100,1-2-7");
        p.merge(&gl("0-3-99,2-1-1"));
        assert_eq!(p.to_string(), "0-1-100,1-2-7,2-1-1");
        assert!(p.covers(&gl("0-9-100")));
        assert!(!p.covers(&gl("0-1-101")));
        assert!(
            !p.covers(&gl("5-1-1")),
            "a domain never seen is not covered"
        );
        assert!(p.covers(&GtidPosition::default()));
        for bad in ["0-1", "a-1-2", "0-1-2-3x", "-1-2"] {
            assert_eq!(GtidPosition::parse(bad), None, "{bad}");
        }
        let many: Vec<String> = (0..65).map(|d| format!("{d}-1-1")).collect();
        assert_eq!(GtidPosition::parse(&many.join(",")), None);
    }

    #[test]
    fn lsns_parse_compare_and_never_cover_a_gtid() {
        let a = g("0/3000060");
        assert_eq!(a, Position::Lsn(Lsn(0x3000060)));
        assert_eq!(a.to_string(), "0/3000060");
        assert_eq!(g("1A/FF").to_string(), "1A/FF");
        let mut b = g("0/3000000");
        assert!(a.covers(&b) && !b.covers(&a));
        b.merge(&a);
        assert_eq!(b, a);
        assert!(!a.covers(&g("0-1-1")) && !g("0-1-1").covers(&a));
        for bad in ["0/", "/1", "g/1", "1/2/3", "100000000/0"] {
            assert_eq!(Lsn::parse(bad), None, "{bad}");
        }
    }

    #[test]
    fn scopes_and_a_new_writer() {
        let r = CausalReads::default();
        r.wrote("app", 0, "a:1", &g("0-1-5"));
        r.wrote("batch", 0, "a:1", &g("0-1-9"));
        assert_eq!(r.shared_token(CausalMode::User, "app", 0), Some(g("0-1-5")));
        assert_eq!(
            r.shared_token(CausalMode::Global, "app", 0),
            Some(g("0-1-9"))
        );
        assert_eq!(r.shared_token(CausalMode::Local, "app", 0), None);
        assert_eq!(r.shared_token(CausalMode::User, "app", 1), None);
        // Failover: the new writer's tokens start afresh.
        r.wrote("app", 0, "b:1", &g("0-2-3"));
        assert_eq!(r.shared_token(CausalMode::Global, "x", 0), Some(g("0-2-3")));
        assert_eq!(r.shared_token(CausalMode::User, "batch", 0), None);
        r.forget(0);
        assert_eq!(r.writer_of(0), None);
        assert_eq!(r.stats.collected.load(Relaxed), 3);
    }

    #[test]
    fn token_for_each_scope_and_after_a_failover() {
        let r = CausalReads::default();
        r.wrote("app", 0, "a:1", &g("0-1-5"));
        r.wrote("batch", 0, "a:1", &g("0-1-9"));
        let writers = vec!["a:1".to_string()];
        let min = g("0-1-7");
        let q = |mode, min| TokenQuery {
            protocol: "mysql",
            mode,
            user: "app",
            writer_hostgroup: 0,
            writers: &writers,
            min,
        };
        let mut local = Some((0, g("0-1-3")));
        assert_eq!(
            r.token_for(&q(CausalMode::Local, None), &mut local),
            Some(g("0-1-3"))
        );
        assert_eq!(
            r.token_for(&q(CausalMode::User, None), &mut local),
            Some(g("0-1-5"))
        );
        assert_eq!(
            r.token_for(&q(CausalMode::Global, None), &mut local),
            Some(g("0-1-9"))
        );
        assert_eq!(
            r.token_for(&q(CausalMode::User, Some(&min)), &mut local),
            Some(g("0-1-7"))
        );
        assert_eq!(
            r.token_for(&q(CausalMode::None, Some(&min)), &mut local),
            Some(g("0-1-7"))
        );
        assert_eq!(r.token_for(&q(CausalMode::None, None), &mut local), None);
        // The writer moved: every token of the old one is gone.
        let moved = vec!["b:1".to_string()];
        let after = TokenQuery {
            writers: &moved,
            ..q(CausalMode::Global, None)
        };
        assert_eq!(r.token_for(&after, &mut local), None);
        assert_eq!(local, None);
        assert_eq!(r.writer_of(0), None);
    }

    #[test]
    fn known_positions_and_outcome_counts() {
        let r = CausalReads::default();
        assert!(!r.known_past("r:1", &g("0-1-1")));
        r.applied("r:1", &g("0-1-10"));
        assert!(r.known_past("r:1", &g("0-1-10")));
        assert!(!r.known_past("r:1", &g("0-1-11")));
        r.stats
            .count(CausalOutcome::Waited, Duration::from_millis(3));
        r.stats.count(CausalOutcome::Ready, Duration::ZERO);
        let counts = r.stats.outcomes();
        assert_eq!(counts[0], (CausalOutcome::Ready, 1));
        assert_eq!(counts[1], (CausalOutcome::Waited, 1));
        assert_eq!(r.stats.wait.snapshot().count, 1);
    }
}

//! The query processor's say on the first message of a transaction (the session holds no server
//! connection yet): blocked, answered by a rule or from the cache, or forwarded — to which
//! hostgroup, rewritten or not, under which timeout, with its result to be cached or not.

use super::held::{Backend, Held};
use super::{PgSession, RULE_PIN};
use crate::Error;
use crate::error::error_for;
use crate::frontend::PgFrontend;
use crate::pids::{BackendKey, set_target};
use crate::session::checkout::timed_checkout;
use crate::session::forward::SessionIo;
use crate::session::forward::forward;
use crate::session::processor::{SessionProcessor, query_text, with_query};
use bytes::Bytes;
use sluice_core::RuntimeConfig;
use sluice_core::config::PgsqlUser;
use sluice_core::config::Priority;
use sluice_core::query::{CacheKey, Decision, QueryCache, StatementKind, digest::fnv1a};
use sluice_core::util::EventClock;
use sluice_pgsql_backend::send_cancel;
use sluice_pgsql_proto::frame::{complete_len, error_response, message, ready};
use sluice_pgsql_proto::tag::{self, client, server, status};
use std::collections::BTreeMap;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt};
use tracing::{info, warn};

/// SQLSTATE of a query blocked by a rule's `error_msg` (insufficient_privilege).
const BLOCKED_SQLSTATE: &str = "42501";
/// ProxySQL's default `default_query_timeout` (10 h): below it, every statement gets a timer.
const UNARMED_TIMEOUT_MS: u64 = 36_000_000;
/// Largest result kept for the cache.
const CAPTURE_LIMIT: usize = 4 << 20;

/// What happens to the first message of a transaction.
// Returned once per statement and matched at once: boxing `Forward` would allocate for each.
#[allow(clippy::large_enum_variant)]
pub(crate) enum Start {
    /// Sluice answered; for an extended batch the rest up to Sync is skipped.
    Answered {
        /// Bytes for the client.
        reply: Vec<u8>,
        /// Drop the batch's remaining messages until Sync (answered with ReadyForQuery).
        skip_until_sync: bool,
    },
    /// Goes to a server.
    Forward(Forward),
}

/// A message on its way to a server, with what the processor decided.
pub(crate) struct Forward {
    /// The message (rewritten if a rule said so).
    pub message: Bytes,
    /// Hostgroup to take the connection from.
    pub hostgroup: u32,
    /// Digest (hash, text) for the stats.
    pub digest: Option<(u64, String)>,
    /// Cancel the statement on the server after this long.
    pub timeout: Option<Duration>,
    /// Copy the reply into the cache.
    pub fill: Option<CacheFill>,
    /// `Some(true)`: a rule pins the session (multiplex=0 / sticky_conn); `Some(false)` unpins.
    pub pin: Option<bool>,
    /// The workload class and whether the statement waits for a slot in it.
    pub admit: crate::session::admit::Admit,
    /// A first statement that reads: what read-your-writes asks of it.
    pub causal: Option<crate::session::causal::ReadWants>,
    /// The statement's clock: it starts, is checked out for and sent at one instant unless it
    /// waits (a rule's delay, a class's slot, a connection).
    pub clock: EventClock,
}

impl Forward {
    /// `message` to the user's default `hostgroup`, before the processor's say.
    fn new(message: Bytes, hostgroup: u32) -> Self {
        Forward {
            hostgroup,
            message,
            digest: None,
            timeout: None,
            fill: None,
            pin: None,
            admit: Default::default(),
            causal: None,
            clock: EventClock::default(),
        }
    }
}

/// A reply being copied for the query cache.
pub(crate) struct CacheFill {
    sql: String,
    variant: u64,
    tables: Vec<String>,
    ttl: Duration,
    empty_ok: bool,
    bytes: Option<Vec<u8>>,
    error: bool,
}

impl CacheFill {
    /// Bytes sent to the client for this reply.
    pub(crate) fn copy(&mut self, written: &[u8]) {
        if let Some(b) = self.bytes.as_mut() {
            if b.len() + written.len() > CAPTURE_LIMIT {
                self.bytes = None;
            } else {
                b.extend_from_slice(written);
            }
        }
    }

    /// The reply carried an ErrorResponse: it is not cached.
    pub(crate) fn failed(&mut self) {
        self.error = true;
    }

    /// The reply is complete (its ReadyForQuery was the last bytes copied): store it.
    pub(crate) fn store(self, cache: &QueryCache, user: &str, database: &str, max_bytes: usize) {
        let Some(mut b) = self.bytes else { return };
        if self.error || b.len() < 6 || b[b.len() - 6] != server::READY_FOR_QUERY {
            return;
        }
        b.truncate(b.len() - 6);
        let mut rows = 0usize;
        let mut pos = 0usize;
        while let Ok(Some(n)) = complete_len(&b[pos..]) {
            if b[pos] == server::DATA_ROW {
                rows += 1;
            }
            pos += n;
        }
        if pos != b.len() || (rows == 0 && !self.empty_ok) {
            return;
        }
        let key = CacheKey {
            user,
            schema: database,
            query: &self.sql,
            variant: self.variant,
        };
        cache.put(&key, &self.tables, &b, self.ttl, max_bytes, Instant::now());
    }
}

/// The session's SET variables shape the text of results (DateStyle, TimeZone, ...).
fn variant(vars: &BTreeMap<String, String>) -> u64 {
    let mut h = 0u64;
    for (k, v) in vars {
        h = h.rotate_left(7) ^ fnv1a(k.as_bytes()) ^ fnv1a(v.as_bytes()).rotate_left(32);
    }
    h
}

/// Decides the first message of a transaction. `vars` are the session's SET variables.
pub(crate) async fn start(
    fe: &PgFrontend,
    rt: &sluice_core::runtime::RuntimeConfig,
    (user, database): (&PgsqlUser, &str),
    s: &mut SessionIo<'_>,
    vars: &BTreeMap<String, String>,
    m: Bytes,
) -> Start {
    let mut f = Forward::new(m, user.default_hostgroup.0);
    let sql = match f.message[0] {
        client::BIND => s.stmts.bound_query(&f.message),
        _ => query_text(&f.message),
    };
    // As text once, for the hook and the processor (a fast-forward user's statements need
    // none unless a hook looks at them). Borrowed when it is UTF-8, as statement texts are
    // (the server checks).
    let text = sql
        .filter(|_| fe.hook.is_some() || !user.fast_forward.0)
        .map(sluice_core::util::text);
    let who = (user.username.as_str(), database);
    let kind = f.message[0];
    let routed = match crate::session::hook::route(fe, s.entry.id, who, kind, text.as_deref()) {
        Ok(routed) => routed,
        Err(answered) => return answered,
    };
    let Some(sql) = text.filter(|_| !user.fast_forward.0) else {
        f.hostgroup = routed.unwrap_or(f.hostgroup);
        return Start::Forward(f);
    };
    let started = f.clock.now();
    let qvars = &rt.pgsql.variables.query;
    let mut d = s.qp.decide(rt, (&fe.query, &fe.shapes), &sql);
    if qvars.stats_time_query_processor {
        fe.stats.processor_time(started);
    }
    let simple = f.message[0] == client::QUERY;
    if d.action.log {
        info!(target: "sluice::query_log", user = %user.username, database, digest = %d.digest.hex(),
            rules = ?d.action.matched, "query: {}", d.text(&sql));
    }
    if let Some(answered) = answer_by_rule(fe, rt, s.qp, &d, started, simple) {
        return answered;
    }
    if simple {
        match from_cache(fe, rt, s.qp, (user, database, vars), &d, &sql, started) {
            Ok(fill) => f.fill = fill,
            Err(reply) => {
                return Start::Answered {
                    reply,
                    skip_until_sync: false,
                };
            }
        }
    }
    let delay = d.delay_ms(qvars);
    if delay > 0 {
        fe.query.delayed.fetch_add(1, Ordering::Relaxed);
        tokio::time::sleep(Duration::from_millis(delay)).await;
        f.clock.reset();
    }
    let class = d.action.workload_class.as_deref();
    let admit = crate::session::admit::Admit {
        class: d.action.workload_class.clone(),
        // Only a configured class can make it wait (unclassified statements fall in `default`).
        waits: sluice_core::admission::governs(
            &rt.workload_classes,
            class.unwrap_or(sluice_core::config::DEFAULT_CLASS),
        ) && !sluice_core::admission::never_waits(&sql),
    };
    // `SELECT pg_notify(…)` writes to the notification queue: a standby refuses it, so it goes
    // to the writer whatever a `^SELECT` rule says, and counts as a write.
    let notifies = crate::listen::sends_notification(&sql);
    apply(fe, s, &mut f, &d, qvars.default_query_timeout);
    f.admit = admit;
    if notifies {
        f.hostgroup = user.default_hostgroup.0;
        s.qp.note_written();
    }
    if !d.digest.kind.writes() && !notifies {
        f.causal = Some(crate::session::causal::ReadWants {
            mode: d.action.causal_reads,
            min: d
                .action
                .min_position
                .as_deref()
                .and_then(sluice_core::causal::Lsn::parse)
                .map(sluice_core::causal::Position::Lsn),
        });
    }
    f.hostgroup = routed.unwrap_or(f.hostgroup);
    s.qp.recycle_tables(std::mem::take(&mut d.digest.tables));
    f.digest = Some((d.digest.hash, d.digest.text));
    Start::Forward(f)
}

/// A rule's `error_msg` (any message) or `OK_msg` (a simple Query) answered by Sluice.
fn answer_by_rule(
    fe: &PgFrontend,
    rt: &sluice_core::runtime::RuntimeConfig,
    qp: &mut SessionProcessor,
    d: &Decision,
    started: Instant,
    simple: bool,
) -> Option<Start> {
    if let Some(msg) = &d.action.error_msg {
        fe.query.blocked.fetch_add(1, Ordering::Relaxed);
        qp.record_local(rt, &fe.query, d, started);
        let mut reply = error_response("ERROR", BLOCKED_SQLSTATE, msg);
        if simple {
            reply.extend(ready(status::IDLE));
        }
        return Some(Start::Answered {
            reply,
            skip_until_sync: !simple,
        });
    }
    if let (Some(msg), true) = (&d.action.ok_msg, simple) {
        fe.query.ok_answered.fetch_add(1, Ordering::Relaxed);
        qp.record_local(rt, &fe.query, d, started);
        let mut tag = msg.as_bytes().to_vec();
        tag.push(0);
        let mut reply = message(server::COMMAND_COMPLETE, &tag);
        reply.extend(ready(status::IDLE));
        return Some(Start::Answered {
            reply,
            skip_until_sync: false,
        });
    }
    None
}

/// A simple Query's cached reply (`Err`, ReadyForQuery included), or what to fill the cache
/// with from the server's reply when a rule caches this read (`Ok(None)`: nothing to cache).
fn from_cache(
    fe: &PgFrontend,
    rt: &sluice_core::runtime::RuntimeConfig,
    qp: &mut SessionProcessor,
    (user, database, vars): (&PgsqlUser, &str, &BTreeMap<String, String>),
    d: &Decision,
    sql: &str,
    started: Instant,
) -> Result<Option<CacheFill>, Vec<u8>> {
    let cacheable = d.digest.kind == StatementKind::Select && !d.digest.locking_read;
    let Some(ttl) = d.action.cache_ttl_ms.filter(|_| cacheable) else {
        return Ok(None);
    };
    let key = CacheKey {
        user: &user.username,
        schema: database,
        query: sql,
        variant: variant(vars),
    };
    if let Some(bytes) = fe.cache.get(&key, Instant::now()) {
        qp.record_local(rt, &fe.query, d, started);
        let mut reply = bytes.to_vec();
        reply.extend(ready(status::IDLE));
        return Err(reply);
    }
    Ok(Some(CacheFill {
        variant: variant(vars),
        tables: d.digest.tables.clone(),
        ttl: Duration::from_millis(ttl),
        empty_ok: d
            .action
            .cache_empty_result
            .unwrap_or(rt.pgsql.variables.query.query_cache_stores_empty_result),
        bytes: Some(Vec::new()),
        error: false,
        sql: sql.to_string(),
    }))
}

/// Applies the parts of a decision every forwarded statement shares (the digest is moved into
/// `f` by the caller).
fn apply(
    fe: &PgFrontend,
    s: &mut SessionIo<'_>,
    f: &mut Forward,
    d: &Decision,
    global_timeout: u64,
) {
    if let Some(hg) = d.action.destination_hostgroup {
        f.hostgroup = hg;
    }
    if let Some(new) = d
        .action
        .rewritten
        .as_deref()
        .and_then(|t| with_query(&f.message, t))
    {
        f.message = Bytes::from(new);
    }
    f.timeout = d
        .action
        .timeout_ms
        .or((global_timeout < UNARMED_TIMEOUT_MS).then_some(global_timeout))
        .filter(|ms| *ms > 0)
        .map(Duration::from_millis);
    f.pin = match (d.action.multiplex, d.action.sticky_conn) {
        (Some(0), _) | (_, Some(true)) => Some(true),
        (Some(1), _) => Some(false),
        _ => None,
    };
    if d.digest.kind.writes() {
        s.qp.note_written();
        if fe
            .config
            .load()
            .pgsql
            .variables
            .query
            .query_cache_invalidate_on_write
        {
            s.qp.note_write(&d.digest.tables, d.digest.tables_complete);
        }
    }
}

/// A timer that cancels the statement running on server process `pid` after `after`.
pub(crate) fn arm_timeout(
    fe: &PgFrontend,
    server: String,
    (pid, secret): (u32, u32),
    after: Duration,
) -> tokio::task::JoinHandle<()> {
    let stats = fe.query.clone();
    tokio::spawn(async move {
        tokio::time::sleep(after).await;
        // The cancel runs in its own task: the caller aborts this timer when the statement
        // ends, which the cancel itself causes.
        tokio::spawn(async move {
            stats.killed_by_timeout.fetch_add(1, Ordering::Relaxed);
            let ok = send_cancel(&server, pid, secret).await;
            warn!(server = %server, pid, timeout_ms = after.as_millis() as u64, ok,
                "statement exceeded its timeout; sent a cancel request to the server");
        });
    })
}

impl<S: AsyncRead + AsyncWrite + Unpin> PgSession<'_, S> {
    /// The first message of a transaction: the query processor decides, a server connection is
    /// taken and handed to the session, and the message goes out.
    pub(super) async fn begin_transaction(&mut self, m: Bytes) -> Result<(), Error> {
        let fe = self.fe;
        // One snapshot for the whole start of the transaction.
        let rt = fe.config.load();
        let who = (self.l.user.as_ref(), self.l.database.as_str());
        let f = match crate::session::begin::start(fe, &rt, who, &mut self.io, self.vars.want(), m)
            .await
        {
            Start::Answered {
                reply,
                skip_until_sync,
            } => {
                self.skip_until_sync = skip_until_sync;
                self.tcp.write_all(&reply).await?;
                return Ok(());
            }
            Start::Forward(f) => f,
        };
        // Its own future: the query processor's and the checkout's never share one layout.
        self.open_transaction(&rt, f).await
    }

    /// A transaction the query processor sends on (`f`): its class's slot, a server
    /// connection handed to the session, and the message out.
    pub(super) async fn open_transaction(
        &mut self,
        rt: &RuntimeConfig,
        f: Forward,
    ) -> Result<(), Error> {
        let fe = self.fe;
        let Forward {
            message: m,
            hostgroup,
            digest: decided,
            timeout,
            fill,
            pin,
            admit,
            causal,
            mut clock,
        } = f;
        // No class configured (or a statement that never waits): no admission future at all.
        let taken = if admit.waits {
            clock.reset();
            crate::session::admit::take(&fe.admission, &rt.workload_classes, self.io.entry, &admit)
                .await
        } else {
            Ok(None)
        };
        let permit = match taken {
            Ok(p) => p,
            Err(refused) => return self.refused_admission(refused, m[0]).await,
        };
        let (timeout, hostgroup) = self.admitted(permit, (timeout, hostgroup), pin);
        // Waiting for a server connection, the class's priority orders the queue.
        let priority = self
            .admission
            .as_ref()
            .map_or(Priority::Regular, |(p, _)| p.priority());
        let user = (
            self.l.user.username.as_str(),
            self.l.user.default_hostgroup.0,
        );
        let gate = causal.and_then(|wants| {
            crate::session::causal::plan(fe, rt, user, &mut self.causal_token, hostgroup, &wants)
        });
        let wanted = (hostgroup, self.owner, priority);
        let checked_out = timed_checkout(fe, rt, self.l, wanted, &mut clock).await;
        let mut c = match checked_out {
            Ok(c) => c,
            Err(e) => return self.checkout_failed(&e, m[0]).await,
        };
        if let Some(gate) = gate {
            // Boxed: a gated read is rare next to every other transaction start.
            match Box::pin(self.causal_read(rt, gate, c, priority, m[0])).await? {
                Some(ready) => c = ready,
                None => return Ok(()),
            }
            clock.reset();
        }
        let conn = c.conn();
        // Staged ahead of the client's messages, in the same write.
        self.io.out.clear();
        let staged = crate::session::handoff::stage(
            conn,
            (self.owner, self.vars.want(), &self.io.stmts.sql),
            rt.pgsql.variables.handoff_reset_all,
            &fe.cancels,
            &mut self.io.out,
        );
        let target = Some(BackendKey {
            server: conn.server.clone(),
            pid: conn.key.0,
            secret: conn.key.1,
        });
        set_target(&self.handle.target, target);
        let timer = timeout.map(|after| {
            let server = conn.server.to_string();
            crate::session::begin::arm_timeout(fe, server, conn.key, after)
        });
        // Held from here: built in place, so no copy of it lives in this step's future.
        self.backend = Backend::Held(Held::new(c, staged, timer, fill));
        if let Backend::Held(held) = &mut self.backend {
            forward(
                fe,
                rt,
                held,
                &mut self.io,
                self.reader,
                (&m, decided, clock),
            )
            .await?;
        }
        Ok(())
    }

    /// The transaction's workload class refused it (`refused`, for a message of `kind`): the
    /// client gets the class's error; an extended batch's other messages are dropped up to its
    /// Sync.
    async fn refused_admission(
        &mut self,
        refused: sluice_core::admission::Refusal,
        kind: u8,
    ) -> Result<(), Error> {
        let simple = matches!(kind, client::QUERY | client::FUNCTION_CALL);
        // The refusal is dropped here, not held in the step's state across the write.
        let reply = crate::session::admit::refusal_reply(&refused, &self.l.user.username, simple);
        drop(refused);
        self.skip_until_sync = !simple;
        self.tcp.write_all(&reply).await?;
        Ok(())
    }

    /// The transaction was admitted (with `permit` when its class has a gate): the permit's
    /// limits applied — the shorter of the two timeouts, a `reroute` guard's hostgroup — and the
    /// rule's pin kept. Returns the timeout and hostgroup it runs with.
    pub(super) fn admitted(
        &mut self,
        permit: Option<sluice_core::admission::Permit>,
        (timeout, hostgroup): (Option<std::time::Duration>, u32),
        pin: Option<bool>,
    ) -> (Option<std::time::Duration>, u32) {
        let timeout = match (timeout, permit.as_ref().and_then(|p| p.max_execution())) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        // An open `reroute` guard sends the transaction to its fallback hostgroup.
        let hostgroup = permit
            .as_ref()
            .and_then(|p| p.reroute())
            .unwrap_or(hostgroup);
        self.admission = permit.map(|p| (p, Instant::now()));
        let pinned = &mut self.io.pinned;
        match pin {
            Some(true) => pinned.sticky = Some(RULE_PIN),
            Some(false) if pinned.sticky == Some(RULE_PIN) => pinned.sticky = None,
            _ => {}
        }
        self.io.qp.hostgroup = i64::from(hostgroup);
        (timeout, hostgroup)
    }

    /// No server connection for the transaction: the client gets the error and the class's
    /// slot goes back at once.
    pub(super) async fn checkout_failed(
        &mut self,
        e: &sluice_pgsql_backend::Error,
        first: u8,
    ) -> Result<(), Error> {
        self.admission = None;
        warn!(user = %self.l.user.username, "pgsql: {e}");
        let mut out = error_for(e);
        if tag::ends_with_ready(first) {
            out.extend(ready(status::IDLE));
        }
        self.tcp.write_all(&out).await?;
        Ok(())
    }
}

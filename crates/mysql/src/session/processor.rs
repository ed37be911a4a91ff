//! The query-processor step of a COM_QUERY: digest and rules ([`sluice_core::query`]) decide
//! routing, rewriting, blocking, caching, delays, timeouts and mirroring; afterwards the
//! execution is recorded in the digest map and writes invalidate cached results.

use super::forward::checkout_request;
use super::{Next, Session};
use sluice_core::RuntimeConfig;
use sluice_core::query::{
    CacheKey, Decision, Dialect, DigestSample, QueryContext, StatementKind, digest, process,
    process_digested,
};
use sluice_core::util::unix_now;
use sluice_mysql_proto::packets::{err_payload, ok_payload};
use sluice_mysql_proto::reply::ReplyTracker;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};
use tracing::{info, warn};

/// ProxySQL's default `default_query_timeout` (10 h): below it, every query gets a timer.
const UNARMED_TIMEOUT_MS: u64 = 36_000_000;
/// Mirror copies in flight at most; beyond it copies are dropped (and counted).
const MIRROR_QUEUE: usize = 64;

impl Session {
    /// Digest and rules for one query; `None` for `fast_forward` users, whose traffic bypasses
    /// the processor as in ProxySQL.
    pub(super) fn plan_query(&mut self, rt: &RuntimeConfig, sql: &str) -> Option<Decision> {
        self.plan_statement(rt, sql, None)
    }

    /// [`Self::plan_query`] for a prepared statement's execution: its digest is made once per
    /// statement (`meta.digest`) and copied into the session's buffers after that.
    pub(super) fn plan_execute(
        &mut self,
        rt: &RuntimeConfig,
        sql: &str,
        meta: &crate::stmt_registry::StmtMeta,
    ) -> Option<Decision> {
        self.plan_statement(rt, sql, Some(meta))
    }

    /// Plans `sql` under `rt`, the snapshot the statement uses from planning to admission.
    fn plan_statement(
        &mut self,
        rt: &RuntimeConfig,
        sql: &str,
        meta: Option<&crate::stmt_registry::StmtMeta>,
    ) -> Option<Decision> {
        if self.login.user.fast_forward.0 {
            return None;
        }
        let vars = &rt.mysql.variables.query;
        let started = vars
            .stats_time_query_processor
            .then(std::time::Instant::now);
        let ctx = QueryContext {
            user: &self.login.user.username,
            schema: self.state.schema.as_deref().unwrap_or(""),
            client_addr: &self.client_ip,
            proxy_addr: &self.local_ip,
            proxy_port: self.io.local.port(),
            flag_in: std::mem::take(&mut self.next_flag_in),
        };
        let mut reuse = std::mem::take(&mut self.spare_digest);
        let limit = vars.query_digests_max_digest_length;
        let known = meta.map(|m| {
            m.digest
                .get_or_init(|| (limit, digest(sql, Dialect::Mysql, limit as usize)))
        });
        let digest = match known {
            Some((made_with, digest)) if *made_with == limit => {
                reuse.assign_from(digest);
                reuse
            }
            _ => {
                let shapes = Some(&self.fe.shapes);
                self.digest_memo
                    .digest(sql, Dialect::Mysql, limit, reuse, shapes)
            }
        };
        let d = process_digested(&rt.mysql.rules, vars, &ctx, sql, digest);
        let a = &d.action;
        let q = &self.fe.counters.query;
        q.hit(&a.matched);
        if let Some(f) = a.next_query_flag_in {
            self.next_flag_in = f;
        }
        match a.multiplex {
            Some(0) => self.pins.rule_pinned = true,
            Some(1) => self.pins.rule_pinned = false,
            _ => {}
        }
        if a.sticky_conn == Some(true) {
            self.pins.rule_pinned = true;
        }
        if a.rewritten.is_some() {
            q.rewritten.fetch_add(1, Ordering::Relaxed);
        }
        if a.log {
            info!(target: "sluice::query_log", session = self.id, user = %self.login.user.username,
                schema = self.state.schema.as_deref().unwrap_or(""), client = %self.io.peer,
                digest = %d.digest.hex(), rules = ?a.matched, "query: {}", d.text(sql));
        }
        if let Some(started) = started {
            self.fe.counters.stats.processor_time(started);
        }
        Some(d)
    }

    /// Holds the query for the global delay plus its rule's (the seed's throttle). Only this
    /// session's task sleeps; everything else keeps running.
    pub(super) async fn delay(&self, rt: &RuntimeConfig, d: Option<&Decision>) {
        let ms = {
            let q = &rt.mysql.variables.query;
            d.map_or(q.default_query_delay, |d| d.delay_ms(q))
        };
        if ms > 0 {
            self.fe
                .counters
                .query
                .delayed
                .fetch_add(1, Ordering::Relaxed);
            tokio::time::sleep(Duration::from_millis(ms)).await;
        }
    }

    /// `error_msg` / `OK_msg`: the rule answers; no backend is involved.
    pub(super) async fn rule_answer(
        &mut self,
        d: &Decision,
        seq: u8,
        started: Instant,
    ) -> Option<Next> {
        let q = &self.fe.counters.query;
        let payload = if let Some(msg) = &d.action.error_msg {
            q.blocked.fetch_add(1, Ordering::Relaxed);
            err_payload(1148, "42000", msg)
        } else if let Some(msg) = &d.action.ok_msg {
            q.ok_answered.fetch_add(1, Ordering::Relaxed);
            let mut p = ok_payload(0, 0, self.pins.status, 0);
            // libmysqlclient and Connector/C read the info text as a length-encoded string.
            sluice_mysql_proto::lenenc::put_lenenc_bytes(&mut p, msg.as_bytes());
            p
        } else {
            return None;
        };
        self.record_digest(&self.fe.config.load(), d, -1, started.elapsed(), None);
        Some(match self.io.write(seq, &payload).await {
            Ok(()) => Next::Continue,
            Err(_) => Next::Close,
        })
    }

    /// The cache key's variant: what shapes the reply bytes besides the query.
    fn cache_variant(&self) -> u64 {
        (self.login.client_caps() << 8) | u64::from(self.login.charset)
    }

    /// TTL to cache this query's result with, when it qualifies: a plain SELECT, outside a
    /// transaction or other pinned state.
    pub(super) fn cache_ttl(&self, d: &Decision) -> Option<Duration> {
        let ttl = d.action.cache_ttl_ms?;
        (d.digest.kind == StatementKind::Select
            && !d.digest.locking_read
            && self.backend.is_none()
            && self.pins.reason().is_none())
        .then(|| Duration::from_millis(ttl))
    }

    /// Serves a cached result; true when it did.
    pub(super) async fn serve_cached(&mut self, sql: &str, d: &Decision, started: Instant) -> bool {
        let key = CacheKey {
            user: &self.login.user.username,
            schema: self.state.schema.as_deref().unwrap_or(""),
            query: sql,
            variant: self.cache_variant(),
        };
        let Some(bytes) = self.fe.counters.cache.get(&key, Instant::now()) else {
            return false;
        };
        use tokio::io::AsyncWriteExt;
        if self.io.stream.write_all(&bytes).await.is_err() {
            self.client_gone = true;
        }
        self.record_digest(&self.fe.config.load(), d, -1, started.elapsed(), None);
        true
    }

    /// After a forwarded query: digest stats, cache store, invalidation by writes.
    pub(super) fn after_forward(
        &mut self,
        sql: &str,
        d: &Decision,
        t: Option<&ReplyTracker>,
        started: Instant,
        captured: Option<Vec<u8>>,
        cache_ttl: Option<Duration>,
    ) {
        let hostgroup = self
            .backend
            .as_ref()
            .map_or(i64::from(self.route_hostgroup), |b| {
                i64::from(b.key().hostgroup)
            });
        // One snapshot for the statistics, the cache and the invalidation.
        let rt = self.fe.config.load();
        self.record_digest(&rt, d, hostgroup, started.elapsed(), t);
        let Some(t) = t else { return };
        if t.error {
            return;
        }
        let vars = &rt.mysql.variables.query;
        if let (Some(ttl), Some(bytes)) = (cache_ttl, captured) {
            let empty_ok = d
                .action
                .cache_empty_result
                .unwrap_or(vars.query_cache_stores_empty_result);
            if t.results == 1 && (t.rows > 0 || empty_ok) {
                let key = CacheKey {
                    user: &self.login.user.username,
                    schema: self.state.schema.as_deref().unwrap_or(""),
                    query: sql,
                    variant: self.cache_variant(),
                };
                let max = vars.query_cache_size_mb as usize * 1024 * 1024;
                self.fe.counters.cache.put(
                    &key,
                    &d.digest.tables,
                    &bytes,
                    ttl,
                    max,
                    Instant::now(),
                );
            }
        }
        if d.digest.kind.writes() && vars.query_cache_invalidate_on_write {
            self.fe
                .counters
                .cache
                .invalidate(&d.digest.tables, d.digest.tables_complete);
        }
    }

    fn record_digest(
        &self,
        rt: &RuntimeConfig,
        d: &Decision,
        hostgroup: i64,
        took: Duration,
        t: Option<&ReplyTracker>,
    ) {
        let vars = &rt.mysql.variables.query;
        if !vars.query_digests {
            return;
        }
        let q = &self.fe.counters.query;
        q.digests
            .set_max_entries(vars.query_digests_max_entries as usize);
        q.digests.record(&DigestSample {
            hostgroup,
            schema: self.state.schema.as_deref().unwrap_or(""),
            user: &self.login.user.username,
            client: if vars.query_digests_track_hostname {
                &self.client_ip
            } else {
                ""
            },
            digest: d.digest.hash,
            text: &d.digest.text,
            duration_us: took.as_micros() as u64,
            rows_affected: t.map_or(0, |t| t.affected_rows),
            rows_sent: t.map_or(0, |t| t.rows),
            now: unix_now(),
        });
    }

    /// The timeout this query runs under (in the statement's snapshot `rt`), when a timer is
    /// worth arming.
    pub(super) fn query_timeout(rt: &RuntimeConfig, d: Option<&Decision>) -> Option<Duration> {
        let global = rt.mysql.variables.query.default_query_timeout;
        let ms = d
            .and_then(|d| d.action.timeout_ms)
            .or((global < UNARMED_TIMEOUT_MS).then_some(global))?;
        (ms > 0).then(|| Duration::from_millis(ms))
    }

    /// Starts a timer that runs `KILL QUERY` on the server connection this session holds, from
    /// another connection to the same server. The caller aborts it when the query ends.
    pub(super) fn arm_killer(&mut self, after: Duration) -> Option<tokio::task::JoinHandle<()>> {
        let b = self.backend.as_mut()?;
        let key = b.key().clone();
        let on = crate::registry::RunningOn {
            hostgroup: key.hostgroup,
            server: key.server.clone(),
            thread_id: b.conn().thread_id,
            active: true,
        };
        let kill = self.kill_query_for(&on)?;
        let counters = self.fe.counters.clone();
        let session = self.id;
        Some(tokio::spawn(async move {
            tokio::time::sleep(after).await;
            // From here on the kill runs in its own task: the caller aborts this timer when the
            // query ends, which the KILL itself causes.
            tokio::spawn(async move {
                counters
                    .query
                    .killed_by_timeout
                    .fetch_add(1, Ordering::Relaxed);
                let thread_id = kill.thread_id;
                match kill.send().await {
                    Ok(()) => {
                        warn!(session, server = %key.server, hostgroup = key.hostgroup, thread_id,
                        timeout_ms = after.as_millis() as u64,
                        "query exceeded its timeout; sent KILL QUERY to the server")
                    }
                    Err(e) => warn!(session, server = %key.server, thread_id,
                        "query exceeded its timeout but KILL QUERY could not be sent: {e}"),
                }
            });
        }))
    }

    /// `mirror_hostgroup`: a fire-and-forget copy of the query on another connection. At most
    /// [`MIRROR_QUEUE`] copies run at once; more are dropped and counted, never queued without
    /// bound.
    pub(super) fn mirror(&self, d: &Decision, sql: &str) {
        let Some(mut hostgroup) = d.action.mirror_hostgroup else {
            return;
        };
        // mirror_flagOUT: the copy goes through the rules of that flag (e.g. a rewrite for the
        // mirror, or another hostgroup) before it is sent.
        let mut text = sql.to_string();
        if let Some(flag) = d.action.mirror_flag_out {
            let rt = self.fe.config.load();
            let ctx = QueryContext {
                user: &self.login.user.username,
                schema: self.state.schema.as_deref().unwrap_or(""),
                client_addr: &self.client_ip,
                proxy_addr: &self.local_ip,
                proxy_port: self.io.local.port(),
                flag_in: flag,
            };
            let m = process(
                &rt.mysql.rules,
                &rt.mysql.variables.query,
                &ctx,
                sql,
                Dialect::Mysql,
            );
            if let Some(hg) = m.action.destination_hostgroup {
                hostgroup = hg;
            }
            if let Some(r) = m.action.rewritten {
                text = r;
            }
        }
        self.mirror_to(hostgroup, text);
    }

    fn mirror_to(&self, hostgroup: u32, sql: String) {
        let counters = self.fe.counters.clone();
        if counters.mirrors_in_flight.fetch_add(1, Ordering::AcqRel) >= MIRROR_QUEUE {
            counters.mirrors_in_flight.fetch_sub(1, Ordering::AcqRel);
            counters
                .query
                .mirror_dropped
                .fetch_add(1, Ordering::Relaxed);
            return;
        }
        let rt = self.fe.config.load();
        let Ok(secret) = self.backend_secret(&rt).map(std::borrow::Cow::into_owned) else {
            counters.mirrors_in_flight.fetch_sub(1, Ordering::AcqRel);
            return;
        };
        let pool = self.fe.pool.clone();
        let user = self.login.user.username.clone();
        let (charset, caps) = (self.login.charset, self.login.client_caps());
        let state = self.state.clone();
        let session = self.id;
        tokio::spawn(async move {
            let vars = &rt.mysql.variables;
            let servers = rt
                .mysql
                .hostgroups
                .get(&hostgroup)
                .map(Vec::as_slice)
                .unwrap_or(&[]);
            let req = checkout_request(vars, hostgroup, servers, (&user, &secret), (charset, caps));
            match pool.checkout(&req).await {
                Ok(mut c) => {
                    let outcome = match c.conn().sync_state(&state).await {
                        Ok(Ok(())) => c
                            .conn()
                            .run_sql(&sql)
                            .await
                            .map(|_| ())
                            .map_err(|e| e.to_string()),
                        Ok(Err(_)) => {
                            Err("the session's state (schema, variables) was refused".into())
                        }
                        Err(e) => Err(e.to_string()),
                    };
                    match outcome {
                        Ok(()) => {
                            counters.query.mirrored.fetch_add(1, Ordering::Relaxed);
                            c.release();
                        }
                        Err(e) => {
                            warn!(session, hostgroup, "mirror copy failed: {e}");
                            counters
                                .query
                                .mirror_dropped
                                .fetch_add(1, Ordering::Relaxed);
                        }
                    }
                }
                Err(e) => {
                    warn!(session, hostgroup, "mirror copy not sent: {e}");
                    counters
                        .query
                        .mirror_dropped
                        .fetch_add(1, Ordering::Relaxed);
                }
            }
            counters.mirrors_in_flight.fetch_sub(1, Ordering::AcqRel);
        });
    }
}

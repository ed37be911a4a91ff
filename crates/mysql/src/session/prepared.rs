//! Prepared statements under multiplexing. Clients get their own statement ids, mapped to the
//! global registry; a statement is prepared on a backend connection the first time that
//! connection needs it, and parameter types are re-sent when the connection has not seen them.

use super::execute::{ExecuteRewrite, stmt_id};
use super::forward::ForwardFailure;
use super::{ClientStmt, Next, Session};
use crate::stmt_registry::{StmtMeta, StmtScope};
use bytes::Bytes;
use sluice_mysql_backend::BackendStmt;
use sluice_mysql_proto::consts::{MAX_CHUNK, cap, mariadb_cap, status};
use sluice_mysql_proto::framing::{Packet, put_packet};
use sluice_mysql_proto::packets::{eof_payload, err_payload};
use sluice_mysql_proto::reply::ReplyKind;

/// Capacity above which the session's execute buffer is not kept for the next execute.
const EXECUTE_BUF_KEPT: usize = 4096;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use tokio::io::AsyncWriteExt;
use tracing::debug;

fn unknown_stmt(id: u32, what: &str) -> Vec<u8> {
    err_payload(
        1243,
        "HY000",
        &format!("Unknown prepared statement handler ({id}) given to {what}"),
    )
}

impl Session {
    /// Answers a prepare from the registry's metadata with the client's statement id.
    async fn send_prepare_ok(&mut self, seq: u8, client_id: u32, meta: &StmtMeta) -> Next {
        let dep = self.login.capabilities & cap::DEPRECATE_EOF != 0;
        let mut out = Vec::with_capacity(64 * (meta.params.len() + meta.columns.len() + 1));
        let mut s = seq;
        let mut ok = vec![0u8];
        ok.extend_from_slice(&client_id.to_le_bytes());
        ok.extend_from_slice(&meta.num_columns.to_le_bytes());
        ok.extend_from_slice(&meta.num_params.to_le_bytes());
        ok.extend_from_slice(&[0, 0, 0]);
        put_packet(&mut out, &mut s, &ok);
        for defs in [&meta.params, &meta.columns] {
            if defs.is_empty() {
                continue;
            }
            for d in defs {
                put_packet(&mut out, &mut s, d);
            }
            if !dep {
                put_packet(&mut out, &mut s, &eof_payload(self.pins.status, 0));
            }
        }
        match self.io.stream.write_all(&out).await {
            Ok(()) => Next::Continue,
            Err(_) => Next::Close,
        }
    }

    pub(super) async fn stmt_prepare(&mut self, pk: &Packet) -> Next {
        let seq = pk.seq.wrapping_add(1);
        let sql = pk.payload.slice(1..);
        let user = self.login.user.username.clone();
        let schema = self.state.schema.clone().unwrap_or_default();
        let registry = self.fe.statements.clone();
        let scope = StmtScope {
            user: &user,
            schema: &schema,
            extended_metadata: self.login.mariadb_capabilities & mariadb_cap::EXTENDED_METADATA
                != 0,
        };
        let meta = match registry.get(scope, &sql) {
            Some(m) => m,
            None => {
                if let Err(f) = self.ensure_backend().await {
                    self.report(seq, f).await;
                    return Next::Continue;
                }
                let cap = self.max_stmts();
                let Some(b) = self.backend.as_mut() else {
                    return Next::Continue;
                };
                let conn = b.conn();
                match conn.prepare(&sql).await {
                    Ok(Ok(p)) => {
                        let meta = registry.insert(scope, sql, &p);
                        let evicted = conn.stmts.insert(
                            BackendStmt::new(meta.global_id, p.backend_id, p.num_params),
                            cap,
                        );
                        for e in evicted {
                            let _ = conn.close_stmt(e.backend_id).await;
                        }
                        self.backend_fresh = false;
                        meta
                    }
                    Ok(Err(err)) => {
                        self.send_err(seq, &err).await;
                        return Next::Continue;
                    }
                    Err(e) => {
                        self.backend = None;
                        self.report(seq, ForwardFailure::Report(crate::Error::Backend(e)))
                            .await;
                        return Next::Continue;
                    }
                }
            }
        };
        let client_id = self.next_stmt_id;
        self.next_stmt_id = self.next_stmt_id.wrapping_add(1).max(1);
        meta.client_refs.fetch_add(1, Ordering::Relaxed);
        self.stmts.insert(
            client_id,
            ClientStmt {
                meta: meta.clone(),
                types: None,
            },
        );
        self.send_prepare_ok(seq, client_id, &meta).await
    }

    fn max_stmts(&self) -> usize {
        self.fe
            .config
            .load()
            .mysql
            .variables
            .max_stmts_per_connection as usize
    }

    /// Makes sure the statement exists on the held backend connection; returns its server id.
    async fn backend_stmt_id(&mut self, meta: &Arc<StmtMeta>) -> Result<u32, ForwardFailure> {
        self.ensure_backend().await?;
        let cap = self.max_stmts();
        let Some(b) = self.backend.as_mut() else {
            return Err(ForwardFailure::Report(crate::Error::Unsupported(
                "no backend connection".into(),
            )));
        };
        let conn = b.conn();
        if let Some(s) = conn.stmts.get_mut(meta.global_id) {
            return Ok(s.backend_id);
        }
        match conn.prepare(&meta.sql).await {
            Ok(Ok(p)) => {
                debug!(session = self.id, global_id = meta.global_id, server = %conn.server, "prepared statement on another backend connection");
                meta.backend_prepares.fetch_add(1, Ordering::Relaxed);
                let evicted = conn.stmts.insert(
                    BackendStmt::new(meta.global_id, p.backend_id, p.num_params),
                    cap,
                );
                for e in evicted {
                    let _ = conn.close_stmt(e.backend_id).await;
                }
                Ok(p.backend_id)
            }
            Ok(Err(err)) => Err(ForwardFailure::ServerErr(err.to_vec())),
            Err(e) => {
                self.backend = None;
                Err(ForwardFailure::Report(crate::Error::Backend(e)))
            }
        }
    }

    /// COM_STMT_EXECUTE, read at `started`.
    pub(super) async fn stmt_execute(&mut self, pk: &Packet, started: std::time::Instant) -> Next {
        let seq = pk.seq.wrapping_add(1);
        let Some(id) = stmt_id(&pk.payload) else {
            self.send_err(
                seq,
                &err_payload(1047, "08S01", "malformed COM_STMT_EXECUTE"),
            )
            .await;
            return Next::Continue;
        };
        let Some(cs) = self.stmts.get(&id).cloned() else {
            self.send_err(seq, &unknown_stmt(id, "mysqld_stmt_execute"))
                .await;
            return Next::Continue;
        };
        // Rules see the statement's text at every execution, like a text query: routing,
        // blocking, delay and digest stats apply to prepared statements too.
        // Borrowed when it is UTF-8 (checked a word at a time; the lossy conversion walks it
        // byte by byte).
        let sql = sluice_core::util::text(&cs.meta.sql);
        let rt = self.fe.config.load();
        let plan = self.plan_execute(&rt, &sql, &cs.meta);
        if let Some(d) = &plan {
            if d.action.error_msg.is_some() {
                return self
                    .rule_answer(d, seq, started)
                    .await
                    .unwrap_or(Next::Continue);
            }
            if let Some(hg) = d.action.destination_hostgroup {
                self.route_hostgroup = hg;
            }
        }
        if let Some(next) = self.admit(&rt, plan.as_ref(), &sql, seq).await {
            return next;
        }
        self.delay(&rt, plan.as_ref()).await;
        let causal = self.causal_plan(&rt, plan.as_ref());
        let timeout = Session::query_timeout(&rt, plan.as_ref());
        drop(rt);
        if let Some(gate) = causal
            && let Some(next) = Box::pin(self.causal_gate(gate, seq)).await
        {
            return next;
        }
        let backend_id = match self.backend_stmt_id(&cs.meta).await {
            Ok(b) => b,
            Err(f) => {
                self.report(seq, f).await;
                return Next::Continue;
            }
        };
        let raw = self.rewrite_execute(&pk.payload, id, &cs, backend_id, pk.seq);
        cs.meta.executions.fetch_add(1, Ordering::Relaxed);
        let cursor = pk.payload.get(5).is_some_and(|f| f & 0x01 != 0);
        let killer = self
            .class_timeout(timeout)
            .and_then(|after| self.arm_killer(after));
        let kind = if cursor {
            ReplyKind::CursorResultSets
        } else {
            ReplyKind::ResultSets
        };
        let t = self.forward_bytes(&raw, pk.seq, kind).await;
        if let Some(k) = killer {
            k.abort();
        }
        self.statement_done(started);
        self.pins.long_data.remove(&id);
        if let Some(d) = &plan {
            self.after_forward(&sql, d, t.as_ref(), started, None, None);
        }
        self.execute_buf = raw;
        if let Some(d) = plan {
            self.spare_digest = d.digest;
        }
        if let Some(t) = t {
            if cursor && t.status & status::CURSOR_EXISTS != 0 {
                self.pins.cursors.insert(id);
            }
            self.note_insert_id(&t);
        }
        Next::Continue
    }

    /// Puts the backend's statement id into the execute packet, and the parameter types when the
    /// backend connection has not seen the ones the client bound; remembers what was bound.
    /// Returns the packet (sequence id `seq`) to send, framed in the session's execute buffer
    /// (the caller gives it back).
    fn rewrite_execute(
        &mut self,
        payload: &Bytes,
        client_id: u32,
        cs: &ClientStmt,
        backend_id: u32,
        seq: u8,
    ) -> Vec<u8> {
        let bstmt = self
            .backend
            .as_mut()
            .and_then(|b| b.conn().stmts.get_mut(cs.meta.global_id));
        let known = bstmt.as_ref().and_then(|b| b.bound_types.as_ref());
        let plan = ExecuteRewrite::plan(
            payload,
            backend_id,
            cs.meta.num_params,
            cs.types.as_ref(),
            known,
            bstmt.is_some(),
        );
        if let (Some(types), Some(b)) = (&plan.server_knows, bstmt) {
            b.bound_types = Some(types.clone());
        }
        if let (Some(types), Some(c)) = (&plan.client_bound, self.stmts.get_mut(&client_id)) {
            c.types = Some(types.clone());
        }
        let mut raw = std::mem::take(&mut self.execute_buf);
        raw.clear();
        if raw.capacity() > EXECUTE_BUF_KEPT {
            // A big execute (blobs) does not keep its buffer for the rest of the session.
            raw = Vec::new();
        }
        let len = plan.len(payload);
        if len < MAX_CHUNK {
            // One packet: framed here, the payload written in place after its header.
            raw.extend_from_slice(&(len as u32).to_le_bytes()[..3]);
            raw.push(seq);
            plan.write(payload, &mut raw);
        } else {
            let mut s = seq;
            put_packet(&mut raw, &mut s, &plan.payload(payload));
        }
        raw
    }

    pub(super) async fn stmt_send_long_data(&mut self, pk: &Packet) -> Next {
        // No reply, ever: errors surface at the execute.
        let Some(id) = stmt_id(&pk.payload) else {
            return Next::Continue;
        };
        let Some(cs) = self.stmts.get(&id).cloned() else {
            return Next::Continue;
        };
        let Ok(backend_id) = self.backend_stmt_id(&cs.meta).await else {
            return Next::Continue;
        };
        let mut payload = pk.payload.to_vec();
        payload[1..5].copy_from_slice(&backend_id.to_le_bytes());
        let mut raw = Vec::with_capacity(payload.len() + 8);
        let mut s = pk.seq;
        put_packet(&mut raw, &mut s, &payload);
        self.pins.long_data.insert(id);
        if let Some(b) = self.backend.as_mut()
            && b.conn().send_raw(&raw).await.is_err()
        {
            self.backend = None;
        }
        Next::Continue
    }

    pub(super) async fn stmt_reset(&mut self, pk: &Packet) -> Next {
        let seq = pk.seq.wrapping_add(1);
        let Some(id) = stmt_id(&pk.payload) else {
            return Next::Continue;
        };
        let Some(cs) = self.stmts.get(&id).cloned() else {
            self.send_err(seq, &unknown_stmt(id, "mysqld_stmt_reset"))
                .await;
            return Next::Continue;
        };
        let held = self.pins.long_data.remove(&id) | self.pins.cursors.remove(&id);
        let backend_id = self
            .backend
            .as_mut()
            .and_then(|b| b.conn().stmts.get_mut(cs.meta.global_id))
            .map(|s| s.backend_id);
        match (held, backend_id) {
            (true, Some(bid)) => {
                let mut payload = pk.payload.to_vec();
                payload[1..5].copy_from_slice(&bid.to_le_bytes());
                let mut raw = Vec::new();
                let mut s = pk.seq;
                put_packet(&mut raw, &mut s, &payload);
                self.forward_bytes(&raw, pk.seq, ReplyKind::Single).await;
                Next::Continue
            }
            // Nothing of this statement's execution state lives on a server: reset is a no-op.
            _ => self.reply_ok(seq).await,
        }
    }

    pub(super) fn stmt_close(&mut self, pk: &Packet) {
        let Some(id) = stmt_id(&pk.payload) else {
            return;
        };
        if let Some(cs) = self.stmts.remove(&id) {
            cs.meta.client_refs.fetch_sub(1, Ordering::Relaxed);
        }
        self.pins.long_data.remove(&id);
        self.pins.cursors.remove(&id);
    }

    pub(super) async fn stmt_fetch(&mut self, pk: &Packet) -> Next {
        let seq = pk.seq.wrapping_add(1);
        let Some(id) = stmt_id(&pk.payload) else {
            return Next::Continue;
        };
        let bid = match self.stmts.get(&id).cloned() {
            Some(cs) if self.pins.cursors.contains(&id) => self
                .backend
                .as_mut()
                .and_then(|b| b.conn().stmts.get_mut(cs.meta.global_id))
                .map(|s| s.backend_id),
            _ => None,
        };
        let Some(bid) = bid else {
            self.send_err(seq, &unknown_stmt(id, "mysqld_stmt_fetch"))
                .await;
            return Next::Continue;
        };
        let mut payload = pk.payload.to_vec();
        payload[1..5].copy_from_slice(&bid.to_le_bytes());
        let mut raw = Vec::new();
        let mut s = pk.seq;
        put_packet(&mut raw, &mut s, &payload);
        if let Some(t) = self.forward_bytes(&raw, pk.seq, ReplyKind::Fetch).await
            && (t.status & status::LAST_ROW_SENT != 0 || t.error)
        {
            self.pins.cursors.remove(&id);
        }
        Next::Continue
    }
}

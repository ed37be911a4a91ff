//! A gated read's start ([`crate::session::causal`]): the replica waits for the token, or the writer
//! serves the read, or the client gets SQLSTATE 40001.

use super::PgSession;
use crate::Error;
use crate::session::causal::{Gate, Waited};
use crate::session::checkout::checkout;
use sluice_core::RuntimeConfig;
use sluice_core::causal::CausalOutcome;
use sluice_core::config::{CausalFallback, Priority};
use sluice_pgsql_backend::PgPooled;
use sluice_pgsql_proto::frame::{error_response, ready};
use sluice_pgsql_proto::tag::{client, status};
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt};
use tracing::{debug, info};

impl<S: AsyncRead + AsyncWrite + Unpin> PgSession<'_, S> {
    /// A read that must see earlier writes, on connection `c` of its replica: it waits for
    /// the token there, or moves to the writer, or the client gets SQLSTATE 40001. `None`:
    /// the client has its answer and no transaction starts.
    pub(super) async fn causal_read(
        &mut self,
        rt: &RuntimeConfig,
        gate: Gate,
        mut c: PgPooled,
        priority: Priority,
        first: u8,
    ) -> Result<Option<PgPooled>, Error> {
        let fe = self.fe;
        let server = c.conn().server.to_string();
        let waited = match crate::session::causal::wait(fe, c.conn(), &gate).await {
            Waited::Reached => return Ok(Some(c)),
            Waited::TimedOut(waited) => {
                c.release_clean();
                waited
            }
            Waited::Broken(waited) => {
                drop(c);
                waited
            }
        };
        match gate.on_timeout {
            CausalFallback::Primary => {
                fe.stats.causal.stats.count(CausalOutcome::Fallback, waited);
                debug!(user = %self.l.user.username, replica = %server, token = %gate.token,
                    "pgsql causal read: the replica did not replay the token in time; the writer answers");
                let hostgroup = gate.writer_hostgroup;
                self.io.qp.hostgroup = i64::from(hostgroup);
                match checkout(fe, rt, self.l, hostgroup, self.owner, priority).await {
                    Ok(c) => Ok(Some(c)),
                    Err(e) => {
                        self.checkout_failed(&e, first).await?;
                        Ok(None)
                    }
                }
            }
            CausalFallback::Error => {
                fe.stats.causal.stats.count(CausalOutcome::Error, waited);
                self.admission = None;
                info!(user = %self.l.user.username, replica = %server, token = %gate.token,
                    "pgsql causal read timed out; the client gets SQLSTATE 40001 (pgsql-causal_reads_on_timeout=error)");
                let msg = format!(
                    "causal read timed out: replica {server} did not replay LSN {} within {} ms; retry, or read from hostgroup {}",
                    gate.token, rt.pgsql.variables.causal.timeout_ms, gate.writer_hostgroup
                );
                let mut out = error_response("ERROR", "40001", &msg);
                if matches!(first, client::QUERY | client::FUNCTION_CALL) {
                    out.extend(ready(status::IDLE));
                } else {
                    // An extended batch's other messages are dropped up to its Sync.
                    self.skip_until_sync = true;
                }
                self.tcp.write_all(&out).await?;
                Ok(None)
            }
        }
    }
}

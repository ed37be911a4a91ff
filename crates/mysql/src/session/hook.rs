//! The embedding service's [`StatementHook`](sluice_core::query::StatementHook): asked about
//! each `COM_QUERY` before the query rules; its replies are encoded here.

use super::{Next, Session};
use sluice_core::query::{HookDecision, HookStatement, LocalReply};
use sluice_mysql_proto::framing::packet;
use sluice_mysql_proto::packets::{err_payload, ok_payload};
use sluice_mysql_proto::resultset::{ColType, text_result};
use tokio::io::AsyncWriteExt;

/// What the hook made of a query.
pub(super) enum Hooked {
    /// Carry on as configured.
    Continue,
    /// Forward to this hostgroup.
    Route(u32),
    /// The client has its answer.
    Answered(Next),
}

impl Session {
    /// Shows `sql` to the frontend's hook, if one is installed; a reply is sent from here with
    /// sequence id `seq`.
    pub(super) async fn consult_hook(&mut self, sql: &str, seq: u8) -> Hooked {
        let Some(hook) = self.fe.hook.clone() else {
            return Hooked::Continue;
        };
        let stmt = HookStatement {
            session: u64::from(self.id),
            user: &self.login.user.username,
            schema: self.state.schema.as_deref().unwrap_or(""),
            sql,
        };
        match hook.on_statement(&stmt) {
            HookDecision::Continue => Hooked::Continue,
            HookDecision::Route { hostgroup } => Hooked::Route(hostgroup),
            HookDecision::Reply(reply) => Hooked::Answered(self.local_reply(seq, &reply).await),
        }
    }

    async fn local_reply(&mut self, seq: u8, reply: &LocalReply) -> Next {
        let status = self.pins.status;
        let bytes = match reply {
            LocalReply::Rows { columns, rows } => {
                let cols: Vec<(&str, ColType)> = columns
                    .iter()
                    .map(|c| (c.as_str(), ColType::Text))
                    .collect();
                text_result(seq, self.login.shape(), status, &cols, rows)
            }
            LocalReply::Done { affected_rows, .. } => {
                packet(seq, &ok_payload(*affected_rows, 0, status, 0))
            }
            LocalReply::Error {
                code,
                sqlstate,
                message,
            } => packet(seq, &err_payload(*code, sqlstate, message)),
        };
        match self.io.stream.write_all(&bytes).await {
            Ok(()) => Next::Continue,
            Err(_) => Next::Close,
        }
    }
}

//! A client message while the session holds no server connection: answered by Sluice when it
//! can be (Sync, Flush, a statement defined locally, a signal, LISTEN through the fan-out),
//! else the start of a transaction.

use super::{Ended, PgSession, Step, terminate};
use crate::Error;
use crate::session::signals::Outcome;
use bytes::Bytes;
use sluice_pgsql_proto::frame::{message, ready};
use sluice_pgsql_proto::message::Query;
use sluice_pgsql_proto::tag::{client, server, status};
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt};

impl<S: AsyncRead + AsyncWrite + Unpin> PgSession<'_, S> {
    /// A client message while the session holds no server connection.
    pub(super) async fn idle_message(&mut self, m: Bytes) -> Result<Step, Error> {
        if m[0] == client::TERMINATE {
            return Ok(Step::End);
        }
        if self.skip_until_sync {
            if m[0] == client::SYNC {
                self.skip_until_sync = false;
                self.tcp.write_all(&ready(status::IDLE)).await?;
            }
            return Ok(Step::Continue);
        }
        if self.terminates_itself(&m, false) {
            return terminate(self.tcp, Ended::Terminated).await;
        }
        // Answered without a server connection (see `SessionStatements::define_locally`): with
        // no connection held there is no transaction and nothing outstanding, so the replies are
        // in order.
        if self.io.stmts.define_locally(&m) {
            self.tcp
                .write_all(&message(server::PARSE_COMPLETE, b""))
                .await?;
            return Ok(Step::Continue);
        }
        match m[0] {
            client::SYNC => {
                self.tcp.write_all(&ready(status::IDLE)).await?;
                return Ok(Step::Continue);
            }
            client::FLUSH => return Ok(Step::Continue),
            _ => {}
        }
        if let Some((stmt, mode)) = self.intercepted_listen(&m) {
            return self.listen_statement(stmt, mode).await;
        }
        if let Some(sig) = Query::read(&m).and_then(|q| crate::session::signals::parse(q.sql)) {
            let me = (self.l.user.username.as_str(), self.own_pid());
            match crate::session::signals::carry_out(&self.fe.cancels, me, sig).await {
                Outcome::Reply(reply) => {
                    self.tcp.write_all(&reply).await?;
                    return Ok(Step::Continue);
                }
                Outcome::OwnTerminate => return terminate(self.tcp, Ended::Terminated).await,
                Outcome::NotOurs => {}
            }
        }
        self.note_notify(&m);
        self.begin_transaction(m).await?;
        Ok(Step::Continue)
    }
}

//! LOAD DATA LOCAL INFILE: when the server asks for the client's file (0xFB), the client's file
//! packets are relayed to the server one at a time as they arrive — memory stays at one packet,
//! whatever the file's size — up to the empty packet that ends the file, then the server's reply
//! is relayed as usual. Offered only with `mysql-enable_load_data_local_infile` and to clients
//! that announced CLIENT_LOCAL_FILES.

use super::Session;
use sluice_mysql_backend::RelayOutcome;
use sluice_mysql_proto::consts::cap;
use sluice_mysql_proto::reply::ReplyTracker;
use tracing::{info, warn};

impl Session {
    /// True when this client may use LOAD DATA LOCAL INFILE through Sluice.
    pub(super) fn local_infile_allowed(&self) -> bool {
        self.login.capabilities & cap::LOCAL_FILES != 0
            && self
                .fe
                .config
                .load()
                .mysql
                .variables
                .enable_load_data_local_infile
    }

    /// Relays the client's file to the server after its request reached the client, then the
    /// rest of the reply. A client that goes away mid-file takes the backend connection with it
    /// (closed, never pooled half-way through a statement).
    pub(super) async fn relay_local_file(&mut self, tracker: ReplyTracker) -> RelayOutcome {
        let mut bytes: u64 = 0;
        loop {
            let pk = match self.io.read().await {
                Ok(pk) => pk,
                Err(e) => {
                    warn!(session = self.id, client = %self.io.peer, bytes,
                        "client went away while sending a LOCAL INFILE file: {e}; its backend connection is closed");
                    self.backend = None;
                    return RelayOutcome::ClientGone(std::io::Error::other(e.to_string()));
                }
            };
            let next_seq = pk.seq.wrapping_add(1);
            let Some(b) = self.backend.as_mut() else {
                return RelayOutcome::ClientGone(std::io::Error::other("no backend connection"));
            };
            if let Err(error) = b.conn().send_more(&pk.raw).await {
                return RelayOutcome::BackendFailed {
                    error,
                    forwarded: 1,
                    next_seq,
                };
            }
            bytes += pk.payload.len() as u64;
            if pk.payload.is_empty() {
                break;
            }
        }
        info!(
            session = self.id,
            bytes, "LOAD DATA LOCAL INFILE: client file relayed to the server"
        );
        let Some(b) = self.backend.as_mut() else {
            return RelayOutcome::ClientGone(std::io::Error::other("no backend connection"));
        };
        let hostgroup = b.key().hostgroup;
        let mut commits = super::causal::commit_sink(
            &self.fe.counters.stats.causal,
            &self.login.user.username,
            hostgroup,
            &mut self.causal_token,
        );
        b.conn()
            .relay_after_local_file(tracker, &mut self.io.stream, &mut commits)
            .await
    }
}

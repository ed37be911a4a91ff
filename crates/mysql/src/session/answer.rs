//! Replies Sluice builds itself: one-row result sets for `SELECT @@version`, `VERSION()`,
//! `@@version_comment`, `LAST_INSERT_ID()` and `CONNECTION_ID()`.

use super::{Next, Session};
use crate::sql::classify::ProxyAnswer;
use sluice_mysql_proto::consts::cap;
use sluice_mysql_proto::resultset::{ColType, text_result};
use tokio::io::AsyncWriteExt;

/// `@@version_comment` as Sluice reports it (ProxySQL says "(ProxySQL)").
pub const VERSION_COMMENT: &str = "(Sluice)";

/// Encodes a one-column, one-row text result set starting at sequence id `seq`.
pub fn one_value_result(
    seq: u8,
    deprecate_eof: bool,
    status: u16,
    name: &str,
    ty: ColType,
    value: &str,
) -> Vec<u8> {
    text_result(
        seq,
        deprecate_eof,
        status,
        &[(name, ty)],
        &[vec![Some(value.to_string())]],
    )
}

impl Session {
    pub(super) async fn answer(&mut self, seq: u8, a: &ProxyAnswer) -> super::Next {
        let version = self.fe.config.load().mysql.variables.server_version.clone();
        let (name, ty, value) = match a {
            ProxyAnswer::Version(n) => (n.as_str(), ColType::Text, version),
            ProxyAnswer::VersionComment(n) => {
                (n.as_str(), ColType::Text, VERSION_COMMENT.to_string())
            }
            ProxyAnswer::LastInsertId(n) => (
                n.as_str(),
                ColType::UnsignedBigint,
                self.last_insert_id.to_string(),
            ),
            ProxyAnswer::ConnectionId(n) => {
                (n.as_str(), ColType::UnsignedBigint, self.id.to_string())
            }
        };
        let dep = self.login.capabilities & cap::DEPRECATE_EOF != 0;
        let bytes = one_value_result(seq, dep, self.pins.status, name, ty, &value);
        match self.io.stream.write_all(&bytes).await {
            Ok(()) => Next::Continue,
            Err(_) => Next::Close,
        }
    }
}

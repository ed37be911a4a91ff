//! Replies Sluice builds itself: one-row result sets for `SELECT @@version`, `VERSION()`,
//! `@@version_comment`, `LAST_INSERT_ID()` and `CONNECTION_ID()`, and `SHOW [FULL]
//! PROCESSLIST` from the session registry.

use super::{Next, Session};
use crate::sql::classify::ProxyAnswer;
use sluice_mysql_proto::resultset::{ColType, ResultShape, text_result};
use tokio::io::AsyncWriteExt;

/// `@@version_comment` as Sluice reports it (ProxySQL says "(ProxySQL)").
pub(super) const VERSION_COMMENT: &str = "(Sluice)";

/// Encodes a one-column, one-row text result set starting at sequence id `seq`.
pub(super) fn one_value_result(
    seq: u8,
    shape: ResultShape,
    status: u16,
    name: &str,
    ty: ColType,
    value: &str,
) -> Vec<u8> {
    text_result(
        seq,
        shape,
        status,
        &[(name, ty)],
        &[vec![Some(value.to_string())]],
    )
}

impl Session {
    pub(super) async fn answer(&mut self, seq: u8, a: &ProxyAnswer) -> super::Next {
        let version = self.fe.config.load().mysql.variables.server_version.clone();
        let (name, ty, value) = match a {
            ProxyAnswer::Processlist { full, text } => {
                let bytes = self.processlist(seq, *full, text);
                return match self.io.stream.write_all(&bytes).await {
                    Ok(()) => Next::Continue,
                    Err(_) => Next::Close,
                };
            }
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
        let bytes = one_value_result(seq, self.login.shape(), self.pins.status, name, ty, &value);
        match self.io.stream.write_all(&bytes).await {
            Ok(()) => Next::Continue,
            Err(_) => Next::Close,
        }
    }
}

/// `Info` of `SHOW PROCESSLIST` (without `FULL`) is cut at this many characters, as MySQL's.
const INFO_CHARS: usize = 100;

impl Session {
    /// `SHOW [FULL] PROCESSLIST` on the data port: the Sluice sessions of this session's user
    /// (MySQL shows a user without PROCESS its own threads), by the ids `KILL` and
    /// `CONNECTION_ID()` use, in MySQL's eight columns. This session is `Query` with its
    /// statement; the others are `Sleep` (their statements are not published) with why they
    /// hold a backend connection, or the class they wait for, as `State`.
    fn processlist(&self, seq: u8, full: bool, text: &str) -> Vec<u8> {
        let me = &self.login.user.username;
        let own_text: String = match full {
            true => text.to_string(),
            false => text.chars().take(INFO_CHARS).collect(),
        };
        let rows: Vec<Vec<Option<String>>> = self
            .fe
            .registry
            .processlist()
            .into_iter()
            .filter(|p| p.user == *me)
            .map(|p| {
                let mine = p.id == self.id;
                let state = match (&p.waiting, p.pin_reason) {
                    (Some((class, _)), _) => format!("waiting for workload class '{class}'"),
                    (None, Some(reason)) => format!("holding a backend connection: {reason}"),
                    (None, None) => String::new(),
                };
                vec![
                    Some(p.id.to_string()),
                    Some(p.user),
                    Some(p.client),
                    (!p.schema.is_empty()).then_some(p.schema),
                    Some(if mine { "Query" } else { "Sleep" }.to_string()),
                    Some("0".to_string()),
                    Some(if mine { "starting".to_string() } else { state }),
                    mine.then(|| own_text.clone()),
                ]
            })
            .collect();
        let columns = [
            ("Id", ColType::UnsignedBigint),
            ("User", ColType::Text),
            ("Host", ColType::Text),
            ("db", ColType::Text),
            ("Command", ColType::Text),
            ("Time", ColType::UnsignedBigint),
            ("State", ColType::Text),
            ("Info", ColType::Text),
        ];
        text_result(seq, self.login.shape(), self.pins.status, &columns, &rows)
    }
}

//! The embedding service's [`StatementHook`](sluice_core::query::StatementHook): asked about the
//! statement that begins each transaction, before the query rules; its replies are encoded here.

use crate::frontend::PgFrontend;
use crate::session::begin::Start;
use sluice_core::query::{HookDecision, HookStatement, LocalReply};
use sluice_pgsql_proto::frame::{error_response, message, ready};
use sluice_pgsql_proto::tag::{client, server, status};

/// What the hook made of a statement.
// Matched at once where it is made, like `Start`: boxing would allocate per hooked statement.
#[allow(clippy::large_enum_variant)]
pub(crate) enum Hooked {
    /// Carry on as configured.
    Continue,
    /// Forward to this hostgroup.
    Route(u32),
    /// Sluice answers with this.
    Answered(Start),
}

/// The hook's say on the first statement of a transaction, when a hook is installed: `Ok`
/// with the hostgroup it chose (or `None`: carry on), `Err` with Sluice's answer.
// The `Err` is returned to the caller's caller as is: no boxing per hooked statement.
#[allow(clippy::result_large_err)]
pub(crate) fn route(
    fe: &PgFrontend,
    session: u32,
    (user, database): (&str, &str),
    kind: u8,
    sql: Option<&str>,
) -> Result<Option<u32>, Start> {
    let (Some(sql), true) = (sql, fe.hook.is_some()) else {
        return Ok(None);
    };
    let stmt = HookStatement {
        session: u64::from(session),
        user,
        schema: database,
        sql,
    };
    match consult(fe, &stmt, kind) {
        Hooked::Continue => Ok(None),
        Hooked::Route(hostgroup) => Ok(Some(hostgroup)),
        Hooked::Answered(start) => Err(start),
    }
}

/// Shows `sql` (the text of message `kind`: `Q` simple query, `P`/`B` extended) to the
/// frontend's hook, if one is installed.
pub(crate) fn consult(fe: &PgFrontend, stmt: &HookStatement<'_>, kind: u8) -> Hooked {
    let Some(hook) = fe.hook.as_ref() else {
        return Hooked::Continue;
    };
    match hook.on_statement(stmt) {
        HookDecision::Continue => Hooked::Continue,
        HookDecision::Route { hostgroup } => Hooked::Route(hostgroup),
        HookDecision::Reply(reply) => Hooked::Answered(encode(&reply, kind == client::QUERY)),
    }
}

/// The client's bytes for `reply`. In the extended protocol only an error can be answered
/// in-process (the rest of the batch is skipped up to Sync); anything else is refused there.
fn encode(reply: &LocalReply, simple: bool) -> Start {
    let mut out = match (reply, simple) {
        (
            LocalReply::Error {
                sqlstate, message, ..
            },
            _,
        ) => error_response("ERROR", sqlstate, message),
        (_, false) => error_response(
            "ERROR",
            "0A000",
            "the statement hook answered a statement sent with the extended query protocol; \
             only errors can be answered there",
        ),
        (LocalReply::Rows { columns, rows }, true) => rows_reply(columns, rows),
        (LocalReply::Done { tag, .. }, true) => complete(tag),
    };
    if simple {
        out.extend(ready(status::IDLE));
    }
    Start::Answered {
        reply: out,
        skip_until_sync: !simple,
    }
}

/// RowDescription (text columns of type `text`), the DataRows and `SELECT n`.
pub(crate) fn rows_reply(columns: &[String], rows: &[Vec<Option<String>>]) -> Vec<u8> {
    /// `text`'s type oid.
    const TEXT_OID: u32 = 25;
    let mut desc = (columns.len() as u16).to_be_bytes().to_vec();
    for name in columns {
        desc.extend_from_slice(name.as_bytes());
        desc.push(0);
        desc.extend_from_slice(&0u32.to_be_bytes()); // table oid
        desc.extend_from_slice(&0u16.to_be_bytes()); // column number
        desc.extend_from_slice(&TEXT_OID.to_be_bytes());
        desc.extend_from_slice(&(-1i16).to_be_bytes()); // variable length
        desc.extend_from_slice(&(-1i32).to_be_bytes()); // no type modifier
        desc.extend_from_slice(&0u16.to_be_bytes()); // text format
    }
    let mut out = message(server::ROW_DESCRIPTION, &desc);
    let mut row = Vec::new();
    for r in rows {
        row.clear();
        row.extend_from_slice(&(r.len() as u16).to_be_bytes());
        for cell in r {
            match cell {
                Some(v) => {
                    row.extend_from_slice(&(v.len() as i32).to_be_bytes());
                    row.extend_from_slice(v.as_bytes());
                }
                None => row.extend_from_slice(&(-1i32).to_be_bytes()),
            }
        }
        out.extend(message(server::DATA_ROW, &row));
    }
    out.extend(complete(&format!("SELECT {}", rows.len())));
    out
}

/// CommandComplete with `tag`.
fn complete(tag: &str) -> Vec<u8> {
    let mut t = tag.as_bytes().to_vec();
    t.push(0);
    message(server::COMMAND_COMPLETE, &t)
}

#[cfg(test)]
mod tests {
    use super::*;
    use sluice_pgsql_proto::frame::complete_len;

    fn frames(b: &[u8]) -> Vec<u8> {
        let mut kinds = Vec::new();
        let mut pos = 0;
        while let Ok(Some(n)) = complete_len(&b[pos..]) {
            kinds.push(b[pos]);
            pos += n;
        }
        assert_eq!(pos, b.len(), "trailing bytes");
        kinds
    }

    #[test]
    fn simple_queries_get_rows_or_tags_and_extended_ones_only_errors() {
        let rows = LocalReply::rows(&["v"], [["1"], ["2"]]);
        let Start::Answered {
            reply,
            skip_until_sync,
        } = encode(&rows, true)
        else {
            panic!("answered expected")
        };
        assert_eq!(frames(&reply), b"TDDCZ");
        assert!(!skip_until_sync);
        let done = LocalReply::Done {
            tag: "SET".into(),
            affected_rows: 0,
        };
        let Start::Answered { reply, .. } = encode(&done, true) else {
            panic!()
        };
        assert_eq!(frames(&reply), b"CZ");
        let Start::Answered {
            reply,
            skip_until_sync,
        } = encode(&rows, false)
        else {
            panic!()
        };
        assert_eq!(frames(&reply), b"E");
        assert!(skip_until_sync);
        assert!(String::from_utf8_lossy(&reply).contains("extended query protocol"));
    }
}

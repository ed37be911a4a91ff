//! What a session's statements signal by Sluice pid (`crate::pids`): `pg_cancel_backend(pid)` /
//! `pg_terminate_backend(pid)` as a Query, or as a Bind of a statement prepared with `$1` —
//! carried out on the session named when it belongs to the same user, and the session's own pid
//! ending it as PostgreSQL ends a backend that signals itself.

use crate::pids::SessionSignals;
use sluice_core::util::lock;
use sluice_pgsql_proto::frame::{error_response, message, ready};
use sluice_pgsql_proto::message::{self as pgmsg, Parse, cstr};
use sluice_pgsql_proto::tag::{server, status};
use std::sync::Arc;

/// `pg_cancel_backend` or `pg_terminate_backend`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Signal {
    /// Cancel the session's running statement.
    Cancel,
    /// Cancel it and end the session.
    Terminate,
}

impl Signal {
    fn function(self) -> &'static str {
        match self {
            Signal::Cancel => "pg_cancel_backend",
            Signal::Terminate => "pg_terminate_backend",
        }
    }
}

/// Whether `sql` may name a signal function: a case-insensitive `_backend`, found without
/// allocating (every Query that starts a transaction and every Parse is looked at).
fn mentions_backend(sql: &[u8]) -> bool {
    sql.len() <= 128
        && memchr::memchr_iter(b'_', sql).any(|i| {
            sql.get(i..i + 8)
                .is_some_and(|w| w.eq_ignore_ascii_case(b"_backend"))
        })
}

/// `SELECT [pg_catalog.]pg_cancel_backend(ARG)` or `…pg_terminate_backend(ARG)` (any case,
/// optional `;`, NUL-terminated or not): the signal and ARG, trimmed and in lower case.
fn parse_call(sql: &[u8]) -> Option<(Signal, String)> {
    if !mentions_backend(sql) {
        return None;
    }
    let text = std::str::from_utf8(sql.strip_suffix(&[0]).unwrap_or(sql)).ok()?;
    let lower = text
        .trim()
        .trim_end_matches(';')
        .trim_end()
        .to_ascii_lowercase();
    let rest = lower.strip_prefix("select")?;
    if !rest.starts_with(char::is_whitespace) {
        return None;
    }
    let rest = rest.trim_start();
    let rest = rest.strip_prefix("pg_catalog.").unwrap_or(rest);
    let (signal, rest) = if let Some(r) = rest.strip_prefix("pg_cancel_backend") {
        (Signal::Cancel, r)
    } else {
        (
            Signal::Terminate,
            rest.strip_prefix("pg_terminate_backend")?,
        )
    };
    let inner = rest
        .trim_start()
        .strip_prefix('(')?
        .strip_suffix(')')?
        .trim();
    // A cast of the argument to an integer type changes nothing (`$1::int`, psycopg's tests).
    let arg = match inner.split_once("::") {
        Some((arg, ty)) if INTEGER_TYPES.contains(&ty.trim()) => arg.trim_end(),
        _ => inner,
    };
    Some((signal, arg.to_string()))
}

/// Integer type names a signal function's argument may be cast to.
const INTEGER_TYPES: [&str; 6] = ["int", "integer", "int4", "int8", "bigint", "oid"];

/// Reads a Query that is exactly `SELECT [pg_catalog.]pg_cancel_backend(pid)` or
/// `…pg_terminate_backend(pid)` (any case, optional `;`).
pub(crate) fn parse(sql: &[u8]) -> Option<(Signal, u32)> {
    let (signal, arg) = parse_call(sql)?;
    Some((signal, arg.parse().ok()?))
}

/// Most prepared statements a session remembers as signalling `$1`; past it the oldest is
/// forgotten (its Bind then goes to the server, as any other).
const MAX_SIGNAL_STATEMENTS: usize = 8;

/// The prepared statements of one session whose text is `SELECT pg_terminate_backend($1)`
/// (what psycopg and other drivers send with the pid as a parameter), so the Bind that passes
/// the session's own pid ends it as PostgreSQL would.
#[derive(Debug, Default)]
pub(crate) struct SignalStatements {
    names: Vec<Vec<u8>>,
}

impl SignalStatements {
    /// Looks at a Parse: its statement is remembered when it terminates `$1`, forgotten when
    /// its name is defined again with anything else.
    pub(crate) fn parsed(&mut self, parse: &[u8]) {
        let Some(p) = Parse::read(parse) else {
            return;
        };
        let name = p.name;
        let terminates = mentions_backend(p.definition)
            && p.query().and_then(parse_call) == Some((Signal::Terminate, "$1".to_string()));
        if let Some(i) = self.names.iter().position(|n| n == name) {
            if !terminates {
                self.names.remove(i);
            }
        } else if terminates {
            if self.names.len() == MAX_SIGNAL_STATEMENTS {
                self.names.remove(0);
            }
            self.names.push(name.to_vec());
        }
    }

    /// The pid a Bind of a remembered statement passes as `$1` (text, or binary int4/int8).
    pub(crate) fn bound_pid(&self, bind: &[u8]) -> Option<u32> {
        if self.names.is_empty() {
            return None;
        }
        let p = first_param(bind)?;
        if !self
            .names
            .iter()
            .any(|n| n.as_slice() == &bind[p.name.clone()])
        {
            return None;
        }
        let value = &bind[p.value];
        match (p.binary, value.len()) {
            (true, 4) => u32::try_from(i32::from_be_bytes(value.try_into().ok()?)).ok(),
            (true, 8) => u32::try_from(i64::from_be_bytes(value.try_into().ok()?)).ok(),
            (true, _) => None,
            (false, _) => std::str::from_utf8(value).ok()?.trim().parse().ok(),
        }
    }
}

/// Where a Bind's statement name and first parameter value are, and the value's format.
struct FirstParam {
    name: std::ops::Range<usize>,
    binary: bool,
    /// The length word, then the value.
    value: std::ops::Range<usize>,
}

/// Finds a Bind's statement name and first parameter (`None`: malformed, or no parameter).
fn first_param(bind: &[u8]) -> Option<FirstParam> {
    let at = |rest: &[u8]| bind.len() - rest.len();
    let (_portal, rest) = cstr(pgmsg::body(bind))?;
    let name_start = at(rest);
    let (name, mut rest) = cstr(rest)?;
    let name = name_start..name_start + name.len();
    let formats = take_u16(&mut rest)?;
    let mut binary = false;
    for i in 0..formats {
        let f = take_u16(&mut rest)?;
        if i == 0 {
            binary = f == 1;
        }
    }
    if take_u16(&mut rest)? == 0 {
        return None;
    }
    let len = usize::try_from(i32::from_be_bytes(rest.get(..4)?.try_into().ok()?)).ok()?;
    let start = at(rest) + 4;
    rest.get(4..4 + len)?;
    Some(FirstParam {
        name,
        binary,
        value: start..start + len,
    })
}

/// A Bind of `pg_terminate_backend($1)` naming `pid`, another Sluice session of `user`, sent
/// by a session that holds a connection to `server` (so inside a transaction or a batch, where
/// Sluice cannot answer for the server). The target session is ended; when its statement runs
/// on `server` too, the Bind is returned with the target's server pid in place of `pid`, so the
/// server terminates that backend and answers true, as for a direct client. Otherwise the Bind
/// goes on as it is, and the server answers false (no such backend) — the session still ends.
pub(crate) fn terminate_bound(
    signals: &SessionSignals,
    (user, server): (&str, &Arc<str>),
    bind: &[u8],
    pid: u32,
) -> Option<Vec<u8>> {
    let (owner, handle) = signals.session(pid)?;
    if *owner != *user {
        return None;
    }
    let running = lock(&handle.target).clone();
    handle.signal.raise(sluice_net::Signal::End);
    tracing::info!(
        target_pid = pid,
        user,
        "pg_terminate_backend() from a client, bound in a transaction"
    );
    let running = running?;
    if running.server != *server {
        return None;
    }
    with_first_param(bind, running.pid)
}

/// `bind` with its first parameter replaced by `pid`, in the parameter's own format (text, or
/// binary int4/int8).
fn with_first_param(bind: &[u8], pid: u32) -> Option<Vec<u8>> {
    let p = first_param(bind)?;
    let value = match (p.binary, p.value.len()) {
        (true, 4) => i32::try_from(pid).ok()?.to_be_bytes().to_vec(),
        (true, 8) => i64::from(pid).to_be_bytes().to_vec(),
        (true, _) => return None,
        (false, _) => pid.to_string().into_bytes(),
    };
    let mut out = Vec::with_capacity(bind.len() + 8);
    out.extend_from_slice(&bind[..p.value.start - 4]);
    out.extend_from_slice(&i32::try_from(value.len()).ok()?.to_be_bytes());
    out.extend_from_slice(&value);
    out.extend_from_slice(&bind[p.value.end..]);
    let total = u32::try_from(out.len() - 1).ok()?;
    out[1..5].copy_from_slice(&total.to_be_bytes());
    Some(out)
}

fn take_u16(b: &mut &[u8]) -> Option<u16> {
    let v = u16::from_be_bytes(b.get(..2)?.try_into().ok()?);
    *b = &b[2..];
    Some(v)
}

/// What a client's `pg_*_backend(pid)` did.
pub(crate) enum Outcome {
    /// `pid` is not a Sluice session: the statement goes to the server (a server pid works
    /// there as on a direct connection).
    NotOurs,
    /// The reply to send (result or error, then ReadyForQuery).
    Reply(Vec<u8>),
    /// `pg_terminate_backend` of the session's own pid: it ends with FATAL 57P01, as a
    /// PostgreSQL backend that signalled itself does.
    OwnTerminate,
}

/// Carries out `signal` on session `pid` for the session `own` (its Sluice pid) of `user`.
pub(crate) async fn carry_out(
    signals: &SessionSignals,
    (user, own): (&str, u32),
    (signal, pid): (Signal, u32),
) -> Outcome {
    if pid == own {
        return match signal {
            Signal::Terminate => Outcome::OwnTerminate,
            // The statement that asked is the one cancelled.
            Signal::Cancel => {
                let mut out =
                    error_response("ERROR", "57014", "canceling statement due to user request");
                out.extend(ready(status::IDLE));
                Outcome::Reply(out)
            }
        };
    }
    let Some((owner, handle)) = signals.session(pid) else {
        return Outcome::NotOurs;
    };
    if *owner != *user {
        let verb = match signal {
            Signal::Cancel => "cancel query",
            Signal::Terminate => "terminate process",
        };
        let msg = format!(
            "permission denied to {verb}: only sessions of the same user can be signalled through Sluice"
        );
        let mut out = error_response("ERROR", "42501", &msg);
        out.extend(ready(status::IDLE));
        return Outcome::Reply(out);
    }
    let running = lock(&handle.target).clone();
    if let Some(k) = running {
        sluice_pgsql_backend::send_cancel(&k.server, k.pid, k.secret).await;
    }
    if signal == Signal::Terminate {
        handle.signal.raise(sluice_net::Signal::End);
    }
    tracing::info!(
        target_pid = pid,
        user,
        "{}() from a client",
        signal.function()
    );
    Outcome::Reply(bool_result(signal.function(), true))
}

/// A one-row, one-column boolean result, CommandComplete and ReadyForQuery.
fn bool_result(column: &str, value: bool) -> Vec<u8> {
    let mut desc = 1u16.to_be_bytes().to_vec();
    desc.extend_from_slice(column.as_bytes());
    desc.push(0);
    desc.extend_from_slice(&0u32.to_be_bytes()); // table oid
    desc.extend_from_slice(&0u16.to_be_bytes()); // column number
    desc.extend_from_slice(&16u32.to_be_bytes()); // bool
    desc.extend_from_slice(&1i16.to_be_bytes()); // type size
    desc.extend_from_slice(&(-1i32).to_be_bytes()); // type modifier
    desc.extend_from_slice(&0u16.to_be_bytes()); // text format
    let mut row = 1u16.to_be_bytes().to_vec();
    row.extend_from_slice(&1u32.to_be_bytes());
    row.push(if value { b't' } else { b'f' });
    let mut out = message(server::ROW_DESCRIPTION, &desc);
    out.extend(message(server::DATA_ROW, &row));
    out.extend(message(server::COMMAND_COMPLETE, b"SELECT 1\0"));
    out.extend(ready(status::IDLE));
    out
}

#[cfg(test)]
mod tests;

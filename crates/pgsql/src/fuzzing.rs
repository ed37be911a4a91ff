//! Entry points for the fuzz targets in `fuzz/` (compiled only with `--cfg fuzzing`, which
//! `cargo xtask fuzz` sets): the crate's readers of client bytes, reachable without a socket.

use crate::session::pins::PinSet;
use crate::session::statements::SessionStatements;
use sluice_core::query::lexer::{Syntax, split_statements};
use sluice_pgsql_backend::prepared::PreparedSet;
use sluice_pgsql_proto::frame::{complete_len, parse_pairs};
use sluice_pgsql_proto::tag::{client, server};

/// Reads a StartupMessage body (after length and protocol version) as a login does: the
/// name/value pairs, then the parameters with the `options` switches, honouring `ignore`.
pub fn startup(body: &[u8], ignore: &str) {
    let pairs = parse_pairs(body);
    if let Ok(p) = crate::login::startup::parse(&pairs, ignore) {
        assert!(!p.database.is_empty() || p.user.is_empty());
    }
}

/// Runs every reader a Query text goes through: statement splitting, the pin tracker, the
/// SET/RESET classifier (both as a Query and as a named Parse) and the signal parser.
pub fn sql(text: &[u8]) {
    let _ = crate::session::sets::classify(text, true);
    let _ = crate::session::sets::classify(text, false);
    let _ = crate::session::signals::parse(text);
    if let Ok(s) = std::str::from_utf8(text) {
        let _ = split_statements(s, Syntax::Pgsql);
        let mut pins = PinSet::default();
        pins.apply(s);
        let _ = pins.reason();
    }
}

/// Feeds the client's extended-protocol messages in `stream` (framed as on the wire) through
/// the self-signal reader and the statement mapper onto two alternating server connections, with the server's replies
/// the kinds in `replies` stand for, as a session under transaction pooling would.
pub fn extended(stream: &[u8], replies: &[u8], max_prepared: usize) {
    let mut statements = SessionStatements::new(42);
    let mut conns = [PreparedSet::default(), PreparedSet::default()];
    let mut rest = stream;
    let mut replies = replies.iter().copied().cycle().take(4096);
    let mut which = 0usize;
    while let Ok(Some(len)) = complete_len(rest) {
        let (msg, tail) = rest.split_at(len);
        rest = tail;
        let conn = &mut conns[which % 2];
        // The session's self-signal reader sees every Parse and Bind first.
        match msg[0] {
            client::PARSE => statements.signals.parsed(msg),
            client::BIND => {
                let _ = statements.signals.bound_pid(msg);
            }
            _ => {}
        }
        if !statements.define_locally(msg) {
            let _ = statements.bound_query(msg);
            let mut out = Vec::new();
            statements.outgoing(msg, conn, max_prepared.max(1), &mut out);
            let mut sent = out.as_slice();
            while let Ok(Some(n)) = complete_len(sent) {
                sent = &sent[n..];
            }
            assert!(sent.is_empty(), "the mapper wrote a partial message");
            if matches!(msg[0], client::SYNC | client::QUERY) {
                statements.batch_sent();
            }
        }
        if let Some(kind) = replies.next() {
            let _ = statements.incoming(kind, conn);
            if kind == server::READY_FOR_QUERY && statements.settled() {
                which += 1;
            }
        }
    }
}

//! Entry points for the fuzz targets in `fuzz/` (compiled only with `--cfg fuzzing`, which
//! `cargo xtask fuzz` sets): the crate's decoders of client bytes, reachable without a socket.

use crate::session::execute::{ExecuteRewrite, stmt_id};
use crate::sql::{classify, lexer, set};
use bytes::Bytes;

/// Runs every SQL reader a COM_QUERY text goes through: statement splitting, the token lexer,
/// the classifier (pins, KILL, proxy answers) and the SET parser.
pub fn sql(text: &str) {
    for stmt in lexer::split_statements(text) {
        let _ = classify::classify(stmt);
        let _ = set::parse_set(stmt);
    }
    let mut lx = lexer::Lexer::new(text);
    // Bounded: the lexer must make progress on every token.
    for _ in 0..=text.len() {
        if lx.next().is_none() {
            break;
        }
    }
}

/// Rewrites a COM_STMT_EXECUTE payload as a session does for a statement with `num_params`
/// parameters, with and without remembered types, and checks what must hold of the result.
pub fn stmt_execute(payload: &[u8], num_params: u16, remembered: &[u8]) {
    let payload = Bytes::copy_from_slice(payload);
    let remembered = Bytes::copy_from_slice(remembered);
    let _ = stmt_id(&payload);
    for (known, on_server) in [(None, false), (None, true), (Some(&remembered), true)] {
        let plan =
            ExecuteRewrite::plan(&payload, 7, num_params, Some(&remembered), known, on_server);
        let rewritten = plan.payload(&payload);
        assert!(
            rewritten.len() >= payload.len(),
            "a rewrite never drops bytes"
        );
        assert_eq!(rewritten.len(), plan.len(&payload));
        if payload.len() >= 5 {
            assert_eq!(stmt_id(&rewritten), Some(7));
        }
        let plan = ExecuteRewrite::plan(&payload, 7, num_params, None, known, on_server);
        assert_eq!(plan.payload(&payload).len(), payload.len());
    }
}

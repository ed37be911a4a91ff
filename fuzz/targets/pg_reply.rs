//! The reply tracker, which scans every frame a PostgreSQL *server* sends (ReadyForQuery
//! statuses, handoff replies, SET outcomes, ErrorResponse fields).
#![no_main]

use libfuzzer_sys::fuzz_target;
use sluice_fuzz::split_first;
use sluice_pgsql_proto::frame::{parse_error, parse_pairs};
use sluice_pgsql_proto::reply::ReplyTracker;

fuzz_target!(|data: &[u8]| {
    let (setup, mut stream) = split_first(data);
    let mut t = ReplyTracker::default();
    for _ in 0..(setup % 4) {
        t.sent_sync();
    }
    t.expect_handoff(setup / 64);
    t.watch_sets(setup & 0x10 != 0);
    while let Ok(Some(frame)) = t.next(stream) {
        assert!(frame.len >= 5 && frame.len <= stream.len());
        let body = &stream[5..frame.len];
        if frame.kind == b'E' || frame.kind == b'N' {
            let _ = parse_error(body);
        }
        if frame.kind == b'S' {
            let _ = parse_pairs(body);
        }
        stream = &stream[frame.len..];
        let _ = t.at_rest();
    }
});

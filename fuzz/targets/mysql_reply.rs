//! The reply tracker, which reads every packet a MySQL *server* sends to tell where a reply
//! ends (result sets, prepare-OK, fetch, field list, single packets, LOCAL INFILE requests).
#![no_main]

use libfuzzer_sys::fuzz_target;
use sluice_fuzz::split_first;
use sluice_mysql_proto::framing::complete_frame_len;
use sluice_mysql_proto::reply::{ReplyKind, ReplyTracker};

fuzz_target!(|data: &[u8]| {
    let (which, mut stream) = split_first(data);
    let kind = match which % 5 {
        0 => ReplyKind::ResultSets,
        1 => ReplyKind::Prepare,
        2 => ReplyKind::Fetch,
        3 => ReplyKind::FieldList,
        _ => ReplyKind::Single,
    };
    let mut t = ReplyTracker::new(kind, which & 0x80 != 0);
    while let Some(n) = complete_frame_len(stream) {
        let payload = &stream[4..n];
        stream = &stream[n..];
        if t.feed(payload, payload.len()).is_err() || t.done() {
            break;
        }
        if t.wants_local_file() {
            t.local_file_sent();
        }
    }
});

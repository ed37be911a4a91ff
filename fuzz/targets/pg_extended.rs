//! Extended-protocol client messages (Parse/Bind/Describe/Execute/Close/Sync) through the
//! statement mapper that renames prepared statements per server connection.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if data.len() < 2 {
        return;
    }
    let max = usize::from(data[0] % 8) + 1;
    let replies_len = usize::from(data[1] % 32);
    let rest = &data[2..];
    let (replies, stream) = rest.split_at(replies_len.min(rest.len()));
    let replies: Vec<u8> = replies
        .iter()
        .map(|b| [b'1', b'2', b'3', b'Z', b'E', b'C'][usize::from(*b) % 6])
        .collect();
    sluice_pgsql::fuzzing::extended(stream, &replies, max);
});

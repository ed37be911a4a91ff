//! COM_STMT_EXECUTE payloads as the session rewrites them for a backend connection: statement
//! id, null bitmap, new-params-bound flag and parameter types, remembered types replayed.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if data.len() < 3 {
        return;
    }
    let num_params = u16::from_le_bytes([data[0], data[1]]) % 300;
    let types_len = usize::from(data[2] % 16);
    let rest = &data[3..];
    let (remembered, payload) = rest.split_at(types_len.min(rest.len()));
    sluice_mysql::fuzzing::stmt_execute(payload, num_params, remembered);
});

//! PostgreSQL framing: startup-phase packets and typed messages read under their size bounds.
#![no_main]

use libfuzzer_sys::fuzz_target;
use sluice_fuzz::{ready, split_first};
use sluice_pgsql_proto::frame::Reader;

fuzz_target!(|data: &[u8]| {
    let (mode, bytes) = split_first(data);
    let mut input = bytes;
    let mut reader = Reader::default();
    if mode & 1 == 1 {
        match ready(reader.startup(&mut input)) {
            Some(Ok(p)) => assert!((8..=10_000).contains(&p.len())),
            Some(Err(_)) => return,
            None => panic!("a read of memory waited"),
        }
    }
    for _ in 0..1024 {
        let read = if mode & 2 == 2 {
            ready(reader.message_within(&mut input, 8192))
        } else {
            ready(reader.message(&mut input))
        };
        match read {
            Some(Ok(m)) => assert!(m.len() >= 5),
            Some(Err(_)) => break,
            None => panic!("a read of memory waited"),
        }
    }
});

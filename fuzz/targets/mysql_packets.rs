//! MySQL framing: logical packets (with 16 MiB continuation chunks) read under a size bound, and
//! the compressed protocol's framing and inflation, from bytes a client or server sent.
#![no_main]

use libfuzzer_sys::fuzz_target;
use sluice_fuzz::{ready, split_first};
use sluice_mysql_proto::compress::MaybeCompressed;
use sluice_mysql_proto::framing::PacketReader;
use tokio::io::AsyncReadExt;

const LIMIT: usize = 64 * 1024;

fuzz_target!(|data: &[u8]| {
    let (mode, bytes) = split_first(data);
    if mode & 1 == 0 {
        let mut reader = PacketReader::new(LIMIT);
        let mut input = bytes;
        for _ in 0..1024 {
            match ready(reader.read(&mut input)) {
                Some(Ok(p)) => assert!(p.payload.len() <= LIMIT && p.raw.len() >= 4),
                Some(Err(_)) => break,
                None => panic!("a read of memory waited"),
            }
        }
    } else {
        let io = tokio::io::join(bytes, tokio::io::sink());
        let mut stream = MaybeCompressed::new(io);
        stream.start_compression();
        let mut reader = PacketReader::new(LIMIT);
        for _ in 0..256 {
            match ready(reader.read(&mut stream)) {
                Some(Ok(p)) => assert!(p.payload.len() <= LIMIT),
                Some(Err(_)) => break,
                None => panic!("a read of memory waited"),
            }
        }
        let mut rest = Vec::new();
        let _ = ready((&mut stream).take(1 << 20).read_to_end(&mut rest));
    }
});

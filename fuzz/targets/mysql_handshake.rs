//! MySQL connection phase: the server greeting, the client's handshake response and
//! COM_CHANGE_USER, OK/ERR/auth-switch packets and length-encoded values.
#![no_main]

use libfuzzer_sys::fuzz_target;
use sluice_fuzz::split_first;
use sluice_mysql_proto::handshake::{ChangeUser, Greeting, HandshakeResponse};
use sluice_mysql_proto::lenenc::Reader;
use sluice_mysql_proto::packets::{eof_status, parse_auth_switch, parse_err, parse_ok};

fuzz_target!(|data: &[u8]| {
    let (which, payload) = split_first(data);
    match which % 4 {
        0 => {
            let _ = Greeting::decode(payload);
        }
        1 => {
            let _ = HandshakeResponse::decode(payload);
        }
        2 => {
            let caps = u32::from_le_bytes([which, 0xa2, 0x0f, 0x00]);
            let _ = ChangeUser::decode(payload, caps);
            let _ = ChangeUser::decode(payload, u32::MAX);
        }
        _ => {
            let _ = parse_ok(payload);
            let _ = parse_err(payload);
            let _ = parse_auth_switch(payload);
            let _ = eof_status(payload);
            let mut r = Reader::new(payload, "fuzz");
            while !r.is_empty() {
                if r.lenenc_bytes().is_err() && r.null_str().is_err() && r.u8().is_err() {
                    break;
                }
            }
        }
    }
});

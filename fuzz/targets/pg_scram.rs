//! SCRAM-SHA-256, both ends: Sluice as the server reads a client's first and final messages;
//! Sluice as a client reads a server's first and final messages.
#![no_main]

use libfuzzer_sys::fuzz_target;
use sluice_fuzz::split_first;
use sluice_pgsql_proto::scram::{Client, Server};

fuzz_target!(|data: &[u8]| {
    let (which, rest) = split_first(data);
    let text = String::from_utf8_lossy(rest);
    let (first, last) = text.split_once('\n').unwrap_or((&text, ""));
    if which & 1 == 0 {
        if let Ok((server, _server_first)) = Server::new("secret", first) {
            let _ = server.finish(last);
        }
    } else {
        let (mut client, _client_first) = Client::new("secret");
        if client.finish(first).is_ok() {
            let _ = client.verify(last);
        }
    }
});

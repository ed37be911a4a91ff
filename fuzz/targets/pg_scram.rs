//! SCRAM-SHA-256, both ends: Sluice as the server reads a client's first and final messages
//! (against a password or a stored verifier, which is parsed too); Sluice as a client reads a
//! server's first and final messages (with a password or recovered keys).
#![no_main]

use libfuzzer_sys::fuzz_target;
use sluice_fuzz::split_first;
use sluice_pgsql_proto::scram::{Client, ClientSecret, Server, Verifier};

fuzz_target!(|data: &[u8]| {
    let (which, rest) = split_first(data);
    let text = String::from_utf8_lossy(rest);
    let (first, last) = text.split_once('\n').unwrap_or((&text, ""));
    // A stored verifier (as pgsql_users may hold one) read from the input, or a fixed one.
    let stored = Verifier::parse(first)
        .unwrap_or_else(|| Verifier::from_password("secret", b"0123456789abcdef", 16));
    match which % 4 {
        0 => {
            if let Ok((server, _server_first)) = Server::new("secret", first) {
                let _ = server.finish(last);
            }
        }
        1 => {
            let (mut client, _client_first) = Client::new("secret");
            if client.finish(first).is_ok() {
                let _ = client.verify(last);
            }
        }
        2 => {
            if let Ok((server, _)) = Server::with_verifier(stored, first) {
                let _ = server.finish_with_key(last);
            }
        }
        _ => {
            let secret = ClientSecret::Keys {
                verifier: stored,
                client_key: vec![7; 32],
            };
            let (mut client, _) = Client::with_secret(secret);
            if client.finish(first).is_ok() {
                let _ = client.verify(last);
            }
        }
    }
});

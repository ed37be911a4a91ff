//! Cuts recorded connections into seeds for each fuzz target: whole streams for the framing
//! targets, connection-phase packets, each command with the server's reply, statement texts,
//! SCRAM exchanges, extended-protocol batches; plus admin statements and configuration files
//! from the repository's own docs.

use crate::fuzz_seed::{Chunk, Seeds};

/// A command (the client's bytes) and the server's bytes that followed it.
struct Exchange {
    client: Vec<u8>,
    server: Vec<u8>,
}

/// Groups a connection's chunks into exchanges; the first has no client bytes when the server
/// spoke first (MySQL's greeting).
fn exchanges(conn: &[Chunk]) -> Vec<Exchange> {
    let mut out: Vec<Exchange> = Vec::new();
    for (from_client, bytes) in conn {
        match out.last_mut() {
            Some(last) if !from_client => last.server.extend_from_slice(bytes),
            Some(last) if last.server.is_empty() => last.client.extend_from_slice(bytes),
            _ => {
                let (client, server) = if *from_client {
                    (bytes.clone(), Vec::new())
                } else {
                    (Vec::new(), bytes.clone())
                };
                out.push(Exchange { client, server });
            }
        }
    }
    out
}

fn stream(conn: &[Chunk], client: bool) -> Vec<u8> {
    conn.iter()
        .filter(|(c, _)| *c == client)
        .flat_map(|(_, b)| b.iter().copied())
        .collect()
}

/// MySQL packets (payloads) of a byte stream, stopping at the first incomplete one.
fn mysql_packets(mut b: &[u8]) -> Vec<&[u8]> {
    let mut out = Vec::new();
    while b.len() >= 4 {
        let len = usize::from(b[0]) | usize::from(b[1]) << 8 | usize::from(b[2]) << 16;
        if b.len() < 4 + len {
            break;
        }
        out.push(&b[4..4 + len]);
        b = &b[4 + len..];
    }
    out
}

const CLIENT_COMPRESS: u32 = 0x20;
const DEPRECATE_EOF: u32 = 0x0100_0000;

/// Seeds from one recorded MySQL connection.
pub(crate) fn mysql(conn: &[Chunk], seeds: &mut Seeds) {
    let ex = exchanges(conn);
    let Some(greeting) = ex
        .first()
        .and_then(|e| mysql_packets(&e.server).first().copied())
    else {
        return;
    };
    seeds.add_with("mysql_handshake", &[0], greeting);
    // The greeting's exchange has no client bytes: the response opens the second.
    let Some(response) = ex
        .get(1)
        .and_then(|e| mysql_packets(&e.client).first().copied())
    else {
        return;
    };
    seeds.add_with("mysql_handshake", &[1], response);
    let caps = response
        .get(..4)
        .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .unwrap_or(0);
    // The login ends with the first exchange whose reply is an OK packet.
    let login_end = ex
        .iter()
        .position(|e| {
            mysql_packets(&e.server)
                .iter()
                .any(|p| p.first() == Some(&0))
        })
        .unwrap_or(0);
    for e in &ex[..=login_end] {
        for p in mysql_packets(&e.server) {
            seeds.add_with("mysql_handshake", &[3], p);
        }
    }
    let after = &ex[login_end + 1..];
    if caps & CLIENT_COMPRESS != 0 {
        let client: Vec<u8> = after.iter().flat_map(|e| e.client.clone()).collect();
        let server: Vec<u8> = after.iter().flat_map(|e| e.server.clone()).collect();
        seeds.add_with("mysql_packets", &[1], &client);
        seeds.add_with("mysql_packets", &[1], &server);
        return;
    }
    seeds.add_with("mysql_packets", &[0], &stream(conn, true));
    seeds.add_with("mysql_packets", &[0], &stream(conn, false));
    let eof_flag = if caps & DEPRECATE_EOF != 0 { 0x80 } else { 0 };
    let mut params = std::collections::HashMap::new();
    for e in after {
        let Some(cmd) = mysql_packets(&e.client).first().copied() else {
            continue;
        };
        let kind: u8 = match cmd.first() {
            Some(0x03 | 0x17) => 0,
            Some(0x16) => 1,
            Some(0x1c) => 2,
            Some(0x04) => 3,
            _ => 4,
        };
        seeds.add_with("mysql_reply", &[kind | eof_flag], &e.server);
        match cmd.first() {
            Some(0x03 | 0x16) => {
                seeds.add("mysql_sql", &cmd[1..]);
                seeds.add("digest", &cmd[1..]);
            }
            Some(0x11) => seeds.add_with("mysql_handshake", &[2], cmd),
            _ => {}
        }
        let reply = mysql_packets(&e.server);
        // A prepare-OK: status 0, statement id, column count, parameter count.
        if cmd.first() == Some(&0x16)
            && let Some(ok) = reply.first().filter(|p| p.len() >= 12 && p[0] == 0)
        {
            params.insert(ok[1..5].to_vec(), u16::from_le_bytes([ok[7], ok[8]]));
        }
        if cmd.first() == Some(&0x17) && cmd.len() >= 5 {
            let n = params.get(&cmd[1..5]).copied().unwrap_or(0);
            let [lo, hi] = n.to_le_bytes();
            seeds.add_with("mysql_execute", &[lo, hi, 0], cmd);
            seeds.add_with("mysql_execute", &[lo, hi, 2, 3, 0], cmd);
        }
    }
}

/// PostgreSQL typed messages `(kind, body)` of a byte stream.
fn pg_messages(mut b: &[u8]) -> Vec<(u8, &[u8])> {
    let mut out = Vec::new();
    while b.len() >= 5 {
        let len = u32::from_be_bytes([b[1], b[2], b[3], b[4]]) as usize;
        if len < 4 || b.len() < 1 + len {
            break;
        }
        out.push((b[0], &b[5..1 + len]));
        b = &b[1 + len..];
    }
    out
}

fn cstr(b: &[u8]) -> (&[u8], &[u8]) {
    match b.iter().position(|c| *c == 0) {
        Some(i) => (&b[..i], &b[i + 1..]),
        None => (b, &[]),
    }
}

/// Seeds from one recorded PostgreSQL connection.
pub(crate) fn pgsql(conn: &[Chunk], seeds: &mut Seeds) {
    let client = stream(conn, true);
    let server = stream(conn, false);
    if client.len() < 8 {
        return;
    }
    let startup_len = u32::from_be_bytes([client[0], client[1], client[2], client[3]]) as usize;
    let Some(startup) = client.get(8..startup_len) else {
        return;
    };
    seeds.add("pg_startup", startup);
    seeds.add_with("pg_framing", &[1], &client);
    seeds.add_with("pg_framing", &[3], &client);
    seeds.add_with("pg_framing", &[0], &server);
    seeds.add_with("pg_reply", &[0], &server);
    let messages = pg_messages(&client[startup_len..]);
    let replies = pg_messages(&server);
    scram(&messages, &replies, seeds);
    for (kind, body) in &messages {
        let text = match kind {
            b'Q' => cstr(body).0,
            b'P' => cstr(cstr(body).1).0,
            _ => continue,
        };
        seeds.add("pg_sql", text);
        seeds.add("digest", text);
    }
    // The extended target's input: max statements, reply kinds, then the client's messages.
    let kinds: Vec<u8> = replies
        .iter()
        .filter_map(|(k, _)| b"123ZEC".iter().position(|c| c == k))
        .filter_map(|i| u8::try_from(i).ok())
        .take(31)
        .collect();
    let mut prefix = vec![3, kinds.len() as u8];
    prefix.extend_from_slice(&kinds);
    seeds.add_with("pg_extended", &prefix, &client[startup_len..]);
    // Per exchange: one Sync's worth of reply for the tracker.
    for e in exchanges(conn).iter().skip(1) {
        seeds.add_with("pg_reply", &[1], &e.server);
    }
}

/// SCRAM seeds from a login: the client's first and final messages (Sluice as server reads
/// them) and the server's (Sluice as client reads them), newline-separated.
fn scram(messages: &[(u8, &[u8])], replies: &[(u8, &[u8])], seeds: &mut Seeds) {
    let responses: Vec<&[u8]> = messages
        .iter()
        .filter(|(k, _)| *k == b'p')
        .map(|(_, b)| *b)
        .collect();
    let [initial, last, ..] = responses[..] else {
        return;
    };
    // SASLInitialResponse: mechanism, int32 length, client-first-message.
    let client_first = cstr(initial).1.get(4..).unwrap_or_default();
    let mut c = vec![0];
    c.extend_from_slice(client_first);
    c.push(b'\n');
    c.extend_from_slice(last);
    seeds.add("pg_scram", &c);
    let server: Vec<&[u8]> = replies
        .iter()
        .filter(|(k, b)| *k == b'R' && matches!(b.get(..4), Some([0, 0, 0, 11 | 12])))
        .map(|(_, b)| &b[4..])
        .collect();
    if let [first, last, ..] = server[..] {
        let mut s = vec![1];
        s.extend_from_slice(first);
        s.push(b'\n');
        s.extend_from_slice(last);
        seeds.add("pg_scram", &s);
    }
}

/// Admin statements from the docs' code blocks and the configuration files of the repository.
pub(crate) fn texts(seeds: &mut Seeds) -> xtask::Result<()> {
    let root = xtask::workspace_root();
    const ADMIN_WORDS: &[&str] = &[
        "LOAD ",
        "SAVE ",
        "SELECT ",
        "UPDATE ",
        "INSERT ",
        "DELETE ",
        "SET ",
        "SHOW ",
        "PROXYSQL ",
        "PAUSE",
        "RESUME",
        "REPLACE ",
        "ATTACH ",
        "PRAGMA ",
        "VACUUM",
    ];
    let docs = std::fs::read_dir(root.join("docs")).map_err(|e| format!("docs/: {e}"))?;
    for doc in docs.flatten() {
        let path = doc.path();
        let text = std::fs::read_to_string(&path).unwrap_or_default();
        if path.extension().is_some_and(|e| e == "toml") {
            seeds.add("config", text.as_bytes());
            continue;
        }
        let mut in_toml = None::<String>;
        for line in text.lines() {
            let trimmed = line.trim();
            if let Some(block) = in_toml.as_mut() {
                if trimmed.starts_with("```") {
                    seeds.add("config", block.as_bytes());
                    in_toml = None;
                } else {
                    block.push_str(line);
                    block.push('\n');
                }
                continue;
            }
            if trimmed == "```toml" {
                in_toml = Some(String::new());
            } else if ADMIN_WORDS
                .iter()
                .any(|w| trimmed.to_uppercase().starts_with(w))
            {
                seeds.add("admin_sql", trimmed.as_bytes());
                seeds.add("digest", trimmed.as_bytes());
            }
        }
    }
    // The admin statements the end-to-end tests send: string literals that start like one.
    let tests = std::fs::read_dir(root.join("tests").join("tests")).map_err(|e| e.to_string())?;
    for file in tests.flatten() {
        let text = std::fs::read_to_string(file.path()).unwrap_or_default();
        for line in text.lines() {
            for literal in line.split('"').skip(1).step_by(2) {
                let upper = literal.to_uppercase();
                if ADMIN_WORDS.iter().any(|w| upper.starts_with(w)) {
                    seeds.add("admin_sql", literal.as_bytes());
                }
            }
        }
    }
    for toml in ["compose/sluice.toml", "docs/demo.toml"] {
        let text = std::fs::read_to_string(root.join(toml)).unwrap_or_default();
        seeds.add("config", text.as_bytes());
    }
    Ok(())
}

//! A service that runs agents' SQL read-only the way Sluice's MCP endpoint does, with
//! `sluice-mcp` on its own: the lexer layer first, then the read-only path (one statement on
//! the wire, a READ ONLY transaction, caps, the server's timeout, a reset connection).
//!
//! ```sh
//! cargo run -p sluice-mcp --example agent_readonly -- 127.0.0.1:3307 app app mysql \
//!     "SELECT 1 AS one" "SELECT 1; DROP TABLE t"
//! ```

use sluice_core::query::Dialect;
use sluice_mcp::exec::{Conns, Limits, Place, run_mysql};
use sluice_mcp::readonly::check_read;
use std::time::Duration;

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [addr, user, password, schema, statements @ ..] = args.as_slice() else {
        eprintln!("usage: agent_readonly HOST:PORT USER PASSWORD SCHEMA SQL...");
        std::process::exit(2);
    };
    let (host, port) = addr.rsplit_once(':').unwrap_or((addr.as_str(), "3306"));
    let place = Place {
        host: host.to_string(),
        port: port.parse().unwrap_or(3306),
        user: user.clone(),
        password: password.clone(),
        database: String::new(),
        schema: Some(schema.clone()),
        connect_timeout: Duration::from_secs(5),
        tls: None,
    };
    let limits = Limits {
        max_rows: 10,
        max_bytes: 1 << 20,
        timeout: Duration::from_secs(5),
    };
    let conns = Conns::new(Default::default());
    let cancel = tokio_util::sync::CancellationToken::new();
    for sql in statements {
        if let Err(refusal) = check_read(sql, Dialect::Mysql, limits.timeout.as_millis() as u64) {
            println!("{sql} -> refused: {refusal}");
            continue;
        }
        match run_mysql(&conns, &place, sql, limits, &cancel).await {
            Ok(r) => println!(
                "{sql} -> {} row(s), truncated: {}, first: {:?}",
                r.rows.len(),
                r.truncated,
                r.rows.first()
            ),
            Err(e) => println!("{sql} -> error: {e}"),
        }
    }
}

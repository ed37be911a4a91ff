//! A Rust service using Sluice's PostgreSQL pool to reach a hostgroup: connections are opened
//! on demand (SCRAM, MD5 or cleartext, as the server asks), reused across checkouts, and capped
//! per server by `max_connections`.
//!
//! ```sh
//! cargo run -p sluice-pgsql-backend --example pg_pooled_query -- 127.0.0.1:5432 app app app
//! ```
//! Arguments: `host:port user password database` (defaults: the test primary, app/app/app).

use sluice_core::pool::PoolOptions;
use sluice_core::runtime::HostgroupServer;
use sluice_pgsql_backend::{PgCheckout, PgPool, ROUND_PAUSE};
use sluice_pgsql_proto::scram::ClientSecret;
use std::time::Duration;

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let arg = |i: usize, default: &str| args.get(i).cloned().unwrap_or(default.to_string());
    let addr = arg(0, "127.0.0.1:15432");
    let (host, port) = addr.rsplit_once(':').ok_or("host:port expected")?;
    let (user, password, database) = (arg(1, "app"), arg(2, "app"), arg(3, "app"));
    // Hostgroup 10 with one server; a real service would list several and let the pool pick.
    let servers = [HostgroupServer::new(host, port.parse()?, 10)];
    let pool = PgPool::new(None);
    let request = PgCheckout {
        hostgroup: 10,
        servers: &servers,
        user: &user,
        secret: &ClientSecret::Password(password),
        database: &database,
        session: None,
        options: PoolOptions::with_timeouts(
            Duration::from_secs(1),
            Duration::from_secs(5),
            ROUND_PAUSE,
        ),
    };
    let mut pids = Vec::new();
    for _ in 0..3 {
        let mut c = pool.checkout(&request).await?;
        let pid = c.conn().query_value("SELECT pg_backend_pid()").await?;
        let sum = c.conn().query_value("SELECT 20 + 22").await?;
        println!(
            "server process {} says 20 + 22 = {}",
            pid.as_deref().unwrap_or("?"),
            sum.as_deref().unwrap_or("?")
        );
        pids.push(pid);
        // Back to the pool: the next checkout gets the same connection.
        c.release_clean();
    }
    let reused = pids.windows(2).all(|w| w[0] == w[1]);
    println!("one pooled connection served every checkout: {reused}");
    Ok(())
}

//! A Rust service using Sluice's MySQL pool to reach a hostgroup: connections are opened on
//! demand (mysql_native_password or caching_sha2_password), reused across checkouts, and capped
//! per server by `max_connections`.
//!
//! ```sh
//! cargo run -p sluice-mysql-backend --example mysql_pooled_query -- 127.0.0.1:3306 app app
//! ```
//! Arguments: `host:port user password` (defaults: the test primary, app/app).

use sluice_core::pool::PoolOptions;
use sluice_core::runtime::HostgroupServer;
use sluice_mysql_backend::{BackendSecret, CheckoutRequest, MysqlPool};
use std::time::Duration;

/// utf8mb4_general_ci.
const COLLATION: u8 = 45;

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let arg = |i: usize, default: &str| args.get(i).cloned().unwrap_or(default.to_string());
    let addr = arg(0, "127.0.0.1:13306");
    let (host, port) = addr.rsplit_once(':').ok_or("host:port expected")?;
    let user = arg(1, "app");
    let secret = BackendSecret::Clear(arg(2, "app"));
    let servers = [HostgroupServer::new(host, port.parse()?, 10)];
    let pool = MysqlPool::new(None);
    let request = CheckoutRequest {
        hostgroup: 10,
        servers: &servers,
        user: &user,
        secret: &secret,
        charset: COLLATION,
        client_caps: 0,
        max_packet: 64 << 20,
        options: PoolOptions::with_timeouts(
            Duration::from_secs(1),
            Duration::from_secs(5),
            Duration::from_millis(10),
        ),
    };
    let mut threads = Vec::new();
    for _ in 0..3 {
        let mut c = pool.checkout(&request).await?;
        let rows = match c
            .conn()
            .query_table("SELECT CONNECTION_ID(), 20 + 22")
            .await?
        {
            Ok((_columns, rows)) => rows,
            Err(server_error) => return Err(format!("server error: {server_error:?}").into()),
        };
        let row = rows.first().ok_or("no row")?;
        let cell = |i: usize| row.get(i).cloned().flatten().unwrap_or_default();
        println!("server thread {} says 20 + 22 = {}", cell(0), cell(1));
        threads.push(cell(0));
        // Back to the pool as it is (nothing pinned): the next checkout gets the same connection.
        c.release_clean();
    }
    let reused = threads.windows(2).all(|w| w[0] == w[1]);
    println!("one pooled connection served every checkout: {reused}");
    Ok(())
}

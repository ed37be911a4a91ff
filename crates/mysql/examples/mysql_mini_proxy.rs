//! A minimal MySQL proxy built on Sluice's frontend, with its own routing hook: reads go to the
//! replica's hostgroup, everything else (and reads that lock) to the primary's.
//!
//! ```sh
//! cargo run -p sluice-mysql --example mysql_mini_proxy -- 127.0.0.1:7033 127.0.0.1:3306 127.0.0.1:3307 app app
//! mariadb -h 127.0.0.1 -P 7033 -u app -papp -e 'SELECT @@port'
//! ```
//! Arguments: `listen primary replica user password`.

use sluice_core::config::Config;
use sluice_core::query::{HookDecision, HookStatement};
use sluice_core::{ConfigHandle, RuntimeConfig};
use sluice_mysql::MysqlFrontend;
use sluice_mysql_backend::MysqlPool;
use std::sync::Arc;

/// Hostgroup 0 holds the primary (the user's default), 1 the replica.
fn route(stmt: &HookStatement<'_>) -> HookDecision {
    let sql = stmt.sql.trim_start().to_ascii_uppercase();
    if sql.starts_with("SELECT") && !sql.contains("FOR UPDATE") {
        HookDecision::Route { hostgroup: 1 }
    } else {
        HookDecision::Continue
    }
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [listen, primary, replica, user, password] = args.as_slice() else {
        return Err("usage: mysql_mini_proxy LISTEN PRIMARY REPLICA USER PASSWORD".into());
    };
    let server = |hostgroup: u32, addr: &str| -> Result<String, Box<dyn std::error::Error>> {
        let (host, port) = addr.rsplit_once(':').ok_or("host:port expected")?;
        Ok(format!(
            "[[mysql_servers]]\nhostgroup_id = {hostgroup}\nhostname = \"{host}\"\nport = {port}\n"
        ))
    };
    let toml = format!(
        "{}{}[[mysql_users]]\nusername = \"{user}\"\npassword = \"{password}\"\n",
        server(0, primary)?,
        server(1, replica)?
    );
    let config = ConfigHandle::new(RuntimeConfig::build(&Config::parse(&toml)?));
    let frontend = MysqlFrontend::builder(config, MysqlPool::new(None))
        .hook(Arc::new(route))
        .build();
    let listeners = sluice_net::bind_all(listen, "MySQL clients").await?;
    println!("listening on {listen}");
    // Ctrl-C: no new clients; each session ends at its next idle point.
    sluice_mysql::serve(frontend, listeners)
        .with_graceful_shutdown(async { tokio::signal::ctrl_c().await.unwrap_or(()) })
        .await;
    Ok(())
}

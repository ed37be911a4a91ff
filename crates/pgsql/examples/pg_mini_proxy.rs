//! A minimal PostgreSQL proxy built on Sluice's frontend (transaction pooling), with its own
//! routing hook: read-only statements go to the replica's hostgroup, the rest to the primary's.
//! A hook that answers in-process is shown by `sluice-mysql`'s `mysql_custom_handler`; the
//! PostgreSQL frontend takes the same hook.
//!
//! ```sh
//! cargo run -p sluice-pgsql --example pg_mini_proxy -- 127.0.0.1:7133 127.0.0.1:5432 127.0.0.1:5433 app app
//! psql -h 127.0.0.1 -p 7133 -U app -c 'SELECT inet_server_port()'
//! ```
//! Arguments: `listen primary replica user password`.

use sluice_core::config::Config;
use sluice_core::query::{HookDecision, HookStatement};
use sluice_core::{ConfigHandle, RuntimeConfig};
use sluice_pgsql::PgFrontend;
use sluice_pgsql_backend::PgPool;
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
        return Err("usage: pg_mini_proxy LISTEN PRIMARY REPLICA USER PASSWORD".into());
    };
    let server = |hostgroup: u32, addr: &str| -> Result<String, Box<dyn std::error::Error>> {
        let (host, port) = addr.rsplit_once(':').ok_or("host:port expected")?;
        Ok(format!(
            "[[pgsql_servers]]\nhostgroup_id = {hostgroup}\nhostname = \"{host}\"\nport = {port}\n"
        ))
    };
    let toml = format!(
        "{}{}[[pgsql_users]]\nusername = \"{user}\"\npassword = \"{password}\"\n",
        server(0, primary)?,
        server(1, replica)?
    );
    let config = ConfigHandle::new(RuntimeConfig::build(&Config::parse(&toml)?));
    let frontend = PgFrontend::builder(config, PgPool::new(None))
        .hook(Arc::new(route))
        .build();
    let listeners = sluice_net::bind_all(listen, "PostgreSQL clients").await?;
    println!("listening on {listen}");
    // Ctrl-C: no new clients; each session ends at its next idle point.
    sluice_pgsql::serve(frontend, listeners)
        .with_graceful_shutdown(async { tokio::signal::ctrl_c().await.unwrap_or(()) })
        .await;
    Ok(())
}

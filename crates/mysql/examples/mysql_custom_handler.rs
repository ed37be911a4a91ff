//! A MySQL frontend with a custom handler: some statements are answered in-process by the
//! embedding service (its own `SHOW APP STATUS`, a refusal of `DROP`), the rest go to the
//! server.
//!
//! ```sh
//! cargo run -p sluice-mysql --example mysql_custom_handler -- 127.0.0.1:7034 127.0.0.1:3306 app app
//! mariadb -h 127.0.0.1 -P 7034 -u app -papp -e 'SHOW APP STATUS'
//! ```
//! Arguments: `listen server user password`.

use sluice_core::config::Config;
use sluice_core::query::{HookDecision, HookStatement, LocalReply, StatementHook};
use sluice_core::{ConfigHandle, RuntimeConfig};
use sluice_mysql::MysqlFrontend;
use sluice_mysql_backend::MysqlPool;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

/// The service's handler: counts what it forwards and reports it on `SHOW APP STATUS`.
#[derive(Default)]
struct AppHandler {
    forwarded: AtomicU64,
}

impl StatementHook for AppHandler {
    fn on_statement(&self, stmt: &HookStatement<'_>) -> HookDecision {
        let sql = stmt.sql.trim().trim_end_matches(';').to_ascii_uppercase();
        if sql == "SHOW APP STATUS" {
            let forwarded = self.forwarded.load(Ordering::Relaxed).to_string();
            let session = stmt.session.to_string();
            return HookDecision::Reply(LocalReply::rows(
                &["user", "session", "forwarded"],
                [[stmt.user, session.as_str(), forwarded.as_str()]],
            ));
        }
        if sql.starts_with("DROP ") {
            return HookDecision::Reply(LocalReply::error(
                1142,
                "42000",
                "DROP is not allowed through this service",
            ));
        }
        self.forwarded.fetch_add(1, Ordering::Relaxed);
        HookDecision::Continue
    }
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [listen, server, user, password] = args.as_slice() else {
        return Err("usage: mysql_custom_handler LISTEN SERVER USER PASSWORD".into());
    };
    let (host, port) = server.rsplit_once(':').ok_or("host:port expected")?;
    let toml = format!(
        "[[mysql_servers]]\nhostname = \"{host}\"\nport = {port}\n\
         [[mysql_users]]\nusername = \"{user}\"\npassword = \"{password}\"\n"
    );
    let config = ConfigHandle::new(RuntimeConfig::build(&Config::parse(&toml)?));
    let frontend = MysqlFrontend::builder(config, MysqlPool::new(None))
        .hook(Arc::new(AppHandler::default()))
        .build();
    let listeners = sluice_net::bind_all(listen, "MySQL clients").await?;
    println!("listening on {listen}");
    // Ctrl-C: no new clients; each session ends at its next idle point.
    sluice_mysql::serve(frontend, listeners)
        .with_graceful_shutdown(async { tokio::signal::ctrl_c().await.unwrap_or(()) })
        .await;
    Ok(())
}

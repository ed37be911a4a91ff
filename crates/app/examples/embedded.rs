//! The whole of Sluice inside another program: a configuration written in code, both data ports,
//! the admin port, and a stop when the admin says `PROXYSQL SHUTDOWN` (or on ctrl-c).
//!
//! ```text
//! cargo run -p sluice-app --example embedded -- MYSQL_PORT PGSQL_PORT ADMIN_PORT MYSQL_SERVER PG_SERVER USER PASSWORD
//! cargo run -p sluice-app --example embedded -- 16033 16133 16032 127.0.0.1:13306 127.0.0.1:15432 app app
//! ```
//!
//! then `mariadb -h127.0.0.1 -P16033 -uapp -papp`, `psql -h 127.0.0.1 -p 16133 -U app app`, and
//! `mariadb -h127.0.0.1 -P16032 -uadmin -padmin -e 'PROXYSQL SHUTDOWN'` to stop it.

use sluice_app::{App, Options};
use sluice_core::config::Config;
use std::time::Duration;

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [
        my_port,
        pg_port,
        admin_port,
        my_server,
        pg_server,
        user,
        password,
    ] = &args[..]
    else {
        return Err(
            "usage: embedded MYSQL_PORT PGSQL_PORT ADMIN_PORT MYSQL_SERVER PG_SERVER USER PASSWORD"
                .into(),
        );
    };
    let host_port = |s: &str| -> Result<(String, u16), Box<dyn std::error::Error>> {
        let (host, port) = s.rsplit_once(':').ok_or("servers are host:port")?;
        Ok((host.to_string(), port.parse()?))
    };
    let (my_host, my_server_port) = host_port(my_server)?;
    let (pg_host, pg_server_port) = host_port(pg_server)?;
    let config = Config::parse(&format!(
        r#"
[admin_variables]
mysql_ifaces = "127.0.0.1:{admin_port}"
pgsql_ifaces = "127.0.0.1:0"

[mysql_variables]
interfaces = "127.0.0.1:{my_port}"
monitor_enabled = false

[pgsql_variables]
interfaces = "127.0.0.1:{pg_port}"
monitor_enabled = false

[[mysql_servers]]
hostgroup_id = 0
hostname = "{my_host}"
port = {my_server_port}

[[mysql_users]]
username = "{user}"
password = "{password}"
default_hostgroup = 0

[[pgsql_servers]]
hostgroup_id = 0
hostname = "{pg_host}"
port = {pg_server_port}

[[pgsql_users]]
username = "{user}"
password = "{password}"
default_hostgroup = 0
"#
    ))?;
    let options = Options {
        shutdown_timeout: Duration::from_secs(5),
        ..Options::default()
    };
    let app = App::build(config, options).await?;
    println!("serving MySQL on {my_port}, PostgreSQL on {pg_port}, admin on {admin_port}");
    app.serve(async {
        let _ = tokio::signal::ctrl_c().await;
        "ctrl-c"
    })
    .await?;
    println!("stopped");
    Ok(())
}

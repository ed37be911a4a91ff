//! Translating a PgBouncer configuration in code, as a deployment tool embedding Sluice would:
//! `cargo run -p sluice-import --example import_pgbouncer` prints the TOML and, on stderr,
//! each setting that did not carry over with its line.

fn main() {
    let ini = "\
[databases]
orders = host=10.0.0.10 port=5432 pool_size=40
reports = host=10.0.0.20,10.0.0.21
* = host=10.0.0.10

[pgbouncer]
listen_addr = *
listen_port = 6432
auth_type = scram-sha-256
max_client_conn = 2000
logfile = /var/log/pgbouncer.log
";
    let userlist = "\"app\" \"SCRAM-SHA-256$4096:c2FsdA==$c3RvcmVk:c2VydmVy\"\n";
    match sluice_import::from_pgbouncer(ini, Some(userlist)) {
        Ok(t) => {
            for note in &t.notes {
                eprintln!("{note}");
            }
            print!("{}", t.toml);
        }
        Err(e) => {
            eprintln!("cannot translate: {e}");
            std::process::exit(64);
        }
    }
}

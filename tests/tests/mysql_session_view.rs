//! What a session sees of its server through Sluice, compared with a direct connection
//! (mariadb-test's `type_json`, `func_weight_string`, `insert_returning`): its session variables,
//! and MariaDB's extended column metadata (`format=json`, geometry type names) when Sluice
//! announces itself as MariaDB.

use mysql_async::prelude::*;
use mysql_async::{Conn, Opts};
use sluice_tests::*;
use std::collections::BTreeMap;

/// Variables that differ between any two connections, direct or not: the thread id, the random
/// seeds and the time of the statement.
const PER_CONNECTION: [&str; 4] = ["pseudo_thread_id", "rand_seed1", "rand_seed2", "timestamp"];

/// Sluice's own settings on its server connections, documented in docs/ARCHITECTURE.md: a
/// MariaDB connection reports each committed GTID (read-your-writes) and nothing else.
const SLUICES: [(&str, &str); 2] = [
    ("session_track_schema", "OFF"),
    ("session_track_system_variables", "last_gtid"),
];

fn session_variables(port: u16) -> BTreeMap<String, String> {
    let out = ok_stdout(&mariadb(
        port,
        "app",
        "app",
        &["-Dapp", "--skip-ssl"],
        "SHOW SESSION VARIABLES",
    ));
    out.lines()
        .filter_map(|l| l.split_once('\t'))
        .filter(|(name, _)| !PER_CONNECTION.contains(name))
        .map(|(n, v)| (n.to_string(), v.to_string()))
        .collect()
}

/// Every session variable a client reads through Sluice is the one a direct connection has —
/// `max_allowed_packet`, `sql_mode` and the character sets included — but the two Sluice needs
/// for causal reads, whose values are the documented ones.
#[test]
fn session_variables_are_those_of_a_direct_connection() {
    if !backends_ready(Servers::MariaDb) {
        return;
    }
    let s = Sluice::start(&standard_config("", ""));
    let direct = session_variables(ports::MY_PRIMARY);
    let mut proxied = session_variables(s.port);
    assert!(direct.len() > 500, "{direct:?}");
    for (name, value) in SLUICES {
        assert_eq!(proxied.remove(name).as_deref(), Some(value), "{name}");
    }
    let differ: Vec<String> = direct
        .iter()
        .filter(|(n, _)| !SLUICES.iter().any(|(s, _)| s == n))
        .filter(|(n, v)| proxied.get(*n) != Some(v))
        .map(|(n, v)| format!("{n}: direct {v:?}, through Sluice {:?}", proxied.get(n)))
        .collect();
    assert!(differ.is_empty(), "{differ:#?}\n{}", s.log());
}

/// The `--column-type-info` of a JSON and a POINT column, and of a result Sluice answers itself.
fn column_types(port: u16) -> String {
    let script = "SELECT j, p FROM app.view_types; SELECT @@version_comment LIMIT 1;";
    let out = ok_stdout(&mariadb(
        port,
        "app",
        "app",
        &["-Dapp", "--skip-ssl", "-t", "--column-type-info"],
        script,
    ));
    out.lines()
        .filter(|l| l.starts_with("Field") || l.starts_with("Type"))
        .collect::<Vec<_>>()
        .join("\n")
}

/// With `mysql-server_version` naming a MariaDB version, the mariadb client negotiates extended
/// column metadata with Sluice and sees `format=json` and `type=point` as directly; Sluice's own
/// result sets carry the (empty) extended block it then expects. Clients that did not negotiate
/// it are served by other server connections, so the same query keeps working for them.
#[test]
fn extended_column_metadata_reaches_mariadb_clients_as_directly() {
    if !backends_ready(Servers::MariaDb) {
        return;
    }
    ok_stdout(&mariadb(
        ports::MY_PRIMARY,
        "app",
        "app",
        &["--skip-ssl"],
        "CREATE OR REPLACE TABLE app.view_types (j JSON, p POINT); \
         INSERT INTO app.view_types VALUES ('{\"a\": 1}', POINT(1, 2));",
    ));
    let mariadb_version = standard_config("", "").replace(
        "server_version = \"8.0.36\"",
        "server_version = \"10.11.6-MariaDB\"",
    );
    let s = Sluice::start(&mariadb_version);
    let direct = column_types(ports::MY_PRIMARY);
    assert!(direct.contains("BLOB (format=json)"), "{direct}");
    assert!(direct.contains("GEOMETRY (type=point)"), "{direct}");
    let proxied = column_types(s.port);
    let server_part = |t: &str| {
        t.split("Field   1:  `@@version_comment`")
            .next()
            .map(str::to_string)
    };
    assert_eq!(server_part(&proxied), server_part(&direct), "{}", s.log());
    assert!(
        proxied.contains("`@@version_comment`\nType:       VAR_STRING"),
        "{proxied}"
    );
    // A client without extended metadata (mysql_async) on the same Sluice, after the pool holds
    // connections that have it.
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    let rows: Vec<(String, Option<Vec<u8>>)> = rt.block_on(async {
        let mut c = Conn::new(Opts::from_url(&s.url("app", "app", "app")).expect("url"))
            .await
            .expect("connect");
        let r = c
            .query("SELECT j, p FROM app.view_types")
            .await
            .expect("query");
        c.disconnect().await.expect("disconnect");
        r
    });
    assert_eq!(rows.len(), 1);
    assert_eq!(rows[0].0, "{\"a\": 1}");
    // Announced as MySQL (the default), Sluice offers no MariaDB capabilities: no extended
    // metadata, as from a MySQL server.
    let mysql_version = Sluice::start(&standard_config("", ""));
    let plain = column_types(mysql_version.port);
    assert!(plain.contains("Type:       BLOB\n"), "{plain}");
}

//! `pgbouncer.ini` (+ `userlist.txt`) → Sluice's TOML.
//!
//! PgBouncer routes by database name to a server; Sluice routes users to hostgroups and
//! statements by rules. So each distinct server list of `[databases]` becomes a hostgroup of
//! `pgsql_servers`, and — when there is more than one — each database a `pgsql_query_rules` row
//! matching its name (`schemaname`, the client's database) to its hostgroup; users land on the
//! `*` entry's hostgroup (or the first). Users and passwords come from the auth file as written.
//! PgBouncer serves PostgreSQL only, so the translation opens no MySQL port.

mod databases;
mod settings;

use crate::emit::TomlDoc;
use crate::ini::{self, Entry};
use crate::{ImportError, Translation};
use databases::Plan;
use std::path::Path;
use toml::Value;

/// Translates a `pgbouncer.ini`'s text, with the text of its auth file when there is one.
pub fn from_pgbouncer(ini_text: &str, userlist: Option<&str>) -> Result<Translation, ImportError> {
    let entries = ini::parse(ini_text)?;
    let users = match userlist {
        Some(t) => Users::Read(ini::userlist(t)?),
        None => Users::NotGiven,
    };
    translate(&entries, users)
}

/// As [`from_pgbouncer`], reading the auth file from `auth_file` or else from where the ini's
/// `auth_file` names (relative paths from `base`); an ini-named file that cannot be read is a
/// note on the `auth_file` setting, a file given explicitly an error.
pub(crate) fn from_pgbouncer_file(
    ini_text: &str,
    base: &Path,
    auth_file: Option<&Path>,
) -> Result<Translation, ImportError> {
    let entries = ini::parse(ini_text)?;
    let users = match auth_file {
        Some(p) => Users::Read(ini::userlist(&crate::read(p)?)?),
        None => match setting(&entries, "auth_file") {
            None => Users::NotGiven,
            Some(e) => {
                let path = base.join(&e.value);
                match std::fs::read_to_string(&path) {
                    Ok(t) => Users::Read(ini::userlist(&t)?),
                    Err(err) => Users::Unreadable(e.line, format!("{}: {err}", path.display())),
                }
            }
        },
    };
    translate(&entries, users)
}

/// The auth file's users: (name, password as written, line).
enum Users {
    NotGiven,
    Read(Vec<(String, String, usize)>),
    Unreadable(usize, String),
}

/// The last `[pgbouncer]` setting named `key` (the one PgBouncer uses).
fn setting<'a>(entries: &'a [Entry], key: &str) -> Option<&'a Entry> {
    entries
        .iter()
        .rev()
        .find(|e| e.section == "pgbouncer" && e.key.eq_ignore_ascii_case(key))
}

fn number(e: &Entry) -> Result<u64, ImportError> {
    e.value.parse().map_err(|_| ImportError::Value {
        line: e.line,
        setting: e.key.clone(),
        message: format!("{:?} is not a whole number", e.value),
    })
}

fn translate(entries: &[Entry], users: Users) -> Result<Translation, ImportError> {
    let mut doc = TomlDoc::new("Translated from a pgbouncer.ini by `sluice import`.");
    let server_tls = setting(entries, "server_tls_sslmode")
        .is_some_and(|e| !matches!(e.value.as_str(), "disable" | "allow" | "prefer" | ""));
    let default_pool = setting(entries, "default_pool_size")
        .map(number)
        .transpose()?;
    let plan = databases::plan(&mut doc, entries, server_tls, default_pool)?;
    settings::translate(&mut doc, entries, &users)?;
    doc.table("mysql_variables", 0);
    doc.comment("PgBouncer serves PostgreSQL only: no MySQL listener.", 0);
    doc.key("interfaces", &Value::String(String::new()), 0);
    servers(&mut doc, &plan);
    users_rows(&mut doc, entries, &users, &plan)?;
    rules(&mut doc, &plan);
    for e in entries
        .iter()
        .filter(|e| !matches!(e.section.as_str(), "pgbouncer" | "databases" | "users"))
    {
        doc.note(
            e.line,
            format!("[{}] {}", e.section, e.key),
            "a section Sluice has no counterpart for",
        );
    }
    doc.finish()
}

fn servers(doc: &mut TomlDoc, plan: &Plan) {
    for (hg, g) in plan.groups.iter().enumerate() {
        for (host, port) in &g.servers {
            doc.row("pgsql_servers", g.line);
            doc.key("hostgroup_id", &Value::Integer(hg as i64), g.line);
            doc.key("hostname", &Value::String(host.clone()), g.line);
            doc.key("port", &Value::Integer(i64::from(*port)), g.line);
            if let Some(n) = g.max_connections {
                doc.key("max_connections", &Value::Integer(n as i64), g.line);
            }
            if g.use_ssl {
                doc.key("use_ssl", &Value::Integer(1), g.line);
            }
        }
    }
}

fn rules(doc: &mut TomlDoc, plan: &Plan) {
    if plan.groups.len() < 2 {
        return;
    }
    for (i, (db, hg, line)) in plan.routes.iter().enumerate() {
        doc.row("pgsql_query_rules", *line);
        doc.comment(
            &format!("[databases] {db}: its server list is hostgroup {hg}"),
            *line,
        );
        doc.key("rule_id", &Value::Integer(i as i64 + 1), *line);
        doc.key("active", &Value::Integer(1), *line);
        doc.key("schemaname", &Value::String(db.clone()), *line);
        doc.key("destination_hostgroup", &Value::Integer(*hg as i64), *line);
        doc.key("apply", &Value::Integer(1), *line);
    }
}

fn users_rows(
    doc: &mut TomlDoc,
    entries: &[Entry],
    users: &Users,
    plan: &Plan,
) -> Result<(), ImportError> {
    let list = match users {
        Users::Read(list) => list,
        Users::NotGiven => return Ok(()),
        Users::Unreadable(line, why) => {
            doc.note(
                *line,
                "auth_file",
                format!("cannot read it ({why}): no pgsql_users written; pass --auth-file"),
            );
            return Ok(());
        }
    };
    let hostgroup = plan
        .fallback
        .or(plan.routes.first().map(|r| r.1))
        .unwrap_or(0);
    let session_mode = setting(entries, "pool_mode").is_some_and(|e| e.value == "session");
    // [users]: per-user settings; pool_mode=session becomes fast_forward, the rest is noted.
    let mut session_users = Vec::new();
    for e in entries.iter().filter(|e| e.section == "users") {
        for (k, v) in ini::conninfo(&e.value, e.line)? {
            match (k.as_str(), v.as_str()) {
                ("pool_mode", "session") => session_users.push(e.key.as_str()),
                ("pool_mode", "transaction") => {}
                _ => doc.note(
                    e.line,
                    format!("[users] {} {k}={v}", e.key),
                    "no per-user counterpart in Sluice",
                ),
            }
        }
    }
    for (user, password, line) in list {
        doc.row("pgsql_users", *line);
        doc.key("username", &Value::String(user.clone()), *line);
        doc.key("password", &Value::String(password.clone()), *line);
        doc.key(
            "default_hostgroup",
            &Value::Integer(hostgroup as i64),
            *line,
        );
        if session_mode || session_users.contains(&user.as_str()) {
            doc.key("fast_forward", &Value::Integer(1), *line);
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const INI: &str = "\
[databases]
appdb = host=10.0.0.1 port=5433 pool_size=30
reports = host=10.0.0.2,10.0.0.3 dbname=reports
* = host=10.0.0.1 port=5433

[pgbouncer]
listen_addr = *
listen_port = 6432
auth_type = md5
auth_file = userlist.txt
max_client_conn = 500
default_pool_size = 20
pool_mode = transaction
logfile = /var/log/pgbouncer/pgbouncer.log
admin_users = admin
query_timeout = 30
";
    const USERS: &str = "\"app\" \"md5fe63fea7be31b0200b496d08bc6b517d\"\n\"admin\" \"secret\"\n\"scram\" \"SCRAM-SHA-256$4096:c2FsdA==$c3RvcmVk:c2VydmVy\"\n";

    #[test]
    fn databases_become_hostgroups_and_rules() {
        let t = from_pgbouncer(INI, Some(USERS)).unwrap();
        let cfg = sluice_core::config::Config::parse(&t.toml).unwrap();
        let servers: Vec<(u32, &str, u16, u32)> = cfg
            .pgsql_servers
            .iter()
            .map(|s| {
                (
                    s.hostgroup_id.0,
                    s.hostname.as_str(),
                    s.port.0,
                    s.max_connections.0,
                )
            })
            .collect();
        assert_eq!(
            servers,
            [
                (0, "10.0.0.1", 5433, 30),
                (1, "10.0.0.2", 5432, 20),
                (1, "10.0.0.3", 5432, 20)
            ]
        );
        let rules: Vec<(Option<&str>, Option<u32>)> = cfg
            .pgsql_query_rules
            .iter()
            .map(|r| (r.schemaname.as_deref(), r.destination_hostgroup))
            .collect();
        assert_eq!(
            rules,
            [(Some("appdb"), Some(0)), (Some("reports"), Some(1))]
        );
        assert_eq!(cfg.pgsql_users.len(), 3);
        assert_eq!(
            cfg.pgsql_users[0].password,
            "md5fe63fea7be31b0200b496d08bc6b517d"
        );
        assert!(cfg.pgsql_users[2].password.starts_with("SCRAM-SHA-256$"));
        assert_eq!(cfg.pgsql_variables.interfaces, "0.0.0.0:6432");
        assert_eq!(cfg.pgsql_variables.max_connections, 500);
        assert_eq!(
            cfg.pgsql_variables.authentication_method, 3,
            "SCRAM verifiers in the auth file"
        );
        let noted: Vec<usize> = t.notes.iter().map(|n| n.line).collect();
        assert!(
            noted.contains(&9),
            "auth_type md5 → SCRAM noted: {:#?}",
            t.notes
        );
        assert!(noted.contains(&14), "logfile noted: {:#?}", t.notes);
    }

    #[test]
    fn aliases_and_bad_numbers_fail_with_their_line() {
        let e =
            from_pgbouncer("[databases]\nx = host=a\nfoo = host=h dbname=bar\n", None).unwrap_err();
        assert!(matches!(e, ImportError::Value { line: 3, .. }), "{e}");
        let e = from_pgbouncer("[pgbouncer]\nmax_client_conn = lots\n", None).unwrap_err();
        assert!(matches!(e, ImportError::Value { line: 2, .. }), "{e}");
    }
}

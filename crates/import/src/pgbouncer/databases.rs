//! `[databases]`: each distinct server list becomes a hostgroup; each database a route to it.

use super::number;
use crate::ImportError;
use crate::emit::TomlDoc;
use crate::ini::{self, Entry};

/// One hostgroup: a server list and how its connections are capped.
pub(super) struct Group {
    pub(super) servers: Vec<(String, u16)>,
    pub(super) use_ssl: bool,
    pub(super) max_connections: Option<u64>,
    pub(super) line: usize,
}

/// The hostgroups, the routes to them and the fallback (`*`).
pub(super) struct Plan {
    pub(super) groups: Vec<Group>,
    /// (database name, hostgroup, line) for the rules; `*` not among them.
    pub(super) routes: Vec<(String, usize, usize)>,
    pub(super) fallback: Option<usize>,
}

/// What one `[databases]` entry says.
struct Database {
    hosts: Option<String>,
    ports: Option<String>,
    /// `max_db_connections`: PgBouncer's cap per database.
    cap: Option<u64>,
    /// `pool_size`: per database and user.
    pool: Option<u64>,
}

pub(super) fn plan(
    doc: &mut TomlDoc,
    entries: &[Entry],
    server_tls: bool,
    default_pool: Option<u64>,
) -> Result<Plan, ImportError> {
    let mut plan = Plan {
        groups: Vec::new(),
        routes: Vec::new(),
        fallback: None,
    };
    let databases: Vec<&Entry> = entries
        .iter()
        .filter(|e| e.section == "databases")
        .collect();
    for (i, e) in databases.iter().enumerate() {
        let what = format!("[databases] {}", e.key);
        if let Some(later) = databases[i + 1..].iter().find(|l| l.key == e.key) {
            let why = format!(
                "defined again on line {}; the last one counts, as in PgBouncer",
                later.line
            );
            doc.note(e.line, &what, why);
            continue;
        }
        let db = database(doc, e, &what)?;
        let servers = server_list(doc, &db, e, &what)?;
        let hg = match plan.groups.iter().position(|g| g.servers == servers) {
            Some(i) => i,
            None => {
                plan.groups.push(Group {
                    servers,
                    use_ssl: server_tls,
                    max_connections: None,
                    line: e.line,
                });
                plan.groups.len() - 1
            }
        };
        // PgBouncer caps per database (max_db_connections) and sizes pools per database and
        // user (pool_size); Sluice caps each server: the cap if there is one, else the pool.
        if let Some(n) = db.cap.or(db.pool).or(default_pool) {
            let g = &mut plan.groups[hg];
            g.max_connections = Some(g.max_connections.map_or(n, |m| m.max(n)));
            let source = if db.cap.is_some() {
                "max_db_connections"
            } else {
                "pool_size"
            };
            doc.note(
                e.line,
                format!("{what} {source}"),
                format!(
                    "PgBouncer counts it per database{}; Sluice caps each server of hostgroup {hg} at max_connections = {} for every user together",
                    if db.cap.is_some() { "" } else { " and user" },
                    g.max_connections.unwrap_or(n)
                ),
            );
        }
        if e.key == "*" {
            plan.fallback = Some(hg);
        } else {
            plan.routes.push((e.key.clone(), hg, e.line));
        }
    }
    Ok(plan)
}

fn database(doc: &mut TomlDoc, e: &Entry, what: &str) -> Result<Database, ImportError> {
    let mut db = Database {
        hosts: None,
        ports: None,
        cap: None,
        pool: None,
    };
    for (k, v) in ini::conninfo(&e.value, e.line)? {
        let n = |v: String| {
            number(&Entry {
                key: format!("{what} {k}"),
                value: v,
                ..e.clone()
            })
        };
        match k.as_str() {
            "host" => db.hosts = Some(v),
            "port" => db.ports = Some(v),
            "dbname" if e.key == "*" => doc.note(
                e.line,
                format!("{what} dbname={v}"),
                "a fallback to one fixed database has no counterpart: clients reach the database they name",
            ),
            "dbname" if v != e.key => {
                return Err(ImportError::Value {
                    line: e.line,
                    setting: what.to_string(),
                    message: format!(
                        "the alias {:?} for database {v:?}: Sluice passes the client's database name to the server unchanged; connect clients to {v:?} (or rename the database)",
                        e.key
                    ),
                });
            }
            "dbname" => {}
            "max_db_connections" => db.cap = Some(n(v)?),
            "pool_size" => db.pool = Some(n(v)?),
            "user" | "password" | "auth_user" => doc.note(
                e.line,
                format!("{what} {k}"),
                "Sluice logs in to servers as the client's own user (pgsql_users), never as a fixed one",
            ),
            "pool_mode" if v == "transaction" => {}
            other => doc.note(
                e.line,
                format!("{what} {other}={v}"),
                "no per-database counterpart in Sluice",
            ),
        }
    }
    Ok(db)
}

/// The servers of an entry: `host=a,b` with one port or one per host; a Unix socket directory or
/// no host at all is reached over TCP on 127.0.0.1 (noted).
fn server_list(
    doc: &mut TomlDoc,
    db: &Database,
    e: &Entry,
    what: &str,
) -> Result<Vec<(String, u16)>, ImportError> {
    let hosts: Vec<&str> = db
        .hosts
        .as_deref()
        .unwrap_or("")
        .split(',')
        .map(str::trim)
        .collect();
    let ports: Vec<&str> = db
        .ports
        .as_deref()
        .unwrap_or("5432")
        .split(',')
        .map(str::trim)
        .collect();
    if ports.len() != 1 && ports.len() != hosts.len() {
        return Err(ImportError::Value {
            line: e.line,
            setting: what.to_string(),
            message: "port lists one port, or one per host".into(),
        });
    }
    let mut out = Vec::new();
    for (i, h) in hosts.iter().enumerate() {
        let p = ports.get(i).or(ports.first()).copied().unwrap_or("5432");
        let port = p.parse().map_err(|_| ImportError::Value {
            line: e.line,
            setting: format!("{what} port"),
            message: format!("{p:?} is not a port"),
        })?;
        let host = if h.is_empty() || h.starts_with('/') {
            let socket = if h.is_empty() {
                "its default Unix socket".to_string()
            } else {
                format!("the Unix socket in {h}")
            };
            doc.note(
                e.line,
                format!("{what} host"),
                format!(
                    "PgBouncer would use {socket}; Sluice connects over TCP to 127.0.0.1:{port}"
                ),
            );
            "127.0.0.1".to_string()
        } else {
            h.to_string()
        };
        out.push((host, port));
    }
    Ok(out)
}

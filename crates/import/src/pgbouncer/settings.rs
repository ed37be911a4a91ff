//! `[pgbouncer]`: each setting mapped to a `pgsql-` or `admin-` variable, or noted.

use super::{Users, number, setting};
use crate::ImportError;
use crate::emit::TomlDoc;
use crate::ini::Entry;
use sluice_core::config::{AdminVariables, PgsqlVariables, SetOutcome, VariableError};
use toml::Value;

/// A variable to write: name, value, source line.
type Var = (&'static str, Value, usize);

struct Section<'a> {
    doc: &'a mut TomlDoc,
    entries: &'a [Entry],
    users: &'a Users,
    pg: Vec<Var>,
    admin: Vec<Var>,
}

/// Translates the `[pgbouncer]` section into `[pgsql_variables]` and `[admin_variables]`.
pub(super) fn translate(
    doc: &mut TomlDoc,
    entries: &[Entry],
    users: &Users,
) -> Result<(), ImportError> {
    let mut s = Section {
        doc,
        entries,
        users,
        pg: Vec::new(),
        admin: Vec::new(),
    };
    for e in entries.iter().filter(|e| e.section == "pgbouncer") {
        let key = e.key.to_ascii_lowercase();
        let last = setting(entries, &key).map_or(e.line, |l| l.line);
        if last != e.line {
            s.note(
                e,
                &format!("set again on line {last}; the last one counts, as in PgBouncer"),
            );
            continue;
        }
        s.one(e, &key)?;
    }
    if setting(entries, "listen_addr").is_none() {
        s.listen_without_addr();
    }
    let Section { doc, pg, admin, .. } = s;
    emit_vars(doc, "pgsql_variables", &pg, |n, v| {
        PgsqlVariables::default().set(n, v)
    })?;
    emit_vars(doc, "admin_variables", &admin, |n, v| {
        AdminVariables::default().set(n, v)
    })
}

impl Section<'_> {
    fn note(&mut self, e: &Entry, why: &str) {
        self.doc
            .note(e.line, format!("[pgbouncer] {} = {}", e.key, e.value), why);
    }

    fn one(&mut self, e: &Entry, key: &str) -> Result<(), ImportError> {
        let v = e.value.as_str();
        let string = || Value::String(v.to_string());
        match key {
            "listen_addr" => self.listen(e),
            "listen_port" | "auth_file" | "default_pool_size" | "server_tls_sslmode" => {}
            "max_client_conn" => self.pg.push(("max_connections", Value::Integer(number(e)? as i64), e.line)),
            "server_connect_timeout" => self.pg.push(("connect_timeout_server", secs_to_ms(e)?, e.line)),
            "query_wait_timeout" => self.pg.push(("connect_timeout_server_max", secs_to_ms(e)?, e.line)),
            "query_timeout" if v == "0" => self.note(e, "PgBouncer's 0 is no limit; Sluice keeps its default_query_timeout (10 hours)"),
            "query_timeout" => self.pg.push(("default_query_timeout", secs_to_ms(e)?, e.line)),
            "max_prepared_statements" if v == "0" => self.note(
                e,
                "PgBouncer's 0 turns prepared-statement tracking off; Sluice always tracks them (pgsql-max_prepared_statements keeps its default)",
            ),
            "max_prepared_statements" => self.pg.push(("max_prepared_statements", Value::Integer(number(e)? as i64), e.line)),
            "client_tls_key_file" => self.pg.push(("ssl_key", string(), e.line)),
            "client_tls_cert_file" => self.pg.push(("ssl_cert", string(), e.line)),
            "client_tls_sslmode" => self.client_tls(e),
            "server_tls_ca_file" => self.pg.push(("ssl_p2s_ca", string(), e.line)),
            "server_tls_cert_file" => self.pg.push(("ssl_p2s_cert", string(), e.line)),
            "server_tls_key_file" => self.pg.push(("ssl_p2s_key", string(), e.line)),
            "ignore_startup_parameters" => self.pg.push(("ignore_startup_parameters", string(), e.line)),
            "auth_type" => self.auth_type(e),
            "pool_mode" if v == "transaction" || v == "session" => {}
            "pool_mode" => self.note(e, "Sluice pools per transaction (statement pooling's multi-statement refusal is not reproduced)"),
            "admin_users" | "stats_users" => self.consoles(e, key),
            "server_reset_query" | "server_reset_query_always" => {
                self.note(e, "Sluice resets a connection itself when a client leaves it (only what the client changed)")
            }
            "server_check_query" | "server_check_delay" => {
                self.note(e, "the monitor checks servers instead (pgsql-monitor_ping_interval)")
            }
            _ => self.note(e, "no counterpart in Sluice"),
        }
        Ok(())
    }

    fn listen_port(&self) -> String {
        setting(self.entries, "listen_port").map_or_else(|| "6432".into(), |e| e.value.clone())
    }

    fn listen(&mut self, e: &Entry) {
        let port = self.listen_port();
        let list: Vec<String> = e
            .value
            .split(',')
            .map(|a| match a.trim() {
                "*" => "0.0.0.0".to_string(),
                "localhost" => "127.0.0.1".to_string(),
                other => other.to_string(),
            })
            .map(|a| {
                if a.contains(':') {
                    format!("[{a}]:{port}")
                } else {
                    format!("{a}:{port}")
                }
            })
            .collect();
        self.pg
            .push(("interfaces", Value::String(list.join(";")), e.line));
    }

    /// No `listen_addr`: PgBouncer listens on its Unix socket only; Sluice needs TCP.
    fn listen_without_addr(&mut self) {
        let port = self.listen_port();
        let line = setting(self.entries, "listen_port").map_or(0, |e| e.line);
        self.doc.note(
            line,
            "[pgbouncer] listen_addr (not set)",
            format!("PgBouncer would listen on its Unix socket only; Sluice listens on TCP at 127.0.0.1:{port}"),
        );
        self.pg.push((
            "interfaces",
            Value::String(format!("127.0.0.1:{port}")),
            line,
        ));
    }

    fn client_tls(&mut self, e: &Entry) {
        match e.value.as_str() {
            "disable" => self.pg.push(("have_ssl", Value::Boolean(false), e.line)),
            "allow" | "prefer" => {}
            _ => self.note(
                e,
                "Sluice offers TLS but does not require it of every client; set use_ssl=1 on pgsql_users rows that must use it",
            ),
        }
    }

    fn auth_type(&mut self, e: &Entry) {
        let stored = |prefix: &str| matches!(self.users, Users::Read(l) if l.iter().any(|(_, p, _)| p.starts_with(prefix)));
        let (any_scram, any_md5) = (stored("SCRAM-SHA-256$"), stored("md5"));
        match e.value.as_str() {
            "scram-sha-256" => self
                .pg
                .push(("authentication_method", Value::Integer(3), e.line)),
            "md5" if any_scram => {
                self.pg
                    .push(("authentication_method", Value::Integer(3), e.line));
                let md5_users = if any_md5 {
                    "; users stored as MD5 hashes in it cannot log in (SCRAM cannot check them): give them SCRAM verifiers"
                } else {
                    ""
                };
                self.note(e, &format!("the auth file holds SCRAM verifiers, so Sluice asks every client for SCRAM (PgBouncer chose per user){md5_users}"));
            }
            "md5" => self
                .pg
                .push(("authentication_method", Value::Integer(2), e.line)),
            "plain" => self
                .pg
                .push(("authentication_method", Value::Integer(1), e.line)),
            _ => self.note(
                e,
                "Sluice always checks passwords from pgsql_users (SCRAM-SHA-256)",
            ),
        }
    }

    /// `admin_users` / `stats_users`: Sluice's admin logins need a cleartext password.
    fn consoles(&mut self, e: &Entry, key: &str) {
        let mut creds = Vec::new();
        for u in e.value.split(',').map(str::trim).filter(|u| !u.is_empty()) {
            let cleartext = match self.users {
                Users::Read(list) => list
                    .iter()
                    .find(|(name, p, _)| {
                        name == u && !p.starts_with("md5") && !p.starts_with("SCRAM-SHA-256$")
                    })
                    .map(|(_, p, _)| p.clone()),
                _ => None,
            };
            match cleartext {
                Some(p) => creds.push(format!("{u}:{p}")),
                None => self.note(e, &format!("{u}: Sluice's admin port needs a cleartext password, and the auth file has none for this user")),
            }
        }
        if !creds.is_empty() {
            let var = if key == "admin_users" {
                "admin_credentials"
            } else {
                "stats_credentials"
            };
            self.admin
                .push((var, Value::String(creds.join(";")), e.line));
            self.note(
                e,
                "PgBouncer's console is Sluice's PostgreSQL admin port (admin_variables.pgsql_ifaces, default 127.0.0.1:6132): SHOW POOLS, STATS, … work there beside ProxySQL's tables",
            );
        }
    }
}

fn secs_to_ms(e: &Entry) -> Result<Value, ImportError> {
    let secs: f64 = e.value.parse().map_err(|_| ImportError::Value {
        line: e.line,
        setting: e.key.clone(),
        message: format!("{:?} is not a number of seconds", e.value),
    })?;
    Ok(Value::Integer((secs * 1000.0).round() as i64))
}

fn emit_vars(
    doc: &mut TomlDoc,
    section: &str,
    vars: &[Var],
    mut set: impl FnMut(&str, &str) -> Result<SetOutcome, VariableError>,
) -> Result<(), ImportError> {
    let Some(first) = vars.first() else {
        return Ok(());
    };
    doc.table(section, first.2);
    for (name, value, line) in vars {
        let text = match value {
            Value::String(s) => s.clone(),
            other => other.to_string(),
        };
        set(name, &text).map_err(|e| ImportError::Value {
            line: *line,
            setting: format!("{section}.{name}"),
            message: e.to_string(),
        })?;
        doc.key(name, value, *line);
    }
    Ok(())
}

//! Targets: where agents' SQL may run. The `mcp_targets` rows when there are any; otherwise
//! every reader hostgroup of `mysql_replication_hostgroups` / `pgsql_replication_hostgroups`,
//! run as the first active login whose `default_hostgroup` is that reader or its writer. A
//! writer hostgroup is a target only with `allow_writer = 1`.

use sluice_core::Protocol;
use sluice_core::RuntimeConfig;
use sluice_core::config::{McpTarget, is_native_hash};
use std::collections::BTreeSet;

/// The role a target's hostgroup plays in the topology.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum Role {
    /// A reader hostgroup (replicas, hot standbys).
    Reader,
    /// A writer hostgroup (the primary).
    Writer,
    /// Neither is configured for it.
    Unknown,
}

/// A target as the tools use it.
#[derive(Debug, Clone)]
pub(crate) struct Target {
    /// The id agents pass.
    pub id: String,
    /// Its protocol.
    pub protocol: Protocol,
    /// The hostgroup.
    pub hostgroup: u32,
    /// The login its SQL runs as (when the MCP user names none).
    pub login: String,
    /// Schema (MySQL) or database (PostgreSQL) by default.
    pub default_schema: String,
    /// What it is.
    pub description: String,
    /// Row cap (0: unset).
    pub max_rows: u64,
    /// Timeout in ms (0: unset).
    pub timeout_ms: u64,
    /// `explain_sql` allowed.
    pub allow_explain: bool,
    /// Discovery and catalog allowed.
    pub allow_discovery: bool,
    /// Its role.
    pub role: Role,
    /// Why it cannot be used, if it cannot.
    pub skip_reason: Option<String>,
    /// From `mcp_targets` (false: derived from the replication hostgroups).
    pub configured: bool,
}

/// The protocol name of a target (`mysql` / `pgsql`).
pub(crate) fn protocol_name(p: Protocol) -> &'static str {
    p.prefix()
}

fn role(rt: &RuntimeConfig, p: Protocol, hg: u32) -> Role {
    let (replication, clusters): (&[_], Vec<_>) = match p {
        Protocol::Mysql => (
            &rt.mysql.replication,
            rt.mysql
                .group_replication
                .iter()
                .chain(&rt.mysql.galera)
                .collect(),
        ),
        Protocol::Pgsql => (&rt.pgsql.replication, Vec::new()),
    };
    let writer = replication.iter().any(|r| r.writer_hostgroup == hg)
        || clusters
            .iter()
            .any(|c| c.writer_hostgroup == hg || c.backup_writer_hostgroup == hg);
    let reader = replication.iter().any(|r| r.reader_hostgroup == hg)
        || clusters.iter().any(|c| c.reader_hostgroup == hg);
    match (writer, reader) {
        (true, _) => Role::Writer,
        (false, true) => Role::Reader,
        _ => Role::Unknown,
    }
}

/// Every target the runtime describes, usable or not (with why not).
pub(crate) fn all(rt: &RuntimeConfig) -> Vec<Target> {
    if rt.mcp.targets.is_empty() {
        return derived(rt);
    }
    rt.mcp.targets.iter().map(|t| configured(rt, t)).collect()
}

fn configured(rt: &RuntimeConfig, t: &McpTarget) -> Target {
    let protocol = if t.protocol == "pgsql" {
        Protocol::Pgsql
    } else {
        Protocol::Mysql
    };
    let role = role(rt, protocol, t.hostgroup_id);
    let skip_reason = if !t.active.0 {
        Some("inactive".to_string())
    } else if role == Role::Writer && !t.allow_writer.0 {
        Some(format!(
            "hostgroup {} is a writer hostgroup: agents run on readers (set allow_writer=1 to allow it)",
            t.hostgroup_id
        ))
    } else if t.username.is_empty() {
        Some("no login: set mcp_targets.username or the MCP user's db_username".to_string())
    } else {
        None
    };
    Target {
        id: t.target_id.clone(),
        protocol,
        hostgroup: t.hostgroup_id,
        login: t.username.clone(),
        default_schema: t.default_schema.clone(),
        description: t.description.clone(),
        max_rows: t.max_rows,
        timeout_ms: t.timeout_ms,
        allow_explain: t.allow_explain.0,
        allow_discovery: t.allow_discovery.0,
        role,
        skip_reason,
        configured: true,
    }
}

/// With no `mcp_targets`: each reader hostgroup, as a login that belongs to it or its writer.
fn derived(rt: &RuntimeConfig) -> Vec<Target> {
    let mut out = Vec::new();
    for (protocol, replication) in [
        (Protocol::Mysql, &rt.mysql.replication),
        (Protocol::Pgsql, &rt.pgsql.replication),
    ] {
        let readers: BTreeSet<(u32, u32)> = replication
            .iter()
            .map(|r| (r.reader_hostgroup, r.writer_hostgroup))
            .collect();
        for (reader, writer) in readers {
            let login = default_login(rt, protocol, reader, writer);
            let name = protocol_name(protocol);
            out.push(Target {
                id: format!("{name}_hg{reader}"),
                protocol,
                hostgroup: reader,
                description: format!(
                    "{name} reader hostgroup {reader} (writer hostgroup {writer}), derived from {name}_replication_hostgroups"
                ),
                default_schema: login.as_ref().map(|l| l.1.clone()).unwrap_or_default(),
                skip_reason: login.is_none().then(|| {
                    format!(
                        "no active {name}_users login with default_hostgroup {reader} or {writer} and a cleartext password"
                    )
                }),
                login: login.map(|l| l.0).unwrap_or_default(),
                max_rows: 0,
                timeout_ms: 0,
                allow_explain: true,
                allow_discovery: true,
                role: Role::Reader,
                configured: false,
            });
        }
    }
    out
}

/// (login, default schema or database) for a derived target: the first by name.
fn default_login(
    rt: &RuntimeConfig,
    p: Protocol,
    reader: u32,
    writer: u32,
) -> Option<(String, String)> {
    let mut candidates: Vec<(String, String)> = match p {
        Protocol::Mysql => rt
            .mysql
            .backend_users
            .values()
            .filter(|u| u.active.0 && [reader, writer].contains(&u.default_hostgroup.0))
            .filter(|u| cleartext(Protocol::Mysql, &u.password))
            .map(|u| {
                (
                    u.username.clone(),
                    u.default_schema.clone().unwrap_or_default(),
                )
            })
            .collect(),
        Protocol::Pgsql => rt
            .pgsql
            .frontend_users
            .values()
            .filter(|u| u.active.0 && u.backend.0)
            .filter(|u| [reader, writer].contains(&u.default_hostgroup.0))
            .filter(|u| cleartext(Protocol::Pgsql, &u.password))
            .map(|u| (u.username.clone(), u.username.clone()))
            .collect(),
    };
    candidates.sort();
    candidates.into_iter().next()
}

/// Whether a stored password is the cleartext the MCP endpoint needs to log in with.
pub(crate) fn cleartext(p: Protocol, password: &str) -> bool {
    match p {
        Protocol::Mysql => !is_native_hash(password) && !password.starts_with("$A$"),
        Protocol::Pgsql => {
            let md5 = password.len() == 35 && password.starts_with("md5");
            !password.starts_with("SCRAM-SHA-256$") && !md5
        }
    }
}

/// The password of `login` on `p`'s side, if it is stored in cleartext.
/// Why a target's login cannot be used by the MCP endpoint.
#[derive(Debug, thiserror::Error)]
pub(crate) enum LoginUnusable {
    /// No such active user with backend=1.
    #[error("no active {side}_users login {login:?} with backend=1")]
    Missing {
        /// `mysql` or `pgsql`.
        side: &'static str,
        /// The login.
        login: String,
    },
    /// Only a hash is stored: the endpoint cannot log in with it.
    #[error(
        "{side}_users login {login:?} has only a password hash: the MCP endpoint logs in with the cleartext password"
    )]
    HashOnly {
        /// `mysql` or `pgsql`.
        side: &'static str,
        /// The login.
        login: String,
    },
}

pub(crate) fn password(
    rt: &RuntimeConfig,
    p: Protocol,
    login: &str,
) -> Result<String, LoginUnusable> {
    let found = match p {
        Protocol::Mysql => rt
            .mysql
            .backend_users
            .get(login)
            .filter(|u| u.active.0)
            .map(|u| u.password.clone()),
        Protocol::Pgsql => rt
            .pgsql
            .frontend_users
            .get(login)
            .filter(|u| u.active.0 && u.backend.0)
            .map(|u| u.password.clone()),
    };
    let side = protocol_name(p);
    match found {
        None => Err(LoginUnusable::Missing {
            side,
            login: login.to_string(),
        }),
        Some(pw) if !cleartext(p, &pw) => Err(LoginUnusable::HashOnly {
            side,
            login: login.to_string(),
        }),
        Some(pw) => Ok(pw),
    }
}

//! Who is calling: the bearer token of the `Authorization` header, matched by its SHA-256
//! against `mcp_users` (each agent its own token) or against the endpoint's shared token
//! (`mcp-<endpoint>_endpoint_auth`, ProxySQL's). Comparisons take constant time; an empty
//! shared token refuses everyone; tokens never appear in a log line.

use ring::digest::{SHA256, digest};
use sluice_core::config::McpUser;
use sluice_core::runtime::McpRuntime;
use std::net::IpAddr;
use std::sync::Arc;

/// The three MCP endpoints.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Endpoint {
    /// `/mcp/query`: discovery, sampling, read-only SQL, the catalog.
    Query,
    /// `/mcp/stats`: what the admin knows (processlist, digests, pools, servers).
    Stats,
    /// `/mcp/config`: the admin's variables.
    Config,
    /// `/mcp/rag`: search over the RAG index.
    Rag,
}

impl Endpoint {
    /// The name in `mcp_users.endpoints`, stats and metrics.
    pub fn name(self) -> &'static str {
        match self {
            Endpoint::Query => "query",
            Endpoint::Stats => "stats",
            Endpoint::Config => "config",
            Endpoint::Rag => "rag",
        }
    }

    /// The endpoint of a URL path.
    pub fn of_path(path: &str) -> Option<Endpoint> {
        match path.trim_end_matches('/') {
            "/mcp/query" => Some(Endpoint::Query),
            "/mcp/stats" | "/mcp/observe" => Some(Endpoint::Stats),
            "/mcp/config" => Some(Endpoint::Config),
            "/mcp/rag" => Some(Endpoint::Rag),
            _ => None,
        }
    }

    fn shared_token(self, rt: &McpRuntime) -> &str {
        match self {
            Endpoint::Query => &rt.variables.query_endpoint_auth,
            Endpoint::Stats => &rt.variables.stats_endpoint_auth,
            Endpoint::Config => &rt.variables.config_endpoint_auth,
            Endpoint::Rag => &rt.variables.rag_endpoint_auth,
        }
    }
}

/// An authenticated caller.
#[derive(Debug, Clone)]
pub struct Caller {
    /// The MCP user's name, or `<endpoint>_endpoint_auth` for the shared token.
    pub name: String,
    /// Its `mcp_users` row (`None` for the shared token: the variables' limits apply).
    pub user: Option<Arc<McpUser>>,
    /// The endpoint called.
    pub endpoint: Endpoint,
    /// The client's address.
    pub peer: IpAddr,
}

/// Why a request was not let in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AuthFailure {
    /// No `Authorization: Bearer` header.
    Missing,
    /// The token is no one's (or the endpoint's shared token is empty).
    Unknown,
    /// The token's user may not use this endpoint.
    EndpointNotGranted(String),
}

impl std::fmt::Display for AuthFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            AuthFailure::Missing => {
                f.write_str("no bearer token (send Authorization: Bearer <token>)")
            }
            AuthFailure::Unknown => f.write_str("the bearer token is not valid for this endpoint"),
            AuthFailure::EndpointNotGranted(u) => {
                write!(f, "MCP user {u} is not granted this endpoint")
            }
        }
    }
}

/// Hex SHA-256 of `token` (what `mcp_users.token_sha256` holds).
pub fn token_sha256(token: &str) -> String {
    let d = digest(&SHA256, token.as_bytes());
    d.as_ref().iter().map(|b| format!("{b:02x}")).collect()
}

fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// The bearer token of an `Authorization` header value.
pub(crate) fn bearer(header: Option<&str>) -> Option<&str> {
    let h = header?.trim();
    let (scheme, token) = h.split_once(' ')?;
    let token = token.trim();
    (scheme.eq_ignore_ascii_case("bearer") && !token.is_empty()).then_some(token)
}

/// Finds who `token` belongs to on `endpoint`.
pub(crate) fn authenticate(
    rt: &McpRuntime,
    endpoint: Endpoint,
    token: Option<&str>,
    peer: IpAddr,
) -> Result<Caller, AuthFailure> {
    let token = token.ok_or(AuthFailure::Missing)?;
    let presented = token_sha256(token);
    // Every user is compared (no early exit), so the time says nothing of which one matched.
    let mut found: Option<&McpUser> = None;
    for u in &rt.users {
        if constant_time_eq(presented.as_bytes(), u.token_sha256.as_bytes()) {
            found = Some(u);
        }
    }
    if let Some(u) = found {
        if !u.may_use_endpoint(endpoint.name()) {
            return Err(AuthFailure::EndpointNotGranted(u.username.clone()));
        }
        return Ok(Caller {
            name: u.username.clone(),
            user: Some(Arc::new(u.clone())),
            endpoint,
            peer,
        });
    }
    let shared = endpoint.shared_token(rt);
    if !shared.is_empty() && constant_time_eq(presented.as_bytes(), token_sha256(shared).as_bytes())
    {
        return Ok(Caller {
            name: format!("{}_endpoint_auth", endpoint.name()),
            user: None,
            endpoint,
            peer,
        });
    }
    Err(AuthFailure::Unknown)
}

#[cfg(test)]
mod tests {
    use super::*;
    use sluice_core::config::Flag;

    fn rt() -> McpRuntime {
        let mut rt = McpRuntime::default();
        rt.users.push(McpUser {
            username: "analyst".into(),
            token_sha256: token_sha256("secret-a"),
            active: Flag(true),
            db_username: String::new(),
            endpoints: "query".into(),
            targets: "*".into(),
            max_rows: 0,
            max_bytes: 0,
            timeout_ms: 0,
            calls_per_minute: 0,
            masked_columns: String::new(),
            comment: String::new(),
        });
        rt
    }

    #[test]
    fn users_and_shared_tokens_are_told_apart() {
        let ip = IpAddr::from([127, 0, 0, 1]);
        let mut rt = rt();
        let c = authenticate(&rt, Endpoint::Query, Some("secret-a"), ip).expect("user");
        assert_eq!(c.name, "analyst");
        assert_eq!(
            authenticate(&rt, Endpoint::Stats, Some("secret-a"), ip).map(|c| c.name),
            Err(AuthFailure::EndpointNotGranted("analyst".into()))
        );
        // An empty shared token refuses everything, the empty token included.
        assert_eq!(
            authenticate(&rt, Endpoint::Query, Some(""), ip).map(|c| c.name),
            Err(AuthFailure::Unknown)
        );
        rt.variables.query_endpoint_auth = "shared".into();
        let c = authenticate(&rt, Endpoint::Query, Some("shared"), ip).expect("shared");
        assert_eq!(c.name, "query_endpoint_auth");
        assert!(c.user.is_none());
        assert_eq!(
            authenticate(&rt, Endpoint::Query, None, ip).map(|c| c.name),
            Err(AuthFailure::Missing)
        );
    }

    #[test]
    fn bearer_header_parsing() {
        assert_eq!(bearer(Some("Bearer abc")), Some("abc"));
        assert_eq!(bearer(Some("bearer   abc ")), Some("abc"));
        assert_eq!(bearer(Some("Basic abc")), None);
        assert_eq!(bearer(Some("Bearer ")), None);
        assert_eq!(
            token_sha256("abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
    }
}

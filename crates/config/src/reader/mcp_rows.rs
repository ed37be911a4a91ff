//! Checking the `mcp_users`, `mcp_targets` and `mcp_query_rules` rows.

use super::Reader;
use crate::Error;
use crate::{McpQueryRule, McpTarget, McpUser};
use std::collections::HashSet;
use toml::Spanned;

impl Reader<'_> {
    pub(super) fn mcp_users(&mut self, rows: Vec<Spanned<McpUser>>) -> Result<(), Error> {
        let mut names = HashSet::new();
        let mut tokens = HashSet::new();
        for row in rows {
            let offset = row.span().start;
            let mut u = row.into_inner();
            if u.username.trim().is_empty() {
                return Err(self.invalid(offset, "mcp_users.username: must not be empty".into()));
            }
            u.token_sha256 = u.token_sha256.trim().to_ascii_lowercase();
            if u.token_sha256.len() != 64 || !u.token_sha256.bytes().all(|b| b.is_ascii_hexdigit())
            {
                return Err(self.invalid(
                    offset,
                    format!(
                        "mcp_users.token_sha256 of {}: must be the 64 hex digits of the token's SHA-256 (for example `printf %s \"$TOKEN\" | sha256sum`), never the token",
                        u.username
                    ),
                ));
            }
            if !names.insert(u.username.clone()) {
                return Err(self.invalid(
                    offset,
                    format!("mcp_users: duplicate username {}", u.username),
                ));
            }
            if !tokens.insert(u.token_sha256.clone()) {
                return Err(self.invalid(
                    offset,
                    format!(
                        "mcp_users: {} has the same token as another user (each agent needs its own)",
                        u.username
                    ),
                ));
            }
            for e in u
                .endpoints
                .split(',')
                .map(str::trim)
                .filter(|e| !e.is_empty())
            {
                if !matches!(e, "query" | "stats" | "config" | "rag" | "*") {
                    return Err(self.invalid(
                        offset,
                        format!(
                            "mcp_users.endpoints of {}: {e:?} is not query, stats, config or rag",
                            u.username
                        ),
                    ));
                }
            }
            self.cfg.mcp_users.push(u);
        }
        Ok(())
    }

    pub(super) fn mcp_targets(&mut self, rows: Vec<Spanned<McpTarget>>) -> Result<(), Error> {
        let mut ids = HashSet::new();
        for row in rows {
            let offset = row.span().start;
            let mut t = row.into_inner();
            t.protocol = t.protocol.trim().to_ascii_lowercase();
            if t.target_id.trim().is_empty() {
                return Err(self.invalid(offset, "mcp_targets.target_id: must not be empty".into()));
            }
            if t.protocol != "mysql" && t.protocol != "pgsql" {
                return Err(self.invalid(
                    offset,
                    format!(
                        "mcp_targets.protocol of {}: {:?} is not mysql or pgsql",
                        t.target_id, t.protocol
                    ),
                ));
            }
            if !ids.insert(t.target_id.clone()) {
                return Err(self.invalid(
                    offset,
                    format!("mcp_targets: duplicate target_id {}", t.target_id),
                ));
            }
            self.cfg.mcp_targets.push(t);
        }
        Ok(())
    }

    pub(super) fn mcp_query_rules(
        &mut self,
        rows: Vec<Spanned<McpQueryRule>>,
    ) -> Result<(), Error> {
        let mut ids = HashSet::new();
        for row in rows {
            let offset = row.span().start;
            let r = row.into_inner();
            if !ids.insert(r.rule_id) {
                return Err(self.invalid(
                    offset,
                    format!("mcp_query_rules: duplicate rule_id {}", r.rule_id),
                ));
            }
            if let Some(p) = &r.match_pattern
                && let Err(e) = regex::Regex::new(p)
            {
                return Err(self.invalid(
                    offset,
                    format!("mcp_query_rules.match_pattern of rule {}: {e}", r.rule_id),
                ));
            }
            self.cfg.mcp_query_rules.push(r);
        }
        self.cfg.mcp_query_rules.sort_by_key(|r| r.rule_id);
        Ok(())
    }
}

//! sluice-query: the query processor both protocols share: a digest per query
//! ([`digest`](mod@digest)), the rules that decide where it goes and what happens to it
//! ([`rules`]), first-comment hints ([`hints`]), the result cache ([`cache`]), the statistics
//! ([`stats`], [`commands`]), a word filter the sessions' state trackers run first
//! ([`WordSet`]) and the one SQL [`lexer`] every other reader of statement text uses. It knows only the config model (`sluice-config`): no sockets, no wire bytes,
//! no runtime. `sluice-core` re-exports it as `sluice_core::query`.
//!
//! ```
//! use sluice_query::{Dialect, digest};
//! let d = digest("SELECT c FROM sbtest1 WHERE id = 4711", Dialect::Mysql, 2048);
//! assert_eq!(d.text, "SELECT c FROM sbtest1 WHERE id = ?");
//! assert_eq!(d.tables, ["sbtest1"]);
//! ```

pub mod cache;
pub mod commands;
pub mod counters;
pub mod digest;
pub mod hints;
pub mod hook;
mod keywords;
pub mod lexer;
mod memo;
pub mod rules;
mod shapes;
pub mod stats;
pub mod util;
mod words;

#[cfg(test)]
mod digest_tests;

pub use cache::{CacheKey, QueryCache};
pub use digest::{Dialect, Digest, StatementKind, digest, digest_reusing};
pub use hints::Hints;
pub use hook::{HookDecision, HookStatement, LocalReply, StatementHook};
pub use memo::{DigestMemo, MEMO_MAX_SQL};
pub use rules::{QueryAction, QueryContext, RuleSet};
pub use shapes::{SHAPE_MAX_SQL, ShapeCache, SharedShapes};
pub use stats::{DigestRow, DigestSample, DigestStats, QueryProcessorStats};
pub use words::WordSet;

use sluice_config::QueryVariables;
use std::sync::Arc;

/// Everything the processor decided about one query.
#[derive(Debug, Clone, Default)]
pub struct Decision {
    /// The query's digest.
    pub digest: Digest,
    /// What the rules decided, with hints folded in.
    pub action: QueryAction,
}

impl Decision {
    /// The text to send: the rewritten query, or `original`.
    pub fn text<'a>(&'a self, original: &'a str) -> &'a str {
        self.action.rewritten.as_deref().unwrap_or(original)
    }

    /// Total delay before forwarding (ms): the global delay plus the rule's or hint's.
    pub fn delay_ms(&self, vars: &QueryVariables) -> u64 {
        vars.default_query_delay
            .saturating_add(self.action.delay_ms.unwrap_or(0))
    }
}

/// Digests `sql`, evaluates `rules` and applies first-comment hints (hints override rules,
/// as in ProxySQL).
pub fn process(
    rules: &RuleSet,
    vars: &QueryVariables,
    ctx: &QueryContext,
    sql: &str,
    dialect: Dialect,
) -> Decision {
    process_reusing(rules, vars, ctx, sql, dialect, Digest::default())
}

/// [`process`] that writes the digest into the buffers of an earlier one (`reuse`, e.g. the
/// session's previous statement's): no allocation for the digest text and table names.
pub fn process_reusing(
    rules: &RuleSet,
    vars: &QueryVariables,
    ctx: &QueryContext,
    sql: &str,
    dialect: Dialect,
    reuse: Digest,
) -> Decision {
    let max = vars.query_digests_max_digest_length as usize;
    let digest = digest::digest_reusing(sql, dialect, max, reuse);
    process_digested(rules, vars, ctx, sql, digest)
}

/// [`process`] for a query whose digest the caller already has (the same text as a query
/// digested before, with the same `query_digests_max_digest_length`).
pub fn process_digested(
    rules: &RuleSet,
    vars: &QueryVariables,
    ctx: &QueryContext,
    sql: &str,
    digest: Digest,
) -> Decision {
    let mut action = if rules.is_empty() {
        QueryAction::default()
    } else {
        rules.evaluate(ctx, sql, &digest)
    };
    if vars.query_processor_first_comment_parsing > 0
        && let Some(c) = digest.first_comment(sql)
    {
        let h = Hints::parse(c);
        if h.hostgroup.is_some() {
            action.destination_hostgroup = h.hostgroup;
        }
        if h.query_delay_ms.is_some() {
            action.delay_ms = h.query_delay_ms;
        }
        if h.query_timeout_ms.is_some() {
            action.timeout_ms = h.query_timeout_ms;
        }
        if h.cache_ttl_ms.is_some() {
            action.cache_ttl_ms = h.cache_ttl_ms;
        }
        if h.retries.is_some() {
            action.retries = h.retries;
        }
        if action.workload_class.is_none() {
            action.workload_class = h.workload.map(Arc::from);
        }
        if h.causal_reads.is_some() {
            action.causal_reads = h.causal_reads;
        }
        if h.min_position.is_some() {
            action.min_position = h.min_position;
        }
    }
    Decision { digest, action }
}

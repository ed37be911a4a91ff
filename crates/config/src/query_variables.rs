//! Query-processor variables shared by the `mysql-` and `pgsql-` sides (each side has its own
//! copy, under its own prefix, as in ProxySQL).

use super::declared::{Bool, Int, variables};
use super::values::VariableError;

variables! {
    /// Digest, cache, hint and rule-evaluation settings.
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub struct QueryVariables for _prefix {
        /// Statements running longer than this (ms) count as `Slow_queries`.
        long_query_time: u64 = 1000 => "long_query_time", Int(0, 20 * 24 * 3_600_000);
        /// Collect digests (`stats_*_query_digest`).
        query_digests: bool = true => "query_digests", Bool;
        /// Longest digest text kept (bytes).
        query_digests_max_digest_length: u32 = 2048
            => "query_digests_max_digest_length", Int(16, 1_048_576);
        /// Most digests kept; the coldest are evicted beyond it (Sluice addition).
        query_digests_max_entries: u32 = 100_000
            => "query_digests_max_entries", Int(16, 100_000_000);
        /// Keep the client address in digest keys.
        query_digests_track_hostname: bool = false => "query_digests_track_hostname", Bool;
        /// Query cache bound (MB).
        query_cache_size_mb: u32 = 256 => "query_cache_size_MB", Int(1, 1_048_576);
        /// Cache empty results unless a rule says otherwise.
        query_cache_stores_empty_result: bool = true => "query_cache_stores_empty_result", Bool;
        /// Writes through Sluice invalidate cached results of the tables they touch (Sluice).
        query_cache_invalidate_on_write: bool = true => "query_cache_invalidate_on_write", Bool;
        /// Extra passes over the rules when a flagOUT chain points backwards.
        query_processor_iterations: u32 = 0 => "query_processor_iterations", Int(0, 1000);
        /// Read hints from a query's first comment (0 = off).
        query_processor_first_comment_parsing: u32 = 2
            => "query_processor_first_comment_parsing", Int(0, 3);
        /// Queries running longer than this (ms) are killed on the server.
        default_query_timeout: u64 = 36_000_000
            => "default_query_timeout", Int(1000, 1_728_000_000);
        /// Throttle: every query forwarded to a backend waits this long first (ms; 0 = off).
        default_query_delay: u64 = 0 => "default_query_delay", Int(0, 3_600_000);
        /// Time the query processor (digest, rules, hints) into `Query_Processor_time_nsec`:
        /// two clock reads per statement, so off by default, as in ProxySQL.
        stats_time_query_processor: bool = false => "stats_time_query_processor", Bool;
    }
}

impl Default for QueryVariables {
    fn default() -> Self {
        QueryVariables::defaults_for("")
    }
}

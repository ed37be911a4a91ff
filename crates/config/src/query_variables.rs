//! Query-processor variables shared by the `mysql-` and `pgsql-` sides (each side has its own
//! copy, under its own prefix, as in ProxySQL).

use super::values::VariableError;

/// Digest, cache, hint and rule-evaluation settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QueryVariables {
    /// Collect digests (`stats_*_query_digest`).
    pub query_digests: bool,
    /// Longest digest text kept (bytes).
    pub query_digests_max_digest_length: u32,
    /// Most digests kept; the coldest are evicted beyond it (Sluice addition).
    pub query_digests_max_entries: u32,
    /// Keep the client address in digest keys.
    pub query_digests_track_hostname: bool,
    /// Query cache bound (MB).
    pub query_cache_size_mb: u32,
    /// Cache empty results unless a rule says otherwise.
    pub query_cache_stores_empty_result: bool,
    /// Writes through Sluice invalidate cached results of the tables they touch (Sluice).
    pub query_cache_invalidate_on_write: bool,
    /// Extra passes over the rules when a flagOUT chain points backwards.
    pub query_processor_iterations: u32,
    /// Read hints from a query's first comment (0 = off).
    pub query_processor_first_comment_parsing: u32,
    /// Queries running longer than this (ms) are killed on the server.
    pub default_query_timeout: u64,
    /// Throttle: every query forwarded to a backend waits this long first (ms; 0 = off).
    pub default_query_delay: u64,
    /// Statements running longer than this (ms) count as `Slow_queries`.
    pub long_query_time: u64,
}

impl Default for QueryVariables {
    fn default() -> Self {
        QueryVariables {
            query_digests: true,
            query_digests_max_digest_length: 2048,
            query_digests_max_entries: 100_000,
            query_digests_track_hostname: false,
            query_cache_size_mb: 256,
            query_cache_stores_empty_result: true,
            query_cache_invalidate_on_write: true,
            query_processor_iterations: 0,
            query_processor_first_comment_parsing: 2,
            default_query_timeout: 36_000_000,
            default_query_delay: 0,
            long_query_time: 1000,
        }
    }
}

impl QueryVariables {
    /// Sets `name` if it is one of these; `None` when it is not.
    pub fn set(&mut self, prefix: &str, name: &str, v: &str) -> Option<Result<(), VariableError>> {
        let int = |min: u64, max: u64| super::values::parse_var_int(prefix, name, v, min, max);
        let boolean = || super::values::parse_var_bool(prefix, name, v);
        let r = (|| {
            match name {
                "query_digests" => self.query_digests = boolean()?,
                "query_digests_max_digest_length" => {
                    self.query_digests_max_digest_length = int(16, 1_048_576)? as u32
                }
                "query_digests_max_entries" => {
                    self.query_digests_max_entries = int(16, 100_000_000)? as u32
                }
                "query_digests_track_hostname" => self.query_digests_track_hostname = boolean()?,
                "query_cache_size_MB" => self.query_cache_size_mb = int(1, 1_048_576)? as u32,
                "query_cache_stores_empty_result" => {
                    self.query_cache_stores_empty_result = boolean()?
                }
                "query_cache_invalidate_on_write" => {
                    self.query_cache_invalidate_on_write = boolean()?
                }
                "query_processor_iterations" => {
                    self.query_processor_iterations = int(0, 1000)? as u32
                }
                "query_processor_first_comment_parsing" => {
                    self.query_processor_first_comment_parsing = int(0, 3)? as u32
                }
                "default_query_timeout" => self.default_query_timeout = int(1000, 1_728_000_000)?,
                "default_query_delay" => self.default_query_delay = int(0, 3_600_000)?,
                "long_query_time" => self.long_query_time = int(0, 20 * 24 * 3_600_000)?,
                _ => return Ok(false),
            }
            Ok(true)
        })();
        match r {
            Ok(true) => Some(Ok(())),
            Ok(false) => None,
            Err(e) => Some(Err(e)),
        }
    }

    /// Every variable as (name, value).
    pub fn pairs(&self) -> Vec<(String, String)> {
        let b = |x: bool| x.to_string();
        vec![
            ("long_query_time".into(), self.long_query_time.to_string()),
            ("query_digests".into(), b(self.query_digests)),
            (
                "query_digests_max_digest_length".into(),
                self.query_digests_max_digest_length.to_string(),
            ),
            (
                "query_digests_max_entries".into(),
                self.query_digests_max_entries.to_string(),
            ),
            (
                "query_digests_track_hostname".into(),
                b(self.query_digests_track_hostname),
            ),
            (
                "query_cache_size_MB".into(),
                self.query_cache_size_mb.to_string(),
            ),
            (
                "query_cache_stores_empty_result".into(),
                b(self.query_cache_stores_empty_result),
            ),
            (
                "query_cache_invalidate_on_write".into(),
                b(self.query_cache_invalidate_on_write),
            ),
            (
                "query_processor_iterations".into(),
                self.query_processor_iterations.to_string(),
            ),
            (
                "query_processor_first_comment_parsing".into(),
                self.query_processor_first_comment_parsing.to_string(),
            ),
            (
                "default_query_timeout".into(),
                self.default_query_timeout.to_string(),
            ),
            (
                "default_query_delay".into(),
                self.default_query_delay.to_string(),
            ),
        ]
    }
}

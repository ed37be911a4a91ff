//! Failed-login throttling settings, shared by the `mysql-` and `pgsql-` sides (each under its
//! own prefix). ProxySQL's `client_host_cache_size` / `client_host_error_counts` keep their
//! names; Sluice adds the window and the spacing, and is on by default (ProxySQL's are 0, off).

use super::declared::{Int, variables};
use super::values::VariableError;

variables! {
    /// How failed logins from one client address are counted and slowed down.
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub struct ClientHostVariables for _prefix {
        /// Client addresses remembered at most; the least recently failed is forgotten beyond it
        /// (0 = nothing remembered, no throttling).
        cache_size: u32 = 10_000 => "client_host_cache_size", Int(0, 10_000_000);
        /// Failed logins from one address, within the window, before its attempts are spaced out
        /// (0 = never throttle).
        error_counts: u32 = 10 => "client_host_error_counts", Int(0, 1_000_000);
        /// Once throttled, one login attempt per this interval (ms): later attempts wait their
        /// turn, and an attempt that would wait more than ten turns is refused at once (Sluice;
        /// 0 = refuse every attempt while throttled, which is ProxySQL's blocking).
        error_delay_ms: u64 = 1_000 => "client_host_error_delay_ms", Int(0, 60_000);
        /// Failures older than this no longer count (ms; Sluice).
        error_window_ms: u64 = 60_000 => "client_host_error_window_ms", Int(1_000, 86_400_000);
    }
}

impl Default for ClientHostVariables {
    fn default() -> Self {
        ClientHostVariables::defaults_for("")
    }
}

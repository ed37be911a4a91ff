//! Failed-login throttling settings, shared by the `mysql-` and `pgsql-` sides (each under its
//! own prefix). ProxySQL's `client_host_cache_size` / `client_host_error_counts` keep their
//! names; Sluice adds the window and the spacing, and is on by default (ProxySQL's are 0, off).

use super::values::VariableError;

/// How failed logins from one client address are counted and slowed down.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClientHostVariables {
    /// Failed logins from one address, within the window, before its attempts are spaced out
    /// (`client_host_error_counts`; 0 = never throttle).
    pub error_counts: u32,
    /// Client addresses remembered at most; the least recently failed is forgotten beyond it
    /// (`client_host_cache_size`; 0 = nothing remembered, no throttling).
    pub cache_size: u32,
    /// Failures older than this no longer count (ms; `client_host_error_window_ms`, Sluice).
    pub error_window_ms: u64,
    /// Once throttled, one login attempt per this interval (ms): later attempts wait their turn,
    /// and an attempt that would wait more than ten turns is refused at once
    /// (`client_host_error_delay_ms`, Sluice; 0 = refuse every attempt while throttled, which is
    /// ProxySQL's blocking).
    pub error_delay_ms: u64,
}

impl Default for ClientHostVariables {
    fn default() -> Self {
        ClientHostVariables {
            error_counts: 10,
            cache_size: 10_000,
            error_window_ms: 60_000,
            error_delay_ms: 1_000,
        }
    }
}

impl ClientHostVariables {
    /// Sets `name` if it is one of these; `None` when it is not.
    pub fn set(&mut self, prefix: &str, name: &str, v: &str) -> Option<Result<(), VariableError>> {
        let int = |min: u64, max: u64| super::values::parse_var_int(prefix, name, v, min, max);
        let r = match name {
            "client_host_error_counts" => int(0, 1_000_000).map(|n| self.error_counts = n as u32),
            "client_host_cache_size" => int(0, 10_000_000).map(|n| self.cache_size = n as u32),
            "client_host_error_window_ms" => {
                int(1_000, 86_400_000).map(|n| self.error_window_ms = n)
            }
            "client_host_error_delay_ms" => int(0, 60_000).map(|n| self.error_delay_ms = n),
            _ => return None,
        };
        Some(r)
    }

    /// Every variable as (name, value).
    pub fn pairs(&self) -> Vec<(String, String)> {
        vec![
            ("client_host_cache_size".into(), self.cache_size.to_string()),
            (
                "client_host_error_counts".into(),
                self.error_counts.to_string(),
            ),
            (
                "client_host_error_delay_ms".into(),
                self.error_delay_ms.to_string(),
            ),
            (
                "client_host_error_window_ms".into(),
                self.error_window_ms.to_string(),
            ),
        ]
    }
}

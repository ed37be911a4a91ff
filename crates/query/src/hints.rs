//! Query annotations: `key=value` pairs in a query's first comment, as ProxySQL reads them
//! (`/* hostgroup=2;query_timeout=500 */`). Unknown keys and bad values are ignored.

/// What a first comment asks for.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Hints {
    /// `hostgroup=N`: route this query there.
    pub hostgroup: Option<u32>,
    /// `query_delay=ms`: hold the query this long first.
    pub query_delay_ms: Option<u64>,
    /// `query_timeout=ms`: kill it on the server after this long.
    pub query_timeout_ms: Option<u64>,
    /// `cache_ttl=ms`: cache its result for this long.
    pub cache_ttl_ms: Option<u64>,
    /// Retries of the statement on another connection after a lost one (`query_retries=N` hint).
    pub retries: Option<u32>,
    /// `workload=NAME`: the statement's workload class, when no rule gave it one (a client
    /// cannot take a statement out of the class a rule put it in).
    pub workload: Option<String>,
    /// `causal_reads=none|local|user|global`: whose writes this read must see.
    pub causal_reads: Option<sluice_config::CausalMode>,
    /// `min_gtid=0-1-100` (ProxySQL's name) or `min_lsn=0/3000060`: the position this read
    /// must see, from the application (a token it kept itself).
    pub min_position: Option<String>,
}

impl Hints {
    /// Reads the hints in a comment body; separators are `;`, `,` and whitespace.
    pub fn parse(comment: &str) -> Hints {
        let mut h = Hints::default();
        for pair in comment.split([';', ',', ' ', '\t', '\n', '\r']) {
            let Some((k, v)) = pair.split_once('=') else {
                continue;
            };
            let v = v.trim();
            match k.trim().to_ascii_lowercase().as_str() {
                "hostgroup" => h.hostgroup = v.parse().ok(),
                "query_delay" => h.query_delay_ms = v.parse().ok(),
                "query_timeout" => h.query_timeout_ms = v.parse().ok(),
                "cache_ttl" => h.cache_ttl_ms = v.parse().ok(),
                "query_retries" => h.retries = v.parse().ok(),
                "causal_reads" => h.causal_reads = sluice_config::CausalMode::parse(v),
                "min_gtid" | "min_lsn" => {
                    h.min_position = Some(v.to_string()).filter(|v| {
                        !v.is_empty()
                            && v.len() <= 1024
                            && v.bytes()
                                .all(|b| b.is_ascii_alphanumeric() || b"-/:,".contains(&b))
                    });
                }
                "workload" | "workload_class" => {
                    h.workload = Some(v.to_string())
                        .filter(|v| sluice_config::WorkloadClass::new(v).check().is_ok());
                }
                _ => {}
            }
        }
        h
    }

    /// True when no hint was given.
    pub fn is_empty(&self) -> bool {
        *self == Hints::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_proxysql_style_pairs() {
        let h = Hints::parse(" ;hostgroup=2;query_delay=50 query_timeout=1000,cache_ttl=5000 ");
        assert_eq!(h.hostgroup, Some(2));
        assert_eq!(h.query_delay_ms, Some(50));
        assert_eq!(h.query_timeout_ms, Some(1000));
        assert_eq!(h.cache_ttl_ms, Some(5000));
        assert!(Hints::parse("just a comment").is_empty());
        assert_eq!(Hints::parse("hostgroup=abc").hostgroup, None);
        assert_eq!(
            Hints::parse("workload=vector").workload.as_deref(),
            Some("vector")
        );
        assert_eq!(Hints::parse("workload=a'b").workload, None);
        // One GTID domain per hint: `,` separates hints, as in ProxySQL.
        let h = Hints::parse("causal_reads=user;min_gtid=0-1-100");
        assert_eq!(h.causal_reads, Some(sluice_config::CausalMode::User));
        assert_eq!(h.min_position.as_deref(), Some("0-1-100"));
        assert_eq!(Hints::parse("min_gtid=0-1-1');DROP").min_position, None);
        assert_eq!(Hints::parse("causal_reads=maybe").causal_reads, None);
    }
}

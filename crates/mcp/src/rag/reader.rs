//! Reading a RAG source through the read-only path: the statement checked by the read-only
//! lexer, run on the MCP endpoint's own connections to a server of the source's hostgroup as
//! its login, in a READ ONLY transaction, with the page's row cap, a byte cap and a timeout.

use crate::exec::Limits;
use crate::readonly;
use crate::service::McpService;
use crate::targets::{Role, Target};
use serde_json::Value;
use sluice_core::Protocol;
use sluice_core::config::RagSource;
use sluice_core::query::Dialect;
use sluice_rag::sync::{Page, ReadError, SourceReader};
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// Bytes of values one page may hold.
const PAGE_MAX_BYTES: u64 = 256 << 20;
/// One page's statement timeout.
const PAGE_TIMEOUT: Duration = Duration::from_secs(120);

/// Why a page could not be read.
#[derive(Debug, thiserror::Error)]
enum PageReadError {
    /// The source's statement is not one read (the read-only lexer's refusal).
    #[error("the source's statement is not one read: {0}")]
    NotOneRead(readonly::Refusal),
    /// The source's workload class refused the page read.
    #[error("a page read was refused by workload class '{class}': {refusal}")]
    Admission {
        /// The class.
        class: String,
        /// The gate's refusal.
        refusal: String,
    },
}

pub(crate) struct ProxyReader<'a> {
    pub svc: &'a McpService,
}

impl SourceReader for ProxyReader<'_> {
    async fn read(
        &self,
        source: &RagSource,
        sql: &str,
        params: &[Value],
        max_rows: u64,
    ) -> Result<Page, ReadError> {
        let (protocol, dialect) = match source.protocol.as_str() {
            "pgsql" => (Protocol::Pgsql, Dialect::Pgsql),
            _ => (Protocol::Mysql, Dialect::Mysql),
        };
        readonly::check_read(sql, dialect, 0).map_err(PageReadError::NotOneRead)?;
        let target = Target {
            id: format!("rag_source_{}", source.source_id),
            protocol,
            hostgroup: source.hostgroup_id,
            login: source.username.clone(),
            default_schema: source.schemaname.clone(),
            description: String::new(),
            max_rows,
            timeout_ms: PAGE_TIMEOUT.as_millis() as u64,
            allow_explain: false,
            allow_discovery: false,
            role: Role::Unknown,
            skip_reason: None,
            configured: true,
        };
        let schema = (protocol == Protocol::Mysql && !source.schemaname.is_empty())
            .then(|| source.schemaname.clone());
        // One row more than the page's LIMIT: PostgreSQL's Execute says "suspended" when it
        // stops at its count, even with no row left; the statement's LIMIT is the real cap.
        let limits = Limits {
            max_rows: max_rows + 1,
            max_bytes: PAGE_MAX_BYTES,
            timeout: PAGE_TIMEOUT,
        };
        let rt = self.svc.config.load();
        // Held while the page is read: the sync's reads count against the class's slots.
        let _permit = match self
            .svc
            .admission()
            .and_then(|a| a.gate(&rt.workload_classes, &source.workload_class))
        {
            Some(gate) => Some(gate.admit().await.map_err(|r| PageReadError::Admission {
                class: source.workload_class.clone(),
                refusal: r.to_string(),
            })?),
            None => None,
        };
        let rs = self
            .svc
            .execute(
                &rt,
                &target,
                &source.username,
                schema,
                sql,
                params,
                limits,
                &CancellationToken::new(),
            )
            .await?;
        Ok(Page {
            columns: rs.columns.into_iter().map(|c| c.name).collect(),
            rows: rs.rows,
            truncated: rs.truncated,
        })
    }
}

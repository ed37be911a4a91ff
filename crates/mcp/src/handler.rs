//! The MCP server handler rmcp runs for each request: the server's identity and protocol
//! versions, the endpoint's tools, and a call's dispatch. The caller was authenticated by the
//! HTTP gate before rmcp saw the request; its identity travels in the request's extensions.

use crate::auth::{Caller, Endpoint};
use crate::service::McpService;
use crate::tools::{self, CallFailure};
use rmcp::model::{
    CacheScope, CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock,
    Implementation, ListToolsResult, PaginatedRequestParams, ProtocolVersion, ServerCapabilities,
    ServerConfig, ToolsCapability,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer, ServerHandler};
use std::borrow::Cow;
use std::sync::Arc;

/// The protocol versions served; each client is answered in the one it speaks.
pub const PROTOCOL_VERSIONS: [ProtocolVersion; 3] = [
    ProtocolVersion::V_2025_06_18,
    ProtocolVersion::V_2025_11_25,
    ProtocolVersion::V_2026_07_28,
];

/// One endpoint's handler.
#[derive(Clone)]
pub(crate) struct Handler {
    pub svc: Arc<McpService>,
    pub endpoint: Endpoint,
}

fn caller(ctx: &RequestContext<RoleServer>) -> Result<Caller, ErrorData> {
    ctx.extensions
        .get::<http::request::Parts>()
        .and_then(|p| p.extensions.get::<Caller>())
        .cloned()
        .ok_or_else(|| ErrorData::internal_error("the request carries no caller", None))
}

impl ServerHandler for Handler {
    fn get_info(&self) -> ServerConfig {
        let mut caps = ServerCapabilities::default();
        caps.tools = Some(ToolsCapability::default());
        ServerConfig::new(caps)
            .with_server_info(Implementation::new("sluice", env!("CARGO_PKG_VERSION")))
            .with_instructions(match self.endpoint {
                Endpoint::Query => {
                    "Sluice's query endpoint: start with list_targets, then list_schemas, list_tables and describe_table; run_sql_readonly runs one read-only statement on a replica with row caps and a timeout."
                }
                Endpoint::Stats => "Sluice's stats endpoint: what the proxy's admin knows.",
                Endpoint::Config => "Sluice's config endpoint: the admin's variables.",
                Endpoint::Rag => {
                    "Sluice's RAG endpoint: rag.search_hybrid (or rag.search_fts / rag.search_vector) finds chunks of the indexed tables; rag.get_chunks and rag.get_docs return them whole; rag.fetch_from_source reads the row as it is now; rag.admin.stats shows the sources."
                }
            })
    }

    fn supported_protocol_versions(&self) -> Cow<'static, [ProtocolVersion]> {
        Cow::Borrowed(&PROTOCOL_VERSIONS)
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _ctx: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let mut list = ListToolsResult::with_all_items(tools::definitions(self.endpoint));
        // The list changes with a Sluice upgrade only; it is the caller's (tokens grant
        // endpoints), so private.
        list.ttl_ms = Some(300_000);
        list.cache_scope = Some(CacheScope::Private);
        Ok(list)
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let caller = caller(&ctx)?;
        match tools::call(
            &self.svc,
            &caller,
            &request.name,
            request.arguments,
            &ctx.ct,
        )
        .await
        {
            Ok(v) => Ok(CallToolResult::structured(v).into()),
            Err(CallFailure::Tool(e)) => {
                Ok(CallToolResult::error(vec![ContentBlock::text(e.to_string())]).into())
            }
            Err(CallFailure::UnknownTool(name)) => Err(ErrorData::invalid_params(
                format!("unknown tool {name:?} on /mcp/{}", self.endpoint.name()),
                None,
            )),
            Err(CallFailure::BadArguments(why)) => Err(ErrorData::invalid_params(
                format!("invalid arguments for {}: {why}", request.name),
                None,
            )),
        }
    }
}

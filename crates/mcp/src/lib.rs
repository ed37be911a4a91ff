//! Sluice's HTTP side: the MCP endpoint for AI agents and the metrics and probe endpoints.

pub mod readonly;

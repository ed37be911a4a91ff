//! Sluice's HTTP side: the MCP endpoint for AI agents ([`McpServer`], [`McpService`]) and the
//! metrics and probe endpoints ([`probes`]), on one HTTP server ([`http`]).

mod audit;
pub mod auth;
mod catalog;
mod error;
pub mod exec;
mod gate;
mod handler;
pub mod http;
mod masks;
pub mod probes;
mod rag;
pub mod readonly;
mod rules;
mod server;
mod service;
pub mod stats;
mod status;
mod targets;
mod tools;

pub use catalog::DdlWatcher;
pub use error::Error;
pub use handler::PROTOCOL_VERSIONS;
pub use rag::SyncRefused;
pub use server::McpServer;
pub use service::McpService;
pub use stats::McpStats;

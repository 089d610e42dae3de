//! MCP servers as spool sees them: their configuration (`[mcp_servers.NAME]`
//! in `spool.toml`), and a client that starts one and lists its tools, on
//! the official Rust SDK (`rmcp`).
//!
//! What is built: servers run as child processes speaking MCP on stdio,
//! initialized and asked for their tools (every page), within the startup
//! timeout; a tool called with a timeout. Not built yet: streamable-HTTP servers, tool calls from turns
//! (`mcpToolCall` items), progress, elicitation, restarts, and Codex's
//! `mcpServer*` methods (`docs/internals/mcp.md`).

// Code that ships never panics on an unwrap: every `expect` names the
// invariant that makes it safe, and is allowed where it stands.
#![cfg_attr(not(test), deny(clippy::unwrap_used, clippy::expect_used))]

mod client;
mod config;
mod servers;

pub use client::{McpCallError, McpCallResult, McpConnection, McpError, McpProgress, McpTool};
pub use config::{
    ConfigError, DEFAULT_STARTUP_TIMEOUT, DEFAULT_TOOL_TIMEOUT, McpServerConfig, McpToolConfig,
    Transport,
};
pub use servers::{McpServers, ServerState, ServerStatus, StartupUpdate};

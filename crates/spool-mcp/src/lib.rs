//! MCP servers as spool sees them, on the official Rust SDK (`rmcp`): their
//! configuration (`[mcp_servers.NAME]` in `spool.toml`), a connection to
//! one (a child process on stdio, or streamable HTTP) that lists its tools
//! and calls them with their progress and questions, and the process's
//! servers (`McpServers`: started on first use, started again after a
//! crash, reported by status), which is the runtime's `McpToolbox`. See
//! `docs/internals/mcp.md`.

// Code that ships never panics on an unwrap: every `expect` names the
// invariant that makes it safe, and is allowed where it stands.
#![cfg_attr(not(test), deny(clippy::unwrap_used, clippy::expect_used))]

#[cfg(feature = "client")]
mod client;
mod config;
#[cfg(feature = "client")]
mod servers;

#[cfg(feature = "client")]
pub use client::{McpCallError, McpCallResult, McpConnection, McpError, McpProgress, McpTool};
pub use config::{
    ConfigError, DEFAULT_STARTUP_TIMEOUT, DEFAULT_TOOL_TIMEOUT, McpServerConfig, McpToolConfig,
    Transport,
};
#[cfg(feature = "client")]
pub use servers::{McpServers, ServerState, ServerStatus, StartupUpdate};

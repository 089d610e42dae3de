//! The MCP methods of Codex app-server v2: what the configured MCP
//! servers are and offer (`mcpServerStatus/list`), a client's own call of
//! a tool (`mcpServer/tool/call`), and reading their configuration again
//! (`config/mcpServer/reload`).

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// `mcpServerStatus/list` params. spool lists every server in one page;
/// `serverName` keeps one.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ListMcpServerStatusParams {
    #[serde(default)]
    pub cursor: Option<String>,
    #[serde(default)]
    pub limit: Option<u32>,
    #[serde(default)]
    pub server_name: Option<String>,
    #[serde(default)]
    pub thread_id: Option<String>,
    /// `full` or `toolsAndAuthOnly`; spool's answer is the same for both
    /// (it has no resources to leave out).
    #[serde(default)]
    pub detail: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ListMcpServerStatusResponse {
    pub data: Vec<McpServerStatus>,
    pub next_cursor: Option<String>,
}

/// One server.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct McpServerStatus {
    pub name: String,
    /// Its tools by name, as the server describes them.
    pub tools: BTreeMap<String, McpToolDescription>,
    /// spool reads no MCP resources.
    pub resources: Vec<Value>,
    pub resource_templates: Vec<Value>,
    /// `bearerToken` for an HTTP server with a token, else `unsupported`.
    pub auth_status: String,
    /// `notStarted`, `starting`, `connected`, `failed` or `disabled`.
    pub runtime_status: Option<String>,
    /// Why its tools are not listed (it failed to start).
    pub tools_error: Option<String>,
    /// The scheme, host and port of an HTTP server.
    pub http_origin: Option<String>,
}

/// A tool as MCP's `tools/list` describes it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct McpToolDescription {
    pub name: String,
    pub description: Option<String>,
    pub input_schema: Value,
    /// `readOnlyHint`, `destructiveHint`, when the server gave them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub annotations: Option<Value>,
}

/// `mcpServer/tool/call`: a client calls a tool itself.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct McpServerToolCallParams {
    pub thread_id: String,
    pub server: String,
    pub tool: String,
    #[serde(default)]
    pub arguments: Option<Value>,
    #[serde(rename = "_meta", default)]
    pub meta: Option<Value>,
}

/// What the tool answered, as MCP carries it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct McpServerToolCallResponse {
    pub content: Vec<Value>,
    pub structured_content: Option<Value>,
    pub is_error: Option<bool>,
}

/// `config/mcpServer/reload` params (none).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct McpServerReloadParams {}

/// `config/mcpServer/reload` result (empty, as Codex's).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct McpServerRefreshResponse {}

/// `mcpServer/startupStatus/updated`: a server began to start, is ready,
/// or failed (`error` says why). Sent to every connection, not logged.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct McpServerStatusUpdatedNotification {
    pub name: String,
    /// `starting`, `ready`, `failed` or `cancelled`.
    pub status: String,
    pub error: Option<String>,
    /// spool's servers serve every thread: none.
    pub thread_id: Option<String>,
}

/// The method of [`McpServerStatusUpdatedNotification`].
pub const MCP_SERVER_STATUS_UPDATED: &str = "mcpServer/startupStatus/updated";

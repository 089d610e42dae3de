//! The MCP methods of Codex app-server v2, served over what the process
//! was configured with (see [`McpAdmin`]).

use std::future::Future;
use std::pin::Pin;

use spool_protocol::*;

use super::{MethodError, Reply, reply};
use crate::hub::Hub;

/// The MCP servers of the process, as the methods see them: their status
/// (started first, so their tools are known) and a reload of their
/// configuration. The binary implements it over its MCP client; a hub
/// without one answers that no server is configured.
pub trait McpAdmin: Send + Sync {
    /// Every server (or the one named), with its tools.
    fn status<'a>(
        &'a self,
        server: Option<&'a str>,
    ) -> Pin<Box<dyn Future<Output = Vec<McpServerStatus>> + Send + 'a>>;

    /// Reads the configuration again; an error names what is wrong with it.
    fn reload(&self) -> Pin<Box<dyn Future<Output = Result<(), String>> + Send + '_>>;
}

pub(crate) async fn status_list(
    hub: &Hub,
    params: ListMcpServerStatusParams,
) -> Result<Reply, MethodError> {
    let data = match hub.mcp() {
        Some(admin) => admin.status(params.server_name.as_deref()).await,
        None => Vec::new(),
    };
    reply(ListMcpServerStatusResponse {
        data,
        next_cursor: None,
    })
}

pub(crate) async fn reload(hub: &Hub) -> Result<Reply, MethodError> {
    if let Some(admin) = hub.mcp() {
        admin.reload().await.map_err(|message| MethodError {
            code: spool_protocol::jsonrpc::error_codes::INVALID_REQUEST,
            message,
        })?;
    }
    reply(McpServerRefreshResponse {})
}

/// Runs the call as a turn of its own and answers what the tool said. A
/// call with no answer (no such server, the timeout passed) is an error
/// reply; its failed item is on record all the same.
pub(crate) async fn tool_call(
    hub: &std::sync::Arc<Hub>,
    params: McpServerToolCallParams,
) -> Result<Reply, MethodError> {
    let arguments = params.arguments.unwrap_or_else(|| serde_json::json!({}));
    let item = hub
        .call_mcp_tool(&params.thread_id, (params.server, params.tool, arguments))
        .await?;
    let ThreadItem::McpToolCall { result, error, .. } = item else {
        return Err(MethodError {
            code: spool_protocol::jsonrpc::error_codes::INTERNAL_ERROR,
            message: "the call's item is not an mcpToolCall".to_owned(),
        });
    };
    match result {
        Some(result) => reply(McpServerToolCallResponse {
            content: result.content,
            structured_content: result.structured_content,
            is_error: Some(error.is_some()),
        }),
        None => Err(MethodError {
            code: spool_protocol::jsonrpc::error_codes::INTERNAL_ERROR,
            message: error.map_or_else(|| "the tool gave no answer".to_owned(), |e| e.message),
        }),
    }
}

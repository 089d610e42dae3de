//! MCP tools as the turn loop sees them: a [`McpToolbox`] lists the tools
//! of the MCP servers an agent may use and calls them. The runtime files
//! each call as an `mcpToolCall` item; which servers run, and how, is the
//! toolbox's business (spool-mcp implements it over rmcp).

use std::future::Future;
use std::pin::Pin;

use serde::Deserialize;
use serde_json::{Map, Value};

/// The prefix of every MCP tool's name as the model sees it.
pub const MODEL_NAME_PREFIX: &str = "mcp__";

/// The longest tool name model APIs take.
const MAX_MODEL_NAME: usize = 64;

/// One tool of one server.
#[derive(Debug, Clone, PartialEq)]
pub struct McpToolInfo {
    /// The server, by its configured name.
    pub server: String,
    /// The tool, as the server names it.
    pub tool: String,
    pub description: Option<String>,
    /// The JSON Schema of its arguments.
    pub input_schema: Value,
    /// The server's hints: the tool only reads, or it may destroy.
    pub read_only: Option<bool>,
    pub destructive: Option<bool>,
    /// The configuration's word on asking, over the thread's policy.
    pub approval: Option<McpApproval>,
}

/// `approval = "always" | "never"` in a server's section (or for one of
/// its tools): always ask a person before a call, or never ask.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum McpApproval {
    Always,
    Never,
}

impl McpToolInfo {
    /// The name the model calls it by: `mcp__{server}__{tool}`, with
    /// characters model APIs refuse replaced by `_`, and a name over their
    /// 64-character limit cut short and told apart by a hash of the whole.
    /// Two servers' tools of one name never collide: the server is part of
    /// the name.
    pub fn model_name(&self) -> String {
        model_name(&self.server, &self.tool)
    }
}

pub fn model_name(server: &str, tool: &str) -> String {
    let clean = |text: &str| -> String {
        text.chars()
            .map(
                |c| match c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                    true => c,
                    false => '_',
                },
            )
            .collect()
    };
    let name = format!("{MODEL_NAME_PREFIX}{}__{}", clean(server), clean(tool));
    if name.len() <= MAX_MODEL_NAME {
        return name;
    }
    // FNV-1a over the exact server and tool: stable across runs and
    // builds, which a model view replayed later depends on.
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in server.bytes().chain([0]).chain(tool.bytes()) {
        hash = (hash ^ u64::from(byte)).wrapping_mul(0x0100_0000_01b3);
    }
    let suffix = format!("_{hash:016x}");
    let mut cut = name;
    cut.truncate(MAX_MODEL_NAME - suffix.len());
    cut + &suffix
}

/// A progress report of a running call.
#[derive(Debug, Clone, PartialEq)]
pub struct McpProgress {
    pub progress: f64,
    pub total: Option<f64>,
    pub message: Option<String>,
}

/// What a tool answered: content blocks and structured content as MCP
/// carries them, and whether the tool says it failed (`isError`).
#[derive(Debug, Clone, PartialEq)]
pub struct McpOutcome {
    pub content: Vec<Value>,
    pub structured_content: Option<Value>,
    pub is_error: bool,
}

pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// Answers a question a server asks a person during a call (MCP's
/// `elicitation/create`). It gets the request's params as MCP writes them
/// (`mode` `form` with `message` and `requestedSchema`, or `url` with
/// `message`, `url` and `elicitationId`) and answers MCP's result
/// (`action`: `accept`, `decline` or `cancel`; `content` when accepted).
pub type McpElicit = std::sync::Arc<dyn Fn(Value) -> BoxFuture<'static, Value> + Send + Sync>;

/// The MCP servers of an agent.
pub trait McpToolbox: Send + Sync {
    /// Every tool offered now, starting servers that have not started.
    /// An error when a server marked `required` cannot start: a turn
    /// cannot go on without it. Other servers that fail are left out
    /// (and reported by their status).
    fn tools(&self) -> BoxFuture<'_, Result<Vec<McpToolInfo>, String>>;

    /// Calls `tool` of `server`; what it reports on the way goes to
    /// `progress`, and what it asks a person to `elicit` (without one, a
    /// question is declined). An error is a call that has no result (the
    /// server is gone, the call timed out), in words for the person and
    /// the model.
    fn call<'a>(
        &'a self,
        server: &'a str,
        tool: &'a str,
        arguments: Option<Map<String, Value>>,
        progress: &'a (dyn Fn(McpProgress) + Send + Sync),
        elicit: Option<McpElicit>,
    ) -> BoxFuture<'a, Result<McpOutcome, String>>;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_namespaced_clean_and_short_enough() {
        assert_eq!(model_name("files", "read_file"), "mcp__files__read_file");
        assert_eq!(model_name("my.server", "do it"), "mcp__my_server__do_it");
        assert_ne!(model_name("a", "echo"), model_name("b", "echo"));
        let long = "x".repeat(80);
        let cut = model_name("server", &long);
        assert_eq!(cut.len(), 64);
        assert!(cut.starts_with("mcp__server__xxx"));
        // Two long names alike up to the cut still differ.
        let other = model_name("server", &format!("{long}y"));
        assert_ne!(cut, other);
        assert_eq!(cut, model_name("server", &long), "stable");
    }
}

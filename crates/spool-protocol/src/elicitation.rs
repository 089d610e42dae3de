//! `mcpServer/elicitation/request`: a question about an MCP server's work
//! put to a person, in Codex app-server v2's shape.
//!
//! spool asks it in two cases: whether an MCP tool may run, and what an
//! MCP server asks a person during a call (its `elicitation/create`,
//! passed on as it came: a form, or a URL to open). Codex asks the first
//! the same way, as a form with no fields whose `_meta` says what it is
//! (`codex_approval_kind: "mcp_tool_call"`, the tool, its arguments), so a
//! Codex client shows it as a tool approval and answers `accept`,
//! `decline` or `cancel`.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

/// `_meta.codex_approval_kind` of a tool approval.
pub const MCP_TOOL_CALL_APPROVAL: &str = "mcp_tool_call";

/// Asked of a client about the MCP server `server_name`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct McpServerElicitationRequestParams {
    pub thread_id: String,
    /// The turn the question arose in, when there is one.
    #[serde(default)]
    pub turn_id: Option<String>,
    pub server_name: String,
    #[serde(flatten)]
    pub request: McpElicitation,
}

/// What is asked: a form (whose schema may have no fields: a yes or no),
/// or a page to open.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "mode", rename_all = "camelCase")]
pub enum McpElicitation {
    #[serde(rename_all = "camelCase")]
    Form {
        message: String,
        requested_schema: Value,
        #[serde(rename = "_meta", default, skip_serializing_if = "Option::is_none")]
        meta: Option<Value>,
    },
    #[serde(rename_all = "camelCase")]
    Url {
        elicitation_id: String,
        message: String,
        url: String,
        #[serde(rename = "_meta", default, skip_serializing_if = "Option::is_none")]
        meta: Option<Value>,
    },
}

impl McpServerElicitationRequestParams {
    /// Whether `tool` of `server` may run with `arguments`.
    pub fn tool_approval(
        thread_id: &str,
        turn_id: &str,
        server: &str,
        tool: &str,
        description: Option<&str>,
        arguments: &Value,
    ) -> Self {
        let mut meta = json!({
            "codex_approval_kind": MCP_TOOL_CALL_APPROVAL,
            "persist": ["session"],
            "tool_name": tool,
            "tool_params": arguments,
        });
        if let Some(description) = description {
            meta["tool_description"] = Value::String(description.to_owned());
        }
        McpServerElicitationRequestParams {
            thread_id: thread_id.to_owned(),
            turn_id: Some(turn_id.to_owned()),
            server_name: server.to_owned(),
            request: McpElicitation::Form {
                message: format!("Allow the {server} MCP server to run tool \"{tool}\"?"),
                requested_schema: json!({"type": "object", "properties": {}}),
                meta: Some(meta),
            },
        }
    }

    /// The tool a tool approval is about.
    pub fn approved_tool(&self) -> Option<&str> {
        let McpElicitation::Form { meta, .. } = &self.request else {
            return None;
        };
        let meta = meta.as_ref()?;
        (meta.get("codex_approval_kind")?.as_str()? == MCP_TOOL_CALL_APPROVAL)
            .then(|| meta.get("tool_name")?.as_str())
            .flatten()
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum McpServerElicitationAction {
    Accept,
    Decline,
    Cancel,
}

/// A client's answer. For a tool approval, `_meta.persist = "session"`
/// with `accept` lets the tool run for the rest of the session unasked.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct McpServerElicitationRequestResponse {
    pub action: McpServerElicitationAction,
    #[serde(default)]
    pub content: Option<Value>,
    #[serde(rename = "_meta", default)]
    pub meta: Option<Value>,
}

impl McpServerElicitationRequestResponse {
    pub fn decline() -> Self {
        McpServerElicitationRequestResponse {
            action: McpServerElicitationAction::Decline,
            content: None,
            meta: None,
        }
    }

    /// An acceptance that asks to be remembered for the session.
    pub fn for_session(&self) -> bool {
        self.action == McpServerElicitationAction::Accept
            && self
                .meta
                .as_ref()
                .and_then(|meta| meta.get("persist"))
                .and_then(Value::as_str)
                == Some("session")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tool_approval_is_a_form_without_fields() {
        let params = McpServerElicitationRequestParams::tool_approval(
            "t",
            "u",
            "files",
            "delete",
            Some("Deletes a file"),
            &json!({"path": "a"}),
        );
        let wire = serde_json::to_value(&params).unwrap();
        assert_eq!(wire["mode"], "form");
        assert_eq!(wire["serverName"], "files");
        assert_eq!(wire["turnId"], "u");
        assert_eq!(
            wire["requestedSchema"],
            json!({"type": "object", "properties": {}})
        );
        assert_eq!(wire["_meta"]["codex_approval_kind"], "mcp_tool_call");
        assert_eq!(wire["_meta"]["tool_params"], json!({"path": "a"}));
        let back: McpServerElicitationRequestParams = serde_json::from_value(wire).unwrap();
        assert_eq!(back, params);
        assert_eq!(back.approved_tool(), Some("delete"));
    }

    #[test]
    fn only_an_accept_with_persist_session_is_for_the_session() {
        let answer = |v: Value| -> McpServerElicitationRequestResponse {
            serde_json::from_value(v).unwrap()
        };
        assert!(answer(json!({"action": "accept", "_meta": {"persist": "session"}})).for_session());
        assert!(!answer(json!({"action": "accept", "content": {}})).for_session());
        assert!(
            !answer(json!({"action": "decline", "_meta": {"persist": "session"}})).for_session()
        );
    }
}

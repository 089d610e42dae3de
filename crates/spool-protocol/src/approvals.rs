//! Approvals and client-executed tools: the policy and sandbox settings,
//! the server → client requests that ask a person (or a client) for
//! something, and their answers. Shapes and method names follow Codex
//! app-server protocol v2.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::items::{CommandAction, DynamicToolCallOutputContentItem};

/// When a person is asked before a tool runs (Codex `AskForApproval`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum AskForApproval {
    /// Only commands known to be read-only run without asking (Codex calls
    /// this variant `UnlessTrusted`; the wire value is the same).
    Untrusted,
    /// Run what the sandbox allows; ask when it would not.
    OnFailure,
    /// Run what the sandbox allows; ask when it would not or when the
    /// model asks to run outside it.
    #[default]
    OnRequest,
    /// Never ask: what the sandbox does not allow is refused.
    Never,
}

impl AskForApproval {
    pub const ALL: [AskForApproval; 4] = [
        AskForApproval::Untrusted,
        AskForApproval::OnFailure,
        AskForApproval::OnRequest,
        AskForApproval::Never,
    ];

    /// The wire spelling (also the CLI's).
    pub fn as_str(self) -> &'static str {
        match self {
            AskForApproval::Untrusted => "untrusted",
            AskForApproval::OnFailure => "on-failure",
            AskForApproval::OnRequest => "on-request",
            AskForApproval::Never => "never",
        }
    }
}

/// What tools may do without a person's say-so.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum SandboxMode {
    ReadOnly,
    #[default]
    WorkspaceWrite,
    DangerFullAccess,
}

impl SandboxMode {
    pub const ALL: [SandboxMode; 3] = [
        SandboxMode::ReadOnly,
        SandboxMode::WorkspaceWrite,
        SandboxMode::DangerFullAccess,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            SandboxMode::ReadOnly => "read-only",
            SandboxMode::WorkspaceWrite => "workspace-write",
            SandboxMode::DangerFullAccess => "danger-full-access",
        }
    }
}

/// A policy or sandbox mode that is not one of the valid spellings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParseModeError {
    pub what: &'static str,
    pub value: String,
    pub valid: Vec<&'static str>,
}

impl std::fmt::Display for ParseModeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "invalid {} {:?}; expected one of: {}",
            self.what,
            self.value,
            self.valid.join(", ")
        )
    }
}

impl std::error::Error for ParseModeError {}

impl std::str::FromStr for AskForApproval {
    type Err = ParseModeError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::ALL
            .into_iter()
            .find(|p| p.as_str() == s)
            .ok_or_else(|| ParseModeError {
                what: "approval policy",
                value: s.to_owned(),
                valid: Self::ALL.iter().map(|p| p.as_str()).collect(),
            })
    }
}

impl std::str::FromStr for SandboxMode {
    type Err = ParseModeError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::ALL
            .into_iter()
            .find(|m| m.as_str() == s)
            .ok_or_else(|| ParseModeError {
                what: "sandbox mode",
                value: s.to_owned(),
                valid: Self::ALL.iter().map(|m| m.as_str()).collect(),
            })
    }
}

impl std::fmt::Display for AskForApproval {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::fmt::Display for SandboxMode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// An argv prefix that, once accepted, lets matching commands run without
/// asking.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(transparent)]
pub struct ExecPolicyAmendment(pub Vec<String>);

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum NetworkPolicyRuleAction {
    Allow,
    Deny,
}

/// A rule for one host that later network approvals honour.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NetworkPolicyAmendment {
    pub host: String,
    pub action: NetworkPolicyRuleAction,
}

/// What a network approval is about.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NetworkApprovalContext {
    pub host: String,
    pub protocol: String,
}

/// The answer to a command approval.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum CommandExecutionApprovalDecision {
    Accept,
    /// Accept, and do not ask again for the same command in this thread.
    AcceptForSession,
    /// Accept, and let commands starting with this prefix run from now on.
    AcceptWithExecpolicyAmendment {
        execpolicy_amendment: ExecPolicyAmendment,
    },
    /// Record an allow or deny rule for a host.
    ApplyNetworkPolicyAmendment {
        network_policy_amendment: NetworkPolicyAmendment,
    },
    /// The command does not run; the turn goes on.
    Decline,
    /// The command does not run; the turn ends interrupted.
    Cancel,
}

/// The answer to a file change approval.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum FileChangeApprovalDecision {
    Accept,
    /// Accept, and do not ask again for changes under the same root.
    AcceptForSession,
    Decline,
    Cancel,
}

/// `item/commandExecution/requestApproval`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CommandExecutionRequestApprovalParams {
    pub thread_id: String,
    pub turn_id: String,
    pub item_id: String,
    /// When the request was asked (Unix ms). Requests stored before spool
    /// wrote it read as 0 and take their row's creation time.
    #[serde(default)]
    pub started_at_ms: i64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub approval_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub network_approval_context: Option<NetworkApprovalContext>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub command: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cwd: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub command_actions: Option<Vec<CommandAction>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub proposed_execpolicy_amendment: Option<ExecPolicyAmendment>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub proposed_network_policy_amendments: Option<Vec<NetworkPolicyAmendment>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub available_decisions: Option<Vec<CommandExecutionApprovalDecision>>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CommandExecutionRequestApprovalResponse {
    pub decision: CommandExecutionApprovalDecision,
}

/// `item/fileChange/requestApproval`. Codex writes both optional fields,
/// as `null` when unset.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct FileChangeRequestApprovalParams {
    pub thread_id: String,
    pub turn_id: String,
    pub item_id: String,
    /// As [`CommandExecutionRequestApprovalParams::started_at_ms`].
    #[serde(default)]
    pub started_at_ms: i64,
    #[serde(default)]
    pub reason: Option<String>,
    #[serde(default)]
    pub grant_root: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct FileChangeRequestApprovalResponse {
    pub decision: FileChangeApprovalDecision,
}

/// `item/tool/call`: run a tool the client declared and answer with its
/// output.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DynamicToolCallParams {
    pub thread_id: String,
    pub turn_id: String,
    pub call_id: String,
    #[serde(default)]
    pub namespace: Option<String>,
    pub tool: String,
    pub arguments: Value,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DynamicToolCallResponse {
    pub content_items: Vec<DynamicToolCallOutputContentItem>,
    pub success: bool,
}

/// Every server → client request, tagged by its JSON-RPC method.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "method", content = "params")]
pub enum ServerRequest {
    #[serde(rename = "item/commandExecution/requestApproval")]
    CommandExecutionRequestApproval(CommandExecutionRequestApprovalParams),
    #[serde(rename = "item/fileChange/requestApproval")]
    FileChangeRequestApproval(FileChangeRequestApprovalParams),
    #[serde(rename = "item/tool/call")]
    DynamicToolCall(DynamicToolCallParams),
    #[serde(rename = "mcpServer/elicitation/request")]
    McpServerElicitation(crate::McpServerElicitationRequestParams),
}

impl ServerRequest {
    pub fn method(&self) -> &'static str {
        match self {
            ServerRequest::CommandExecutionRequestApproval(_) => {
                "item/commandExecution/requestApproval"
            }
            ServerRequest::FileChangeRequestApproval(_) => "item/fileChange/requestApproval",
            ServerRequest::DynamicToolCall(_) => "item/tool/call",
            ServerRequest::McpServerElicitation(_) => "mcpServer/elicitation/request",
        }
    }

    pub fn thread_id(&self) -> &str {
        match self {
            ServerRequest::CommandExecutionRequestApproval(p) => &p.thread_id,
            ServerRequest::FileChangeRequestApproval(p) => &p.thread_id,
            ServerRequest::DynamicToolCall(p) => &p.thread_id,
            ServerRequest::McpServerElicitation(p) => &p.thread_id,
        }
    }

    pub fn turn_id(&self) -> &str {
        match self {
            ServerRequest::CommandExecutionRequestApproval(p) => &p.turn_id,
            ServerRequest::FileChangeRequestApproval(p) => &p.turn_id,
            ServerRequest::DynamicToolCall(p) => &p.turn_id,
            ServerRequest::McpServerElicitation(p) => p.turn_id.as_deref().unwrap_or_default(),
        }
    }

    /// `value` as the answer this request expects. Answers are untagged on
    /// the wire, and some shapes fit two kinds (a file change answer,
    /// `{"decision": "accept"}`, is also a command answer): read without
    /// their request they could come back as the wrong kind.
    pub fn answer_from(&self, value: Value) -> Result<ServerRequestAnswer, serde_json::Error> {
        match self {
            ServerRequest::CommandExecutionRequestApproval(_) => {
                serde_json::from_value(value).map(ServerRequestAnswer::CommandExecution)
            }
            ServerRequest::FileChangeRequestApproval(_) => {
                serde_json::from_value(value).map(ServerRequestAnswer::FileChange)
            }
            ServerRequest::DynamicToolCall(_) => {
                serde_json::from_value(value).map(ServerRequestAnswer::DynamicToolCall)
            }
            ServerRequest::McpServerElicitation(_) => {
                serde_json::from_value(value).map(ServerRequestAnswer::McpServerElicitation)
            }
        }
    }

    /// The answer that refuses this request: `decline` for an approval;
    /// for a client-run tool, a failed call whose output says `why`.
    pub fn refusal(&self, why: &str) -> ServerRequestAnswer {
        match self {
            ServerRequest::CommandExecutionRequestApproval(_) => {
                ServerRequestAnswer::CommandExecution(CommandExecutionRequestApprovalResponse {
                    decision: CommandExecutionApprovalDecision::Decline,
                })
            }
            ServerRequest::FileChangeRequestApproval(_) => {
                ServerRequestAnswer::FileChange(FileChangeRequestApprovalResponse {
                    decision: FileChangeApprovalDecision::Decline,
                })
            }
            ServerRequest::DynamicToolCall(_) => {
                ServerRequestAnswer::DynamicToolCall(DynamicToolCallResponse {
                    content_items: vec![DynamicToolCallOutputContentItem::InputText {
                        text: why.to_owned(),
                    }],
                    success: false,
                })
            }
            ServerRequest::McpServerElicitation(_) => ServerRequestAnswer::McpServerElicitation(
                crate::McpServerElicitationRequestResponse::decline(),
            ),
        }
    }

    /// Sets when an approval was asked, where it is not set yet (a new
    /// request, or one stored before the field existed). A client-run
    /// tool call carries no time.
    pub fn stamp_started_at(&mut self, at_ms: i64) {
        let started = match self {
            ServerRequest::CommandExecutionRequestApproval(p) => &mut p.started_at_ms,
            ServerRequest::FileChangeRequestApproval(p) => &mut p.started_at_ms,
            ServerRequest::DynamicToolCall(_) | ServerRequest::McpServerElicitation(_) => return,
        };
        if *started == 0 {
            *started = at_ms;
        }
    }
}

/// A client's answer to a server request, by the request's kind.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(untagged)]
pub enum ServerRequestAnswer {
    CommandExecution(CommandExecutionRequestApprovalResponse),
    FileChange(FileChangeRequestApprovalResponse),
    DynamicToolCall(DynamicToolCallResponse),
    McpServerElicitation(crate::McpServerElicitationRequestResponse),
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn decisions_use_codex_wire_spellings() {
        let cases = [
            (CommandExecutionApprovalDecision::Accept, json!("accept")),
            (
                CommandExecutionApprovalDecision::AcceptForSession,
                json!("acceptForSession"),
            ),
            (
                CommandExecutionApprovalDecision::AcceptWithExecpolicyAmendment {
                    execpolicy_amendment: ExecPolicyAmendment(vec!["cargo".into(), "test".into()]),
                },
                json!({"acceptWithExecpolicyAmendment": {"execpolicy_amendment": ["cargo", "test"]}}),
            ),
            (
                CommandExecutionApprovalDecision::ApplyNetworkPolicyAmendment {
                    network_policy_amendment: NetworkPolicyAmendment {
                        host: "pypi.org".into(),
                        action: NetworkPolicyRuleAction::Deny,
                    },
                },
                json!({"applyNetworkPolicyAmendment": {"network_policy_amendment": {"host": "pypi.org", "action": "deny"}}}),
            ),
            (CommandExecutionApprovalDecision::Decline, json!("decline")),
            (CommandExecutionApprovalDecision::Cancel, json!("cancel")),
        ];
        for (decision, wire) in cases {
            assert_eq!(serde_json::to_value(&decision).unwrap(), wire);
            let back: CommandExecutionApprovalDecision = serde_json::from_value(wire).unwrap();
            assert_eq!(back, decision);
        }
    }

    #[test]
    fn policy_and_sandbox_use_kebab_case() {
        let spelled: Vec<Value> = AskForApproval::ALL
            .iter()
            .map(|p| serde_json::to_value(p).unwrap())
            .collect();
        assert_eq!(
            spelled,
            [
                json!("untrusted"),
                json!("on-failure"),
                json!("on-request"),
                json!("never")
            ]
        );
        for policy in AskForApproval::ALL {
            assert_eq!(
                serde_json::to_value(policy).unwrap(),
                json!(policy.as_str())
            );
        }
        for mode in SandboxMode::ALL {
            assert_eq!(serde_json::to_value(mode).unwrap(), json!(mode.as_str()));
        }
    }

    #[test]
    fn server_requests_are_tagged_by_method() {
        let request = ServerRequest::FileChangeRequestApproval(FileChangeRequestApprovalParams {
            thread_id: "t".into(),
            turn_id: "u".into(),
            item_id: "i".into(),
            started_at_ms: 7,
            reason: None,
            grant_root: None,
        });
        let wire = serde_json::to_value(&request).unwrap();
        assert_eq!(
            wire,
            json!({"method": "item/fileChange/requestApproval", "params": {
                "threadId": "t", "turnId": "u", "itemId": "i", "startedAtMs": 7, "reason": null,
                "grantRoot": null}})
        );
        assert_eq!(wire["method"], request.method());
    }
}

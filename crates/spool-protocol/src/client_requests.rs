//! Client → server requests of Codex app-server protocol v2, as spool's
//! server implements them, and reading one from a JSON-RPC request.
//!
//! Shapes follow `codex-rs/app-server-protocol` (`protocol/v1.rs` for
//! `initialize`, `protocol/v2/thread.rs` and `protocol/v2/turn.rs` for the
//! rest, registered in `protocol/common.rs`). Codex's wire conventions are
//! kept: camelCase fields; an unset optional field is written as `null`;
//! `bool` flags are written only when `true`; unknown fields are ignored.
//! spool's additions are opt-in (`initialize` → `capabilities.spool`) and
//! are omitted from the wire when unset.
//!
//! | method | params | result |
//! |---|---|---|
//! | `initialize` | [`InitializeParams`] | [`InitializeResponse`] |
//! | `thread/start` | [`ThreadStartParams`] | [`ThreadStartResponse`] |
//! | `thread/resume` | [`ThreadResumeParams`] | [`ThreadResumeResponse`] |
//! | `thread/fork` | [`ThreadForkParams`] | [`ThreadForkResponse`] |
//! | `thread/list` | [`ThreadListParams`] | [`ThreadListResponse`] |
//! | `thread/read` | [`ThreadReadParams`] | [`ThreadReadResponse`] |
//! | `thread/turns/list` | [`ThreadTurnsListParams`] | [`ThreadTurnsListResponse`] |
//! | `thread/items/list` | [`ThreadItemsListParams`] | [`ThreadItemsListResponse`] |
//! | `thread/archive` | [`ThreadArchiveParams`] | [`ThreadArchiveResponse`] |
//! | `thread/unarchive` | [`ThreadUnarchiveParams`] | [`ThreadUnarchiveResponse`] |
//! | `thread/name/set` | [`ThreadSetNameParams`] | [`ThreadSetNameResponse`] |
//! | `thread/revert` | [`ThreadRevertParams`] | [`ThreadRevertResponse`] |
//! | `thread/rollback` | [`ThreadRollbackParams`] | [`ThreadRollbackResponse`] |
//! | `turn/start` | [`TurnStartParams`] | [`TurnStartResponse`] |
//! | `turn/steer` | [`TurnSteerParams`] | [`TurnSteerResponse`] |
//! | `turn/interrupt` | [`TurnInterruptParams`] | [`TurnInterruptResponse`] |
//! | `review/start` | [`ReviewStartParams`] | [`ReviewStartResponse`] |
//! | `thread/compact/start` | [`ThreadCompactStartParams`] | [`ThreadCompactStartResponse`] |
//! | `configRequirements/read` | [`ConfigRequirementsReadParams`] | [`ConfigRequirementsReadResponse`] |
//! | `account/read` | [`GetAccountParams`] | [`GetAccountResponse`] |
//! | `config/read` | [`ConfigReadParams`] | [`ConfigReadResponse`] |
//! | `model/list` | [`ModelListParams`] | [`ModelListResponse`] |
//! | `skills/list`, `hooks/list` | [`CwdsParams`] | [`SkillsListResponse`], [`HooksListResponse`] |
//! | `plugin/list` | [`PluginListParams`] | [`PluginListResponse`] |
//! | `mcpServerStatus/list` | [`ListMcpServerStatusParams`] | [`ListMcpServerStatusResponse`] |
//! | `mcpServer/tool/call` | [`McpServerToolCallParams`] | [`McpServerToolCallResponse`] |
//! | `config/mcpServer/reload` | [`McpServerReloadParams`] | [`McpServerRefreshResponse`] |
//! | `collaborationMode/list` | [`CollaborationModeListParams`] | [`CollaborationModeListResponse`] |
//! | `thread/loaded/list` | [`ThreadLoadedListParams`] | [`ThreadLoadedListResponse`] |
//! | `thread/unsubscribe` | [`ThreadUnsubscribeParams`] | [`ThreadUnsubscribeResponse`] |
//! | `thread/delete` | [`ThreadDeleteParams`] | [`ThreadDeleteResponse`] |

mod initialize;
mod mcp;
mod requirements;
mod review;
mod serde_helpers;
mod settings;
mod surface;
mod thread_history;
mod thread_lifecycle;
mod turn;

pub use initialize::*;
pub use mcp::*;
pub use requirements::*;
pub use review::*;
pub use settings::{
    ApprovalsReviewer, DynamicToolFunctionSpec, DynamicToolNamespaceSpec, DynamicToolNamespaceTool,
    DynamicToolSpec, NetworkAccess, SandboxPolicy, ThreadStartSource,
};
pub use surface::*;
pub use thread_history::*;
pub use thread_lifecycle::*;
pub use turn::*;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::jsonrpc::{JsonRpcError, JsonRpcRequest, RequestId, Version2, error_codes};

/// Declares [`ClientRequest`] and the code that maps method names to it,
/// so every method name is written once.
macro_rules! client_requests {
    ($( $(#[$doc:meta])* $variant:ident => $wire:literal ($params:ty), )*) => {
        /// Every client → server request spool serves, tagged by its
        /// JSON-RPC method: `{"method": "thread/start", "params": {...}}`.
        /// The request id stays with the [`JsonRpcRequest`].
        #[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
        #[serde(tag = "method", content = "params")]
        pub enum ClientRequest {
            $( $(#[$doc])* #[serde(rename = $wire)] $variant($params), )*
        }

        impl ClientRequest {
            /// Every method name, in declaration order.
            pub const METHODS: &'static [&'static str] = &[$($wire),*];

            /// The JSON-RPC method of this request.
            pub fn method(&self) -> &'static str {
                match self {
                    $( ClientRequest::$variant(_) => $wire, )*
                }
            }

            /// Reads `params` as the params of `method`.
            pub fn from_method_params(
                method: &str,
                params: Value,
            ) -> Result<ClientRequest, ClientRequestError> {
                match method {
                    $( $wire => serde_json::from_value::<$params>(params)
                        .map(ClientRequest::$variant)
                        .map_err(|e| ClientRequestError::InvalidParams {
                            method: $wire,
                            message: e.to_string(),
                        }), )*
                    other => Err(ClientRequestError::UnknownMethod {
                        method: other.to_owned(),
                    }),
                }
            }
        }
    };
}

client_requests! {
    /// The handshake; must come first on a connection, and only once.
    Initialize => "initialize" (InitializeParams),
    ThreadStart => "thread/start" (Box<ThreadStartParams>),
    /// Load a stored thread (or rejoin a running one); spool's `afterSeq`
    /// replays what a client missed.
    ThreadResume => "thread/resume" (Box<ThreadResumeParams>),
    ThreadFork => "thread/fork" (Box<ThreadForkParams>),
    ThreadList => "thread/list" (Box<ThreadListParams>),
    ThreadRead => "thread/read" (ThreadReadParams),
    ThreadTurnsList => "thread/turns/list" (ThreadTurnsListParams),
    ThreadItemsList => "thread/items/list" (ThreadItemsListParams),
    ThreadArchive => "thread/archive" (ThreadArchiveParams),
    ThreadUnarchive => "thread/unarchive" (ThreadUnarchiveParams),
    ThreadSetName => "thread/name/set" (ThreadSetNameParams),
    ThreadRevert => "thread/revert" (ThreadRevertParams),
    /// Deprecated in Codex for `thread/revert`; spool still serves it.
    ThreadRollback => "thread/rollback" (ThreadRollbackParams),
    TurnStart => "turn/start" (Box<TurnStartParams>),
    TurnSteer => "turn/steer" (TurnSteerParams),
    TurnInterrupt => "turn/interrupt" (TurnInterruptParams),
    /// A code review run as a turn (inline) or on a new thread (detached).
    ReviewStart => "review/start" (ReviewStartParams),
    /// Compact the thread's history now, as a turn of its own.
    ThreadCompactStart => "thread/compact/start" (ThreadCompactStartParams),
    /// The ceilings the operator set on what clients may ask for.
    ConfigRequirementsRead => "configRequirements/read" (ConfigRequirementsReadParams),
    /// spool needs no login: `requiresOpenaiAuth` is false.
    AccountRead => "account/read" (GetAccountParams),
    /// The settings new threads get and where each came from.
    ConfigRead => "config/read" (ConfigReadParams),
    /// The provider's models (its `/models`), else the configured one.
    ModelList => "model/list" (ModelListParams),
    SkillsList => "skills/list" (CwdsParams),
    HooksList => "hooks/list" (CwdsParams),
    PluginList => "plugin/list" (PluginListParams),
    /// Experimental in Codex (not in its published schema).
    CollaborationModeList => "collaborationMode/list" (CollaborationModeListParams),
    /// The threads running or watched in this server.
    ThreadLoadedList => "thread/loaded/list" (ThreadLoadedListParams),
    /// Stop watching a thread on this connection.
    ThreadUnsubscribe => "thread/unsubscribe" (ThreadUnsubscribeParams),
    /// Delete a thread and everything of it.
    ThreadDelete => "thread/delete" (ThreadDeleteParams),
    /// The configured MCP servers: state and tools.
    McpServerStatusList => "mcpServerStatus/list" (ListMcpServerStatusParams),
    /// A client calls an MCP tool itself: a turn of its own on the thread.
    McpServerToolCall => "mcpServer/tool/call" (McpServerToolCallParams),
    /// Read `[mcp_servers]` again: changed servers restart on next use.
    McpServerReload => "config/mcpServer/reload" (McpServerReloadParams),
}

impl ClientRequest {
    /// Reads a JSON-RPC request. Absent or `null` params are read as `{}`
    /// (so `thread/list` needs none; `thread/read` then fails on its missing
    /// `threadId`).
    pub fn from_jsonrpc(request: &JsonRpcRequest) -> Result<ClientRequest, ClientRequestError> {
        let params = match &request.params {
            None | Some(Value::Null) => Value::Object(serde_json::Map::new()),
            Some(params) => params.clone(),
        };
        ClientRequest::from_method_params(&request.method, params)
    }

    /// The JSON-RPC request that carries this one under `id`.
    pub fn to_jsonrpc(&self, id: RequestId) -> JsonRpcRequest {
        let params = match serde_json::to_value(self) {
            Ok(Value::Object(mut tagged)) => tagged.remove("params"),
            _ => None,
        };
        JsonRpcRequest {
            jsonrpc: Version2,
            id,
            method: self.method().to_owned(),
            params,
        }
    }

    /// The thread a request acts on, if it names one. Requests on one
    /// thread are served in order; `None` means no thread (`initialize`,
    /// `thread/start`, `thread/list`, the server-wide reads).
    pub fn thread_id(&self) -> Option<&str> {
        match self {
            ClientRequest::Initialize(_)
            | ClientRequest::ThreadStart(_)
            | ClientRequest::ThreadList(_)
            | ClientRequest::ConfigRequirementsRead(_)
            | ClientRequest::AccountRead(_)
            | ClientRequest::ConfigRead(_)
            | ClientRequest::ModelList(_)
            | ClientRequest::SkillsList(_)
            | ClientRequest::HooksList(_)
            | ClientRequest::PluginList(_)
            | ClientRequest::CollaborationModeList(_)
            | ClientRequest::ThreadLoadedList(_)
            | ClientRequest::McpServerStatusList(_)
            | ClientRequest::McpServerReload(_) => None,
            ClientRequest::ThreadUnsubscribe(p) => Some(&p.thread_id),
            ClientRequest::ThreadDelete(p) => Some(&p.thread_id),
            ClientRequest::ThreadResume(p) => Some(&p.thread_id),
            ClientRequest::ThreadFork(p) => Some(&p.thread_id),
            ClientRequest::ThreadRead(p) => Some(&p.thread_id),
            ClientRequest::ThreadTurnsList(p) => Some(&p.thread_id),
            ClientRequest::ThreadItemsList(p) => Some(&p.thread_id),
            ClientRequest::ThreadArchive(p) => Some(&p.thread_id),
            ClientRequest::ThreadUnarchive(p) => Some(&p.thread_id),
            ClientRequest::ThreadSetName(p) => Some(&p.thread_id),
            ClientRequest::ThreadRevert(p) => Some(&p.thread_id),
            ClientRequest::ThreadRollback(p) => Some(&p.thread_id),
            ClientRequest::TurnStart(p) => Some(&p.thread_id),
            ClientRequest::TurnSteer(p) => Some(&p.thread_id),
            ClientRequest::TurnInterrupt(p) => Some(&p.thread_id),
            ClientRequest::ReviewStart(p) => Some(&p.thread_id),
            ClientRequest::ThreadCompactStart(p) => Some(&p.thread_id),
            ClientRequest::McpServerToolCall(p) => Some(&p.thread_id),
        }
    }
}

/// Why a JSON-RPC request is not a [`ClientRequest`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ClientRequestError {
    /// No such method (-32601).
    UnknownMethod { method: String },
    /// A known method whose params do not fit (-32602); `message` is
    /// serde's.
    InvalidParams {
        method: &'static str,
        message: String,
    },
}

impl ClientRequestError {
    pub fn code(&self) -> i64 {
        match self {
            ClientRequestError::UnknownMethod { .. } => error_codes::METHOD_NOT_FOUND,
            ClientRequestError::InvalidParams { .. } => error_codes::INVALID_PARAMS,
        }
    }

    /// The error reply to the request with this id.
    pub fn to_jsonrpc_error(&self, id: RequestId) -> JsonRpcError {
        JsonRpcError::new(Some(id), self.code(), self.to_string())
    }
}

impl std::fmt::Display for ClientRequestError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ClientRequestError::UnknownMethod { method } => {
                write!(f, "method not found: {method} (spool does not serve it)")
            }
            ClientRequestError::InvalidParams { method, message } => {
                write!(f, "invalid params for {method}: {message}")
            }
        }
    }
}

impl std::error::Error for ClientRequestError {}

//! JSON Schema of every wire type, generated from the Rust types.
//!
//! `schema/` at the workspace root holds the committed output; the drift
//! test in `tests/schema_drift.rs` fails when the two disagree. Regenerate
//! with `SPOOL_UPDATE_SCHEMA=1 cargo nextest run -p spool-protocol schema`.

use schemars::{JsonSchema, generate::SchemaSettings};
use serde_json::Value;

use crate::approvals::{AskForApproval, SandboxMode, ServerRequest, ServerRequestAnswer};
use crate::envelope::ItemEnvelope;
use crate::event::ThreadEvent;
use crate::items::ThreadItem;
use crate::jsonrpc::{
    JsonRpcError, JsonRpcMessage, JsonRpcNotification, JsonRpcRequest, JsonRpcResponse,
};
use crate::notifications::*;
use crate::thread::{Thread, ThreadStatus, Turn};
use crate::user_input::UserInput;

// Invariant: a generated schema is plain JSON.
#[allow(clippy::expect_used)]
pub(crate) fn schema_of<T: JsonSchema>() -> Value {
    let generator = SchemaSettings::draft2020_12().into_generator();
    let schema = generator.into_root_schema_for::<T>();
    serde_json::to_value(schema).expect("schemas serialize")
}

/// `(file stem, schema)` for every wire type, in a stable order.
pub fn all_schemas() -> Vec<(&'static str, Value)> {
    let mut out = vec![
        ("ThreadItem", schema_of::<ThreadItem>()),
        ("ItemEnvelope", schema_of::<ItemEnvelope>()),
        ("UserInput", schema_of::<UserInput>()),
        ("Thread", schema_of::<Thread>()),
        ("ThreadStatus", schema_of::<ThreadStatus>()),
        ("Turn", schema_of::<Turn>()),
        ("ThreadEvent", schema_of::<ThreadEvent>()),
        ("ServerNotification", schema_of::<ServerNotification>()),
        ("ServerRequest", schema_of::<ServerRequest>()),
        ("ServerRequestAnswer", schema_of::<ServerRequestAnswer>()),
        ("AskForApproval", schema_of::<AskForApproval>()),
        ("SandboxMode", schema_of::<SandboxMode>()),
        (
            "ThreadStartedNotification",
            schema_of::<ThreadStartedNotification>(),
        ),
        (
            "ThreadStatusChangedNotification",
            schema_of::<ThreadStatusChangedNotification>(),
        ),
        (
            "ThreadNameUpdatedNotification",
            schema_of::<ThreadNameUpdatedNotification>(),
        ),
        (
            "ThreadArchivedNotification",
            schema_of::<ThreadArchivedNotification>(),
        ),
        (
            "TurnStartedNotification",
            schema_of::<TurnStartedNotification>(),
        ),
        (
            "TurnCompletedNotification",
            schema_of::<TurnCompletedNotification>(),
        ),
        (
            "ItemStartedNotification",
            schema_of::<ItemStartedNotification>(),
        ),
        (
            "ItemCompletedNotification",
            schema_of::<ItemCompletedNotification>(),
        ),
        (
            "AgentMessageDeltaNotification",
            schema_of::<AgentMessageDeltaNotification>(),
        ),
        (
            "ReasoningSummaryTextDeltaNotification",
            schema_of::<ReasoningSummaryTextDeltaNotification>(),
        ),
        (
            "ReasoningSummaryPartAddedNotification",
            schema_of::<ReasoningSummaryPartAddedNotification>(),
        ),
        (
            "ReasoningTextDeltaNotification",
            schema_of::<ReasoningTextDeltaNotification>(),
        ),
        (
            "McpToolCallProgressNotification",
            schema_of::<McpToolCallProgressNotification>(),
        ),
        (
            "ThreadTokenUsageUpdatedNotification",
            schema_of::<ThreadTokenUsageUpdatedNotification>(),
        ),
        ("ErrorNotification", schema_of::<ErrorNotification>()),
        (
            "ItemRemovedNotification",
            schema_of::<ItemRemovedNotification>(),
        ),
        (
            "ThreadClearedNotification",
            schema_of::<ThreadClearedNotification>(),
        ),
        (
            "ThreadEventsLostNotification",
            schema_of::<ThreadEventsLostNotification>(),
        ),
        (
            "ServerRequestResolvedNotification",
            schema_of::<ServerRequestResolvedNotification>(),
        ),
        (
            "ContextCompactedNotification",
            schema_of::<ContextCompactedNotification>(),
        ),
        ("JsonRpcMessage", schema_of::<JsonRpcMessage>()),
        ("JsonRpcRequest", schema_of::<JsonRpcRequest>()),
        ("JsonRpcNotification", schema_of::<JsonRpcNotification>()),
        ("JsonRpcResponse", schema_of::<JsonRpcResponse>()),
        ("JsonRpcError", schema_of::<JsonRpcError>()),
    ];
    out.extend(client_request_schemas());
    out.extend(crate::responses::schemas());
    out
}

/// The client → server requests: the tagged union, then each method's
/// params and result.
fn client_request_schemas() -> Vec<(&'static str, Value)> {
    use crate::client_requests::*;
    vec![
        ("ClientRequest", schema_of::<ClientRequest>()),
        ("InitializeParams", schema_of::<InitializeParams>()),
        ("InitializeResponse", schema_of::<InitializeResponse>()),
        ("ThreadStartParams", schema_of::<ThreadStartParams>()),
        ("ThreadStartResponse", schema_of::<ThreadStartResponse>()),
        ("ThreadResumeParams", schema_of::<ThreadResumeParams>()),
        ("ThreadResumeResponse", schema_of::<ThreadResumeResponse>()),
        ("ThreadForkParams", schema_of::<ThreadForkParams>()),
        ("ThreadForkResponse", schema_of::<ThreadForkResponse>()),
        ("ThreadListParams", schema_of::<ThreadListParams>()),
        ("ThreadListResponse", schema_of::<ThreadListResponse>()),
        ("ThreadReadParams", schema_of::<ThreadReadParams>()),
        ("ThreadReadResponse", schema_of::<ThreadReadResponse>()),
        (
            "ThreadTurnsListParams",
            schema_of::<ThreadTurnsListParams>(),
        ),
        (
            "ThreadTurnsListResponse",
            schema_of::<ThreadTurnsListResponse>(),
        ),
        (
            "ThreadItemsListParams",
            schema_of::<ThreadItemsListParams>(),
        ),
        (
            "ThreadItemsListResponse",
            schema_of::<ThreadItemsListResponse>(),
        ),
        ("ThreadArchiveParams", schema_of::<ThreadArchiveParams>()),
        (
            "ThreadArchiveResponse",
            schema_of::<ThreadArchiveResponse>(),
        ),
        (
            "ThreadUnarchiveParams",
            schema_of::<ThreadUnarchiveParams>(),
        ),
        (
            "ThreadUnarchiveResponse",
            schema_of::<ThreadUnarchiveResponse>(),
        ),
        ("ThreadSetNameParams", schema_of::<ThreadSetNameParams>()),
        (
            "ThreadSetNameResponse",
            schema_of::<ThreadSetNameResponse>(),
        ),
        ("ThreadRevertParams", schema_of::<ThreadRevertParams>()),
        ("ThreadRevertResponse", schema_of::<ThreadRevertResponse>()),
        ("ThreadRollbackParams", schema_of::<ThreadRollbackParams>()),
        (
            "ThreadRollbackResponse",
            schema_of::<ThreadRollbackResponse>(),
        ),
        ("TurnStartParams", schema_of::<TurnStartParams>()),
        ("TurnStartResponse", schema_of::<TurnStartResponse>()),
        ("TurnSteerParams", schema_of::<TurnSteerParams>()),
        ("TurnSteerResponse", schema_of::<TurnSteerResponse>()),
        ("TurnInterruptParams", schema_of::<TurnInterruptParams>()),
        (
            "TurnInterruptResponse",
            schema_of::<TurnInterruptResponse>(),
        ),
        ("ReviewStartParams", schema_of::<ReviewStartParams>()),
        ("ReviewStartResponse", schema_of::<ReviewStartResponse>()),
        (
            "ThreadCompactStartParams",
            schema_of::<ThreadCompactStartParams>(),
        ),
        (
            "ThreadCompactStartResponse",
            schema_of::<ThreadCompactStartResponse>(),
        ),
        (
            "ConfigRequirementsReadParams",
            schema_of::<ConfigRequirementsReadParams>(),
        ),
        (
            "ConfigRequirementsReadResponse",
            schema_of::<ConfigRequirementsReadResponse>(),
        ),
    ]
}

/// The text written to `schema/<stem>.json`.
// Invariant: a `Value` always serializes.
#[allow(clippy::expect_used)]
pub fn render(schema: &Value) -> String {
    let mut s = serde_json::to_string_pretty(schema).expect("schemas serialize");
    s.push('\n');
    s
}

//! `turn/start`, `turn/steer`, `turn/interrupt`.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::serde_helpers::double_option;
use super::settings::{ApprovalsReviewer, SandboxPolicy};
use crate::approvals::AskForApproval;
use crate::thread::Turn;
use crate::user_input::UserInput;

/// `turn/start` params: user input for a thread, and overrides that apply
/// to this turn *and every later one* (Codex's semantics; only
/// `serviceTierForTurn` is for this turn alone).
///
/// As in Codex, optional fields are written as `null` when unset. Codex's
/// experimental fields (`environments`, `permissions`, `collaborationMode`,
/// `additionalContext`, `responsesapiClientMetadata`, ...) and `toolOutput`
/// are ignored when read.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TurnStartParams {
    pub thread_id: String,
    /// Client-chosen id of the user message, echoed on its item.
    #[serde(default)]
    pub client_user_message_id: Option<String>,
    pub input: Vec<UserInput>,
    /// Free-form label of what started the turn (analytics).
    #[serde(default)]
    pub turn_trigger: Option<String>,
    #[serde(default)]
    pub cwd: Option<String>,
    #[serde(default)]
    pub approval_policy: Option<AskForApproval>,
    #[serde(default)]
    pub approvals_reviewer: Option<ApprovalsReviewer>,
    /// The full policy; `thread/start` takes only a mode (`sandbox`).
    #[serde(default)]
    pub sandbox_policy: Option<SandboxPolicy>,
    #[serde(default)]
    pub model: Option<String>,
    /// Omitted: unchanged; `null`: no tier from now on; a string: that tier.
    #[serde(
        default,
        with = "double_option",
        skip_serializing_if = "Option::is_none"
    )]
    #[schemars(with = "Option<String>")]
    pub service_tier: Option<Option<String>>,
    /// A tier for this turn only (`"default"` for standard speed).
    #[serde(default)]
    pub service_tier_for_turn: Option<String>,
    /// Reasoning effort (`none` ... `xhigh`); passed through.
    #[serde(default)]
    pub effort: Option<String>,
    /// Reasoning summary (`auto`, `concise`, `detailed`, `none`); passed
    /// through.
    #[serde(default)]
    pub summary: Option<String>,
    #[serde(default)]
    pub personality: Option<String>,
    /// JSON Schema the final assistant message of this turn must follow.
    #[serde(default)]
    pub output_schema: Option<Value>,
}

impl TurnStartParams {
    /// A turn with this input and no overrides.
    pub fn new(thread_id: impl Into<String>, input: Vec<UserInput>) -> Self {
        TurnStartParams {
            thread_id: thread_id.into(),
            input,
            ..TurnStartParams::default()
        }
    }
}

/// `turn/start` result: the turn, `inProgress`, with no items.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TurnStartResponse {
    pub turn: Turn,
}

/// `turn/steer` params: more input for the running turn, taken at its next
/// model call.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TurnSteerParams {
    pub thread_id: String,
    #[serde(default)]
    pub client_user_message_id: Option<String>,
    pub input: Vec<UserInput>,
    /// Required: the request fails unless this is the running turn.
    pub expected_turn_id: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TurnSteerResponse {
    pub turn_id: String,
}

/// `turn/interrupt` params. The turn ends with `turn/completed`, status
/// `interrupted`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TurnInterruptParams {
    pub thread_id: String,
    pub turn_id: String,
}

/// `turn/interrupt` result: `{}`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct TurnInterruptResponse {}

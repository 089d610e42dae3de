//! `thread/start`, `thread/resume`, `thread/fork`: the requests that make a
//! thread live on a connection, and their common response shape.
//!
//! Codex's convention, kept here: an optional field is written as `null`
//! when unset and may be omitted or `null` when read; a `bool` flag is
//! written only when `true`; a three-way field (`serviceTier`) is omitted
//! when untouched and `null` when cleared. Codex's experimental fields
//! that spool does not model are ignored when read.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::serde_helpers::{double_option, is_false};
use super::settings::{
    ApprovalsReviewer, DynamicToolSpec, SandboxPolicy, ThreadStartSource, deserialize_dynamic_tools,
};
use crate::approvals::{AskForApproval, SandboxMode};
use crate::thread::{HistoryMode, Thread, ThreadHistoryMode};

/// `thread/start` params. Every field is optional: `{}` starts a thread
/// with the server's defaults.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ThreadStartParams {
    #[serde(default)]
    pub model: Option<String>,
    #[serde(default)]
    pub model_provider: Option<String>,
    /// Omitted: the configured tier; `null`: no tier; a string: that tier.
    #[serde(
        default,
        with = "double_option",
        skip_serializing_if = "Option::is_none"
    )]
    #[schemars(with = "Option<String>")]
    pub service_tier: Option<Option<String>>,
    #[serde(default)]
    pub cwd: Option<String>,
    #[serde(default)]
    pub approval_policy: Option<AskForApproval>,
    #[serde(default)]
    pub approvals_reviewer: Option<ApprovalsReviewer>,
    /// The coarse mode; `turn/start` takes the full [`SandboxPolicy`].
    #[serde(default)]
    pub sandbox: Option<SandboxMode>,
    /// `config.toml`-style overrides, keyed by dotted path.
    #[serde(default)]
    pub config: Option<Map<String, Value>>,
    #[serde(default)]
    pub service_name: Option<String>,
    /// Replaces the built-in system instructions.
    #[serde(default)]
    pub base_instructions: Option<String>,
    #[serde(default)]
    pub developer_instructions: Option<String>,
    /// `none`, `friendly` or `pragmatic`; passed through.
    #[serde(default)]
    pub personality: Option<String>,
    /// A thread that is never written to disk. Codex types this one as
    /// `Option<bool>` (written `null`), unlike `thread/fork`'s plain flag.
    #[serde(default)]
    pub ephemeral: Option<bool>,
    /// Codex's experimental paging (`legacy`, `paginated`), or spool's
    /// owner of the model's history (`replay`, `previousResponseId`,
    /// `conversationId`): the two share the name, and every value is one
    /// or the other.
    #[serde(default)]
    pub history_mode: Option<ThreadStartHistoryMode>,
    /// spool: the OpenAI conversation a `conversationId` thread continues;
    /// without it, one is created before the thread's first request.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub conversation_id: Option<String>,
    #[serde(default)]
    pub session_start_source: Option<ThreadStartSource>,
    /// Client-chosen analytics label, reported back on `Thread`.
    #[serde(default)]
    pub thread_source: Option<String>,
    /// Experimental in Codex: tools the client runs (`item/tool/call`).
    /// Both Codex spellings are read (see [`DynamicToolSpec`]).
    #[serde(default, deserialize_with = "deserialize_dynamic_tools")]
    #[schemars(with = "Option<Vec<DynamicToolSpec>>")]
    pub dynamic_tools: Option<Vec<DynamicToolSpec>>,
}

/// `thread/start`'s `historyMode`: see [`ThreadStartParams::history_mode`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(untagged)]
pub enum ThreadStartHistoryMode {
    Paging(ThreadHistoryMode),
    Owner(HistoryMode),
}

impl ThreadStartHistoryMode {
    /// The history owner it names, if it names one.
    pub fn owner(self) -> Option<HistoryMode> {
        match self {
            ThreadStartHistoryMode::Owner(mode) => Some(mode),
            ThreadStartHistoryMode::Paging(_) => None,
        }
    }
}

/// The result of `thread/start` and `thread/fork`: the thread and the
/// settings it runs with. Codex's experimental `runtimeWorkspaceRoots`,
/// `activePermissionProfile` and `multiAgentMode` are not sent.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ThreadStartResponse {
    pub thread: Thread,
    pub model: String,
    pub model_provider: String,
    pub service_tier: Option<String>,
    pub cwd: String,
    /// Instruction files (AGENTS.md and the like) loaded for the thread.
    #[serde(default)]
    pub instruction_sources: Vec<String>,
    pub approval_policy: AskForApproval,
    pub approvals_reviewer: ApprovalsReviewer,
    /// The full policy, although the request took a [`SandboxMode`].
    pub sandbox: SandboxPolicy,
    pub reasoning_effort: Option<String>,
}

/// `thread/fork` result: the new thread, in the shape of
/// [`ThreadStartResponse`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ThreadForkResponse {
    pub thread: Thread,
    pub model: String,
    pub model_provider: String,
    pub service_tier: Option<String>,
    pub cwd: String,
    #[serde(default)]
    pub instruction_sources: Vec<String>,
    pub approval_policy: AskForApproval,
    pub approvals_reviewer: ApprovalsReviewer,
    pub sandbox: SandboxPolicy,
    pub reasoning_effort: Option<String>,
}

/// `thread/resume` params: the thread to load (or rejoin, if it is running
/// already) and overrides for its next turns. Codex's experimental
/// `history`, `path` and `initialTurnsPage` are not read.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ThreadResumeParams {
    pub thread_id: String,
    #[serde(default)]
    pub model: Option<String>,
    #[serde(default)]
    pub model_provider: Option<String>,
    #[serde(
        default,
        with = "double_option",
        skip_serializing_if = "Option::is_none"
    )]
    #[schemars(with = "Option<String>")]
    pub service_tier: Option<Option<String>>,
    #[serde(default)]
    pub cwd: Option<String>,
    #[serde(default)]
    pub approval_policy: Option<AskForApproval>,
    #[serde(default)]
    pub approvals_reviewer: Option<ApprovalsReviewer>,
    #[serde(default)]
    pub sandbox: Option<SandboxMode>,
    #[serde(default)]
    pub config: Option<Map<String, Value>>,
    #[serde(default)]
    pub base_instructions: Option<String>,
    #[serde(default)]
    pub developer_instructions: Option<String>,
    #[serde(default)]
    pub personality: Option<String>,
    /// Leave `thread.turns` empty in the response (page with
    /// `thread/turns/list` instead).
    #[serde(default, skip_serializing_if = "is_false")]
    pub exclude_turns: bool,
    // --- spool's opt-in additions ---
    /// spool only (capability `seq`): replay every event of the thread
    /// after this `seq`, deltas included, then continue live. Omitted when
    /// unset.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub after_seq: Option<u64>,
}

/// `thread/resume` result: [`ThreadStartResponse`] plus the cursors to
/// page backwards from the end of the thread.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ThreadResumeResponse {
    pub thread: Thread,
    pub model: String,
    pub model_provider: String,
    pub service_tier: Option<String>,
    pub cwd: String,
    #[serde(default)]
    pub instruction_sources: Vec<String>,
    pub approval_policy: AskForApproval,
    pub approvals_reviewer: ApprovalsReviewer,
    pub sandbox: SandboxPolicy,
    pub reasoning_effort: Option<String>,
    /// Pass as `cursor` to `thread/turns/list` with `sortDirection: "desc"`;
    /// the first page includes the turn it names.
    #[serde(default)]
    pub turns_backwards_cursor: Option<String>,
    /// The same for `thread/items/list`.
    #[serde(default)]
    pub items_backwards_cursor: Option<String>,
}

/// `thread/fork` params: a new thread that starts with a copy of another's
/// history (all of it, through `lastTurnId`, or before `beforeTurnId`).
/// Codex's experimental `path` is not read.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ThreadForkParams {
    pub thread_id: String,
    /// Copy turns up to and including this one; it must not be running.
    #[serde(default)]
    pub last_turn_id: Option<String>,
    /// Experimental in Codex: copy the turns before this one. Not with
    /// `lastTurnId`.
    #[serde(default)]
    pub before_turn_id: Option<String>,
    #[serde(default)]
    pub model: Option<String>,
    #[serde(default)]
    pub model_provider: Option<String>,
    #[serde(
        default,
        with = "double_option",
        skip_serializing_if = "Option::is_none"
    )]
    #[schemars(with = "Option<String>")]
    pub service_tier: Option<Option<String>>,
    #[serde(default)]
    pub cwd: Option<String>,
    #[serde(default)]
    pub approval_policy: Option<AskForApproval>,
    #[serde(default)]
    pub approvals_reviewer: Option<ApprovalsReviewer>,
    #[serde(default)]
    pub sandbox: Option<SandboxMode>,
    #[serde(default)]
    pub config: Option<Map<String, Value>>,
    #[serde(default)]
    pub base_instructions: Option<String>,
    #[serde(default)]
    pub developer_instructions: Option<String>,
    /// A plain flag here, written only when `true` (on `thread/start` it is
    /// an `Option<bool>` written as `null`).
    #[serde(default, skip_serializing_if = "is_false")]
    pub ephemeral: bool,
    #[serde(default)]
    pub thread_source: Option<String>,
    #[serde(default, skip_serializing_if = "is_false")]
    pub exclude_turns: bool,
}

impl ThreadStartResponse {
    /// The same session settings as a `thread/fork` reply (same shape).
    pub fn into_fork(self) -> ThreadForkResponse {
        ThreadForkResponse {
            thread: self.thread,
            model: self.model,
            model_provider: self.model_provider,
            service_tier: self.service_tier,
            cwd: self.cwd,
            instruction_sources: self.instruction_sources,
            approval_policy: self.approval_policy,
            approvals_reviewer: self.approvals_reviewer,
            sandbox: self.sandbox,
            reasoning_effort: self.reasoning_effort,
        }
    }

    /// The same session settings as a `thread/resume` reply, with its
    /// history cursors.
    pub fn into_resume(
        self,
        turns_backwards_cursor: Option<String>,
        items_backwards_cursor: Option<String>,
    ) -> ThreadResumeResponse {
        ThreadResumeResponse {
            thread: self.thread,
            model: self.model,
            model_provider: self.model_provider,
            service_tier: self.service_tier,
            cwd: self.cwd,
            instruction_sources: self.instruction_sources,
            approval_policy: self.approval_policy,
            approvals_reviewer: self.approvals_reviewer,
            sandbox: self.sandbox,
            reasoning_effort: self.reasoning_effort,
            turns_backwards_cursor,
            items_backwards_cursor,
        }
    }
}

/// `thread/delete` params.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ThreadDeleteParams {
    pub thread_id: String,
}

/// `thread/delete` result: empty; the thread's watchers get
/// `thread/deleted`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct ThreadDeleteResponse {}

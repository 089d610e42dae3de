//! Server → client notifications (Codex app-server v2 names and shapes).
//!
//! Every notification that belongs to a thread is also a log event: the
//! log stores exactly these payloads, each under a per-thread `seq`.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::envelope::ItemEnvelope;
use crate::items::ThreadItem;
use crate::jsonrpc::RequestId;
use crate::thread::{Thread, ThreadStatus, ThreadTokenUsage, Turn, TurnError};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ThreadStartedNotification {
    /// Boxed: a thread is many times larger than any other notification.
    pub thread: Box<Thread>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ThreadStatusChangedNotification {
    pub thread_id: String,
    pub status: ThreadStatus,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ThreadNameUpdatedNotification {
    pub thread_id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub thread_name: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ThreadArchivedNotification {
    pub thread_id: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TurnStartedNotification {
    pub thread_id: String,
    pub turn: Turn,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TurnCompletedNotification {
    pub thread_id: String,
    pub turn: Turn,
}

/// `item/started`: the full item, status in progress.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ItemStartedNotification {
    pub item: ThreadItem,
    pub thread_id: String,
    pub turn_id: String,
    /// Unix milliseconds.
    #[serde(default)]
    pub started_at_ms: i64,
    /// spool: status, provenance, audience (opt-in on the wire; always in the log).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub envelope: Option<ItemEnvelope>,
}

/// `item/completed`: the final item, authoritative over its deltas.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ItemCompletedNotification {
    pub item: ThreadItem,
    pub thread_id: String,
    pub turn_id: String,
    /// Unix milliseconds.
    #[serde(default)]
    pub completed_at_ms: i64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub envelope: Option<ItemEnvelope>,
}

/// Shape shared by the plain text deltas (agent message, plan, command output).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TextDeltaNotification {
    pub thread_id: String,
    pub turn_id: String,
    pub item_id: String,
    pub delta: String,
}

pub type AgentMessageDeltaNotification = TextDeltaNotification;
pub type PlanDeltaNotification = TextDeltaNotification;
pub type CommandExecutionOutputDeltaNotification = TextDeltaNotification;

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ReasoningSummaryTextDeltaNotification {
    pub thread_id: String,
    pub turn_id: String,
    pub item_id: String,
    pub delta: String,
    pub summary_index: i64,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ReasoningSummaryPartAddedNotification {
    pub thread_id: String,
    pub turn_id: String,
    pub item_id: String,
    pub summary_index: i64,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ReasoningTextDeltaNotification {
    pub thread_id: String,
    pub turn_id: String,
    pub item_id: String,
    pub delta: String,
    pub content_index: i64,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct McpToolCallProgressNotification {
    pub thread_id: String,
    pub turn_id: String,
    pub item_id: String,
    pub message: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ThreadTokenUsageUpdatedNotification {
    pub thread_id: String,
    pub turn_id: String,
    pub token_usage: ThreadTokenUsage,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ErrorNotification {
    pub error: TurnError,
    pub will_retry: bool,
    pub thread_id: String,
    pub turn_id: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ServerRequestResolvedNotification {
    pub thread_id: String,
    pub request_id: RequestId,
}

/// spool: an item was removed from the thread (the Session API's
/// `pop_item`). The log keeps the item's history; views no longer show it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ItemRemovedNotification {
    pub thread_id: String,
    pub turn_id: String,
    pub item_id: String,
}

/// spool: every item of the thread was removed (the Session API's
/// `clear`). The log keeps their history; views start empty after it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ThreadClearedNotification {
    pub thread_id: String,
}

/// Every server notification, tagged by its JSON-RPC method.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "method", content = "params")]
pub enum ServerNotification {
    #[serde(rename = "thread/started")]
    ThreadStarted(ThreadStartedNotification),
    #[serde(rename = "thread/status/changed")]
    ThreadStatusChanged(ThreadStatusChangedNotification),
    #[serde(rename = "thread/name/updated")]
    ThreadNameUpdated(ThreadNameUpdatedNotification),
    #[serde(rename = "thread/archived")]
    ThreadArchived(ThreadArchivedNotification),
    #[serde(rename = "turn/started")]
    TurnStarted(TurnStartedNotification),
    #[serde(rename = "turn/completed")]
    TurnCompleted(TurnCompletedNotification),
    #[serde(rename = "item/started")]
    ItemStarted(ItemStartedNotification),
    #[serde(rename = "item/completed")]
    ItemCompleted(ItemCompletedNotification),
    #[serde(rename = "item/agentMessage/delta")]
    AgentMessageDelta(AgentMessageDeltaNotification),
    #[serde(rename = "item/plan/delta")]
    PlanDelta(PlanDeltaNotification),
    #[serde(rename = "item/reasoning/summaryTextDelta")]
    ReasoningSummaryTextDelta(ReasoningSummaryTextDeltaNotification),
    #[serde(rename = "item/reasoning/summaryPartAdded")]
    ReasoningSummaryPartAdded(ReasoningSummaryPartAddedNotification),
    #[serde(rename = "item/reasoning/textDelta")]
    ReasoningTextDelta(ReasoningTextDeltaNotification),
    #[serde(rename = "item/commandExecution/outputDelta")]
    CommandExecutionOutputDelta(CommandExecutionOutputDeltaNotification),
    #[serde(rename = "item/mcpToolCall/progress")]
    McpToolCallProgress(McpToolCallProgressNotification),
    #[serde(rename = "thread/tokenUsage/updated")]
    ThreadTokenUsageUpdated(ThreadTokenUsageUpdatedNotification),
    #[serde(rename = "error")]
    Error(ErrorNotification),
    #[serde(rename = "serverRequest/resolved")]
    ServerRequestResolved(ServerRequestResolvedNotification),
    /// spool only (opt-in on the wire).
    #[serde(rename = "item/removed")]
    ItemRemoved(ItemRemovedNotification),
    /// spool only (opt-in on the wire).
    #[serde(rename = "thread/cleared")]
    ThreadCleared(ThreadClearedNotification),
}

impl ServerNotification {
    /// The JSON-RPC method name.
    pub fn method(&self) -> &'static str {
        match self {
            ServerNotification::ThreadStarted(_) => "thread/started",
            ServerNotification::ThreadStatusChanged(_) => "thread/status/changed",
            ServerNotification::ThreadNameUpdated(_) => "thread/name/updated",
            ServerNotification::ThreadArchived(_) => "thread/archived",
            ServerNotification::TurnStarted(_) => "turn/started",
            ServerNotification::TurnCompleted(_) => "turn/completed",
            ServerNotification::ItemStarted(_) => "item/started",
            ServerNotification::ItemCompleted(_) => "item/completed",
            ServerNotification::AgentMessageDelta(_) => "item/agentMessage/delta",
            ServerNotification::PlanDelta(_) => "item/plan/delta",
            ServerNotification::ReasoningSummaryTextDelta(_) => "item/reasoning/summaryTextDelta",
            ServerNotification::ReasoningSummaryPartAdded(_) => "item/reasoning/summaryPartAdded",
            ServerNotification::ReasoningTextDelta(_) => "item/reasoning/textDelta",
            ServerNotification::CommandExecutionOutputDelta(_) => {
                "item/commandExecution/outputDelta"
            }
            ServerNotification::McpToolCallProgress(_) => "item/mcpToolCall/progress",
            ServerNotification::ThreadTokenUsageUpdated(_) => "thread/tokenUsage/updated",
            ServerNotification::Error(_) => "error",
            ServerNotification::ServerRequestResolved(_) => "serverRequest/resolved",
            ServerNotification::ItemRemoved(_) => "item/removed",
            ServerNotification::ThreadCleared(_) => "thread/cleared",
        }
    }

    /// The thread this notification belongs to.
    pub fn thread_id(&self) -> &str {
        match self {
            ServerNotification::ThreadStarted(n) => &n.thread.id,
            ServerNotification::ThreadStatusChanged(n) => &n.thread_id,
            ServerNotification::ThreadNameUpdated(n) => &n.thread_id,
            ServerNotification::ThreadArchived(n) => &n.thread_id,
            ServerNotification::TurnStarted(n) => &n.thread_id,
            ServerNotification::TurnCompleted(n) => &n.thread_id,
            ServerNotification::ItemStarted(n) => &n.thread_id,
            ServerNotification::ItemCompleted(n) => &n.thread_id,
            ServerNotification::AgentMessageDelta(n)
            | ServerNotification::PlanDelta(n)
            | ServerNotification::CommandExecutionOutputDelta(n) => &n.thread_id,
            ServerNotification::ReasoningSummaryTextDelta(n) => &n.thread_id,
            ServerNotification::ReasoningSummaryPartAdded(n) => &n.thread_id,
            ServerNotification::ReasoningTextDelta(n) => &n.thread_id,
            ServerNotification::McpToolCallProgress(n) => &n.thread_id,
            ServerNotification::ThreadTokenUsageUpdated(n) => &n.thread_id,
            ServerNotification::Error(n) => &n.thread_id,
            ServerNotification::ServerRequestResolved(n) => &n.thread_id,
            ServerNotification::ItemRemoved(n) => &n.thread_id,
            ServerNotification::ThreadCleared(n) => &n.thread_id,
        }
    }

    /// Deltas are streamed at once and committed in groups; everything else
    /// is a lifecycle event, committed before it is sent (DESIGN §2).
    pub fn is_delta(&self) -> bool {
        match self {
            ServerNotification::AgentMessageDelta(_)
            | ServerNotification::PlanDelta(_)
            | ServerNotification::ReasoningSummaryTextDelta(_)
            | ServerNotification::ReasoningSummaryPartAdded(_)
            | ServerNotification::ReasoningTextDelta(_)
            | ServerNotification::CommandExecutionOutputDelta(_)
            | ServerNotification::McpToolCallProgress(_) => true,
            ServerNotification::ThreadStarted(_)
            | ServerNotification::ThreadStatusChanged(_)
            | ServerNotification::ThreadNameUpdated(_)
            | ServerNotification::ThreadArchived(_)
            | ServerNotification::TurnStarted(_)
            | ServerNotification::TurnCompleted(_)
            | ServerNotification::ItemStarted(_)
            | ServerNotification::ItemCompleted(_)
            | ServerNotification::ThreadTokenUsageUpdated(_)
            | ServerNotification::Error(_)
            | ServerNotification::ServerRequestResolved(_)
            | ServerNotification::ItemRemoved(_)
            | ServerNotification::ThreadCleared(_) => false,
        }
    }

    /// The kind of the item an `item/started` or `item/completed` carries
    /// (deltas name their item by id only).
    pub fn carried_item_kind(&self) -> Option<crate::items::ItemKind> {
        match self {
            ServerNotification::ItemStarted(n) => Some(n.item.kind()),
            ServerNotification::ItemCompleted(n) => Some(n.item.kind()),
            ServerNotification::ThreadStarted(_)
            | ServerNotification::ThreadStatusChanged(_)
            | ServerNotification::ThreadNameUpdated(_)
            | ServerNotification::ThreadArchived(_)
            | ServerNotification::TurnStarted(_)
            | ServerNotification::TurnCompleted(_)
            | ServerNotification::AgentMessageDelta(_)
            | ServerNotification::PlanDelta(_)
            | ServerNotification::ReasoningSummaryTextDelta(_)
            | ServerNotification::ReasoningSummaryPartAdded(_)
            | ServerNotification::ReasoningTextDelta(_)
            | ServerNotification::CommandExecutionOutputDelta(_)
            | ServerNotification::McpToolCallProgress(_)
            | ServerNotification::ThreadTokenUsageUpdated(_)
            | ServerNotification::Error(_)
            | ServerNotification::ServerRequestResolved(_)
            | ServerNotification::ItemRemoved(_)
            | ServerNotification::ThreadCleared(_) => None,
        }
    }

    /// The envelope an `item/started` or `item/completed` carries, if any.
    pub fn envelope(&self) -> Option<&ItemEnvelope> {
        match self {
            ServerNotification::ItemStarted(n) => n.envelope.as_ref(),
            ServerNotification::ItemCompleted(n) => n.envelope.as_ref(),
            ServerNotification::ThreadStarted(_)
            | ServerNotification::ThreadStatusChanged(_)
            | ServerNotification::ThreadNameUpdated(_)
            | ServerNotification::ThreadArchived(_)
            | ServerNotification::TurnStarted(_)
            | ServerNotification::TurnCompleted(_)
            | ServerNotification::AgentMessageDelta(_)
            | ServerNotification::PlanDelta(_)
            | ServerNotification::ReasoningSummaryTextDelta(_)
            | ServerNotification::ReasoningSummaryPartAdded(_)
            | ServerNotification::ReasoningTextDelta(_)
            | ServerNotification::CommandExecutionOutputDelta(_)
            | ServerNotification::McpToolCallProgress(_)
            | ServerNotification::ThreadTokenUsageUpdated(_)
            | ServerNotification::Error(_)
            | ServerNotification::ServerRequestResolved(_)
            | ServerNotification::ItemRemoved(_)
            | ServerNotification::ThreadCleared(_) => None,
        }
    }

    /// [`ServerNotification::envelope`], to adjust before it is logged.
    pub fn envelope_mut(&mut self) -> Option<&mut ItemEnvelope> {
        match self {
            ServerNotification::ItemStarted(n) => n.envelope.as_mut(),
            ServerNotification::ItemCompleted(n) => n.envelope.as_mut(),
            ServerNotification::ThreadStarted(_)
            | ServerNotification::ThreadStatusChanged(_)
            | ServerNotification::ThreadNameUpdated(_)
            | ServerNotification::ThreadArchived(_)
            | ServerNotification::TurnStarted(_)
            | ServerNotification::TurnCompleted(_)
            | ServerNotification::AgentMessageDelta(_)
            | ServerNotification::PlanDelta(_)
            | ServerNotification::ReasoningSummaryTextDelta(_)
            | ServerNotification::ReasoningSummaryPartAdded(_)
            | ServerNotification::ReasoningTextDelta(_)
            | ServerNotification::CommandExecutionOutputDelta(_)
            | ServerNotification::McpToolCallProgress(_)
            | ServerNotification::ThreadTokenUsageUpdated(_)
            | ServerNotification::Error(_)
            | ServerNotification::ServerRequestResolved(_)
            | ServerNotification::ItemRemoved(_)
            | ServerNotification::ThreadCleared(_) => None,
        }
    }

    /// The item a delta, start or completion is about.
    pub fn item_id(&self) -> Option<&str> {
        match self {
            ServerNotification::ItemStarted(n) => Some(n.item.id()),
            ServerNotification::ItemCompleted(n) => Some(n.item.id()),
            ServerNotification::AgentMessageDelta(n)
            | ServerNotification::PlanDelta(n)
            | ServerNotification::CommandExecutionOutputDelta(n) => Some(&n.item_id),
            ServerNotification::ReasoningSummaryTextDelta(n) => Some(&n.item_id),
            ServerNotification::ReasoningSummaryPartAdded(n) => Some(&n.item_id),
            ServerNotification::ReasoningTextDelta(n) => Some(&n.item_id),
            ServerNotification::McpToolCallProgress(n) => Some(&n.item_id),
            ServerNotification::ItemRemoved(n) => Some(&n.item_id),
            ServerNotification::ThreadStarted(_)
            | ServerNotification::ThreadStatusChanged(_)
            | ServerNotification::ThreadNameUpdated(_)
            | ServerNotification::ThreadArchived(_)
            | ServerNotification::TurnStarted(_)
            | ServerNotification::TurnCompleted(_)
            | ServerNotification::ThreadTokenUsageUpdated(_)
            | ServerNotification::Error(_)
            | ServerNotification::ServerRequestResolved(_)
            | ServerNotification::ThreadCleared(_) => None,
        }
    }
}

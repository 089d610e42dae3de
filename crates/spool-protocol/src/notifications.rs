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

/// Deprecated in Codex for the `contextCompaction` item, and still sent:
/// the thread's history was compacted by this turn.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ContextCompactedNotification {
    pub thread_id: String,
    pub turn_id: String,
}

/// The thread is no longer archived.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ThreadUnarchivedNotification {
    pub thread_id: String,
}

/// The thread was deleted: nothing of it is left to read. Sent to its
/// watchers, never logged (its log is gone with it).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ThreadDeletedNotification {
    pub thread_id: String,
}

/// The thread is no longer loaded in this server: its last watcher left
/// and no turn runs. Sent to that watcher, never logged.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ThreadClosedNotification {
    pub thread_id: String,
}

/// Turns were dropped from the thread (`thread/revert`, `thread/rollback`);
/// their items' `item/removed` come first.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ThreadRevertedNotification {
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

/// spool: the seqs `from_seq..=to_seq` name no event of the log. A server
/// that stopped without shutting down (a crash, `kill -9`) may have sent
/// deltas under those seqs before they were committed; they were lost, and
/// no other event will ever carry those seqs. Logged at `to_seq + 1`, right
/// after the range, so a client resuming from any seq it saw gets this
/// first, then the committed state of the items those deltas belonged to
/// (their `item/completed`). See `docs/internals/log.md`, "Cursors across
/// crashes".
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ThreadEventsLostNotification {
    pub thread_id: String,
    pub from_seq: u64,
    pub to_seq: u64,
}

/// What the notification table needs of each notification's params: the
/// thread it belongs to and, for item notifications, the item.
pub trait NotificationParams {
    fn thread_id(&self) -> &str;
    /// The item a delta, start, completion or removal is about.
    fn item_id(&self) -> Option<&str> {
        None
    }
    /// The item an `item/started` or `item/completed` carries.
    fn item(&self) -> Option<&ThreadItem> {
        None
    }
    fn envelope(&self) -> Option<&ItemEnvelope> {
        None
    }
    fn envelope_mut(&mut self) -> Option<&mut ItemEnvelope> {
        None
    }
}

/// Params whose thread is their `thread_id` field.
macro_rules! of_thread {
    ($($params:ty),* $(,)?) => {$(
        impl NotificationParams for $params {
            fn thread_id(&self) -> &str {
                &self.thread_id
            }
        }
    )*};
}

/// Params about one item, named by their `item_id` field.
macro_rules! of_item {
    ($($params:ty),* $(,)?) => {$(
        impl NotificationParams for $params {
            fn thread_id(&self) -> &str {
                &self.thread_id
            }
            fn item_id(&self) -> Option<&str> {
                Some(&self.item_id)
            }
        }
    )*};
}

/// Params that carry a whole item with its envelope.
macro_rules! with_item {
    ($($params:ty),* $(,)?) => {$(
        impl NotificationParams for $params {
            fn thread_id(&self) -> &str {
                &self.thread_id
            }
            fn item_id(&self) -> Option<&str> {
                Some(self.item.id())
            }
            fn item(&self) -> Option<&ThreadItem> {
                Some(&self.item)
            }
            fn envelope(&self) -> Option<&ItemEnvelope> {
                self.envelope.as_ref()
            }
            fn envelope_mut(&mut self) -> Option<&mut ItemEnvelope> {
                self.envelope.as_mut()
            }
        }
    )*};
}

impl NotificationParams for ThreadStartedNotification {
    fn thread_id(&self) -> &str {
        &self.thread.id
    }
}

of_thread!(
    ContextCompactedNotification,
    ThreadStatusChangedNotification,
    ThreadNameUpdatedNotification,
    ThreadArchivedNotification,
    ThreadUnarchivedNotification,
    ThreadRevertedNotification,
    ThreadDeletedNotification,
    ThreadClosedNotification,
    TurnStartedNotification,
    TurnCompletedNotification,
    ThreadTokenUsageUpdatedNotification,
    ErrorNotification,
    ServerRequestResolvedNotification,
    ThreadClearedNotification,
    ThreadEventsLostNotification,
);
of_item!(
    TextDeltaNotification,
    ReasoningSummaryTextDeltaNotification,
    ReasoningSummaryPartAddedNotification,
    ReasoningTextDeltaNotification,
    McpToolCallProgressNotification,
    ItemRemovedNotification,
);
with_item!(ItemStartedNotification, ItemCompletedNotification);

/// How a notification is committed and sent: deltas are streamed at once
/// and committed in groups; lifecycle events are committed before they
/// are sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Flow {
    Lifecycle,
    Delta,
}

/// Whose protocol a notification belongs to: Codex's (every client gets
/// it), or spool's additions (only clients that opted in).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dialect {
    Codex,
    Spool,
}

/// Declares [`ServerNotification`] from one table: each notification's
/// variant, JSON-RPC method, params, [`Flow`] and [`Dialect`], written
/// once; names, ids and kinds are derived from it.
macro_rules! server_notifications {
    ($( $(#[$doc:meta])* $variant:ident => $wire:literal ($params:ty) $flow:ident $dialect:ident, )*) => {
        /// Every server notification, tagged by its JSON-RPC method.
        #[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
        #[serde(tag = "method", content = "params")]
        pub enum ServerNotification {
            $( $(#[$doc])* #[serde(rename = $wire)] $variant($params), )*
        }

        impl ServerNotification {
            /// Every method name, in declaration order.
            pub const METHODS: &'static [&'static str] = &[$($wire),*];

            /// The JSON-RPC method name.
            pub fn method(&self) -> &'static str {
                match self {
                    $( ServerNotification::$variant(_) => $wire, )*
                }
            }

            pub fn flow(&self) -> Flow {
                match self {
                    $( ServerNotification::$variant(_) => Flow::$flow, )*
                }
            }

            pub fn dialect(&self) -> Dialect {
                match self {
                    $( ServerNotification::$variant(_) => Dialect::$dialect, )*
                }
            }

            fn params(&self) -> &dyn NotificationParams {
                match self {
                    $( ServerNotification::$variant(n) => n, )*
                }
            }

            fn params_mut(&mut self) -> &mut dyn NotificationParams {
                match self {
                    $( ServerNotification::$variant(n) => n, )*
                }
            }
        }
    };
}

server_notifications! {
    ThreadStarted => "thread/started" (ThreadStartedNotification) Lifecycle Codex,
    ThreadStatusChanged => "thread/status/changed" (ThreadStatusChangedNotification) Lifecycle Codex,
    ThreadNameUpdated => "thread/name/updated" (ThreadNameUpdatedNotification) Lifecycle Codex,
    ThreadArchived => "thread/archived" (ThreadArchivedNotification) Lifecycle Codex,
    ThreadUnarchived => "thread/unarchived" (ThreadUnarchivedNotification) Lifecycle Codex,
    ThreadReverted => "thread/reverted" (ThreadRevertedNotification) Lifecycle Codex,
    /// Live only: the thread's log is gone.
    ThreadDeleted => "thread/deleted" (ThreadDeletedNotification) Lifecycle Codex,
    /// Live only, to the watcher that left last.
    ThreadClosed => "thread/closed" (ThreadClosedNotification) Lifecycle Codex,
    TurnStarted => "turn/started" (TurnStartedNotification) Lifecycle Codex,
    TurnCompleted => "turn/completed" (TurnCompletedNotification) Lifecycle Codex,
    ItemStarted => "item/started" (ItemStartedNotification) Lifecycle Codex,
    ItemCompleted => "item/completed" (ItemCompletedNotification) Lifecycle Codex,
    AgentMessageDelta => "item/agentMessage/delta" (AgentMessageDeltaNotification) Delta Codex,
    PlanDelta => "item/plan/delta" (PlanDeltaNotification) Delta Codex,
    ReasoningSummaryTextDelta => "item/reasoning/summaryTextDelta"
        (ReasoningSummaryTextDeltaNotification) Delta Codex,
    ReasoningSummaryPartAdded => "item/reasoning/summaryPartAdded"
        (ReasoningSummaryPartAddedNotification) Delta Codex,
    ReasoningTextDelta => "item/reasoning/textDelta" (ReasoningTextDeltaNotification) Delta Codex,
    CommandExecutionOutputDelta => "item/commandExecution/outputDelta"
        (CommandExecutionOutputDeltaNotification) Delta Codex,
    McpToolCallProgress => "item/mcpToolCall/progress" (McpToolCallProgressNotification) Delta Codex,
    ThreadTokenUsageUpdated => "thread/tokenUsage/updated"
        (ThreadTokenUsageUpdatedNotification) Lifecycle Codex,
    Error => "error" (ErrorNotification) Lifecycle Codex,
    ServerRequestResolved => "serverRequest/resolved"
        (ServerRequestResolvedNotification) Lifecycle Codex,
    /// Deprecated in Codex (the `contextCompaction` item says it); sent
    /// after a compaction's item completes, as Codex does.
    ThreadCompacted => "thread/compacted" (ContextCompactedNotification) Lifecycle Codex,
    /// spool only (opt-in on the wire).
    ItemRemoved => "item/removed" (ItemRemovedNotification) Lifecycle Spool,
    /// spool only (opt-in on the wire).
    ThreadCleared => "thread/cleared" (ThreadClearedNotification) Lifecycle Spool,
    /// spool only (opt-in on the wire): seqs a crash voided.
    ThreadEventsLost => "thread/eventsLost" (ThreadEventsLostNotification) Lifecycle Spool,
}

impl ServerNotification {
    /// The thread this notification belongs to.
    pub fn thread_id(&self) -> &str {
        self.params().thread_id()
    }

    /// Deltas are streamed at once and committed in groups; everything else
    /// is a lifecycle event, committed before it is sent.
    pub fn is_delta(&self) -> bool {
        self.flow() == Flow::Delta
    }

    /// The kind of the item an `item/started` or `item/completed` carries
    /// (deltas name their item by id only).
    pub fn carried_item_kind(&self) -> Option<crate::items::ItemKind> {
        self.params().item().map(ThreadItem::kind)
    }

    /// The envelope an `item/started` or `item/completed` carries, if any.
    pub fn envelope(&self) -> Option<&ItemEnvelope> {
        self.params().envelope()
    }

    /// [`ServerNotification::envelope`], to adjust before it is logged.
    pub fn envelope_mut(&mut self) -> Option<&mut ItemEnvelope> {
        self.params_mut().envelope_mut()
    }

    /// The item a delta, start, completion or removal is about.
    pub fn item_id(&self) -> Option<&str> {
        self.params().item_id()
    }
}

//! Reading and reshaping stored threads: `thread/list`, `thread/read`,
//! `thread/turns/list`, `thread/items/list`, `thread/archive`,
//! `thread/unarchive`, `thread/name/set`, `thread/revert` and
//! `thread/rollback`.
//!
//! Pagination follows Codex: a page carries `nextCursor` (continue in the
//! same direction; `null` at the end) and `backwardsCursor` (pass it as
//! `cursor` with the opposite `sortDirection`; `null` on an empty page).

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::serde_helpers::{double_option, is_false};
use crate::envelope::ItemEnvelope;
use crate::items::ThreadItem;
use crate::thread::{Thread, Turn, TurnItemsView};

/// Order of a page.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum SortDirection {
    Asc,
    Desc,
}

impl SortDirection {
    pub fn reversed(self) -> SortDirection {
        match self {
            SortDirection::Asc => SortDirection::Desc,
            SortDirection::Desc => SortDirection::Asc,
        }
    }
}

/// What `thread/list` sorts by. snake_case on the wire (`created_at`),
/// unlike the camelCase of most v2 enums.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ThreadSortKey {
    CreatedAt,
    UpdatedAt,
    /// Codex: the latest user-visible activity. spool treats it as
    /// `updated_at`.
    RecencyAt,
    /// Codex: the order within a thread section.
    SectionPosition,
}

/// What started a thread, as `thread/list` filters it (Codex
/// `ThreadSourceKind`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum ThreadSourceKind {
    Cli,
    #[serde(rename = "vscode")]
    VsCode,
    Exec,
    AppServer,
    SubAgent,
    SubAgentReview,
    SubAgentCompact,
    SubAgentThreadSpawn,
    SubAgentOther,
    Unknown,
}

/// One working directory or several (Codex accepts both spellings).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(untagged)]
pub enum ThreadListCwdFilter {
    One(String),
    Many(Vec<String>),
}

/// `thread/list` params. `{}` lists unarchived interactive threads, newest
/// first.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ThreadListParams {
    #[serde(default)]
    pub cursor: Option<String>,
    #[serde(default)]
    pub limit: Option<u32>,
    /// Default `created_at`.
    #[serde(default)]
    pub sort_key: Option<ThreadSortKey>,
    /// Default `desc`.
    #[serde(default)]
    pub sort_direction: Option<SortDirection>,
    /// Only threads of these providers; empty means all.
    #[serde(default)]
    pub model_providers: Option<Vec<String>>,
    /// Only threads of these sources; omitted or empty means interactive
    /// ones.
    #[serde(default)]
    pub source_kinds: Option<Vec<ThreadSourceKind>>,
    /// `true`: only archived threads; `false` or `null`: only unarchived.
    #[serde(default)]
    pub archived: Option<bool>,
    /// Omitted: every section; `null`: threads in no section; an id: that
    /// section.
    #[serde(
        default,
        with = "double_option",
        skip_serializing_if = "Option::is_none"
    )]
    #[schemars(with = "Option<String>")]
    pub section_id: Option<Option<String>>,
    /// Only threads whose working directory is exactly one of these.
    #[serde(default)]
    pub cwd: Option<ThreadListCwdFilter>,
    /// Codex: skip repairing metadata from rollout files. Written only when
    /// `true`; spool has nothing to repair and ignores it.
    #[serde(default, skip_serializing_if = "is_false")]
    pub use_state_db_only: bool,
    /// Substring of the thread's title (its name, else its preview).
    #[serde(default)]
    pub search_term: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ThreadListResponse {
    pub data: Vec<Thread>,
    pub next_cursor: Option<String>,
    pub backwards_cursor: Option<String>,
}

/// `thread/read` params.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ThreadReadParams {
    pub thread_id: String,
    /// Fill `thread.turns` with every turn and its items. Written only when
    /// `true`.
    #[serde(default, skip_serializing_if = "is_false")]
    pub include_turns: bool,
}

/// `thread/read` result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ThreadReadResponse {
    pub thread: Thread,
}

/// spool only: which items a history page holds: every stored one, or what a
/// person or the model sees.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum ItemsView {
    /// Every stored item.
    All,
    /// What a person sees: no `context` or `status` items. What Codex
    /// returns.
    #[default]
    Client,
    /// What the model sees, packed newest first under `tokens`.
    Llm,
}

/// `thread/turns/list` params.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ThreadTurnsListParams {
    pub thread_id: String,
    #[serde(default)]
    pub cursor: Option<String>,
    #[serde(default)]
    pub limit: Option<u32>,
    /// Default `desc` (newest turn first).
    #[serde(default)]
    pub sort_direction: Option<SortDirection>,
    /// How much of each turn's items to include. Default `summary`.
    #[serde(default)]
    pub items_view: Option<TurnItemsView>,
    // --- spool's opt-in additions (capability `views`) ---
    /// spool only: which items the turns carry. Omitted when unset (then
    /// `client`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub view: Option<ItemsView>,
    /// spool only: stop adding turns once their items would exceed this
    /// many tokens (the newest turn of the page is always included).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tokens: Option<u64>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ThreadTurnsListResponse {
    pub data: Vec<Turn>,
    pub next_cursor: Option<String>,
    pub backwards_cursor: Option<String>,
}

/// `thread/items/list` params: items across the thread, or of one turn.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ThreadItemsListParams {
    pub thread_id: String,
    /// Only the items of this turn.
    #[serde(default)]
    pub turn_id: Option<String>,
    #[serde(default)]
    pub cursor: Option<String>,
    #[serde(default)]
    pub limit: Option<u32>,
    /// Default `asc` (oldest item first), unlike `thread/turns/list`.
    #[serde(default)]
    pub sort_direction: Option<SortDirection>,
    // --- spool's opt-in additions (capability `views`) ---
    /// spool only: `all`, `client` (default) or `llm`. Omitted when unset.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub view: Option<ItemsView>,
    /// spool only: a token budget. With `view: "llm"`, whole turns are
    /// packed newest first until the next would not fit; otherwise the page
    /// stops before the item that would exceed it. Omitted when unset.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tokens: Option<u64>,
}

/// One item of a `thread/items/list` page, with the turn that holds it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ThreadItemEntry {
    pub turn_id: String,
    pub item: ThreadItem,
    /// spool only (capability `provenance`): status, provenance, audience.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub envelope: Option<ItemEnvelope>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ThreadItemsListResponse {
    pub data: Vec<ThreadItemEntry>,
    pub next_cursor: Option<String>,
    pub backwards_cursor: Option<String>,
}

/// `thread/archive` params.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ThreadArchiveParams {
    pub thread_id: String,
}

/// `thread/archive` result: `{}`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct ThreadArchiveResponse {}

/// `thread/unarchive` params.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ThreadUnarchiveParams {
    pub thread_id: String,
}

/// `thread/unarchive` result: the thread, back in the list.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ThreadUnarchiveResponse {
    pub thread: Thread,
}

/// `thread/name/set` params.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ThreadSetNameParams {
    pub thread_id: String,
    pub name: String,
}

/// `thread/name/set` result: `{}`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct ThreadSetNameResponse {}

/// `thread/revert` params: drop `beforeTurnId` and every later turn from
/// the history. Files the agent changed are not restored.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ThreadRevertParams {
    pub thread_id: String,
    pub before_turn_id: String,
}

/// `thread/revert` result. `thread.turns` is always empty: page the kept
/// history with the two cursors.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ThreadRevertResponse {
    pub thread: Thread,
    /// For `thread/turns/list` with `sortDirection: "desc"`.
    pub turns_backwards_cursor: Option<String>,
    /// For `thread/items/list` with `sortDirection: "desc"`.
    pub items_backwards_cursor: Option<String>,
}

/// `thread/rollback` params (deprecated in Codex for `thread/revert`):
/// drop the last `numTurns` turns (at least 1).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ThreadRollbackParams {
    pub thread_id: String,
    pub num_turns: u32,
}

/// `thread/rollback` result: unlike `thread/revert`, the thread comes back
/// with `turns` filled.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ThreadRollbackResponse {
    pub thread: Thread,
}

/// `thread/compact/start` params: compact the thread's history now.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ThreadCompactStartParams {
    pub thread_id: String,
}

/// `thread/compact/start` result: empty; the compaction runs as a turn,
/// reported by its notifications.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct ThreadCompactStartResponse {}

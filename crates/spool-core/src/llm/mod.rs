//! The `llm` view: what the next model request gets, as OpenAI Responses
//! API input items, packed under a token budget
//! (`docs/internals/views-and-providers.md`).
//!
//! # Which records
//!
//! Records whose audience includes the model and whose kind can become
//! model input (`convert.rs` says which kinds do not, and why), or that
//! carry a raw input item (below), whatever their kind. Everything
//! before the latest finished `contextCompaction` is left out: its summary
//! stands in for it.
//!
//! # Conversion (one record → input items)
//!
//! A record that carries a raw Responses input item (`providerData.inputItem`,
//! written by the Session API, which stores what its caller gave it) is
//! sent as exactly that item: the caller's own JSON, ids and all, since it
//! is what the caller chose to keep; not even the reasoning-id policy
//! touches it. Raw items go through the same pairing rules as the rest.
//! Other records are converted:
//!
//! | item | input items |
//! |---|---|
//! | `userMessage` | `message` role `user`: `input_text`, `input_image` for image URLs; local images, skills and mentions as text references |
//! | `agentMessage` | `message` role `assistant` with `output_text` |
//! | `reasoning` | `reasoning` (summary, content, provider id and `encrypted_content`), under the [`ReasoningIdPolicy`] |
//! | `functionCall` | `function_call` + `function_call_output` (declined, failed: saying so) |
//! | `commandExecution`, `fileChange`, `mcpToolCall`, `dynamicToolCall`, `handoff`, `plan` | the provider's call + a `function_call_output` built from the result |
//! | `webSearch` | `web_search_call` with the provider's id and action |
//! | `context` | `message` role `developer` |
//! | `contextCompaction` | `message` role `user` with the summary; the provider's own compaction items when its compact endpoint made it (`providerData.compactedOutput`) |
//! | anything else | nothing |
//!
//! # Stripped metadata
//!
//! Converted records carry what the model reads and the ids the API needs
//! to tie items together, nothing else:
//!
//! - spool's own item ids are never sent: they mean nothing to a provider.
//! - Provider item ids of messages and function calls (`msg_...`,
//!   `fc_...`) and every `status` are dropped: they are output metadata,
//!   and sending them back ties the request to server-side storage that a
//!   stateless (`store: false`) request does not have.
//! - A reasoning item spool recorded from a response keeps the provider's
//!   `rs_...` id under [`ReasoningIdPolicy::Preserve`] and loses it under
//!   [`ReasoningIdPolicy::Omit`] (a caller's raw reasoning item keeps
//!   whatever it has); a reasoning item left with nothing the
//!   model can use (no summary, content or encrypted content) is dropped.
//! - A web search call keeps the provider's id: the API identifies the
//!   hosted call by it.
//! - `call_id`s are kept exactly as the provider gave them.
//!
//! # Packing
//!
//! See `pack.rs` ([`Packer`]): whole turns, newest first, the newest
//! always; older turns while the total stays within the budget, stopping at
//! the first that does not fit. Then `sanitize.rs` drops what the API would reject (orphan
//! outputs, unanswered calls, dangling reasoning). `total_tokens` is the sum
//! over the packed records, so it can only overstate the input when
//! sanitizing drops an item.

mod convert;
mod extend;
mod pack;
mod provider;
mod sanitize;
mod tools;
mod tracker;

use serde::{Deserialize, Serialize};
use spool_protocol::responses::ResponseItem;

use crate::record::ItemRecord;

pub use convert::{
    COMPACTED_OUTPUT_KEY, COMPACTION_PREFIX, INPUT_ITEM_KEY, REVIEW_PREFIX, in_view, is_cut_point,
    raw_input_item,
};
pub use extend::ViewBase;
pub use pack::{Offered, Packer, count_turns};
pub use sanitize::{ToolSide, splits_before, tool_side, tool_side_of};
pub use tools::IMAGE_URL_KEY;
pub use tracker::{HistoryCursor, PartKey, Prepared, Response, Sent};

/// What happens to the provider ids of reasoning items.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum ReasoningIdPolicy {
    /// Keep them: the provider can tie the reasoning to what it stored.
    #[default]
    Preserve,
    /// Strip them, for providers or requests that cannot resolve them
    /// (another model, `store: false` without encrypted content).
    Omit,
}

/// How to build the `llm` view.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LlmViewOptions {
    /// At most this many tokens (o200k_base), except that the newest turn
    /// always goes in. `None`: everything.
    pub token_budget: Option<usize>,
    pub reasoning_ids: ReasoningIdPolicy,
    /// Keep what [`LlmView::extend`] needs (`LlmView::base`), for a caller
    /// that will add the records logged after this read (the runner, from
    /// one step of a turn to the next).
    pub extendable: bool,
    /// Leave records without a cached token count uncounted, when there is
    /// no budget: for a caller that needs the input and not its size.
    /// Counting builds the o200k_base encoder on first use (100–200 ms on
    /// a small machine), which would otherwise delay the first model call
    /// of a fresh process. `LlmView::total_tokens` then sums only the
    /// cached counts, and nothing is counted for the store to cache.
    pub skip_token_counts: bool,
}

impl LlmViewOptions {
    /// Whether records without a cached count are counted.
    pub(crate) fn counts_tokens(&self) -> bool {
        !self.skip_token_counts || self.token_budget.is_some()
    }
}

/// The input of the next model request.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct LlmView {
    /// Input items, oldest first.
    pub input: Vec<ResponseItem>,
    /// Tokens of the included records (cached or computed counts).
    pub total_tokens: usize,
    pub turns_included: usize,
    /// Turns left out for the budget (not those before a compaction).
    pub turns_omitted: usize,
    /// Counts computed here for records that had none, by item id, for the
    /// store to cache. Only finished items are listed: an item still in
    /// progress will change.
    pub computed_token_counts: Vec<(String, u32)>,
    /// Set when the options asked for it and every record in the view had
    /// finished: what [`LlmView::extend`] builds on.
    pub base: Option<ViewBase>,
}

/// Builds the `llm` view of `records`, which must be in ordinal order (as
/// the store returns them).
pub fn llm_view(records: &[ItemRecord], options: &LlmViewOptions) -> LlmView {
    debug_assert!(
        records.is_sorted_by_key(|record| record.ordinal),
        "records must be in ordinal order"
    );
    pack::pack(records, options)
}

/// The input of a review's next model call: the records of the review's
/// turn (in ordinal order), whatever their audience, each converted as the
/// `llm` view converts it, then sanitized. A review's items are the
/// client's alone in the thread's view (only its `exitedReviewMode`
/// reaches later turns); the reviewer sees them all, and nothing before
/// the turn.
pub fn review_input(turn: &[ItemRecord], reasoning_ids: ReasoningIdPolicy) -> Vec<ResponseItem> {
    let scoped: Vec<ItemRecord> = turn
        .iter()
        .filter(|record| record.item.kind() != spool_protocol::ItemKind::ExitedReviewMode)
        .cloned()
        .map(|mut record| {
            record.envelope.audience.llm = true;
            record
        })
        .collect();
    let options = LlmViewOptions {
        token_budget: None,
        reasoning_ids,
        extendable: false,
        skip_token_counts: false,
    };
    pack::pack(&scoped, &options).input
}

/// The input items one record stands for, unpacked and unsanitized: its
/// raw input item if it has one, else its conversion (a tool item gives its
/// call and its output; a kind that is no model input gives nothing).
pub fn input_items(record: &ItemRecord, policy: ReasoningIdPolicy) -> Vec<ResponseItem> {
    let mut out = Vec::new();
    convert::convert(record, policy, &mut out);
    out
}

/// The records the `llm` view is built from, unpacked, in the order given.
pub(crate) fn view_records(records: &[ItemRecord]) -> Vec<&ItemRecord> {
    // By ordinal rather than position, so that callers with unsorted
    // records (see `views::select`) get the same answer.
    let start = records
        .iter()
        .filter(|record| convert::in_view(record) && convert::is_cut_point(record))
        .map(|record| record.ordinal)
        .max()
        .unwrap_or(0);
    records
        .iter()
        .filter(|record| record.ordinal >= start && convert::in_view(record))
        .collect()
}

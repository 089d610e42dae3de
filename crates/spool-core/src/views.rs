//! The three views of a thread's items
//! (`docs/internals/views-and-providers.md`).
//!
//! Every item carries an audience (`client`, `llm`) in its envelope. Its
//! producer may set it; otherwise it is the default of its kind
//! ([`ItemKind::default_audience`]), which is this table (a test checks the
//! two agree):
//!
//! | kind | client | llm |
//! |---|---|---|
//! | `userMessage` | yes | yes |
//! | `agentMessage` | yes | yes |
//! | `reasoning` | yes | yes |
//! | `plan` | yes | yes |
//! | `commandExecution` | yes | yes |
//! | `fileChange` | yes | yes |
//! | `mcpToolCall` | yes | yes |
//! | `dynamicToolCall` | yes | yes |
//! | `webSearch` | yes | yes |
//! | `imageView` | yes | yes |
//! | `contextCompaction` | yes | yes |
//! | `functionCall` | yes | yes |
//! | `handoff` | yes | yes |
//! | `context` | no | yes |
//! | `status` | yes | no |
//! | `component` | yes | no |
//! | `container` | yes | no |
//! | `stateChange` | yes | no |
//! | `resourceChange` | yes | no |
//! | `stepError` | yes | no |
//! | `error` | yes | no |
//! | `enteredReviewMode` | yes | no |
//! | `exitedReviewMode` | yes | yes |
//!
//! The views:
//!
//! - [`View::All`]: every record given, in ordinal order. The store applies
//!   the persistence policy, so this is every persisted item.
//! - [`View::Client`]: records whose audience includes the client, minus
//!   `context` (hidden context is for the model, whatever its audience
//!   says) and `status` (transient progress: it is streamed live and never
//!   part of a stored view).
//! - [`View::Llm`]: the records that feed the next model request (see
//!   [`crate::llm`]); [`select`] returns them unpacked, and
//!   [`crate::llm::llm_view`] turns them into provider input under a token
//!   budget.

use spool_protocol::{ItemKind, ItemsView};

use crate::record::ItemRecord;

/// Which items a reader gets.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum View {
    /// Every persisted item.
    All,
    /// What a UI shows.
    Client,
    /// What the next model request gets.
    Llm,
}

/// The view a client names on the wire (`view`: `all`, `client`, `llm`).
impl From<ItemsView> for View {
    fn from(view: ItemsView) -> View {
        match view {
            ItemsView::All => View::All,
            ItemsView::Client => View::Client,
            ItemsView::Llm => View::Llm,
        }
    }
}

/// The records of `view`, in ordinal order.
///
/// For [`View::Llm`] these are the records the model view is built from
/// (model audience, kinds that become model input, nothing before the
/// latest compaction), before packing and conversion.
pub fn select(records: &[ItemRecord], view: View) -> Vec<&ItemRecord> {
    let mut selected: Vec<&ItemRecord> = match view {
        View::All => records.iter().collect(),
        View::Client => records
            .iter()
            .filter(|record| record.envelope.audience.client && client_shows(record.item.kind()))
            .collect(),
        View::Llm => crate::llm::view_records(records),
    };
    // The store hands records over in ordinal order; sorting an already
    // sorted slice is linear, and callers that built records by hand still
    // get the documented order.
    selected.sort_by_key(|record| record.ordinal);
    selected
}

/// [`select`] on owned records: those of `view`, moved out of `records`
/// (which must be in ordinal order, as the store gives them) rather than
/// cloned.
pub fn keep(records: Vec<ItemRecord>, view: View) -> Vec<ItemRecord> {
    match view {
        View::All => records,
        View::Client | View::Llm => {
            // `select` returns a subsequence in ordinal order, and ordinals
            // are unique per thread, so one merge walk finds its records.
            let selected: Vec<u64> = select(&records, view)
                .iter()
                .map(|record| record.ordinal)
                .collect();
            let mut selected = selected.into_iter().peekable();
            records
                .into_iter()
                .filter(|record| {
                    let keep = selected.peek() == Some(&record.ordinal);
                    if keep {
                        selected.next();
                    }
                    keep
                })
                .collect()
        }
    }
}

/// Whether a client view may show an item of this kind at all (its
/// audience decides the rest).
fn client_shows(kind: ItemKind) -> bool {
    match kind {
        // Model-only by definition, even if a producer marked it otherwise.
        ItemKind::Context => false,
        // Transient progress: streamed live, never part of a stored view.
        ItemKind::Status => false,
        ItemKind::UserMessage
        | ItemKind::AgentMessage
        | ItemKind::Reasoning
        | ItemKind::Plan
        | ItemKind::CommandExecution
        | ItemKind::FileChange
        | ItemKind::McpToolCall
        | ItemKind::DynamicToolCall
        | ItemKind::WebSearch
        | ItemKind::ImageView
        | ItemKind::EnteredReviewMode
        | ItemKind::ExitedReviewMode
        | ItemKind::ContextCompaction
        | ItemKind::FunctionCall
        | ItemKind::Handoff
        | ItemKind::Component
        | ItemKind::Container
        | ItemKind::StateChange
        | ItemKind::ResourceChange
        | ItemKind::StepError
        | ItemKind::Error => true,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The table in the module docs is the documentation of
    /// `ItemKind::default_audience`; this keeps them from drifting.
    #[test]
    fn the_documented_audience_table_matches_the_defaults() {
        let source = include_str!("views.rs");
        let mut kinds = std::collections::HashSet::new();
        for line in source.lines() {
            let Some(row) = line.strip_prefix("//! | `") else {
                continue;
            };
            let cells: Vec<&str> = row.split('|').map(str::trim).collect();
            let name = cells[0].trim_end_matches('`');
            let kind: ItemKind =
                serde_json::from_value(serde_json::Value::String(name.into())).unwrap();
            let audience = kind.default_audience();
            assert_eq!(cells[1] == "yes", audience.client, "client of {name}");
            assert_eq!(cells[2] == "yes", audience.llm, "llm of {name}");
            assert!(kinds.insert(kind), "{name} is listed twice");
        }
        assert_eq!(kinds.len(), 23, "one row per item kind");
    }

    #[test]
    fn only_context_and_status_are_never_shown_to_clients() {
        assert!(!client_shows(ItemKind::Context));
        assert!(!client_shows(ItemKind::Status));
        assert!(client_shows(ItemKind::Component));
    }
}

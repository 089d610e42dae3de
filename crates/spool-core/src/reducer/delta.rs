//! How each delta changes the item it belongs to.

use spool_protocol::{ServerNotification, ThreadItem};

use super::ReduceError;

/// Applies a delta to an in-progress item of the right kind.
///
/// The caller has checked that the item exists and is in progress. Public so
/// that producers who keep their own copy of an open item (the runtime's
/// output mapper) change it exactly as the reducer would.
///
/// # Panics
/// If `event` is not a delta (`ServerNotification::is_delta`).
pub fn apply_delta(item: &mut ThreadItem, event: &ServerNotification) -> Result<(), ReduceError> {
    let method = event.method();
    let mismatch = |item: &ThreadItem| ReduceError::DeltaKindMismatch {
        method,
        item_id: item.id().to_owned(),
        kind: item.kind(),
    };
    match event {
        ServerNotification::AgentMessageDelta(d) => match item {
            ThreadItem::AgentMessage { text, .. } => text.push_str(&d.delta),
            other => return Err(mismatch(other)),
        },
        ServerNotification::PlanDelta(d) => match item {
            ThreadItem::Plan { text, .. } => text.push_str(&d.delta),
            other => return Err(mismatch(other)),
        },
        ServerNotification::CommandExecutionOutputDelta(d) => match item {
            ThreadItem::CommandExecution {
                aggregated_output, ..
            } => aggregated_output
                .get_or_insert_with(String::new)
                .push_str(&d.delta),
            other => return Err(mismatch(other)),
        },
        ServerNotification::ReasoningSummaryTextDelta(d) => match item {
            ThreadItem::Reasoning { id, summary, .. } => {
                let slot = slot_at(summary, d.summary_index, method, id)?;
                slot.push_str(&d.delta);
            }
            other => return Err(mismatch(other)),
        },
        ServerNotification::ReasoningSummaryPartAdded(d) => match item {
            ThreadItem::Reasoning { id, summary, .. } => {
                slot_at(summary, d.summary_index, method, id)?;
            }
            other => return Err(mismatch(other)),
        },
        ServerNotification::ReasoningTextDelta(d) => match item {
            ThreadItem::Reasoning { id, content, .. } => {
                let slot = slot_at(content, d.content_index, method, id)?;
                slot.push_str(&d.delta);
            }
            other => return Err(mismatch(other)),
        },
        // Progress messages are streamed to clients; the item itself does
        // not change until it completes.
        ServerNotification::McpToolCallProgress(_) => match item {
            ThreadItem::McpToolCall { .. } => {}
            other => return Err(mismatch(other)),
        },
        ServerNotification::ThreadStarted(_)
        | ServerNotification::ThreadStatusChanged(_)
        | ServerNotification::ThreadNameUpdated(_)
        | ServerNotification::ThreadArchived(_)
        | ServerNotification::ThreadUnarchived(_)
        | ServerNotification::ThreadReverted(_)
        | ServerNotification::ThreadDeleted(_)
        | ServerNotification::ThreadClosed(_)
        | ServerNotification::TurnStarted(_)
        | ServerNotification::TurnCompleted(_)
        | ServerNotification::ItemStarted(_)
        | ServerNotification::ItemCompleted(_)
        | ServerNotification::ThreadTokenUsageUpdated(_)
        | ServerNotification::Error(_)
        | ServerNotification::ServerRequestResolved(_)
        | ServerNotification::ThreadCompacted(_)
        | ServerNotification::ItemRemoved(_)
        | ServerNotification::ThreadCleared(_)
        | ServerNotification::ThreadEventsLost(_) => {
            unreachable!("apply_delta is only called with deltas, got {method}")
        }
    }
    Ok(())
}

/// The string at `index`, growing the list with empty parts as needed
/// (a part may be announced by its first delta).
fn slot_at<'a>(
    parts: &'a mut Vec<String>,
    index: i64,
    method: &'static str,
    item_id: &str,
) -> Result<&'a mut String, ReduceError> {
    let index = usize::try_from(index).map_err(|_| ReduceError::NegativeIndex {
        method,
        item_id: item_id.to_owned(),
        index,
    })?;
    if parts.len() <= index {
        parts.resize(index + 1, String::new());
    }
    Ok(&mut parts[index])
}

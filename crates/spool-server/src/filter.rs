//! What each client sees: a client that did not opt in to spool's
//! additions (in `initialize` capabilities) sees exactly what Codex's
//! app-server would send; one that did gets the `seq` cursor, item
//! envelopes (status, provenance, audience) and spool's own item kinds and
//! notifications.

use serde_json::Value;
use spool_protocol::*;
use spool_store::Appended;

/// spool's opt-in additions for one connection.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Capabilities {
    /// `params.seq` on every logged notification (the resume cursor).
    pub seq: bool,
    /// spool's item kinds, envelopes, `item/removed`, `thread/cleared`.
    pub spool_items: bool,
}

/// The notification as this client gets it (JSON-RPC), or `None` when it
/// is not for this client.
pub fn for_client(appended: &Appended, capabilities: &Capabilities) -> Option<Value> {
    let notification = appended.notification();
    if !capabilities.spool_items && !codex_knows(notification) {
        return None;
    }
    let mut value = serde_json::to_value(notification).ok()?;
    let object = value.as_object_mut()?;
    object.insert("jsonrpc".to_owned(), Value::from("2.0"));
    if let Some(params) = object.get_mut("params").and_then(Value::as_object_mut) {
        if !capabilities.spool_items {
            params.remove("envelope");
        }
        if capabilities.seq
            && let Some(seq) = appended.seq()
        {
            params.insert("seq".to_owned(), Value::from(seq));
        }
    }
    Some(value)
}

/// Whether a Codex app-server client would get this notification: not
/// spool's own kinds, nor an item kept from the client's view (a review's
/// prompt).
fn codex_knows(notification: &ServerNotification) -> bool {
    let for_client =
        |envelope: &Option<ItemEnvelope>| envelope.as_ref().is_none_or(|e| e.audience.client);
    match notification {
        ServerNotification::ItemStarted(n) => {
            n.item.kind().is_codex_kind() && for_client(&n.envelope)
        }
        ServerNotification::ItemCompleted(n) => {
            n.item.kind().is_codex_kind() && for_client(&n.envelope)
        }
        ServerNotification::ItemRemoved(_) | ServerNotification::ThreadCleared(_) => false,
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
        | ServerNotification::ServerRequestResolved(_) => true,
    }
}

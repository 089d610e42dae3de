//! What an in-process tool gets besides its arguments: who called it, and a
//! way to add items next to its result (a message, a UI component, a status
//! line, extra context for the model).
//!
//! Tools never touch the store. They send [`ToolEmission`]s down a channel and
//! the runtime turns them into items, so a tool cannot break the log's
//! ordering or write to a thread it was not called from.

use serde_json::Value;
use tokio::sync::mpsc::UnboundedSender;

/// One side item a tool asked for, tagged with the call it came from so the
/// runtime can attach it to the right place even when calls run in parallel.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolEmission {
    /// Id of the item that made the call (the function-call item).
    pub parent_item_id: String,
    /// The provider's call id, as given.
    pub call_id: String,
    pub kind: EmissionKind,
}

/// What a tool can add on the side.
#[derive(Debug, Clone, PartialEq)]
pub enum EmissionKind {
    /// A message shown to the user.
    Message { text: String },
    /// A named UI component with its props, rendered by the client.
    Component { name: String, props: Value },
    /// A transient progress line ("fetching page 2 of 5").
    Status { text: String },
    /// Text added to what the model sees on its next request.
    Context { text: String },
}

/// Handed to every in-process tool call. Cheap to clone; clones share the
/// channel, so a tool may hand it to tasks it spawns.
#[derive(Debug, Clone)]
pub struct ToolContext {
    parent_item_id: String,
    call_id: String,
    // `None` for a detached context: emissions go nowhere.
    sender: Option<UnboundedSender<ToolEmission>>,
}

impl ToolContext {
    pub fn new(
        parent_item_id: impl Into<String>,
        call_id: impl Into<String>,
        sender: UnboundedSender<ToolEmission>,
    ) -> Self {
        Self {
            parent_item_id: parent_item_id.into(),
            call_id: call_id.into(),
            sender: Some(sender),
        }
    }

    /// A context whose emissions are dropped: for tests and for callers that
    /// have nowhere to put side items.
    pub fn detached(parent_item_id: impl Into<String>, call_id: impl Into<String>) -> Self {
        Self {
            parent_item_id: parent_item_id.into(),
            call_id: call_id.into(),
            sender: None,
        }
    }

    pub fn call_id(&self) -> &str {
        &self.call_id
    }

    pub fn parent_item_id(&self) -> &str {
        &self.parent_item_id
    }

    pub fn emit_message(&self, text: impl Into<String>) {
        self.emit(EmissionKind::Message { text: text.into() });
    }

    pub fn emit_component(&self, name: impl Into<String>, props: Value) {
        self.emit(EmissionKind::Component {
            name: name.into(),
            props,
        });
    }

    pub fn emit_status(&self, text: impl Into<String>) {
        self.emit(EmissionKind::Status { text: text.into() });
    }

    pub fn emit_context(&self, text: impl Into<String>) {
        self.emit(EmissionKind::Context { text: text.into() });
    }

    /// Sends one emission. A closed receiver means the turn that made the
    /// call is gone (finished or cancelled); a tool still running then has
    /// nobody to tell, and failing the tool for it would help no one, so
    /// the send error is ignored on purpose.
    pub fn emit(&self, kind: EmissionKind) {
        if let Some(sender) = &self.sender {
            let _ = sender.send(ToolEmission {
                parent_item_id: self.parent_item_id.clone(),
                call_id: self.call_id.clone(),
                kind,
            });
        }
    }
}

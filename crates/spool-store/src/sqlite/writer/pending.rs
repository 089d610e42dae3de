//! What a thread's next commit writes: the events accepted since the last
//! one, as rows, and what else changed in the thread's row.

use std::borrow::Cow;

use spool_protocol::ServerNotification;

use super::dirty::Dirty;
use crate::error::StoreError;
use crate::sqlite::codec::encode;
use crate::types::ThreadRecord;

/// What the next commit writes for a thread.
#[derive(Default)]
pub(super) struct Pending {
    /// The thread row to insert: the thread was created in this batch.
    pub(super) created: Option<ThreadRecord>,
    pub(super) created_at_ms: i64,
    /// Accepted events, in seq order.
    pub(super) events: Vec<PendingEvent>,
    /// The projection rows to write or delete.
    pub(super) dirty: Dirty,
    pub(super) name: Option<Option<String>>,
    pub(super) preview: Option<String>,
    /// The thread's archived flag as the last event set it.
    pub(super) archived: Option<bool>,
}

impl Pending {
    pub(super) fn is_empty(&self) -> bool {
        self.created.is_none() && self.events.is_empty()
    }
}

/// An accepted event as the `events` table stores it.
pub(super) struct PendingEvent {
    pub(super) seq: u64,
    pub(super) at_ms: i64,
    pub(super) method: &'static str,
    pub(super) item_id: Option<String>,
    /// Empty for a folded start and for a [`PendingEvent::deferred`]
    /// completion.
    pub(super) json: String,
    /// The completion of an item born complete whose caller left it
    /// unencoded: kept typed, encoded only if its row must hold it (see
    /// [`PendingEvent::payload_json`]), and what a rebuild replays.
    pub(super) deferred: Option<Box<ServerNotification>>,
    /// An `item/started` stored in the next event's row (`born.rs`): no
    /// row of its own.
    pub(super) folded: bool,
    /// The completion of an item born complete that is exactly what the
    /// item's projection row holds (`born::projects`): its log row may
    /// leave the body to that row, if the row is written with it.
    pub(super) projected: bool,
}

impl PendingEvent {
    /// The text of the event's row when it holds its payload: the caller's
    /// JSON, or a deferred completion encoded now.
    pub(super) fn payload_json(&self) -> Result<Cow<'_, str>, StoreError> {
        match &self.deferred {
            Some(payload) if self.json.is_empty() => {
                encode("notification", payload).map(Cow::Owned)
            }
            _ => Ok(Cow::Borrowed(&self.json)),
        }
    }

    /// The notification, for a rebuild; the error names the seq.
    pub(super) fn payload(&self) -> Result<ServerNotification, String> {
        match &self.deferred {
            Some(payload) => Ok(ServerNotification::clone(payload)),
            None => serde_json::from_str(&self.json)
                .map_err(|e| format!("pending seq {}: {e}", self.seq)),
        }
    }
}

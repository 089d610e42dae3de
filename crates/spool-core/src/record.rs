//! An item as the store keeps it: the item, its envelope and its place.

use serde::{Deserialize, Serialize};
use spool_protocol::{ItemEnvelope, ThreadItem};

/// One row of the item projection.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ItemRecord {
    pub thread_id: String,
    pub turn_id: String,
    /// The seq of the item's `item/started` event: its place in the thread.
    pub ordinal: u64,
    /// The seq of the last event that changed the item.
    pub seq: u64,
    pub item: ThreadItem,
    pub envelope: ItemEnvelope,
    /// o200k_base token count of the item's model input, computed once.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token_count: Option<u32>,
}

/// A turn as the store keeps it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TurnRecord {
    pub thread_id: String,
    pub id: String,
    pub status: spool_protocol::TurnStatus,
    pub error: Option<spool_protocol::TurnError>,
    /// Unix seconds.
    pub started_at: Option<i64>,
    /// Unix seconds.
    pub completed_at: Option<i64>,
    pub duration_ms: Option<i64>,
    pub token_usage: Option<spool_protocol::TokenUsageBreakdown>,
    /// The seq of `turn/started`.
    pub ordinal: u64,
    /// The seq of the last event that changed the turn.
    pub seq: u64,
}

impl TurnRecord {
    /// The wire shape, with the given items.
    pub fn to_turn(&self, items: Vec<ThreadItem>) -> spool_protocol::Turn {
        spool_protocol::Turn {
            id: self.id.clone(),
            items_view: spool_protocol::TurnItemsView::Full,
            items,
            status: self.status,
            error: self.error.clone(),
            started_at: self.started_at,
            completed_at: self.completed_at,
            duration_ms: self.duration_ms,
            token_usage: self.token_usage,
        }
    }
}

//! A log event: one notification of a thread with its place in the log.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::notifications::ServerNotification;

/// What an event says. The log stores server notifications as they are.
pub type EventPayload = ServerNotification;

/// One entry of a thread's append-only log.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ThreadEvent {
    pub thread_id: String,
    /// Per-thread, gap-free, strictly increasing; starts at 1.
    pub seq: u64,
    /// When the event was appended (unix milliseconds).
    pub at_ms: i64,
    #[serde(flatten)]
    pub payload: EventPayload,
}

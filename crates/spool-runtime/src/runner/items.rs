//! Building the lifecycle events of the items a run files.

use std::sync::Arc;

use serde_json::Value;
use spool_protocol::*;

use crate::now_ms;

/// Where a run's items go: its thread, turn and the agent writing them.
#[derive(Debug, Clone)]
pub(crate) struct ItemSink {
    pub thread_id: String,
    pub turn_id: String,
    pub agent: String,
    /// The model call (1-based) the items belong to, for provenance.
    pub step: u32,
    /// Who every item is for, when not its kind's default (a review's
    /// items are the client's alone; see `runner::review`).
    pub audience: Option<Audience>,
}

/// An item that has started and not finished.
#[derive(Debug, Clone)]
pub(crate) struct OpenItem {
    pub item: ThreadItem,
    pub envelope: ItemEnvelope,
}

impl OpenItem {
    pub fn id(&self) -> &str {
        self.item.id()
    }
}

impl ItemSink {
    /// `item/started` for a new item of the run's agent.
    pub fn start(
        &self,
        item: ThreadItem,
        parent_item_id: Option<String>,
        provider_data: Option<Value>,
    ) -> (OpenItem, ServerNotification) {
        let now = now_ms();
        let audience = self
            .audience
            .unwrap_or_else(|| item.kind().default_audience());
        let mut envelope = ItemEnvelope::started(&self.agent, audience, now);
        envelope.provenance.parent_item_id = parent_item_id;
        envelope.provenance.phase = WorkPhase::Work;
        envelope.provenance.step_index = Some(self.step);
        envelope.provider_data = provider_data.map(Arc::new);
        let started = ServerNotification::ItemStarted(ItemStartedNotification {
            item: item.clone(),
            thread_id: self.thread_id.clone(),
            turn_id: self.turn_id.clone(),
            started_at_ms: now,
            envelope: Some(envelope.clone()),
        });
        (OpenItem { item, envelope }, started)
    }

    /// `item/completed` with the final item and envelope status.
    pub fn complete(&self, open: OpenItem, status: ItemStatus) -> ServerNotification {
        let now = now_ms();
        let mut envelope = open.envelope;
        envelope.status = status;
        envelope.completed_at_ms = Some(now);
        ServerNotification::ItemCompleted(ItemCompletedNotification {
            item: open.item,
            thread_id: self.thread_id.clone(),
            turn_id: self.turn_id.clone(),
            completed_at_ms: now,
            envelope: Some(envelope),
        })
    }

    /// Started and completed at once (an item born finished). The
    /// provider's data rides on the completion only: the start then says
    /// nothing the completion does not, and the store keeps the pair as
    /// one row of its log.
    pub fn whole(
        &self,
        item: ThreadItem,
        parent_item_id: Option<String>,
        provider_data: Option<Value>,
    ) -> Vec<ServerNotification> {
        let (mut open, started) = self.start(item, parent_item_id, None);
        open.envelope.provider_data = provider_data.map(Arc::new);
        vec![started, self.complete(open, ItemStatus::Completed)]
    }

    pub fn output_delta(&self, item_id: &str, delta: String) -> ServerNotification {
        ServerNotification::CommandExecutionOutputDelta(TextDeltaNotification {
            thread_id: self.thread_id.clone(),
            turn_id: self.turn_id.clone(),
            item_id: item_id.to_owned(),
            delta,
        })
    }

    pub fn plan_delta(&self, item_id: &str, delta: String) -> ServerNotification {
        ServerNotification::PlanDelta(TextDeltaNotification {
            thread_id: self.thread_id.clone(),
            turn_id: self.turn_id.clone(),
            item_id: item_id.to_owned(),
            delta,
        })
    }
}

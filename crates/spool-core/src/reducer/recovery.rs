//! Closing what was left open: after a crash, a dropped stream or an
//! interrupt, open items end `incomplete` with what was committed and the
//! turn ends `interrupted` or `failed` — recorded as new events, never by
//! rewriting the log.

use spool_protocol::{
    CommandExecutionStatus, DynamicToolCallStatus, FunctionCallStatus, ItemCompletedNotification,
    ItemStatus, McpToolCallStatus, PatchApplyStatus, ServerNotification, ThreadItem,
    TurnCompletedNotification, TurnError, TurnStatus,
};

use super::ThreadReducer;

impl ThreadReducer {
    /// The events that close every open item of `turn_id` as `incomplete`
    /// and then the turn itself with `status` (interrupted or failed).
    /// Applying them in order is always accepted by the reducer.
    pub fn closing_events(
        &self,
        turn_id: &str,
        status: TurnStatus,
        error: Option<TurnError>,
        at_ms: i64,
    ) -> Vec<ServerNotification> {
        let mut out = Vec::new();
        for record in self.items() {
            if record.turn_id != turn_id || record.envelope.status.is_terminal() {
                continue;
            }
            let mut envelope = record.envelope.clone();
            envelope.status = ItemStatus::Incomplete;
            envelope.completed_at_ms = Some(at_ms);
            out.push(ServerNotification::ItemCompleted(
                ItemCompletedNotification {
                    item: stopped(record.item.clone()),
                    thread_id: self.thread_id().to_owned(),
                    turn_id: turn_id.to_owned(),
                    completed_at_ms: at_ms,
                    envelope: Some(envelope),
                },
            ));
        }
        if let Some(turn) = self.turn(turn_id).filter(|t| !t.status.is_terminal()) {
            let mut turn = turn.to_turn(Vec::new());
            turn.items_view = spool_protocol::TurnItemsView::NotLoaded;
            turn.status = status;
            turn.error = error;
            turn.completed_at = Some(at_ms / 1000);
            out.push(ServerNotification::TurnCompleted(
                TurnCompletedNotification {
                    thread_id: self.thread_id().to_owned(),
                    turn,
                },
            ));
        }
        out
    }

    /// Closing events for every turn still in progress (crash recovery).
    pub fn interrupt_all(&self, at_ms: i64) -> Vec<ServerNotification> {
        self.turns()
            .iter()
            .filter(|t| !t.status.is_terminal())
            .flat_map(|t| self.closing_events(&t.id, TurnStatus::Interrupted, None, at_ms))
            .collect()
    }
}

/// The item as it stands, with a kind status that says it did not finish
/// (Codex's per-kind statuses have no "incomplete", so tools read `failed`).
/// Shared with the runtime, which closes what a crash left open the same
/// way on resume.
pub fn stopped(mut item: ThreadItem) -> ThreadItem {
    match &mut item {
        ThreadItem::CommandExecution { status, .. } => {
            if *status == CommandExecutionStatus::InProgress {
                *status = CommandExecutionStatus::Failed;
            }
        }
        ThreadItem::FileChange { status, .. } => {
            if *status == PatchApplyStatus::InProgress {
                *status = PatchApplyStatus::Failed;
            }
        }
        ThreadItem::McpToolCall { status, .. } => {
            if *status == McpToolCallStatus::InProgress {
                *status = McpToolCallStatus::Failed;
            }
        }
        ThreadItem::DynamicToolCall { status, .. } => {
            if *status == DynamicToolCallStatus::InProgress {
                *status = DynamicToolCallStatus::Failed;
            }
        }
        ThreadItem::FunctionCall { status, .. } => {
            if *status == FunctionCallStatus::InProgress {
                *status = FunctionCallStatus::Failed;
            }
        }
        // These kinds carry no status of their own: the envelope says
        // `incomplete` and the content is what was committed.
        ThreadItem::UserMessage { .. }
        | ThreadItem::AgentMessage { .. }
        | ThreadItem::Reasoning { .. }
        | ThreadItem::Plan { .. }
        | ThreadItem::WebSearch { .. }
        | ThreadItem::ImageView { .. }
        | ThreadItem::EnteredReviewMode { .. }
        | ThreadItem::ExitedReviewMode { .. }
        | ThreadItem::ContextCompaction { .. }
        | ThreadItem::Handoff { .. }
        | ThreadItem::Component { .. }
        | ThreadItem::Container { .. }
        | ThreadItem::Status { .. }
        | ThreadItem::StateChange { .. }
        | ThreadItem::ResourceChange { .. }
        | ThreadItem::StepError { .. }
        | ThreadItem::Error { .. }
        | ThreadItem::Context { .. } => {}
    }
    item
}

//! Turns a provider's normalized events into item lifecycle events.
//!
//! An assistant message becomes `agentMessage` started → deltas →
//! completed; a reasoning item becomes `reasoning` (summary parts, summary
//! and raw-content deltas); a function call becomes a `functionCall` item; a
//! hosted `web_search_call` becomes `webSearch`. The provider's own ids and
//! raw payload go to the item's `providerData`. Item ids are spool's own
//! (UUIDv7), so they never collide across providers or turns.

use std::collections::HashMap;
use std::sync::Arc;

use serde_json::Value;
use spool_model::ModelEvent;
use spool_protocol::responses::{KnownResponseItem, ResponseItem};
use spool_protocol::*;

use crate::output_items::{completed_item, provider_ids, provider_key, search_query};

/// One provider output item that has started and not yet finished.
#[derive(Debug, Clone)]
struct OpenItem {
    item: ThreadItem,
    envelope: ItemEnvelope,
}

/// Maps one model response to item events for one turn.
#[derive(Debug)]
pub struct OutputMapper {
    thread_id: String,
    turn_id: String,
    agent: String,
    /// Open items by the provider's item id (or output index when it has none).
    open: HashMap<String, OpenItem>,
    /// Provider item id of each output index, for events that name only the index.
    by_index: HashMap<usize, String>,
    /// Function calls the model finished writing, waiting for a tool runner.
    pending_calls: Vec<PendingCall>,
    /// When set, function calls start no item here: the runner files each
    /// as the item kind its tool produces (`take_model_calls`).
    defer_calls: bool,
    model_calls: Vec<ModelCall>,
    /// Who every item is for, when not its kind's default.
    audience: Option<Audience>,
    /// Hold the completion of the response's last item until the response
    /// ends ([`OutputMapper::holding_last_completion`]).
    hold_last: bool,
    held: Option<ItemCompletedNotification>,
}

/// A function call the model wrote, as given, for the runner to file and
/// run (see [`OutputMapper::deferring_calls`]).
#[derive(Debug, Clone, PartialEq)]
pub struct ModelCall {
    pub call_id: String,
    pub name: String,
    /// The arguments as the model wrote them (JSON text).
    pub arguments: String,
    /// The provider's item, kept as the tool item's `providerData`: the
    /// model view sends the call back in the model's own words.
    pub raw: Value,
}

impl OutputMapper {
    pub fn new(thread_id: &str, turn_id: &str, agent: &str) -> Self {
        OutputMapper {
            thread_id: thread_id.to_owned(),
            turn_id: turn_id.to_owned(),
            agent: agent.to_owned(),
            open: HashMap::new(),
            by_index: HashMap::new(),
            pending_calls: Vec::new(),
            defer_calls: false,
            model_calls: Vec::new(),
            audience: None,
            hold_last: false,
            held: None,
        }
    }

    /// Holds back the `item/completed` that ends a provider event's output
    /// until the next event, and the last one until [`OutputMapper::end_response`]:
    /// a provider can mark an item done and only then say that the response
    /// was cut (`response.incomplete`, a token limit), and a completed item
    /// cannot become incomplete afterwards.
    pub fn holding_last_completion(mut self) -> Self {
        self.hold_last = true;
        self
    }

    /// The response ended: the held completion (as `incomplete`, with the
    /// provider's reason in its `providerData.incomplete_details`, when the
    /// response was cut), then every item still open, as `incomplete`.
    pub fn end_response(
        &mut self,
        incomplete_reason: Option<&str>,
        now_ms: i64,
    ) -> Vec<ServerNotification> {
        let mut out = Vec::new();
        if let Some(mut held) = self.held.take() {
            if let (Some(reason), Some(envelope)) = (incomplete_reason, held.envelope.as_mut()) {
                envelope.status = ItemStatus::Incomplete;
                if let Some(Value::Object(raw)) = envelope.provider_data.as_mut().map(Arc::make_mut)
                {
                    raw.insert(
                        "incomplete_details".to_owned(),
                        serde_json::json!({"reason": reason}),
                    );
                }
            }
            out.push(ServerNotification::ItemCompleted(held));
        }
        out.extend(self.close_open(now_ms));
        out
    }

    /// Files every item for `audience` instead of its kind's default
    /// (`None`: the default).
    pub fn with_audience(mut self, audience: Option<Audience>) -> Self {
        self.audience = audience;
        self
    }

    /// Function calls start no `functionCall` item: they are collected, in
    /// output order, for the runner (`take_model_calls`).
    pub fn deferring_calls(mut self) -> Self {
        self.defer_calls = true;
        self
    }

    /// The function calls the model finished writing, in output order
    /// (only with [`OutputMapper::deferring_calls`]).
    pub fn take_model_calls(&mut self) -> Vec<ModelCall> {
        std::mem::take(&mut self.model_calls)
    }

    /// Function calls the model finished writing, in output order. Their
    /// items are started and stay in progress until a tool runner answers
    /// them (see [`PendingCall::complete`]).
    pub fn take_pending_calls(&mut self) -> Vec<PendingCall> {
        std::mem::take(&mut self.pending_calls)
    }

    /// Notifications that close every item still open (the response ended
    /// without finishing them) as `incomplete`.
    pub fn close_open(&mut self, now_ms: i64) -> Vec<ServerNotification> {
        let mut open: Vec<OpenItem> = self.open.drain().map(|(_, o)| o).collect();
        open.sort_by_key(|o| o.envelope.started_at_ms);
        open.into_iter()
            .map(|o| {
                let mut envelope = o.envelope;
                envelope.status = ItemStatus::Incomplete;
                envelope.completed_at_ms = Some(now_ms);
                ServerNotification::ItemCompleted(ItemCompletedNotification {
                    item: o.item,
                    thread_id: self.thread_id.clone(),
                    turn_id: self.turn_id.clone(),
                    completed_at_ms: now_ms,
                    envelope: Some(envelope),
                })
            })
            .collect()
    }

    /// The notifications one provider event stands for (often none or one).
    pub fn on_event(&mut self, event: ModelEvent, now_ms: i64) -> Vec<ServerNotification> {
        let mut out = self.map_event(event, now_ms);
        if self.hold_last && !out.is_empty() {
            if let Some(held) = self.held.take() {
                out.insert(0, ServerNotification::ItemCompleted(held));
            }
            if let Some(ServerNotification::ItemCompleted(_)) = out.last()
                && let Some(ServerNotification::ItemCompleted(last)) = out.pop()
            {
                self.held = Some(last);
            }
        }
        // Keep each open item as the reducer sees it, so that closing it
        // early keeps what was streamed.
        for n in out.iter().filter(|n| n.is_delta()) {
            let open = self
                .open
                .values_mut()
                .find(|o| Some(o.item.id()) == n.item_id());
            if let Some(open) = open
                && let Err(e) = spool_core::reducer::apply_delta(&mut open.item, n)
            {
                tracing::warn!(error = %e, "delta does not apply to its own item");
            }
        }
        out
    }

    fn map_event(&mut self, event: ModelEvent, now_ms: i64) -> Vec<ServerNotification> {
        match event {
            ModelEvent::Created { .. } | ModelEvent::Completed { .. } => Vec::new(),
            ModelEvent::OutputItemAdded { output_index, item } => {
                let key = provider_key(&item, output_index);
                self.by_index.insert(output_index, key.clone());
                // An item announced again (a provider repeating
                // `output_item.added`) is the one already started. Starting
                // another would lose the first from `open`: it would stay in
                // progress, and the turn could not complete (found by the
                // `provider_events` fuzz target).
                if self.open.contains_key(&key) {
                    return Vec::new();
                }
                match self.start(&key, &item, now_ms) {
                    Some(n) => vec![n],
                    None => Vec::new(),
                }
            }
            ModelEvent::OutputTextDelta { item_id, delta, .. } => self
                .text_delta(&item_id, delta)
                .map(ServerNotification::AgentMessageDelta)
                .into_iter()
                .collect(),
            ModelEvent::ReasoningSummaryPartAdded {
                item_id,
                summary_index,
            } => self
                .reasoning_id(&item_id)
                .map(|id| {
                    ServerNotification::ReasoningSummaryPartAdded(
                        ReasoningSummaryPartAddedNotification {
                            thread_id: self.thread_id.clone(),
                            turn_id: self.turn_id.clone(),
                            item_id: id,
                            summary_index: summary_index as i64,
                        },
                    )
                })
                .into_iter()
                .collect(),
            ModelEvent::ReasoningSummaryDelta {
                item_id,
                summary_index,
                delta,
            } => self
                .reasoning_id(&item_id)
                .map(|id| {
                    ServerNotification::ReasoningSummaryTextDelta(
                        ReasoningSummaryTextDeltaNotification {
                            thread_id: self.thread_id.clone(),
                            turn_id: self.turn_id.clone(),
                            item_id: id,
                            delta,
                            summary_index: summary_index as i64,
                        },
                    )
                })
                .into_iter()
                .collect(),
            ModelEvent::ReasoningTextDelta {
                item_id,
                content_index,
                delta,
            } => self
                .reasoning_id(&item_id)
                .map(|id| {
                    ServerNotification::ReasoningTextDelta(ReasoningTextDeltaNotification {
                        thread_id: self.thread_id.clone(),
                        turn_id: self.turn_id.clone(),
                        item_id: id,
                        delta,
                        content_index: content_index as i64,
                    })
                })
                .into_iter()
                .collect(),
            // Arguments are not streamed to clients (Codex has no delta for
            // them); the completed functionCall item carries them whole.
            ModelEvent::FunctionCallArgumentsDelta { .. } => Vec::new(),
            ModelEvent::OutputItemDone {
                output_index,
                item,
                raw,
            } => self.finish(output_index, item, raw, now_ms),
        }
    }

    /// The spool id of an open reasoning item. A reasoning event that
    /// names an item of another kind is dropped: the reducer would refuse
    /// it, and a refused event stops the run's appender (found by the
    /// `provider_events` fuzz target: a summary part for a message).
    fn reasoning_id(&self, provider_item_id: &str) -> Option<String> {
        self.open
            .get(provider_item_id)
            .filter(|o| matches!(o.item, ThreadItem::Reasoning { .. }))
            .map(|o| o.item.id().to_owned())
    }

    fn text_delta(&self, provider_item_id: &str, delta: String) -> Option<TextDeltaNotification> {
        let open = self.open.get(provider_item_id)?;
        match open.item {
            ThreadItem::AgentMessage { .. } => Some(TextDeltaNotification {
                thread_id: self.thread_id.clone(),
                turn_id: self.turn_id.clone(),
                item_id: open.item.id().to_owned(),
                delta,
            }),
            _ => None,
        }
    }

    /// Starts the spool item for a provider item; `None` for items spool does
    /// not model (they are skipped, never fatal).
    fn start(&mut self, key: &str, item: &ResponseItem, now_ms: i64) -> Option<ServerNotification> {
        if self.defer_calls
            && let ResponseItem::Known(KnownResponseItem::FunctionCall { .. }) = item
        {
            return None;
        }
        let id = new_item_id();
        let thread_item = match item {
            ResponseItem::Known(KnownResponseItem::Message { .. }) => {
                ThreadItem::agent_message(id, "")
            }
            ResponseItem::Known(KnownResponseItem::Reasoning { .. }) => ThreadItem::Reasoning {
                id,
                summary: Vec::new(),
                content: Vec::new(),
            },
            ResponseItem::Known(KnownResponseItem::FunctionCall { call_id, name, .. }) => {
                ThreadItem::FunctionCall {
                    id,
                    name: name.clone(),
                    call_id: call_id.clone(),
                    arguments: String::new(),
                    status: FunctionCallStatus::InProgress,
                    output: None,
                    duration_ms: None,
                }
            }
            ResponseItem::Known(KnownResponseItem::WebSearchCall { action, .. }) => {
                ThreadItem::WebSearch {
                    id,
                    query: search_query(action.as_ref()),
                    action: None,
                    results: None,
                }
            }
            // Inputs never come back as output; other types are not modelled.
            ResponseItem::Known(KnownResponseItem::FunctionCallOutput { .. })
            | ResponseItem::Other(_) => {
                tracing::debug!(?item, "skipping an output item spool does not model");
                return None;
            }
        };
        let audience = self
            .audience
            .unwrap_or_else(|| thread_item.kind().default_audience());
        let mut envelope = ItemEnvelope::started(&self.agent, audience, now_ms);
        envelope.provider_data = provider_ids(item).map(Arc::new);
        self.open.insert(
            key.to_owned(),
            OpenItem {
                item: thread_item.clone(),
                envelope: envelope.clone(),
            },
        );
        Some(ServerNotification::ItemStarted(ItemStartedNotification {
            item: thread_item,
            thread_id: self.thread_id.clone(),
            turn_id: self.turn_id.clone(),
            started_at_ms: now_ms,
            envelope: Some(envelope),
        }))
    }

    fn finish(
        &mut self,
        output_index: usize,
        item: ResponseItem,
        raw: Value,
        now_ms: i64,
    ) -> Vec<ServerNotification> {
        let key = self
            .by_index
            .get(&output_index)
            .cloned()
            .unwrap_or_else(|| provider_key(&item, output_index));
        let mut out = Vec::new();
        if self.defer_calls
            && let ResponseItem::Known(KnownResponseItem::FunctionCall {
                call_id,
                name,
                arguments,
                ..
            }) = &item
        {
            self.model_calls.push(ModelCall {
                call_id: call_id.clone(),
                name: name.clone(),
                arguments: arguments.clone(),
                raw,
            });
            return out;
        }
        if !self.open.contains_key(&key) {
            // Some providers send an item only when it is done.
            out.extend(self.start(&key, &item, now_ms));
        }
        let Some(open) = self.open.remove(&key) else {
            return out;
        };
        let final_item = completed_item(open.item, &item);
        let cut = raw.get("status").and_then(Value::as_str) == Some("incomplete");
        let mut envelope = open.envelope;
        envelope.provider_data = Some(Arc::new(raw));
        if let ThreadItem::FunctionCall { .. } = final_item {
            // Completed by whoever runs the tool, with its output.
            self.pending_calls.push(PendingCall {
                thread_id: self.thread_id.clone(),
                turn_id: self.turn_id.clone(),
                item: final_item,
                envelope,
            });
            return out;
        }
        // A provider that cut the item short (the token limit, a content
        // filter) says so in its status: the item is incomplete, not done.
        envelope.status = match cut {
            true => ItemStatus::Incomplete,
            false => ItemStatus::Completed,
        };
        envelope.completed_at_ms = Some(now_ms);
        out.push(ServerNotification::ItemCompleted(
            ItemCompletedNotification {
                item: final_item,
                thread_id: self.thread_id.clone(),
                turn_id: self.turn_id.clone(),
                completed_at_ms: now_ms,
                envelope: Some(envelope),
            },
        ));
        out
    }
}

/// A function call the model made, started and waiting for its output.
#[derive(Debug, Clone)]
pub struct PendingCall {
    thread_id: String,
    turn_id: String,
    pub item: ThreadItem,
    pub envelope: ItemEnvelope,
}

impl PendingCall {
    /// The call's name and arguments, as the model wrote them.
    pub fn name_and_arguments(&self) -> (&str, &str) {
        match &self.item {
            ThreadItem::FunctionCall {
                name, arguments, ..
            } => (name, arguments),
            other => unreachable!("pending calls are function calls, not {:?}", other.kind()),
        }
    }

    /// The `item/completed` that answers the call.
    pub fn complete(
        self,
        status: FunctionCallStatus,
        output: String,
        duration_ms: i64,
        now_ms: i64,
    ) -> ServerNotification {
        let mut item = self.item;
        if let ThreadItem::FunctionCall {
            status: s,
            output: o,
            duration_ms: d,
            ..
        } = &mut item
        {
            *s = status;
            *o = Some(output);
            *d = Some(duration_ms);
        }
        let mut envelope = self.envelope;
        envelope.status = match status {
            FunctionCallStatus::Completed => ItemStatus::Completed,
            FunctionCallStatus::Declined => ItemStatus::Declined,
            FunctionCallStatus::Failed | FunctionCallStatus::InProgress => ItemStatus::Failed,
        };
        envelope.completed_at_ms = Some(now_ms);
        ServerNotification::ItemCompleted(ItemCompletedNotification {
            item,
            thread_id: self.thread_id,
            turn_id: self.turn_id,
            completed_at_ms: now_ms,
            envelope: Some(envelope),
        })
    }
}

pub fn new_item_id() -> String {
    uuid::Uuid::now_v7().to_string()
}

#[cfg(test)]
#[path = "output_mapper_tests.rs"]
mod tests;

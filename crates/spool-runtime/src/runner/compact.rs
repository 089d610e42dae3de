//! Compaction: a turn of its own that summarizes the thread's history so
//! far into one `contextCompaction` item, which later `llm` views send in
//! place of everything before it. Nothing is deleted: the `all` and
//! `client` views still show every original item.
//!
//! The turn holds one item. It starts without a summary, the model is
//! asked for one (the thread's whole `llm` view, then the request to
//! summarize; no tools; in parts, oldest first, each with the summary so
//! far, when the history does not fit one call), and it completes with the summary and the seq range it
//! replaces (`replaces`: from the thread's first event, or the previous
//! compaction, through the last event before this turn). Then
//! `thread/compacted` (Codex's deprecated notice of the same) and
//! `turn/completed`. A compaction whose model call fails completes
//! `failed` with no summary: it replaces nothing, and the turn fails with
//! the provider's error.
//!
//! When the provider holds the history (`previousResponseId`,
//! `conversationId`) it still holds everything the summary replaces, so
//! the compaction starts it over: no previous response, no conversation
//! (a new one is created at the next request), and the next request
//! carries the summary and what came after it.
//!
//! [`Runner::run_streamed`] compacts first, as its own turn, when the
//! thread's history would pass the runner's [`CompactionPolicy`]; a turn
//! that outgrows the window on its own is compacted inside it, before its
//! next model call, the same way: the item is then one of that turn's
//! (see `input.rs`).

use std::sync::Arc;

use futures_util::StreamExt;
use serde_json::{Value, json};
use spool_core::llm::{
    COMPACTED_OUTPUT_KEY, COMPACTION_PREFIX, HistoryCursor, LlmViewOptions, splits_before,
};
use spool_model::{ModelEvent, ModelRequest};
use spool_protocol::responses::{ContentItem, KnownResponseItem, ResponseItem};
use spool_protocol::*;
use spool_store::{Appended, Store, StoredHistory};
use tokio::sync::{mpsc, watch};

use super::drive::{Opening, Run};
use super::{RunError, RunResult, Runner};
use crate::agent::Agent;
use crate::output_mapper::new_item_id;

/// What the summarizing model is told.
pub const COMPACTION_INSTRUCTIONS: &str = "\
You are compacting a conversation so that it can go on within a limited \
context window. Write a summary that lets the assistant continue the work \
as if it still had the whole conversation: the user's goals and \
constraints, decisions made and why, facts learned (names, paths, numbers, \
commands and their results), what was done, what is still open, and the \
next step. Keep exact values; drop pleasantries and repetition. Write \
plain text, no preamble.";

/// The request that closes the summarizing call's input.
const SUMMARIZE: &str = "Summarize the conversation so far, following your instructions.";

/// When a thread is compacted before a turn: once its history would pass
/// `compact_at` of the model's `context_window` (in o200k_base tokens).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CompactionPolicy {
    pub context_window: usize,
    /// A share of the window, in (0, 1].
    pub compact_at: f64,
}

impl CompactionPolicy {
    /// The history size, in tokens, past which the thread is compacted.
    pub fn threshold(&self) -> usize {
        let share = self.compact_at.clamp(0.0, 1.0);
        // Window sizes are far below 2^52: the conversion is exact enough.
        (self.context_window as f64 * share) as usize
    }
}

impl<S: Store + Clone + 'static> Runner<S> {
    /// Compacts the thread's history now, as one turn (see the module
    /// docs), as [`Runner::run`] runs one: nobody watches its events (the
    /// log has them) and nothing interrupts it.
    pub async fn compact(&self, agent: Arc<Agent>, thread_id: &str) -> Result<RunResult, RunError> {
        let (events, _) = mpsc::unbounded_channel();
        let (_stop, interrupt) = watch::channel(false);
        self.compact_streamed(agent, thread_id, &events, interrupt)
            .await
    }

    /// Compacts the thread's history now, as one turn (see the module
    /// docs), streaming its events as [`Runner::run_streamed`] does.
    /// `agent` gives the model.
    pub async fn compact_streamed(
        &self,
        agent: Arc<Agent>,
        thread_id: &str,
        events: &mpsc::UnboundedSender<Appended>,
        interrupt: watch::Receiver<bool>,
    ) -> Result<RunResult, RunError> {
        let run = Run::start(self, agent, thread_id, events, interrupt, Opening::Compact).await?;
        run.compact().await
    }

    /// Whether the thread's history, with `input` added, would pass the
    /// compaction threshold.
    pub(crate) async fn needs_compaction(
        &self,
        thread_id: &str,
        input: &[UserInput],
    ) -> Result<bool, RunError> {
        let Some(policy) = self.compaction else {
            return Ok(false);
        };
        let incoming: usize = input
            .iter()
            .map(|part| match part {
                UserInput::Text { text, .. } => spool_core::tokens::count_text(text),
                _ => 0,
            })
            .sum();
        // When the new input alone fills the window, summarizing the rest
        // still makes the most room for it.
        let threshold = policy.threshold().saturating_sub(incoming);
        // Packing stops at the budget: this reads no more than the
        // threshold's worth of history.
        let view = self
            .store
            .llm_view(
                thread_id,
                LlmViewOptions {
                    token_budget: Some(threshold),
                    ..LlmViewOptions::default()
                },
            )
            .await?;
        let over = view.turns_omitted > 0 || view.total_tokens > threshold;
        Ok(over && !view.input.is_empty())
    }
}

impl<S: Store + Clone + 'static> Run<'_, S> {
    /// The compaction turn after `turn/started`.
    async fn compact(mut self) -> Result<RunResult, RunError> {
        self.appender.sync().await?;
        let turn_ordinal = self
            .runner
            .store
            .turns(&self.state.thread_id)
            .await?
            .iter()
            .find(|turn| turn.id == self.state.turn_id)
            .map_or(0, |turn| turn.ordinal);
        match self.compact_history(turn_ordinal.saturating_sub(1)).await? {
            Ok(()) => self.finish(TurnStatus::Completed, None).await,
            Err(error) => self.finish(TurnStatus::Failed, Some(error)).await,
        }
    }

    /// Compacts the thread's history through `through_seq` (everything
    /// logged so far: sync the appender first) into a `contextCompaction`
    /// item of this turn, and starts a provider-held history over from it.
    /// `Err`: the summarizing call failed; the item is `failed` and
    /// replaces nothing.
    pub(super) async fn compact_history(
        &mut self,
        through_seq: u64,
    ) -> Result<Result<(), TurnError>, RunError> {
        let history = self.compaction_input().await?;
        let (mut open, started) = self.sink.start(
            ThreadItem::ContextCompaction {
                id: new_item_id(),
                summary: None,
                replaces: None,
            },
            None,
            None,
        );
        self.appender.push(vec![started])?;
        if history.is_empty() {
            // Nothing to summarize: an item that replaces nothing.
            let done = self.sink.complete(open, ItemStatus::Completed);
            self.appender.push(vec![done, self.compacted()])?;
            return Ok(Ok(()));
        }
        let replaces = Some(SeqRange {
            from_seq: self.replaced_from().await?,
            through_seq,
        });
        let id = open.item.id().to_owned();
        if let Some(items) = self.provider_compaction().await? {
            open.item = ThreadItem::ContextCompaction {
                id,
                summary: Some(format!(
                    "(compacted by the provider: {} opaque item(s) stand for this history)",
                    items.len()
                )),
                replaces,
            };
            open.envelope.provider_data = Some(Arc::new(json!({ COMPACTED_OUTPUT_KEY: items })));
        } else {
            let summary = match self.summarize_all(history).await {
                Ok(summary) => summary,
                Err(error) => {
                    let failed = self.sink.complete(open, ItemStatus::Failed);
                    self.appender.push(vec![failed])?;
                    return Ok(Err(error));
                }
            };
            open.item = ThreadItem::ContextCompaction {
                id,
                summary: Some(summary),
                replaces,
            };
        }
        let done = self.sink.complete(open, ItemStatus::Completed);
        self.appender.push(vec![done, self.compacted()])?;
        self.appender.sync().await?;
        if let Some(owner) = &mut self.owner {
            // The provider holds what the summary replaces: start over
            // from the summary (the records after what it replaces).
            owner.stored = StoredHistory {
                cursor: HistoryCursor {
                    through_ordinal: through_seq,
                    ..HistoryCursor::default()
                },
                conversation_id: None,
            };
            self.runner
                .store
                .set_history(&self.state.thread_id, &owner.stored)
                .await?;
        }
        Ok(Ok(()))
    }

    /// In `previousResponseId` mode with a stored response to continue
    /// from: the provider's compaction of its history, from its compact
    /// endpoint. `None` (summarize instead) in every other case, and when
    /// the endpoint is missing or refuses.
    async fn provider_compaction(&mut self) -> Result<Option<Vec<Value>>, RunError> {
        let Some(owner) = &mut self.owner else {
            return Ok(None);
        };
        if owner.mode != HistoryMode::PreviousResponseId
            || owner.stored.cursor.previous_response_id.is_none()
        {
            return Ok(None);
        }
        let mut request = ModelRequest {
            model: self.agent.model.model.clone(),
            instructions: self.agent.instructions.clone(),
            ..ModelRequest::default()
        };
        let thread_id = self.state.thread_id.clone();
        let prepared = owner
            .prepare(
                self.runner,
                &thread_id,
                self.state.reasoning_ids,
                &mut request,
            )
            .await?;
        if prepared.is_err() {
            return Ok(None);
        }
        match self.runner.provider.compact(request).await {
            Ok(items) => Ok(Some(items)),
            Err(error) => {
                tracing::info!(%thread_id, %error, "no provider compaction; summarizing instead");
                Ok(None)
            }
        }
    }

    /// The history the summary replaces, as the model would get it: all
    /// of it (the previous compaction's summary, then everything after it).
    async fn compaction_input(&self) -> Result<Vec<ResponseItem>, RunError> {
        let view = self
            .runner
            .store
            .llm_view(
                &self.state.thread_id,
                LlmViewOptions {
                    token_budget: None,
                    reasoning_ids: self.state.reasoning_ids,
                    extendable: false,
                    skip_token_counts: false,
                },
            )
            .await?;
        Ok(view.input)
    }

    /// The most history one summarizing call is given. Under a policy, half
    /// the window: the rest is for the instructions and the summary itself,
    /// and for the difference between o200k_base counts and the model's
    /// own. (Not the threshold: a history that passed it would then never
    /// fit one call.)
    fn summarizing_budget(&self) -> Option<usize> {
        self.runner
            .compaction
            .map(|policy| policy.context_window / 2)
            .or(self.runner.history_token_budget)
    }

    /// A summary of all of `history`. History that does not fit one call's
    /// budget is summarized in parts, oldest first, each call given the
    /// summary so far and the next part: nothing the compaction replaces
    /// is left out of its summary. An empty summary from any call is an
    /// error.
    async fn summarize_all(&mut self, history: Vec<ResponseItem>) -> Result<String, TurnError> {
        // With no budget, one part holds everything.
        let budget = self.summarizing_budget().unwrap_or(usize::MAX);
        let mut rest = history.as_slice();
        let mut summary: Option<String> = None;
        while !rest.is_empty() {
            let mut input = Vec::new();
            let mut used = 0;
            if let Some(summary) = &summary {
                let so_far = ResponseItem::user_text(format!("{COMPACTION_PREFIX}{summary}"));
                used += spool_core::tokens::count_input_item(&so_far) as usize;
                input.push(so_far);
            }
            let take = part_length(rest, budget.saturating_sub(used));
            input.extend_from_slice(&rest[..take]);
            rest = &rest[take..];
            let written = self.summarize(input).await?;
            if written.trim().is_empty() {
                return Err(TurnError::new(
                    "the model wrote no summary".to_owned(),
                    None,
                ));
            }
            summary = Some(written);
        }
        Ok(summary.unwrap_or_default())
    }

    /// The first seq the compaction replaces: just after the previous
    /// compaction (in an earlier turn or earlier in this one; the one being
    /// made has no summary yet), or the thread's first.
    async fn replaced_from(&self) -> Result<u64, RunError> {
        let records = self
            .runner
            .store
            .items(&self.state.thread_id, spool_core::View::All)
            .await?;
        let previous = records
            .iter()
            .filter(|record| spool_core::llm::is_cut_point(record))
            .map(|record| record.seq + 1)
            .next_back();
        Ok(previous.unwrap_or(1))
    }

    /// One model call, no tools: the summary's text.
    async fn summarize(&mut self, mut input: Vec<ResponseItem>) -> Result<String, TurnError> {
        input.push(ResponseItem::user_text(SUMMARIZE));
        let request = ModelRequest {
            model: self.agent.model.model.clone(),
            instructions: Some(COMPACTION_INSTRUCTIONS.to_owned()),
            input,
            max_output_tokens: self.agent.model.max_output_tokens,
            temperature: self.agent.model.temperature,
            ..ModelRequest::default()
        };
        self.state.step += 1;
        let mut stream = self.runner.provider.stream(request);
        let mut streamed = String::new();
        let mut done = String::new();
        let mut interrupt = self.interrupt.clone();
        loop {
            let event = tokio::select! {
                event = stream.next() => event,
                _ = interrupt.wait_for(|stop| *stop) => {
                    return Err(TurnError::new("the compaction was interrupted".to_owned(), None));
                }
            };
            match event {
                None => break,
                Some(Err(error)) => {
                    let info = error.codex_error_info();
                    return Err(TurnError::new(error.to_string(), Some(info)));
                }
                Some(Ok(ModelEvent::OutputTextDelta { delta, .. })) => streamed.push_str(&delta),
                Some(Ok(ModelEvent::OutputItemDone {
                    item: ResponseItem::Known(KnownResponseItem::Message { content, .. }),
                    ..
                })) => {
                    for part in content {
                        if let ContentItem::OutputText { text, .. } = part {
                            done.push_str(&text);
                        }
                    }
                }
                Some(Ok(ModelEvent::Completed { .. })) => break,
                Some(Ok(_)) => {}
            }
        }
        // The finished message is authoritative; deltas stand in for a
        // provider that sends none.
        Ok(if done.is_empty() { streamed } else { done })
    }

    fn compacted(&self) -> ServerNotification {
        ServerNotification::ThreadCompacted(ContextCompactedNotification {
            thread_id: self.state.thread_id.clone(),
            turn_id: self.state.turn_id.clone(),
        })
    }
}

/// How many of `items`' first items one summarizing call takes: as many
/// as fit `budget` tokens, at least one, and never a split the API would
/// refuse (see `splits_before`), even if that passes the budget.
fn part_length(items: &[ResponseItem], budget: usize) -> usize {
    let mut used = 0;
    let mut take = 0;
    for (index, item) in items.iter().enumerate() {
        let tokens = spool_core::tokens::count_input_item(item) as usize;
        if index > 0 && used + tokens > budget && splits_before(items, index) {
            break;
        }
        used += tokens;
        take = index + 1;
    }
    take
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parts_fill_the_budget_and_keep_calls_with_their_outputs() {
        let text = |n: usize| ResponseItem::user_text("word ".repeat(n));
        let call = ResponseItem::Known(KnownResponseItem::FunctionCall {
            id: None,
            call_id: "c".into(),
            name: "f".into(),
            arguments: "{}".into(),
            status: None,
        });
        let output = ResponseItem::Known(KnownResponseItem::FunctionCallOutput {
            call_id: "c".into(),
            output: "word ".repeat(50),
        });
        let tokens = |item: &ResponseItem| spool_core::tokens::count_input_item(item) as usize;
        let items = vec![text(40), text(40), call, output, text(10)];
        let two = tokens(&items[0]) + tokens(&items[1]);
        assert_eq!(part_length(&items, two), 2);
        // The output goes with its call even past the budget.
        assert_eq!(part_length(&items, two + tokens(&items[2])), 4);
        // One item always goes, however small the budget.
        assert_eq!(part_length(&items, 0), 1);
        assert_eq!(part_length(&items, usize::MAX), 5);
        assert_eq!(part_length(&[], 10), 0);
    }
}

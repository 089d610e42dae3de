//! The input of each model call of a turn, and compaction inside a turn.
//!
//! In `replay` mode the input is the thread's `llm` view, grown from one
//! step to the next by the records the step logged; in the server-managed
//! modes it is what the provider does not hold yet (`history.rs`).
//!
//! A turn can outgrow the model's window on its own: an agent that reads
//! large files step after step never reaches the next turn's check (see
//! `compact.rs`). So before every model call after the turn's first, the
//! history the call would continue is measured against the runner's
//! [`CompactionPolicy`](super::CompactionPolicy), and past its threshold
//! the thread is compacted there, inside the turn: a `contextCompaction`
//! item in this turn replaces everything before it (this turn's earlier
//! items included), and the call goes out with the summary instead.
//!
//! What "the history" measures depends on who holds it:
//! - `replay`: the view about to be sent, in o200k_base tokens (the same
//!   count the check before a turn uses);
//! - `previousResponseId`, `conversationId`: the provider's own count of
//!   the last response's context and output (its `usage`), plus the new
//!   input. A provider that reports no usage is never compacted inside a
//!   turn.
//!
//! A compaction that fails inside a turn is on record (its item
//! `failed`), and the turn goes on with its history as it is, without
//! trying again; one that is interrupted interrupts the turn.

use spool_protocol::responses::ResponseItem;
use spool_protocol::{TokenUsageBreakdown, TurnError};
use spool_store::Store;

use super::RunError;
use super::drive::{Run, StepEnd};
use super::history::InFlight;
use spool_core::llm::LlmViewOptions;
use spool_model::ModelRequest;

/// The context a response was made from plus its output, in tokens: what
/// a provider-held history holds after it.
pub(super) fn context_size(usage: &TokenUsageBreakdown) -> usize {
    let held = usage.input_tokens.saturating_add(usage.output_tokens);
    usize::try_from(held).unwrap_or(0)
}

impl<S: Store + Clone + 'static> Run<'_, S> {
    /// Fills `request`'s input (and, in the server-managed modes, what it
    /// continues from), compacting first when the turn has outgrown the
    /// window. `Err` ends the step without a model call.
    pub(super) async fn input(
        &mut self,
        request: &mut ModelRequest,
    ) -> Result<Result<Option<InFlight>, StepEnd>, RunError> {
        let mut compacted = false;
        loop {
            // A review is its own conversation, replayed whatever the owner.
            let flight = match &mut self.owner {
                Some(owner) if !self.review => {
                    let prepared = owner
                        .prepare(
                            self.runner,
                            &self.state.thread_id,
                            self.state.reasoning_ids,
                            request,
                        )
                        .await?;
                    match prepared {
                        Ok(flight) => Some(flight),
                        Err(e) => {
                            let info = e.codex_error_info();
                            let error = TurnError::new(e.to_string(), Some(info));
                            return Ok(Err(StepEnd::Failed(error)));
                        }
                    }
                }
                _ => {
                    request.input = self.history().await?;
                    None
                }
            };
            if compacted || !self.outgrown(&request.input) {
                return Ok(Ok(flight));
            }
            compacted = true;
            if let Err(end) = self.compact_in_turn().await? {
                return Ok(Err(end));
            }
        }
    }

    /// Whether the history the next call continues has passed the
    /// compaction threshold, inside a turn (see the module docs).
    fn outgrown(&self, input: &[ResponseItem]) -> bool {
        let Some(policy) = self.runner.compaction else {
            return false;
        };
        // The turn's first call was measured before the turn began.
        if self.review || self.state.step == 0 || self.compaction_failed {
            return false;
        }
        let tokens = match &self.owner {
            None => self.replay.as_ref().map_or(0, |view| view.total_tokens),
            Some(_) => match self.context_tokens {
                Some(held) => {
                    let new: u64 = input
                        .iter()
                        .map(|item| u64::from(spool_core::tokens::count_input_item(item)))
                        .sum();
                    held.saturating_add(usize::try_from(new).unwrap_or(usize::MAX))
                }
                None => return false,
            },
        };
        tokens > policy.threshold()
    }

    /// Compacts everything logged so far, inside this turn.
    async fn compact_in_turn(&mut self) -> Result<Result<(), StepEnd>, RunError> {
        self.appender.sync().await?;
        let thread_id = self.state.thread_id.clone();
        let through_seq = match self.runner.store.thread(&thread_id).await? {
            Some(record) => record.last_seq,
            None => return Err(spool_store::StoreError::UnknownThread(thread_id).into()),
        };
        let outcome = self.compact_history(through_seq).await?;
        // The next view starts at the compaction.
        self.replay = None;
        self.context_tokens = None;
        match outcome {
            Ok(()) => Ok(Ok(())),
            Err(_) if *self.interrupt.borrow() => Ok(Err(StepEnd::Interrupted)),
            Err(error) => {
                tracing::warn!(
                    %thread_id,
                    error = %error.message,
                    "compaction inside the turn failed; going on uncompacted"
                );
                self.compaction_failed = true;
                Ok(Ok(()))
            }
        }
    }

    /// The thread's model history, as the next call gets it (committed
    /// events only: sync the appender first). A review sees its own turn
    /// only.
    ///
    /// From one step to the next the view grows by the records the step
    /// logged: those are read and added (`LlmView::extend`), not the whole
    /// view again, whenever that gives exactly what a fresh read would.
    pub(super) async fn history(&mut self) -> Result<Vec<ResponseItem>, RunError> {
        if self.review {
            return self.review_history().await;
        }
        let options = LlmViewOptions {
            token_budget: self.runner.history_token_budget,
            reasoning_ids: self.state.reasoning_ids,
            extendable: true,
            // The view's size matters only to compaction (`outgrown`).
            skip_token_counts: self.runner.compaction.is_none(),
        };
        let store = &self.runner.store;
        let thread_id = &self.state.thread_id;
        if let Some(view) = &mut self.replay
            && let Some(base) = &view.base
        {
            let records = store
                .llm_records_after(thread_id, base.through_ordinal(), &[])
                .await?;
            if view.extend(&records, &options) {
                let input = std::mem::take(&mut view.input);
                #[cfg(debug_assertions)]
                {
                    // Every test run checks the invariant `extend` rests on.
                    let fresh = store.llm_view(thread_id, options.clone()).await?;
                    assert_eq!(
                        input, fresh.input,
                        "an extended view differs from a fresh read"
                    );
                }
                return Ok(input);
            }
        }
        let mut view = store.llm_view(thread_id, options).await?;
        let input = std::mem::take(&mut view.input);
        self.replay = Some(view);
        Ok(input)
    }
}

//! Ending a run: pausing (everything durable, the state saved) or
//! finishing the turn, and the result either way.

use spool_core::View;
use spool_core::llm::LlmViewOptions;
use spool_core::run_state::RunState;
use spool_protocol::responses::ResponseItem;
use spool_protocol::*;
use spool_store::Store;

use super::drive::Run;
use super::{RunError, RunResult, RunStatus, Runner};
use crate::now_ms;

impl<S: Store + Clone + 'static> Run<'_, S> {
    /// Saves the run state, once the turn has one (it gets one when it
    /// first waits on a request).
    pub(super) async fn save_state(&mut self) -> Result<(), RunError> {
        if !self.persisted {
            return Ok(());
        }
        self.write_state().await
    }

    /// Makes everything appended so far durable, then saves the run state
    /// over it.
    async fn write_state(&mut self) -> Result<(), RunError> {
        self.appender.sync().await?;
        let snapshot = self.snapshot().await?;
        self.runner
            .store
            .save_run_state(&self.state.thread_id, &self.state.turn_id, snapshot)
            .await?;
        Ok(())
    }

    /// The run state as JSON, its `input` brought up to date first: the
    /// history the model saw plus what it has not seen yet (tool outputs
    /// not yet sent), from the store (synced by the caller).
    pub(super) async fn snapshot(&mut self) -> Result<String, RunError> {
        let input = self.history().await?;
        set_input(&mut self.state, &input);
        self.state.history = self.owner.as_ref().and_then(|owner| owner.snapshot());
        Ok(self.state.to_json())
    }

    /// Stops here, waiting on a person; everything so far is durable.
    pub(super) async fn pause(mut self) -> Result<RunResult, RunError> {
        self.write_state().await?;
        let Run {
            runner,
            appender,
            state,
            final_text,
            ..
        } = self;
        appender.finish().await?;
        result(runner, state, TurnStatus::InProgress, None, final_text).await
    }

    /// Ends the turn with `status`.
    pub(super) async fn finish(
        self,
        status: TurnStatus,
        error: Option<TurnError>,
    ) -> Result<RunResult, RunError> {
        let thread_id = self.state.thread_id.clone();
        let turn_id = self.state.turn_id.clone();
        // Calls still waiting will never run: decline them.
        let mut run = self;
        for (request, filed) in std::mem::take(&mut run.waiting) {
            run.cancel_request(request, filed).await?;
        }
        if run.review {
            // The review text is the reviewer's final answer; a review that
            // did not finish has none.
            let review = match status {
                TurnStatus::Completed => run.final_text.clone().unwrap_or_default(),
                TurnStatus::Interrupted | TurnStatus::Failed | TurnStatus::InProgress => {
                    String::new()
                }
            };
            run.appender
                .push(super::review::closing(&run.sink, review))?;
        }
        if let Some(error) = &error {
            run.appender
                .push(vec![ServerNotification::Error(ErrorNotification {
                    error: error.clone(),
                    will_retry: false,
                    thread_id: thread_id.clone(),
                    turn_id: turn_id.clone(),
                })])?;
        }
        if let Some(last) = run.usage {
            let update =
                crate::usage::token_usage_update(&run.runner.store, &thread_id, &turn_id, last)
                    .await?;
            run.appender.push(vec![update])?;
        }
        let completed_at_ms = now_ms();
        let mut turn = Turn::new(turn_id.clone(), status);
        turn.error = error.clone();
        turn.started_at = Some(run.started_at_ms / 1000);
        turn.completed_at = Some(completed_at_ms / 1000);
        turn.duration_ms = Some(completed_at_ms - run.started_at_ms);
        turn.token_usage = run.usage;
        // In summary form, as Codex sends it: clients read the final
        // answer from here.
        turn.items = run.final_message.take().into_iter().collect();
        turn.items_view = TurnItemsView::Summary;
        run.appender.push(vec![
            ServerNotification::TurnCompleted(TurnCompletedNotification {
                thread_id: thread_id.clone(),
                turn,
            }),
            super::drive::status_changed(&thread_id, ThreadStatus::Idle),
        ])?;
        let Run {
            runner,
            appender,
            state,
            final_text,
            persisted,
            usage,
            ..
        } = run;
        appender.finish().await?;
        if persisted {
            runner.store.clear_run_state(&thread_id, &turn_id).await?;
        }
        let mut result = result(runner, state, status, error, final_text).await?;
        result.usage = usage;
        Ok(result)
    }
}

async fn result<S: Store>(
    runner: &Runner<S>,
    mut state: RunState,
    status: TurnStatus,
    error: Option<TurnError>,
    final_output: Option<String>,
) -> Result<RunResult, RunError> {
    // Both reads cover the whole thread: skipped for callers that stream
    // the events and never look at the result's items (the server).
    let (items, input_list) = match runner.collect_results {
        true => {
            let items = runner
                .store
                .items(&state.thread_id, View::All)
                .await?
                .into_iter()
                .filter(|record| record.turn_id == state.turn_id)
                .collect();
            let input_list = runner
                .store
                .llm_view(&state.thread_id, LlmViewOptions::default())
                .await?
                .input;
            set_input(&mut state, &input_list);
            (items, input_list)
        }
        false => (Vec::new(), Vec::new()),
    };
    Ok(RunResult {
        thread_id: state.thread_id.clone(),
        turn_id: state.turn_id.clone(),
        status: RunStatus::of(status),
        error,
        items,
        final_output,
        state,
        input_list,
        usage: None,
    })
}

/// Sets the state's `input` to `input` (the thread's model view). The
/// model has seen at most all of it: a view packed under a budget can be
/// shorter than the one the last model call got, and the snapshot must
/// stay valid (`acknowledgedInputCount <= input.len()`).
fn set_input(state: &mut RunState, input: &[ResponseItem]) {
    state.input = input
        .iter()
        .map(|item| serde_json::to_value(item).unwrap_or_default())
        .collect();
    state.acknowledged_input_count = state.acknowledged_input_count.min(state.input.len());
}

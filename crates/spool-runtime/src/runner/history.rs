//! Who owns the conversation a run continues, and what each request
//! carries for it.
//!
//! - `replay`: spool. Each request carries the thread's `llm` view under
//!   the history budget, read from the store.
//! - `previousResponseId`: the Responses API. Each request names the
//!   latest stored response and carries only what the provider does not
//!   hold (`spool_core::llm::HistoryCursor`), with `store: true`.
//! - `conversationId`: an OpenAI conversation, created before the first
//!   request when the thread has none. Each request names it and carries
//!   only what it does not hold.
//!
//! The cursor moves only when a response was stored, and is written to the
//! store after the records it covers are committed; see
//! `docs/internals/conversation-ownership.md`.

use std::collections::HashSet;

use spool_core::llm::{Prepared, ReasoningIdPolicy, Response, Sent};
use spool_core::run_state::RunHistory;
use spool_model::ModelError;
use spool_model::ModelRequest;
use spool_protocol::responses::ResponseItem;
use spool_protocol::{HistoryMode, ServerNotification};
use spool_store::{Store, StoredHistory};

use super::{RunError, Runner};

/// A server-managed history during a run.
#[derive(Debug, Clone)]
pub(crate) struct ServerHistory {
    pub mode: HistoryMode,
    pub stored: StoredHistory,
}

/// The request being made, as the tracker needs to finish it.
pub(crate) struct InFlight {
    prepared: Prepared,
    sent: Option<Sent>,
    /// Items the response started: its output.
    produced: HashSet<String>,
}

impl ServerHistory {
    /// The thread's history owner: `None` for `replay`. A provider that
    /// keeps no history cannot own one.
    ///
    /// A paused run's snapshot carries the history as it left it
    /// (`from_state`); the store's copy wins only when it is further along
    /// (another process went on since the snapshot was taken), so a
    /// resumed run never sends again what the provider acknowledged.
    pub async fn load<S: Store>(
        runner: &Runner<S>,
        thread_id: &str,
        from_state: Option<&RunHistory>,
    ) -> Result<Option<ServerHistory>, RunError> {
        let Some(record) = runner.store.thread(thread_id).await? else {
            return Err(spool_store::StoreError::UnknownThread(thread_id.to_owned()).into());
        };
        let mode = record.thread.history_owner.unwrap_or_default();
        if let Some(state) = from_state
            && state.mode != mode
        {
            return Err(RunError::StateHistoryMismatch {
                state: state.mode,
                thread: mode,
            });
        }
        if mode == HistoryMode::Replay {
            return Ok(None);
        }
        if !runner.provider.keeps_history() {
            return Err(RunError::HistoryNotKept {
                mode,
                provider: runner.provider.name().to_owned(),
            });
        }
        let in_store = runner.store.history(thread_id).await?.unwrap_or_default();
        let stored = match from_state {
            Some(state) if state.cursor.through_ordinal >= in_store.cursor.through_ordinal => {
                StoredHistory {
                    cursor: state.cursor.clone(),
                    conversation_id: state.conversation_id.clone().or(in_store.conversation_id),
                }
            }
            Some(_) | None => in_store,
        };
        Ok(Some(ServerHistory { mode, stored }))
    }

    /// The history as a RunState carries it.
    pub fn snapshot(&self) -> Option<RunHistory> {
        if self.mode == HistoryMode::Replay {
            return None;
        }
        Some(RunHistory {
            mode: self.mode,
            cursor: self.stored.cursor.clone(),
            conversation_id: self.stored.conversation_id.clone(),
        })
    }

    /// Prepares the next request's input and names what it continues
    /// from. Creates the thread's conversation first if it needs one; the
    /// provider's refusal is the inner error (it fails the turn).
    pub async fn prepare<S: Store>(
        &mut self,
        runner: &Runner<S>,
        thread_id: &str,
        reasoning_ids: ReasoningIdPolicy,
        request: &mut ModelRequest,
    ) -> Result<Result<InFlight, ModelError>, RunError> {
        if self.mode == HistoryMode::ConversationId && self.stored.conversation_id.is_none() {
            let id = match runner.provider.create_conversation().await {
                Ok(id) => id,
                Err(e) => return Ok(Err(e)),
            };
            self.stored.conversation_id = Some(id);
            runner.store.set_history(thread_id, &self.stored).await?;
        }
        let cursor = &self.stored.cursor;
        let records = runner
            .store
            .llm_records_after(thread_id, cursor.through_ordinal, &cursor.unsent_item_ids())
            .await?;
        let prepared = cursor.prepare(&records, reasoning_ids);
        request.input = prepared.input.clone();
        request.store = Some(true);
        match self.mode {
            HistoryMode::PreviousResponseId => {
                request.previous_response_id = cursor.previous_response_id.clone();
            }
            HistoryMode::ConversationId => {
                request.conversation = self.stored.conversation_id.clone();
            }
            HistoryMode::Replay => {}
        }
        Ok(Ok(InFlight {
            prepared,
            sent: None,
            produced: HashSet::new(),
        }))
    }

    /// Moves the cursor after a response that ended (`completed`) with
    /// `response_id` and made `calls`, and records it. A response the
    /// provider did not store moves nothing.
    pub async fn finish<S: Store>(
        &mut self,
        runner: &Runner<S>,
        thread_id: &str,
        flight: InFlight,
        completed: bool,
        response_id: Option<String>,
        calls: Vec<String>,
    ) -> Result<(), RunError> {
        let Some(sent) = flight.sent else {
            return Ok(());
        };
        let stored = completed
            && match self.mode {
                HistoryMode::PreviousResponseId => response_id.is_some(),
                HistoryMode::ConversationId | HistoryMode::Replay => true,
            };
        if !stored {
            return Ok(());
        }
        let logged_since = runner
            .store
            .llm_records_after(thread_id, sent.through(), &[])
            .await?;
        let next = self.stored.cursor.acknowledge(
            &sent,
            Response {
                stored,
                response_id,
                logged_since: &logged_since,
                produced: &flight.produced,
                calls,
            },
        );
        if let Some(next) = next {
            self.stored.cursor = next;
            runner.store.set_history(thread_id, &self.stored).await?;
        }
        Ok(())
    }
}

impl InFlight {
    /// Marks what the request carries, once any input filter is done.
    pub fn mark_sent(&mut self, input: &[ResponseItem]) {
        self.sent = Some(self.prepared.mark_sent(input));
    }

    /// Notes the items a batch of the response's events started.
    pub fn note(&mut self, payloads: &[ServerNotification]) {
        for payload in payloads {
            if let ServerNotification::ItemStarted(started) = payload {
                self.produced.insert(started.item.id().to_owned());
            }
        }
    }
}

//! The agent loop: model call → tool calls → tool outputs → model call,
//! until a final answer, an interruption, a pause on a person, or
//! `max_turns` model calls.
//!
//! One run is one turn of the thread. Every event goes through the store
//! (lifecycle events durable before they are streamed); the model's history
//! is the thread's `llm` view, read from the store before each call, so
//! what the model sees is exactly what is recorded. Parallel calls of one
//! response run concurrently; their items are filed in call order, which is
//! the order their outputs go back to the model.
//!
//! A call that needs a person becomes a durable request and the run pauses
//! (or waits for its [`ClientRequests`]). The run state is saved with the
//! request, and from then on every tool run is marked `executed` in it
//! before it starts, so a resumed run never runs a call twice: a call left
//! executed but not completed by a crash is reported failed, not re-run.
//! See `docs/internals/run-state.md` and `docs/internals/approvals.md`.

mod compact;
mod confine;
mod drive;
mod ending;
mod execute;
mod file_call;
mod history;
mod input;
mod items;
mod mcp_call;
mod requests;
mod resume;
mod review;
mod waiting;

use std::path::PathBuf;
use std::sync::Arc;

use spool_core::ItemRecord;
use spool_core::llm::ReasoningIdPolicy;
use spool_core::run_state::{Interruption, RunState, RunStateError};
use spool_model::{ModelProvider, ModelRequest};
use spool_protocol::responses::ResponseItem;
use spool_protocol::{TurnError, TurnStatus, UserInput};
use spool_store::{Appended, Store, StoreError};
use spool_tools::policy::RulesFileError;
use tokio::sync::{mpsc, watch};

use crate::agent::Agent;
pub use compact::{COMPACTION_INSTRUCTIONS, CompactionPolicy};
pub use requests::ClientRequests;
pub use review::{REVIEWER_INSTRUCTIONS, Review, reviewer};

/// Runs agents on one store and one model provider.
pub struct Runner<S> {
    pub(crate) store: S,
    pub(crate) provider: Arc<dyn ModelProvider>,
    /// Most model calls one run may make (resumes included).
    pub max_turns: u32,
    /// Token budget of the history sent with each model call.
    pub history_token_budget: Option<usize>,
    /// Who answers requests while a run runs; `None`: runs pause on them.
    pub client: Option<Arc<dyn ClientRequests>>,
    /// Where accepted exec and network policy amendments are written (and
    /// read from at the start of each run), for an operator to review.
    pub rules_file: Option<PathBuf>,
    /// Fill [`RunResult::items`] and [`RunResult::to_input_list`] when a
    /// run ends (two reads of the whole thread). Off for callers that only
    /// stream the events.
    pub collect_results: bool,
    /// Counts input added to the running turn from outside (a client's
    /// `turn/steer`, logged as a user message of the turn). When it moved
    /// while the model answered, the turn makes another model call, with
    /// that input, instead of ending.
    pub more_input: Option<watch::Receiver<u64>>,
    /// What happens to the provider ids of reasoning items spool sends back
    /// (never to the caller's own input items).
    pub reasoning_ids: ReasoningIdPolicy,
    /// Sees every request just before it goes, and may change it: its
    /// input is the whole history in `replay` mode, the delta the provider
    /// lacks in the server-managed ones. What it leaves in `input` is what
    /// the tracker marks as sent.
    pub input_filter: Option<InputFilter>,
    /// Compact the thread before a turn once its history would pass this
    /// share of the model's window (see `compact.rs`); `None`: never
    /// automatically.
    pub compaction: Option<CompactionPolicy>,
}

/// See [`Runner::input_filter`].
pub type InputFilter = Arc<dyn Fn(&mut ModelRequest) + Send + Sync>;

/// How a run ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RunStatus {
    Completed,
    Interrupted,
    Failed,
    /// Waiting on a person: see [`RunResult::interruptions`].
    Paused,
}

impl RunStatus {
    pub(crate) fn of(status: TurnStatus) -> RunStatus {
        match status {
            TurnStatus::Completed => RunStatus::Completed,
            TurnStatus::Interrupted => RunStatus::Interrupted,
            TurnStatus::Failed => RunStatus::Failed,
            TurnStatus::InProgress => RunStatus::Paused,
        }
    }
}

/// What a run did.
#[derive(Debug, Clone)]
pub struct RunResult {
    pub thread_id: String,
    pub turn_id: String,
    pub status: RunStatus,
    pub error: Option<TurnError>,
    /// Tokens this run's model calls used (summed over its steps).
    pub usage: Option<spool_protocol::TokenUsageBreakdown>,
    pub(crate) items: Vec<ItemRecord>,
    pub(crate) final_output: Option<String>,
    pub(crate) state: RunState,
    pub(crate) input_list: Vec<ResponseItem>,
}

impl RunResult {
    /// The turn's items as stored.
    pub fn items(&self) -> &[ItemRecord] {
        &self.items
    }

    /// The text of the agent's last message, if it wrote one.
    pub fn final_output(&self) -> Option<&str> {
        self.final_output.as_deref()
    }

    /// The thread's history as the next model call would get it (the
    /// `llm` view): replay-ready input items.
    pub fn to_input_list(&self) -> &[ResponseItem] {
        &self.input_list
    }

    /// Requests still waiting for a person (empty unless paused).
    pub fn interruptions(&self) -> &[Interruption] {
        &self.state.interruptions
    }

    /// The versioned RunState JSON to resume from.
    pub fn to_state(&self) -> String {
        self.state.to_json()
    }

    pub fn state(&self) -> &RunState {
        &self.state
    }
}

/// Why a run could not go on (a model failure is a failed run, not one of
/// these).
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("the run made {max_turns} model calls without finishing (max_turns = {max_turns})")]
    MaxTurnsExceeded { max_turns: u32 },
    #[error(transparent)]
    State(#[from] RunStateError),
    #[error("thread {thread_id} has no paused run to resume")]
    NothingToResume { thread_id: String },
    #[error("the RunState is for turn {state_turn} of thread {state_thread}, which is not open")]
    StateNotOpen {
        state_thread: String,
        state_turn: String,
    },
    #[error(transparent)]
    Rules(#[from] RulesFileError),
    #[error(
        "the thread's history is owned by the provider ({}), but provider {provider} keeps \
         no history (Chat Completions cannot); fork the thread to continue it in `replay` mode",
        mode.as_str()
    )]
    HistoryNotKept {
        mode: spool_protocol::HistoryMode,
        provider: String,
    },
    #[error(
        "the RunState's history is held in `{}` mode, but its thread's is `{}`",
        state.as_str(),
        thread.as_str()
    )]
    StateHistoryMismatch {
        state: spool_protocol::HistoryMode,
        thread: spool_protocol::HistoryMode,
    },
}

impl<S: Store + Clone + 'static> Runner<S> {
    pub fn new(store: S, provider: Arc<dyn ModelProvider>) -> Self {
        Runner {
            store,
            provider,
            max_turns: 10,
            history_token_budget: None,
            client: None,
            rules_file: None,
            collect_results: true,
            more_input: None,
            reasoning_ids: ReasoningIdPolicy::Preserve,
            input_filter: None,
            compaction: None,
        }
    }

    pub fn with_client(mut self, client: Arc<dyn ClientRequests>) -> Self {
        self.client = Some(client);
        self
    }

    pub fn with_max_turns(mut self, max_turns: u32) -> Self {
        self.max_turns = max_turns;
        self
    }

    /// Runs one turn of `agent` on the thread and waits for its end (or
    /// pause).
    pub async fn run(
        &self,
        agent: Arc<Agent>,
        thread_id: &str,
        input: Vec<UserInput>,
    ) -> Result<RunResult, RunError> {
        let (events, _) = mpsc::unbounded_channel();
        let (_stop, interrupt) = watch::channel(false);
        self.run_streamed(agent, thread_id, input, &events, interrupt)
            .await
    }

    /// As [`Runner::run`], sending every event to `events` once the store
    /// has given it its seq (the same events the store records), and
    /// stopping when `interrupt` turns true.
    pub async fn run_streamed(
        &self,
        agent: Arc<Agent>,
        thread_id: &str,
        input: Vec<UserInput>,
        events: &mpsc::UnboundedSender<Appended>,
        interrupt: watch::Receiver<bool>,
    ) -> Result<RunResult, RunError> {
        if self.needs_compaction(thread_id, &input).await? {
            let compacted = self
                .compact_streamed(agent.clone(), thread_id, events, interrupt.clone())
                .await?;
            // A failed compaction is on record; the turn goes on with the
            // history as it is (packed under the budget, if any).
            if compacted.status == RunStatus::Interrupted {
                return Ok(compacted);
            }
        }
        let opening = drive::Opening::User(input);
        let run = drive::Run::start(self, agent, thread_id, events, interrupt, opening).await?;
        run.drive().await
    }

    /// Resumes the thread's paused run from the store: answers already
    /// recorded take effect, and requests still open go to the client (or
    /// leave the run paused).
    pub async fn resume(
        &self,
        agent: Arc<Agent>,
        thread_id: &str,
        events: &mpsc::UnboundedSender<Appended>,
        interrupt: watch::Receiver<bool>,
    ) -> Result<RunResult, RunError> {
        let stored = self.store.run_states(thread_id).await?;
        let Some(stored) = stored.into_iter().last() else {
            return Err(RunError::NothingToResume {
                thread_id: thread_id.to_owned(),
            });
        };
        let state = RunState::from_json(&stored.state)?;
        self.resume_from_state(agent, state, events, interrupt)
            .await
    }

    /// Resumes from an exported RunState (its thread's turn must still be
    /// open in the store).
    pub async fn resume_from_state(
        &self,
        agent: Arc<Agent>,
        state: RunState,
        events: &mpsc::UnboundedSender<Appended>,
        interrupt: watch::Receiver<bool>,
    ) -> Result<RunResult, RunError> {
        let run = resume::reopen(self, agent, state, events, interrupt).await?;
        run.drive().await
    }
}

//! Review turns: a reviewer agent looks at a set of changes and writes its
//! findings, as one turn of the thread.
//!
//! The turn opens with `enteredReviewMode` (what is reviewed, for the UI)
//! and the reviewer's prompt (a `userMessage` for nobody's view but the
//! reviewer's: it holds the whole diff), then runs the reviewer like any
//! agent, and closes with `exitedReviewMode` carrying the full review text
//! (the final message; empty when the review did not finish) just before
//! `turn/completed`.
//!
//! What the model sees:
//! - The reviewer sees this turn only, from its prompt on, whatever the
//!   audience of its items ([`spool_core::llm::review_input`]): not the
//!   conversation before it, as a fresh pair of eyes.
//! - The reviewer's own items (messages, reasoning, commands) are the
//!   client's alone, so later turns of the thread do not replay the
//!   reviewer's work; they get the review through `exitedReviewMode`,
//!   which the `llm` view turns into a user message with the findings.
//!
//! The reviewer ([`reviewer`]) may run read-only commands and nothing
//! else, without asking: a review never waits on a person, so it never
//! pauses (a paused run resumes as an ordinary turn, which a review is
//! not). A review cut short by a crash is closed by recovery like any
//! turn (`interrupted`, open items `incomplete`), with no
//! `exitedReviewMode`.

use std::sync::Arc;

use spool_core::View;
use spool_core::llm::{ReasoningIdPolicy, review_input};
use spool_protocol::responses::ResponseItem;
use spool_protocol::*;
use spool_store::{Appended, Store};
use spool_tools::policy::{ApprovalPolicy, SandboxMode};
use tokio::sync::{mpsc, watch};

use super::drive::{Opening, Run};
use super::items::ItemSink;
use super::{RunError, RunResult, Runner};
use crate::agent::{Agent, ShellTool, Tool};
use crate::output_mapper::new_item_id;

/// What a review looks at.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Review {
    /// What is reviewed, in a few words (`enteredReviewMode`'s text).
    pub hint: String,
    /// The reviewer's request, with the changes (see
    /// `spool_tools::review::gather`).
    pub prompt: String,
}

/// How the reviewer works and what it writes.
pub const REVIEWER_INSTRUCTIONS: &str = "\
You are reviewing a set of code changes written by someone else. Find the \
problems a careful senior engineer would flag before merging: bugs, wrong \
or missing error handling, security issues, data loss, races, broken edge \
cases, and tests that do not test what they claim. Do not comment on style \
unless it hides a bug, and do not restate what the change does.

The changes are in the request. You may run read-only commands (such as \
`git show`, `git diff`, `cat`, `ls`, `rg`) to read the surrounding code; \
you cannot change anything.

Write your review as plain text: one finding per paragraph, the most \
serious first, each starting with its file and line and a one-line \
summary, then why it is a problem and what would fix it. End with a \
one-paragraph verdict on whether the change is correct. If you find no \
problems, say so plainly.";

/// The reviewer of `agent`'s thread: the same model, workspace and name
/// prefix, the review instructions, and a shell that runs read-only
/// commands only (never asking: anything else is refused to the model).
pub fn reviewer(agent: &Agent) -> Agent {
    Agent {
        name: "reviewer".to_owned(),
        instructions: Some(REVIEWER_INSTRUCTIONS.to_owned()),
        model: agent.model.clone(),
        tools: vec![Tool::Shell(ShellTool::default())],
        handoffs: Vec::new(),
        approval_policy: ApprovalPolicy::Never,
        sandbox: SandboxMode::ReadOnly,
        workspace_root: agent.workspace_root.clone(),
        // The thread's confinement: with the kernel sandbox, the reviewer's
        // commands run read-only inside it.
        confinement: agent.confinement.clone(),
        sandbox_options: Default::default(),
        env_pass_through: agent.env_pass_through.clone(),
        env_secrets: agent.env_secrets.clone(),
        // Reviews read; the thread's MCP tools could write.
        mcp: None,
    }
}

impl<S: Store + Clone + 'static> Runner<S> {
    /// Runs a review as one turn of the thread (see the module docs),
    /// streaming its events as [`Runner::run_streamed`] does. `reviewer`
    /// is usually [`reviewer`] of the thread's agent.
    pub async fn review_streamed(
        &self,
        reviewer: Arc<Agent>,
        thread_id: &str,
        review: Review,
        events: &mpsc::UnboundedSender<Appended>,
        interrupt: watch::Receiver<bool>,
    ) -> Result<RunResult, RunError> {
        let opening = Opening::Review(review);
        let run = Run::start(self, reviewer, thread_id, events, interrupt, opening).await?;
        run.drive().await
    }
}

/// The sink a review files its items through: the client's alone.
pub(super) fn reviewer_sink(sink: ItemSink) -> ItemSink {
    ItemSink {
        audience: Some(Audience::CLIENT_ONLY),
        ..sink
    }
}

/// `enteredReviewMode` and the reviewer's prompt.
pub(super) fn opening(sink: &ItemSink, review: Review) -> Vec<ServerNotification> {
    let mut events = sink.whole(
        ThreadItem::EnteredReviewMode {
            id: new_item_id(),
            review: review.hint,
        },
        None,
        None,
    );
    let mut prompt = sink.whole(
        ThreadItem::user_message(new_item_id(), vec![UserInput::text(review.prompt)]),
        None,
        None,
    );
    for event in &mut prompt {
        if let Some(envelope) = event.envelope_mut() {
            envelope.audience = Audience {
                client: false,
                llm: false,
            };
            envelope.provenance.phase = WorkPhase::Main;
            envelope.provenance.step_index = None;
        }
    }
    events.extend(prompt);
    events
}

/// `exitedReviewMode` with the review text, for the client and for later
/// turns' model view.
pub(super) fn closing(sink: &ItemSink, review: String) -> Vec<ServerNotification> {
    let mut events = sink.whole(
        ThreadItem::ExitedReviewMode {
            id: new_item_id(),
            review,
        },
        None,
        None,
    );
    for event in &mut events {
        if let Some(envelope) = event.envelope_mut() {
            envelope.audience = Audience::BOTH;
        }
    }
    events
}

impl<S: Store + Clone + 'static> Run<'_, S> {
    /// The reviewer's input: this turn's records (synced by the caller).
    pub(super) async fn review_history(&self) -> Result<Vec<ResponseItem>, RunError> {
        let records = self
            .runner
            .store
            .items(&self.state.thread_id, View::All)
            .await?;
        let turn: Vec<_> = records
            .into_iter()
            .filter(|record| record.turn_id == self.state.turn_id)
            .collect();
        Ok(review_input(&turn, ReasoningIdPolicy::default()))
    }
}

//! One run, step by step (see the module docs of `runner`).

use std::sync::Arc;

use futures_util::StreamExt;
use spool_core::llm::LlmView;
use spool_core::run_state::{AgentKey, CallRecord, RunState};
use spool_model::{ModelEvent, ModelRequest};
use spool_protocol::*;
use spool_store::{Appended, Appender, PendingRequest, Store};
use spool_tools::policy::{Grants, RulesFile};
use tokio::sync::{mpsc, watch};

use super::execute::{Ran, StoreProcesses, decline, run_filed};
use super::file_call::{Filed, FiledCall, file_call, prepare};
use super::history::ServerHistory;
use super::items::{ItemSink, OpenItem};
use super::requests::{Gate, approval_request, gate, replay_session_grants};
use super::{RunError, RunResult, Runner};
use crate::agent::{Agent, AgentSet};
use crate::now_ms;
use crate::output_mapper::{ModelCall, OutputMapper, new_item_id};

pub(crate) struct Run<'r, S> {
    pub runner: &'r Runner<S>,
    pub agents: AgentSet,
    pub agent_key: AgentKey,
    pub agent: Arc<Agent>,
    pub state: RunState,
    pub sink: ItemSink,
    pub appender: Appender,
    /// Where events the store logs outside the appender (resolutions) go.
    pub events: mpsc::UnboundedSender<Appended>,
    pub grants: Grants,
    pub interrupt: watch::Receiver<bool>,
    /// The turn has a saved run state: tool runs are marked in it first.
    pub persisted: bool,
    pub started_at_ms: i64,
    pub usage: Option<TokenUsageBreakdown>,
    pub final_text: Option<String>,
    /// The last agent message of the turn: `turn/completed` carries it.
    pub final_message: Option<ThreadItem>,
    /// Calls waiting on a request, in call order.
    pub waiting: Vec<(PendingRequest, FiledCall)>,
    /// Control passes to this agent before the next model call.
    pub next_agent: Option<AgentKey>,
    /// A review turn: the model sees only this turn (see `review`).
    pub review: bool,
    /// The provider that owns the thread's history; `None`: spool does
    /// (`replay`).
    pub owner: Option<ServerHistory>,
    /// In `replay` mode, the view the last model call got, grown by the
    /// records logged since rather than read again (`LlmView::extend`).
    pub replay: Option<LlmView>,
    /// Events of a response that ended in calls, appended with the calls'
    /// filing (`handle_calls`), which follows at once.
    pub held: Vec<ServerNotification>,
    /// The size of the context the last response was made from plus its
    /// output, as the provider counted it: how much a provider-held
    /// history holds (see `input.rs`).
    pub context_tokens: Option<usize>,
    /// A compaction inside this turn failed: the turn goes on without
    /// trying again.
    pub compaction_failed: bool,
    /// The MCP tools offered at the last model call: the calls of its
    /// response are checked against them.
    pub mcp_tools: Vec<spool_tools::mcp::McpToolInfo>,
}

/// What a turn opens with.
pub(crate) enum Opening {
    /// The user's message.
    User(Vec<UserInput>),
    /// A review: `enteredReviewMode` and the reviewer's prompt.
    Review(super::review::Review),
    /// A compaction: its item comes next (see `compact`).
    Compact,
    /// A client's own tool call: its item comes next (see `mcp_call`).
    Direct,
}

/// How one model call ended.
pub(super) enum StepEnd {
    Calls(Vec<ModelCall>),
    Final,
    Failed(TurnError),
    Interrupted,
}

/// Where answering the waiting requests left the run.
pub(super) enum Settled {
    Done,
    Paused,
    Cancelled,
}

impl<'r, S: Store + Clone + 'static> Run<'r, S> {
    /// Starts the turn: `turn/started` and the user's message.
    pub async fn start(
        runner: &'r Runner<S>,
        agent: Arc<Agent>,
        thread_id: &str,
        events: &mpsc::UnboundedSender<Appended>,
        interrupt: watch::Receiver<bool>,
        opening: Opening,
    ) -> Result<Run<'r, S>, RunError> {
        // Before the turn opens: a thread its provider cannot continue
        // gets an error, not a failed turn.
        let owner = ServerHistory::load(runner, thread_id, None).await?;
        let agents = AgentSet::new(agent);
        let (agent_key, agent) = {
            let (key, agent) = agents.start();
            (key.clone(), agent.clone())
        };
        let turn_id = new_item_id();
        let started_at_ms = now_ms();
        let appender = Appender::spawn(runner.store.clone(), thread_id, events.clone());
        let mut turn = Turn::new(turn_id.clone(), TurnStatus::InProgress);
        turn.started_at = Some(started_at_ms / 1000);
        appender.push(vec![
            ServerNotification::TurnStarted(TurnStartedNotification {
                thread_id: thread_id.to_owned(),
                turn,
            }),
            status_changed(thread_id, ThreadStatus::active()),
        ])?;
        let sink = ItemSink {
            thread_id: thread_id.to_owned(),
            turn_id: turn_id.clone(),
            agent: "user".to_owned(),
            step: 0,
            audience: None,
        };
        let review = matches!(opening, Opening::Review(_));
        let sink = match opening {
            Opening::User(input) => {
                appender.push(user_message(&sink, input))?;
                sink
            }
            Opening::Review(review) => {
                let sink = super::review::reviewer_sink(sink);
                appender.push(super::review::opening(&sink, review))?;
                sink
            }
            Opening::Compact | Opening::Direct => sink,
        };
        let grants = load_grants(runner, thread_id).await?;
        let state = RunState {
            thread_id: thread_id.to_owned(),
            turn_id: turn_id.clone(),
            current_agent: agent_key.clone(),
            step: 0,
            max_turns: runner.max_turns,
            last_response_id: None,
            acknowledged_input_count: 0,
            input: Vec::new(),
            calls: Vec::new(),
            approvals: Vec::new(),
            interruptions: Vec::new(),
            reasoning_ids: runner.reasoning_ids,
            history: None,
        };
        Ok(Run {
            runner,
            sink: ItemSink {
                agent: agent.name.clone(),
                ..sink
            },
            agents,
            agent_key,
            agent,
            state,
            appender,
            events: events.clone(),
            grants,
            interrupt,
            persisted: false,
            started_at_ms,
            usage: None,
            final_text: None,
            final_message: None,
            waiting: Vec::new(),
            next_agent: None,
            review,
            owner,
            replay: None,
            held: Vec::new(),
            context_tokens: None,
            compaction_failed: false,
            mcp_tools: Vec::new(),
        })
    }

    /// Runs until the turn ends or pauses.
    pub async fn drive(mut self) -> Result<RunResult, RunError> {
        loop {
            // A re-run asked about after a sandbox denial can add a request
            // while others are settled.
            while !self.waiting.is_empty() {
                match self.settle_waiting().await? {
                    Settled::Done => {}
                    Settled::Paused => return self.pause().await,
                    Settled::Cancelled => return self.finish(TurnStatus::Interrupted, None).await,
                }
            }
            if let Some(next) = self.next_agent.take()
                && let Some(agent) = self.agents.get(&next).cloned()
            {
                self.agent = agent;
                self.agent_key = next;
                self.sink.agent = self.agent.name.clone();
                self.state.current_agent = self.agent_key.clone();
            }
            if *self.interrupt.borrow() {
                return self.finish(TurnStatus::Interrupted, None).await;
            }
            if self.state.step >= self.state.max_turns {
                let error = RunError::MaxTurnsExceeded {
                    max_turns: self.state.max_turns,
                };
                let turn_error = TurnError::new(error.to_string(), None);
                self.finish(TurnStatus::Failed, Some(turn_error)).await?;
                return Err(error);
            }
            let input_seen = self.input_count();
            match self.model_step().await? {
                // Input that arrived while the model answered is answered
                // in this turn, by one more call.
                StepEnd::Final if self.input_count() != input_seen => {}
                StepEnd::Final => return self.finish(TurnStatus::Completed, None).await,
                StepEnd::Failed(error) => {
                    return self.finish(TurnStatus::Failed, Some(error)).await;
                }
                StepEnd::Interrupted => return self.finish(TurnStatus::Interrupted, None).await,
                StepEnd::Calls(calls) => self.handle_calls(calls).await?,
            }
        }
    }

    /// How much input has been added to the turn from outside so far.
    fn input_count(&self) -> u64 {
        self.runner.more_input.as_ref().map_or(0, |rx| *rx.borrow())
    }

    /// One model call with the thread's history.
    async fn model_step(&mut self) -> Result<StepEnd, RunError> {
        // The history read below must see everything logged so far.
        self.appender.sync().await?;
        let mut tools: Vec<_> = self.agent.tools.iter().map(|tool| tool.spec()).collect();
        for target in &self.agent.handoffs {
            if let Some(key) = self.agents.key_of(target) {
                tools.push(spool_model::ToolSpec {
                    name: AgentSet::handoff_tool_name(key),
                    description: format!(
                        "Hand the conversation over to the agent {}.",
                        target.name
                    ),
                    parameters: serde_json::json!({"type": "object", "properties": {}}),
                });
            }
        }
        if let Some(toolbox) = &self.agent.mcp {
            // Listed at every step: a server that started, restarted or
            // changed its tools since is seen at once.
            match toolbox.tools().await {
                Ok(offered) => self.mcp_tools = offered,
                Err(message) => return Ok(StepEnd::Failed(TurnError::new(message, None))),
            }
            tools.extend(self.mcp_tools.iter().map(|tool| spool_model::ToolSpec {
                name: tool.model_name(),
                description: tool.description.clone().unwrap_or_else(|| {
                    format!("The tool {} of the MCP server {}.", tool.tool, tool.server)
                }),
                parameters: tool.input_schema.clone(),
            }));
        }
        let mut request = ModelRequest {
            model: self.agent.model.model.clone(),
            instructions: self.agent.instructions.clone(),
            tools,
            parallel_tool_calls: self.agent.model.parallel_tool_calls,
            max_output_tokens: self.agent.model.max_output_tokens,
            temperature: self.agent.model.temperature,
            ..ModelRequest::default()
        };
        let mut flight = match self.input(&mut request).await? {
            Ok(flight) => flight,
            Err(end) => return Ok(end),
        };
        if let Some(filter) = &self.runner.input_filter {
            filter(&mut request);
        }
        if let Some(flight) = &mut flight {
            flight.mark_sent(&request.input);
        }
        self.state.acknowledged_input_count = request.input.len();
        self.state.step += 1;
        self.sink.step = self.state.step;
        let mut mapper =
            OutputMapper::new(&self.state.thread_id, &self.state.turn_id, &self.agent.name)
                .deferring_calls()
                .holding_last_completion()
                .with_audience(self.sink.audience);
        let mut stream = self.runner.provider.stream(request);
        let mut interrupt = self.interrupt.clone();
        // Why the provider cut the response short, if it did.
        let mut cut: Option<String> = None;
        // The id of the response, once it completed.
        let mut completed: Option<Option<String>> = None;
        let end = loop {
            let next = tokio::select! {
                next = stream.next() => next,
                // A dropped sender can no longer ask: that is not a stop.
                Ok(_) = interrupt.wait_for(|stop| *stop) => break StepEnd::Interrupted,
            };
            match next {
                Some(Ok(ModelEvent::Completed {
                    usage,
                    response_id,
                    incomplete_reason,
                })) => {
                    cut = incomplete_reason;
                    if let Some(usage) = &usage {
                        self.usage
                            .get_or_insert_with(TokenUsageBreakdown::default)
                            .add(usage);
                    }
                    self.state.last_response_id = response_id.clone();
                    self.context_tokens = usage.as_ref().map(super::input::context_size);
                    completed = Some(response_id);
                    break StepEnd::Final;
                }
                Some(Ok(event)) => {
                    let payloads = mapper.on_event(event, now_ms());
                    if let Some(flight) = &mut flight {
                        flight.note(&payloads);
                    }
                    self.note_final_message(&payloads);
                    self.appender.push(payloads)?;
                }
                Some(Err(e)) => {
                    break StepEnd::Failed(TurnError::new(
                        e.to_string(),
                        Some(e.codex_error_info()),
                    ));
                }
                None => {
                    break StepEnd::Failed(TurnError::new(
                        format!(
                            "provider {} ended its stream without completing the response",
                            self.runner.provider.name()
                        ),
                        Some(CodexErrorInfo::ResponseStreamDisconnected {
                            http_status_code: None,
                        }),
                    ));
                }
            }
        };
        drop(stream);
        let last = mapper.end_response(cut.as_deref(), now_ms());
        self.note_final_message(&last);
        if let Some(flight) = &mut flight {
            flight.note(&last);
        }
        let calls = mapper.take_model_calls();
        if self.owner.is_none() && !calls.is_empty() && matches!(end, StepEnd::Final) {
            // The calls are filed next, with no wait in between: one append
            // (one commit) for the response's end and the filing.
            self.held = last;
        } else {
            self.appender.push(last)?;
        }
        if let (Some(owner), Some(flight)) = (&mut self.owner, flight) {
            // The cursor may only cover what is committed.
            self.appender.sync().await?;
            let call_ids = calls.iter().map(|call| call.call_id.clone()).collect();
            let ended = completed.is_some();
            let response_id = completed.flatten();
            owner
                .finish(
                    self.runner,
                    &self.state.thread_id,
                    flight,
                    ended,
                    response_id,
                    call_ids,
                )
                .await?;
        }
        Ok(match end {
            StepEnd::Final if !calls.is_empty() => StepEnd::Calls(calls),
            other => other,
        })
    }

    /// Remembers the agent message a response completed: the turn's final
    /// answer so far.
    fn note_final_message(&mut self, payloads: &[ServerNotification]) {
        for payload in payloads {
            if let ServerNotification::ItemCompleted(ItemCompletedNotification {
                item: item @ ThreadItem::AgentMessage { text, .. },
                ..
            }) = payload
            {
                self.final_text = Some(text.clone());
                self.final_message = Some(item.clone());
            }
        }
    }

    /// Files the calls of one response, runs what the policy lets through
    /// (concurrently) and opens requests for the rest.
    async fn handle_calls(&mut self, calls: Vec<ModelCall>) -> Result<(), RunError> {
        let mut out = std::mem::take(&mut self.held);
        let mut filed_calls = Vec::new();
        for call in calls {
            let prepared = prepare(&call, &self.agent, &self.agents, &self.mcp_tools);
            let filed = file_call(
                call,
                prepared,
                &self.agent,
                &self.agent_key,
                &self.sink,
                &mut out,
            );
            let done = matches!(filed.filed, Filed::Done);
            self.state.calls.push(CallRecord {
                call_id: filed.call.call_id.clone(),
                tool: filed.tool.clone(),
                item_id: filed.item_id.clone(),
                arguments: filed.call.arguments.clone(),
                executed: done,
                completed: done,
                output: None,
            });
            if let Some(next) = &filed.handoff {
                self.next_agent = Some(next.clone());
            }
            filed_calls.push(filed);
        }
        self.appender.push(out)?;

        let mut to_run = Vec::new();
        let mut asks = Vec::new();
        for filed in filed_calls {
            match gate(
                &filed,
                &self.agent,
                &self.grants,
                &self.state.thread_id,
                &self.state.turn_id,
            ) {
                Gate::Run(outside) => {
                    let mut filed = filed;
                    if let Filed::Shell { outside: o, .. } = &mut filed.filed {
                        *o = outside;
                    }
                    to_run.push(filed)
                }
                Gate::Refuse(reason) => {
                    self.mark_done(&filed.call.call_id);
                    let refusal = format!("Not run: {reason}");
                    self.appender
                        .push(decline(filed.filed, Some(refusal), &self.sink))?;
                }
                Gate::Ask(request) => asks.push((*request, filed)),
            }
        }
        self.run_calls(to_run).await?;
        if !asks.is_empty() {
            self.open_requests(asks).await?;
        }
        Ok(())
    }

    /// Runs calls concurrently; each one's outcome is logged as it ends.
    pub(super) async fn run_calls(&mut self, calls: Vec<FiledCall>) -> Result<(), RunError> {
        if calls.is_empty() {
            return Ok(());
        }
        for call in &calls {
            if let Some(record) = self.record_mut(&call.call.call_id) {
                record.executed = true;
            }
        }
        self.save_state().await?;
        let processes = StoreProcesses {
            store: self.runner.store.clone(),
            thread_id: self.state.thread_id.clone(),
        };
        let asking = self.mcp_asking();
        let mut futures = Vec::with_capacity(calls.len());
        let mut rest = Vec::with_capacity(calls.len());
        for call in calls {
            futures.push(run_filed(
                call.filed,
                &self.agent,
                &self.sink,
                &self.appender,
                (&processes, &asking),
                self.interrupt.clone(),
            ));
            rest.push((call.call, call.tool, call.item_id, call.handoff));
        }
        let outcomes = futures_util::future::join_all(futures).await;
        let mut retries = Vec::new();
        for (outcome, (call, tool, item_id, handoff)) in outcomes.into_iter().zip(rest) {
            match outcome? {
                Ran::Done => self.mark_done(&call.call_id),
                // Executed but not completed: the ledger shows the re-run
                // it is asked about comes after a confined first run.
                Ran::Denied { filed, reason } => {
                    let filed = FiledCall {
                        call,
                        tool,
                        item_id,
                        filed: *filed,
                        handoff,
                    };
                    let reason = format!("{reason}; run it again outside the sandbox?");
                    if let Some(request) = approval_request(
                        &filed,
                        &reason,
                        &self.agent,
                        &self.state.thread_id,
                        &self.state.turn_id,
                    ) {
                        retries.push((request, filed));
                    }
                }
            }
        }
        self.save_state().await?;
        if !retries.is_empty() {
            self.open_requests(retries).await?;
        }
        Ok(())
    }

    pub(super) fn record_mut(&mut self, call_id: &str) -> Option<&mut CallRecord> {
        self.state.calls.iter_mut().find(|c| c.call_id == call_id)
    }

    pub(super) fn mark_done(&mut self, call_id: &str) {
        if let Some(record) = self.record_mut(call_id) {
            record.executed = true;
            record.completed = true;
        }
    }
}

/// The grants a run starts with: the rules file's rules and the thread's
/// session approvals.
/// The user's message that opens a turn (the user's own step: no model
/// call yet).
fn user_message(sink: &ItemSink, input: Vec<UserInput>) -> Vec<ServerNotification> {
    let mut message = sink.whole(ThreadItem::user_message(new_item_id(), input), None, None);
    for event in &mut message {
        if let Some(envelope) = event.envelope_mut() {
            envelope.provenance.phase = WorkPhase::Main;
            envelope.provenance.step_index = None;
        }
    }
    message
}

pub(crate) async fn load_grants<S: Store>(
    runner: &Runner<S>,
    thread_id: &str,
) -> Result<Grants, RunError> {
    let mut grants = Grants::for_thread(thread_id);
    if let Some(path) = &runner.rules_file {
        grants.add_rules(RulesFile::load(path)?.rules);
    }
    let requests = runner.store.requests(thread_id).await?;
    replay_session_grants(&requests, &mut grants);
    Ok(grants)
}

/// An item rebuilt from its record (resume).
pub(crate) fn open_item(record: &spool_core::ItemRecord) -> OpenItem {
    OpenItem {
        item: record.item.clone(),
        envelope: record.envelope.clone(),
    }
}

/// `thread/status/changed`, as Codex announces a thread starting a turn,
/// waiting on a person, and going idle.
pub(super) fn status_changed(thread_id: &str, status: ThreadStatus) -> ServerNotification {
    ServerNotification::ThreadStatusChanged(ThreadStatusChangedNotification {
        thread_id: thread_id.to_owned(),
        status,
    })
}

//! Picking a paused run back up, in this process or another one.
//!
//! The RunState names what the run was waiting on (its interruptions) and
//! which calls already ran (the ledger); the store holds the items and the
//! requests with any answers given meanwhile. Resuming:
//!
//! 1. checks the state against the agent graph being resumed (fail closed:
//!    an interruption naming an agent or tool that is not there is an
//!    error, never a guess);
//! 2. finishes calls a crash left executed but not completed as failed,
//!    without running them again, and closes other items the crash left
//!    open;
//! 3. rebuilds each waiting call from its ledger entry and its item, and
//!    hands them to the loop, which answers them (stored answer, or the
//!    client) and goes on. No model call is made or counted until every
//!    request is answered.

use std::collections::HashSet;
use std::sync::Arc;

use spool_core::reducer::stopped;
use spool_core::run_state::RunState;
use spool_protocol::*;
use spool_store::{Appended, Appender, Store, StoreError};
use tokio::sync::{mpsc, watch};

use super::drive::{Run, load_grants, open_item};
use super::file_call::{Filed, FiledCall, Prepared, prepare};
use super::history::ServerHistory;
use super::items::{ItemSink, OpenItem};
use super::{RunError, Runner};
use crate::agent::{Agent, AgentSet};
use crate::now_ms;
use crate::output_mapper::ModelCall;

const NOT_RERUN: &str = "the process running this call stopped before it finished; \
    it was not run again";

pub(crate) async fn reopen<'r, S: Store + Clone + 'static>(
    runner: &'r Runner<S>,
    agent: Arc<Agent>,
    state: RunState,
    events: &mpsc::UnboundedSender<Appended>,
    interrupt: watch::Receiver<bool>,
) -> Result<Run<'r, S>, RunError> {
    let agents = AgentSet::new(agent);
    state.check_against(&agents)?;
    let thread_id = state.thread_id.clone();
    let turn_id = state.turn_id.clone();
    let turns = runner.store.turns(&thread_id).await?;
    let Some(turn) = turns
        .iter()
        .find(|t| t.id == turn_id && t.status == TurnStatus::InProgress)
    else {
        return Err(RunError::StateNotOpen {
            state_thread: thread_id,
            state_turn: turn_id,
        });
    };
    let started_at_ms = turn.started_at.unwrap_or_default() * 1000;
    let agent = agents
        .get(&state.current_agent)
        .cloned()
        .ok_or_else(|| StoreError::UnknownThread(thread_id.clone()))?;
    let sink = ItemSink {
        thread_id: thread_id.clone(),
        turn_id: turn_id.clone(),
        agent: agent.name.clone(),
        step: state.step,
        audience: None,
    };
    let appender = Appender::spawn(runner.store.clone(), &thread_id, events.clone());
    let records = runner
        .store
        .items(&thread_id, spool_core::View::All)
        .await?;
    let open: Vec<OpenItem> = records
        .iter()
        .filter(|r| r.turn_id == turn_id && r.envelope.status == ItemStatus::InProgress)
        .map(open_item)
        .collect();
    let waiting_items: HashSet<&str> = state
        .interruptions
        .iter()
        .map(|i| i.item_id.as_str())
        .collect();

    // What a crash left behind: never re-run, never left open.
    let mut closing = Vec::new();
    for item in &open {
        if waiting_items.contains(item.id()) {
            continue;
        }
        let executed = state
            .calls
            .iter()
            .any(|c| c.item_id == item.id() && c.executed && !c.completed);
        closing.push(abandon(item.clone(), executed, &sink));
    }
    appender.push(closing)?;

    let mut waiting = Vec::new();
    let mut state = state;
    for interruption in state.interruptions.clone() {
        let Some(request) = runner
            .store
            .request(&thread_id, &interruption.request_id)
            .await?
        else {
            return Err(StoreError::UnknownRequest {
                thread_id: thread_id.clone(),
                request_id: interruption.request_id.clone(),
            }
            .into());
        };
        let Some(record) = state
            .calls
            .iter()
            .find(|c| c.call_id == interruption.call_id)
            .cloned()
        else {
            continue;
        };
        let Some(item) = open
            .iter()
            .find(|o| o.id() == interruption.item_id)
            .cloned()
        else {
            // Finished meanwhile (another resumer): nothing to wait for.
            state
                .interruptions
                .retain(|i| i.request_id != interruption.request_id);
            continue;
        };
        let raw = item
            .envelope
            .provider_data
            .as_deref()
            .cloned()
            .unwrap_or_else(|| {
                serde_json::json!({"type": "function_call", "call_id": record.call_id,
                "name": record.tool.name, "arguments": record.arguments})
            });
        let call = ModelCall {
            call_id: record.call_id.clone(),
            name: record.tool.name.clone(),
            arguments: record.arguments.clone(),
            raw,
        };
        let tool_agent = agents
            .get(&record.tool.agent)
            .cloned()
            .unwrap_or(agent.clone());
        // A call to an MCP tool is checked against the tools offered now.
        let mcp_tools = match &tool_agent.mcp {
            Some(toolbox) if call.name.starts_with(spool_tools::mcp::MODEL_NAME_PREFIX) => {
                toolbox.tools().await.unwrap_or_default()
            }
            _ => Vec::new(),
        };
        match refile(prepare(&call, &tool_agent, &agents, &mcp_tools), item) {
            Ok(filed) => waiting.push((
                request,
                FiledCall {
                    call,
                    tool: record.tool.clone(),
                    item_id: interruption.item_id.clone(),
                    filed,
                    handoff: None,
                },
            )),
            Err(failed) => {
                let (item, message) = *failed;
                appender.push(vec![fail(item, &message, &sink)])?;
                state
                    .interruptions
                    .retain(|i| i.request_id != interruption.request_id);
            }
        }
    }
    let grants = load_grants(runner, &thread_id).await?;
    let owner = ServerHistory::load(runner, &thread_id, state.history.as_ref()).await?;
    Ok(Run {
        runner,
        agent_key: state.current_agent.clone(),
        agents,
        agent,
        state,
        sink,
        appender,
        events: events.clone(),
        grants,
        interrupt,
        persisted: true,
        started_at_ms,
        usage: None,
        final_text: None,
        final_message: None,
        waiting,
        next_agent: None,
        review: false,
        owner,
        replay: None,
        held: Vec::new(),
        context_tokens: None,
        compaction_failed: false,
        mcp_tools: Vec::new(),
    })
}

/// A waiting call rebuilt around its existing item.
fn refile(prepared: Prepared, open: OpenItem) -> Result<Filed, Box<(OpenItem, String)>> {
    match prepared {
        Prepared::Shell {
            command,
            escalation_requested,
        } => Ok(Filed::Shell {
            open,
            command,
            escalation_requested,
            outside: false,
        }),
        Prepared::Patch { patch, paths, .. } => Ok(Filed::Patch { open, patch, paths }),
        Prepared::Function(tool) => Ok(Filed::Function { open, tool }),
        Prepared::Dynamic { tool, arguments } => Ok(Filed::Dynamic {
            open,
            tool,
            arguments,
        }),
        Prepared::Mcp { tool, arguments } => Ok(Filed::Mcp {
            open,
            tool,
            arguments,
        }),
        Prepared::Invalid(message) => Err(Box::new((open, message))),
        Prepared::Plan(_) | Prepared::Image(_) | Prepared::Handoff(..) => Err(Box::new((
            open,
            "this call does not wait on a request".to_owned(),
        ))),
    }
}

/// Closes an item a crash left open: a tool that may have run is failed
/// with why it was not run again; anything else ends `incomplete`.
fn abandon(mut open: OpenItem, executed: bool, sink: &ItemSink) -> ServerNotification {
    if executed {
        return fail(open, NOT_RERUN, sink);
    }
    let _ = now_ms();
    open.item = stopped(open.item);
    sink.complete(open, ItemStatus::Incomplete)
}

fn fail(mut open: OpenItem, message: &str, sink: &ItemSink) -> ServerNotification {
    match &mut open.item {
        ThreadItem::CommandExecution {
            status,
            aggregated_output,
            ..
        } => {
            *status = CommandExecutionStatus::Failed;
            *aggregated_output = Some(message.to_owned());
        }
        ThreadItem::FunctionCall { status, output, .. } => {
            *status = FunctionCallStatus::Failed;
            *output = Some(message.to_owned());
        }
        item => *item = stopped(item.clone()),
    }
    sink.complete(open, ItemStatus::Failed)
}

//! Running a filed call and finishing its item.
//!
//! Shell output streams as `item/commandExecution/outputDelta` while the
//! command runs; everything else reports when it ends. Whatever happens,
//! the item ends with one `item/completed`: a tool's failure is the item's
//! `failed` status and output (what the model is told), never an error of
//! the run.

use std::time::Instant;

use spool_protocol::*;
use spool_store::{Appender, StoreError};
use spool_tools::apply_patch;
use spool_tools::function::{EmissionKind, ToolContext, ToolEmission};
use spool_tools::shell::{self, ShellEnd};
use tokio::sync::{mpsc, watch};

use super::confine::{self, SandboxVerdict};
use super::file_call::Filed;
use super::items::{ItemSink, OpenItem};
use crate::agent::Agent;
use crate::output_mapper::new_item_id;

/// How running a call ended.
pub(crate) enum Ran {
    /// Its item is completed.
    Done,
    /// The sandbox denied the command something and the policy asks before
    /// a re-run outside it: the item stays open, the call goes back to the
    /// caller with the reason to ask with.
    Denied { filed: Box<Filed>, reason: String },
}

/// Runs a call the policy let through and logs its completion (and what
/// it streamed or emitted on the way).
pub(crate) async fn run_filed(
    filed: Filed,
    agent: &Agent,
    sink: &ItemSink,
    appender: &Appender,
    (processes, asking): (&dyn ProcessLog, &dyn super::mcp_call::McpAsking),
    mut interrupt: watch::Receiver<bool>,
) -> Result<Ran, StoreError> {
    match filed {
        Filed::Shell {
            open,
            command,
            escalation_requested,
            outside,
        } => {
            let prepared = match confine::prepare(agent, &command, outside) {
                Ok(prepared) => prepared,
                Err(reason) => {
                    let error = format!("the sandbox could not be set up: {reason}");
                    let ran = Err(shell::ShellError::Sandbox(error));
                    appender.push(vec![finish_command(open, ran, sink)])?;
                    return Ok(Ran::Done);
                }
            };
            let item_id = open.id().to_owned();
            let cancel = async move {
                // Only a real stop kills the command; a dropped sender never
                // asks again.
                if interrupt.wait_for(|stop| *stop).await.is_err() {
                    std::future::pending::<()>().await;
                }
            };
            let mut push_error = None;
            let (spawned, pid) = tokio::sync::oneshot::channel();
            let run = shell::run_command_with(
                &prepared.command,
                move |pid| {
                    let _ = spawned.send(pid);
                },
                |_, bytes| {
                    let delta = String::from_utf8_lossy(bytes).into_owned();
                    if let Err(error) = appender.push(vec![sink.output_delta(&item_id, delta)]) {
                        push_error.get_or_insert(error);
                    }
                },
                cancel,
            );
            // The command's process group is on record while it runs, so a
            // crash cannot leave it running unnoticed.
            let record = async {
                let Ok(pid) = pid.await else { return false };
                let Some(ticks) = spool_store::processes::start_ticks(pid) else {
                    return false;
                };
                processes.started(&item_id, pid, ticks).await
            };
            let (mut ran, recorded) = tokio::join!(run, record);
            if recorded {
                processes.ended(&item_id).await;
            }
            if let Some(error) = push_error {
                return Err(error);
            }
            if let Ok(outcome) = &mut ran {
                match confine::judge(agent, outcome, prepared.sandboxed) {
                    SandboxVerdict::Plain => {}
                    SandboxVerdict::SetupFailed(line) => {
                        outcome.aggregated_output = format!("{line}\n[the command did not run]");
                    }
                    SandboxVerdict::Denied { note } => {
                        if confine::asks_after_denial(agent.approval_policy) {
                            let filed = Filed::Shell {
                                open,
                                command,
                                escalation_requested,
                                outside,
                            };
                            return Ok(Ran::Denied {
                                filed: Box::new(filed),
                                reason: note,
                            });
                        }
                        let output = &mut outcome.aggregated_output;
                        if !output.is_empty() && !output.ends_with('\n') {
                            output.push('\n');
                        }
                        output.push_str(&note);
                    }
                }
            }
            appender.push(vec![finish_command(open, ran, sink)])?;
            Ok(Ran::Done)
        }
        Filed::Patch { open, patch, .. } => {
            let applied = apply_patch::apply(&patch, &agent.workspace_root);
            appender.push(vec![finish_patch(open, applied, sink)])?;
            Ok(Ran::Done)
        }
        Filed::Function { open, tool } => {
            let (emissions, mut received) = mpsc::unbounded_channel();
            let (arguments, call_id) = match &open.item {
                ThreadItem::FunctionCall {
                    arguments, call_id, ..
                } => (arguments.clone(), call_id.clone()),
                _ => (String::new(), String::new()),
            };
            let context = ToolContext::new(open.id(), call_id, emissions);
            let started = Instant::now();
            // What the tool emits while it runs is logged (and streamed) as
            // it comes, not when the tool returns.
            let invoke = tool.invoke(&arguments, context);
            tokio::pin!(invoke);
            let outcome = loop {
                tokio::select! {
                    outcome = &mut invoke => break outcome,
                    Some(emission) = received.recv() => {
                        appender.push(emitted_item(emission, sink))?;
                    }
                }
            };
            let mut out = Vec::new();
            while let Ok(emission) = received.try_recv() {
                out.extend(emitted_item(emission, sink));
            }
            let mut open = open;
            let status = match outcome.success {
                true => FunctionCallStatus::Completed,
                false => FunctionCallStatus::Failed,
            };
            if let ThreadItem::FunctionCall {
                status: s,
                output,
                duration_ms,
                ..
            } = &mut open.item
            {
                *s = status;
                *output = Some(outcome.output);
                *duration_ms = Some(started.elapsed().as_millis() as i64);
            }
            let envelope_status = match outcome.success {
                true => ItemStatus::Completed,
                false => ItemStatus::Failed,
            };
            out.push(sink.complete(open, envelope_status));
            appender.push(out)?;
            Ok(Ran::Done)
        }
        Filed::Mcp {
            open,
            tool,
            arguments,
        } => {
            let asker = asking.asker(&tool.server, open.id());
            super::mcp_call::run(open, &tool, arguments, agent, (sink, appender), asker).await?;
            Ok(Ran::Done)
        }
        // Run by the client: finished when its answer comes (see `requests.rs`).
        Filed::Dynamic { .. } | Filed::Done => Ok(Ran::Done),
    }
}

/// The completion of a command from how its run ended.
fn finish_command(
    mut open: OpenItem,
    ran: Result<shell::ShellOutcome, shell::ShellError>,
    sink: &ItemSink,
) -> ServerNotification {
    let (status, output, code, duration) = match ran {
        Ok(outcome) => {
            let mut output = outcome.aggregated_output.clone();
            let status = match outcome.end {
                ShellEnd::Exited { code: 0 } => CommandExecutionStatus::Completed,
                ShellEnd::Exited { .. }
                | ShellEnd::Signaled { .. }
                | ShellEnd::TimedOut { .. }
                | ShellEnd::Cancelled => CommandExecutionStatus::Failed,
            };
            if let (
                ShellEnd::TimedOut { .. } | ShellEnd::Cancelled | ShellEnd::Signaled { .. },
                Some(reason),
            ) = (outcome.end, outcome.failure_reason())
            {
                if !output.is_empty() && !output.ends_with('\n') {
                    output.push('\n');
                }
                output.push_str(&format!("[{reason}]"));
            }
            let duration = outcome.duration.as_millis() as i64;
            (status, output, outcome.exit_code, duration)
        }
        Err(error) => (CommandExecutionStatus::Failed, error.to_string(), None, 0),
    };
    if let ThreadItem::CommandExecution {
        status: s,
        aggregated_output,
        exit_code,
        duration_ms,
        ..
    } = &mut open.item
    {
        *s = status;
        *aggregated_output = Some(output);
        *exit_code = code;
        *duration_ms = Some(duration);
    }
    let envelope = match status {
        CommandExecutionStatus::Completed => ItemStatus::Completed,
        CommandExecutionStatus::Failed
        | CommandExecutionStatus::InProgress
        | CommandExecutionStatus::Declined => ItemStatus::Failed,
    };
    sink.complete(open, envelope)
}

fn finish_patch(
    mut open: OpenItem,
    applied: Result<Vec<FileUpdateChange>, apply_patch::PatchError>,
    sink: &ItemSink,
) -> ServerNotification {
    let (status, envelope) = match &applied {
        Ok(_) => (PatchApplyStatus::Completed, ItemStatus::Completed),
        Err(error) => {
            tracing::warn!(%error, item = open.id(), "applying a patch failed");
            (PatchApplyStatus::Failed, ItemStatus::Failed)
        }
    };
    if let ThreadItem::FileChange {
        status: s, changes, ..
    } = &mut open.item
    {
        *s = status;
        if let Ok(applied) = applied {
            *changes = applied;
        }
    }
    sink.complete(open, envelope)
}

/// The item a tool added on the side, with the tool's call as its parent.
fn emitted_item(emission: ToolEmission, sink: &ItemSink) -> Vec<ServerNotification> {
    let id = new_item_id();
    let item = match emission.kind {
        EmissionKind::Message { text } => ThreadItem::agent_message(id, text),
        EmissionKind::Component { name, props } => ThreadItem::Component { id, name, props },
        EmissionKind::Status { text } => ThreadItem::Status { id, text },
        EmissionKind::Context { text } => ThreadItem::Context { id, text },
    };
    sink.whole(item, Some(emission.parent_item_id), None)
}

/// Completes an item that will not run: declined by a person or refused
/// by the policy (`reason` goes to the model for a refusal).
pub(crate) fn decline(
    filed: Filed,
    reason: Option<String>,
    sink: &ItemSink,
) -> Vec<ServerNotification> {
    match filed {
        Filed::Shell { mut open, .. } => {
            if let ThreadItem::CommandExecution {
                status,
                aggregated_output,
                ..
            } = &mut open.item
            {
                *status = CommandExecutionStatus::Declined;
                *aggregated_output = reason;
            }
            vec![sink.complete(open, ItemStatus::Declined)]
        }
        Filed::Patch { mut open, .. } => {
            if let ThreadItem::FileChange { status, .. } = &mut open.item {
                *status = PatchApplyStatus::Declined;
            }
            vec![sink.complete(open, ItemStatus::Declined)]
        }
        Filed::Function { mut open, .. } => {
            if let ThreadItem::FunctionCall { status, output, .. } = &mut open.item {
                *status = FunctionCallStatus::Declined;
                *output = reason;
            }
            vec![sink.complete(open, ItemStatus::Declined)]
        }
        Filed::Dynamic { mut open, .. } => {
            if let ThreadItem::DynamicToolCall {
                status, success, ..
            } = &mut open.item
            {
                *status = DynamicToolCallStatus::Failed;
                *success = Some(false);
            }
            vec![sink.complete(open, ItemStatus::Declined)]
        }
        Filed::Mcp { open, .. } => vec![super::mcp_call::declined(open, reason, sink)],
        Filed::Done => Vec::new(),
    }
}

/// Where the process groups of running commands are recorded
/// ([`spool_store::Store::process_started`]); object-safe, for
/// [`run_filed`].
pub(crate) trait ProcessLog: Send + Sync {
    /// Records the group; whether it was recorded.
    fn started<'a>(
        &'a self,
        item_id: &'a str,
        pgid: u32,
        start_ticks: u64,
    ) -> futures_util::future::BoxFuture<'a, bool>;
    fn ended<'a>(&'a self, item_id: &'a str) -> futures_util::future::BoxFuture<'a, ()>;
}

/// [`ProcessLog`] in a thread of a store.
pub(crate) struct StoreProcesses<S> {
    pub store: S,
    pub thread_id: String,
}

impl<S: spool_store::Store + Send + Sync> ProcessLog for StoreProcesses<S> {
    fn started<'a>(
        &'a self,
        item_id: &'a str,
        pgid: u32,
        start_ticks: u64,
    ) -> futures_util::future::BoxFuture<'a, bool> {
        Box::pin(async move {
            let recorded = self
                .store
                .process_started(&self.thread_id, item_id, pgid, start_ticks)
                .await;
            if let Err(error) = &recorded {
                tracing::warn!(%error, item_id, "cannot record a running command");
            }
            recorded.is_ok()
        })
    }

    fn ended<'a>(&'a self, item_id: &'a str) -> futures_util::future::BoxFuture<'a, ()> {
        Box::pin(async move {
            if let Err(error) = self.store.process_ended(&self.thread_id, item_id).await {
                tracing::warn!(%error, item_id, "cannot forget a finished command");
            }
        })
    }
}

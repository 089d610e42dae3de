//! Waiting on requests: making them durable, answering them (stored
//! answer, else the client), and what an answer does to its call.

use spool_core::run_state::{ApprovalRecord, Interruption, InterruptionKind};
use spool_protocol::*;
use spool_store::{Appended, PendingRequest, Store, StoreError};
use spool_tools::policy::{Rule, RulesFile};

use super::RunError;
use super::drive::{Run, Settled};
use super::execute::decline;
use super::file_call::{Filed, FiledCall};
use super::items::ItemSink;
use super::requests::{apply_answer, leaves_sandbox, stored_answer};
use crate::now_ms;

impl<S: Store + Clone + 'static> Run<'_, S> {
    /// Makes the requests durable (with the run state) before anyone is
    /// asked.
    pub(super) async fn open_requests(
        &mut self,
        asks: Vec<(PendingRequest, FiledCall)>,
    ) -> Result<(), RunError> {
        for (request, filed) in &asks {
            self.state.interruptions.push(Interruption {
                request_id: request.request_id.clone(),
                call_id: filed.call.call_id.clone(),
                tool: filed.tool.clone(),
                item_id: filed.item_id.clone(),
                kind: interruption_kind(&request.request),
                summary: summary(&request.request),
            });
        }
        // The items must be committed before the request that names them.
        self.appender.sync().await?;
        let snapshot = self.snapshot().await?;
        for (request, _) in &asks {
            self.runner
                .store
                .open_request(request.clone(), Some(snapshot.clone()))
                .await?;
        }
        self.persisted = true;
        // A client-run tool call is not an approval: the thread waits on
        // no person for it.
        let approval = asks
            .iter()
            .any(|(request, _)| !matches!(request.request, ServerRequest::DynamicToolCall(_)));
        let flags = match approval {
            true => vec![ThreadActiveFlag::WaitingOnApproval],
            false => Vec::new(),
        };
        self.appender.push(vec![super::drive::status_changed(
            &self.state.thread_id,
            ThreadStatus::Active {
                active_flags: flags,
            },
        )])?;
        self.waiting.extend(asks);
        Ok(())
    }

    /// Answers the waiting requests in order: from the store if answered
    /// already, else from the client; stops (paused) at the first one
    /// nobody answers.
    pub(super) async fn settle_waiting(&mut self) -> Result<Settled, RunError> {
        let waiting = std::mem::take(&mut self.waiting);
        let mut rest = waiting.into_iter();
        while let Some((request, filed)) = rest.next() {
            let Some(answer) = self.answer_for(&request).await? else {
                self.waiting.push((request, filed));
                self.waiting.extend(rest);
                return Ok(Settled::Paused);
            };
            let effect = apply_answer(&request, &answer, &mut self.grants);
            if let Some(rule) = effect.new_rule {
                self.keep_rule(rule)?;
            }
            self.state
                .interruptions
                .retain(|i| i.request_id != request.request_id);
            self.state.approvals.push(ApprovalRecord {
                request_id: request.request_id.clone(),
                call_id: filed.call.call_id.clone(),
                tool: filed.tool.clone(),
                decision: serde_json::to_value(&answer).unwrap_or_default(),
            });
            let call_id = filed.call.call_id.clone();
            match (effect.dynamic, effect.run) {
                (Some(response), _) => {
                    self.mark_done(&call_id);
                    let done = finish_dynamic(filed.filed, response, &self.sink);
                    self.appender.push(done)?;
                    self.save_state().await?;
                }
                (None, true) => {
                    let mut filed = filed;
                    // A call that already ran once (confined, and denied)
                    // is being re-run outside the sandbox.
                    let retry = self
                        .state
                        .calls
                        .iter()
                        .any(|c| c.call_id == call_id && c.executed);
                    let outside = leaves_sandbox(&filed, &self.agent, retry);
                    if let Filed::Shell { outside: o, .. } = &mut filed.filed {
                        *o = outside;
                    }
                    self.run_calls(vec![filed]).await?
                }
                (None, false) => {
                    self.mark_done(&call_id);
                    self.appender.push(decline(filed.filed, None, &self.sink))?;
                    self.save_state().await?;
                }
            }
            if effect.interrupt_turn {
                for (request, filed) in rest {
                    self.cancel_request(request, filed).await?;
                }
                return Ok(Settled::Cancelled);
            }
        }
        // Everyone answered: running again, waiting on no one.
        if self.waiting.is_empty() {
            self.appender.push(vec![super::drive::status_changed(
                &self.state.thread_id,
                ThreadStatus::active(),
            )])?;
        }
        Ok(Settled::Done)
    }

    pub(super) async fn answer_for(
        &self,
        request: &PendingRequest,
    ) -> Result<Option<ServerRequestAnswer>, RunError> {
        let thread_id = &self.state.thread_id;
        let stored = self
            .runner
            .store
            .request(thread_id, &request.request_id)
            .await?;
        if let Some(answer) = stored.as_ref().and_then(stored_answer) {
            return Ok(Some(answer));
        }
        let Some(client) = &self.runner.client else {
            return Ok(None);
        };
        let Some(answer) = client.ask(request).await else {
            return Ok(None);
        };
        let json = serde_json::to_value(&answer).unwrap_or_default();
        match self
            .runner
            .store
            .resolve_request(thread_id, &request.request_id, json)
            .await
        {
            Ok(resolved) => {
                // Logged by the store itself: stream it like the rest.
                let _ = self.events.send(Appended::Logged(resolved.event));
                Ok(Some(answer))
            }
            // Answered elsewhere meanwhile: the first answer stands.
            Err(StoreError::RequestAlreadyResolved { .. }) => {
                let stored = self
                    .runner
                    .store
                    .request(thread_id, &request.request_id)
                    .await?;
                Ok(stored.as_ref().and_then(stored_answer))
            }
            Err(error) => Err(error.into()),
        }
    }

    /// A request left when the turn is cancelled: answered `cancel` (so it
    /// is not asked again) and its item declined.
    pub(super) async fn cancel_request(
        &mut self,
        request: PendingRequest,
        filed: FiledCall,
    ) -> Result<(), RunError> {
        let cancel = match &request.request {
            ServerRequest::FileChangeRequestApproval(_) => {
                serde_json::json!({"decision": "cancel"})
            }
            ServerRequest::CommandExecutionRequestApproval(_) => {
                serde_json::json!({"decision": "cancel"})
            }
            ServerRequest::DynamicToolCall(_) => {
                serde_json::json!({"contentItems": [{"type": "inputText", "text": "cancelled"}], "success": false})
            }
            ServerRequest::McpServerElicitation(_) => serde_json::json!({"action": "cancel"}),
        };
        // What was pushed before goes out before the resolution.
        self.appender.sync().await?;
        match self
            .runner
            .store
            .resolve_request(&self.state.thread_id, &request.request_id, cancel)
            .await
        {
            Ok(resolved) => {
                let _ = self.events.send(Appended::Logged(resolved.event));
            }
            Err(StoreError::RequestAlreadyResolved { .. }) => {}
            Err(error) => return Err(error.into()),
        }
        self.state
            .interruptions
            .retain(|i| i.request_id != request.request_id);
        self.mark_done(&filed.call.call_id);
        self.appender.push(decline(filed.filed, None, &self.sink))?;
        Ok(())
    }

    pub(super) fn keep_rule(&mut self, rule: Rule) -> Result<(), RunError> {
        let scoped = match rule {
            Rule::Exec(rule) => Rule::Exec(rule.for_thread(self.state.thread_id.clone())),
            Rule::Network(rule) => Rule::Network(rule.for_thread(self.state.thread_id.clone())),
        };
        self.grants.add_rule(scoped.clone());
        if let Some(path) = &self.runner.rules_file {
            RulesFile::append(path, &scoped)?;
        }
        Ok(())
    }
}

fn interruption_kind(request: &ServerRequest) -> InterruptionKind {
    match request {
        ServerRequest::CommandExecutionRequestApproval(_) => InterruptionKind::CommandExecution,
        ServerRequest::FileChangeRequestApproval(_) => InterruptionKind::FileChange,
        ServerRequest::DynamicToolCall(_) => InterruptionKind::DynamicToolCall,
        ServerRequest::McpServerElicitation(_) => InterruptionKind::McpToolCall,
    }
}

/// What a person is shown about a request.
fn summary(request: &ServerRequest) -> String {
    match request {
        ServerRequest::CommandExecutionRequestApproval(params) => {
            params.command.clone().unwrap_or_default()
        }
        ServerRequest::FileChangeRequestApproval(params) => format!(
            "file changes under {}",
            params.grant_root.clone().unwrap_or_default()
        ),
        ServerRequest::DynamicToolCall(params) => format!("client tool {}", params.tool),
        ServerRequest::McpServerElicitation(params) => format!(
            "MCP tool {} of {}",
            params.approved_tool().unwrap_or("?"),
            params.server_name
        ),
    }
}

/// Completes a client-run tool's item with its answer.
fn finish_dynamic(
    filed: Filed,
    response: DynamicToolCallResponse,
    sink: &ItemSink,
) -> Vec<ServerNotification> {
    let Filed::Dynamic { mut open, .. } = filed else {
        return Vec::new();
    };
    let status = match response.success {
        true => DynamicToolCallStatus::Completed,
        false => DynamicToolCallStatus::Failed,
    };
    if let ThreadItem::DynamicToolCall {
        status: s,
        content_items,
        success,
        duration_ms,
        ..
    } = &mut open.item
    {
        *s = status;
        *content_items = Some(response.content_items);
        *success = Some(response.success);
        *duration_ms = Some(now_ms() - open.envelope.started_at_ms);
    }
    let envelope = match response.success {
        true => ItemStatus::Completed,
        false => ItemStatus::Failed,
    };
    vec![sink.complete(open, envelope)]
}

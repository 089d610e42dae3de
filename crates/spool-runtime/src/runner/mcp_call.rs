//! Running an MCP tool call and finishing its `mcpToolCall` item.
//!
//! The call goes to the agent's toolbox; what the server reports on the
//! way is logged as `item/mcpToolCall/progress` while it runs. The item
//! always ends with one `item/completed` carrying `durationMs`: the
//! content the tool answered in `result` (an answer the tool marks as an
//! error also sets `error`), or, for a call with no answer (the server
//! gone, the timeout passed), `error` alone. Either way the model is told
//! (see the model view's tool conversion).

use std::time::Instant;

use serde_json::Value;
use spool_protocol::*;
use spool_store::{Appender, StoreError};
use spool_tools::mcp::{McpElicit, McpProgress, McpToolInfo};

use std::sync::Arc;

use spool_store::{Appended, Store};
use tokio::sync::{mpsc, watch};

use super::drive::{Opening, Run};
use super::items::{ItemSink, OpenItem};
use super::{RunError, RunResult, Runner};
use crate::agent::Agent;

/// Who a client's direct call is by, in its item's provenance.
const CLIENT: &str = "client";

impl<S: Store + Clone + 'static> Runner<S> {
    /// A client's own call of an MCP tool (`mcpServer/tool/call`), as a
    /// turn of its own holding its one `mcpToolCall` item: on record like
    /// any call, so the model sees it and its result in later turns. The
    /// client asked for it: no approval is asked. Answers the completed
    /// item beside the run's result.
    pub async fn mcp_call_streamed(
        &self,
        agent: Arc<Agent>,
        thread_id: &str,
        (server, tool, arguments): (String, String, Value),
        events: &mpsc::UnboundedSender<Appended>,
        interrupt: watch::Receiver<bool>,
    ) -> Result<(RunResult, ThreadItem), RunError> {
        let mut run =
            Run::start(self, agent, thread_id, events, interrupt, Opening::Direct).await?;
        // What the server says of the tool, when it still offers it.
        let offered = match &run.agent.mcp {
            Some(toolbox) => toolbox.tools().await.unwrap_or_default(),
            None => Vec::new(),
        };
        let info = offered
            .into_iter()
            .find(|t| t.server == server && t.tool == tool)
            .unwrap_or(McpToolInfo {
                server,
                tool,
                description: None,
                input_schema: Value::Null,
                read_only: None,
                destructive: None,
                approval: None,
            });
        run.sink.agent = CLIENT.to_owned();
        let (open, started) = run.sink.start(item(&info, &arguments), None, None);
        run.appender.push(vec![started])?;
        let asker = run.mcp_asking().asker(&info.server, open.id());
        let parts = (&run.sink, &run.appender);
        let completed = self::run(open, &info, arguments, &run.agent, parts, asker).await?;
        let result = run.finish(TurnStatus::Completed, None).await?;
        Ok((result, completed))
    }
}

/// Calls the tool and logs its progress and its completion; answers the
/// item as completed.
pub(super) async fn run(
    open: OpenItem,
    tool: &McpToolInfo,
    arguments: Value,
    agent: &Agent,
    (sink, appender): (&ItemSink, &Appender),
    asker: Option<McpElicit>,
) -> Result<ThreadItem, StoreError> {
    let Some(toolbox) = &agent.mcp else {
        let error = "this agent has no MCP servers".to_owned();
        return push_completion(finish(open, Err(error), 0, sink), appender);
    };
    let arguments = match arguments {
        Value::Object(map) => Some(map),
        _ => None,
    };
    let item_id = open.id().to_owned();
    let push_error = std::sync::Mutex::new(None::<StoreError>);
    let on_progress = |progress: McpProgress| {
        let notification =
            ServerNotification::McpToolCallProgress(McpToolCallProgressNotification {
                thread_id: sink.thread_id.clone(),
                turn_id: sink.turn_id.clone(),
                item_id: item_id.clone(),
                message: progress_message(&progress),
            });
        if let Err(error) = appender.push(vec![notification]) {
            let mut slot = push_error
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            slot.get_or_insert(error);
        }
    };
    let started = Instant::now();
    let outcome = toolbox
        .call(&tool.server, &tool.tool, arguments, &on_progress, asker)
        .await;
    let duration = started.elapsed().as_millis() as i64;
    if let Some(error) = push_error
        .into_inner()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
    {
        return Err(error);
    }
    push_completion(finish(open, outcome, duration, sink), appender)
}

fn push_completion(
    (item, completed): (ThreadItem, ServerNotification),
    appender: &Appender,
) -> Result<ThreadItem, StoreError> {
    appender.push(vec![completed])?;
    Ok(item)
}

/// The `mcpToolCall` item of a call about to run.
pub(super) fn item(tool: &McpToolInfo, arguments: &Value) -> ThreadItem {
    ThreadItem::McpToolCall {
        id: crate::output_mapper::new_item_id(),
        server: tool.server.clone(),
        tool: tool.tool.clone(),
        status: McpToolCallStatus::InProgress,
        arguments: arguments.clone(),
        app_context: None,
        mcp_app_resource_uri: None,
        mcp_app_ui: None,
        plugin_id: None,
        read_only_hint: tool.read_only,
        result: None,
        error: None,
        duration_ms: None,
    }
}

/// Who the questions of a run's MCP calls go to.
pub(crate) trait McpAsking: Send + Sync {
    /// The asker for one call of `server`, filed as `item_id`.
    fn asker(&self, server: &str, item_id: &str) -> Option<McpElicit>;
}

/// A server's question during a call goes to the run's client as an
/// `mcpServer/elicitation/request`, durable like an approval: recorded in
/// the store before it is asked, its answer recorded (and logged as
/// `serverRequest/resolved`) before the server gets it. With nobody to
/// ask, it is declined, and recorded so. A call does not pause its turn:
/// the server waits for the answer within the call's timeout.
#[derive(Clone)]
pub(crate) struct StoreAsking<S> {
    pub store: S,
    pub client: Option<Arc<dyn super::ClientRequests>>,
    pub events: mpsc::UnboundedSender<Appended>,
    pub thread_id: String,
    pub turn_id: String,
}

impl<S: Store + Clone + Send + Sync + 'static> McpAsking for StoreAsking<S> {
    fn asker(&self, server: &str, item_id: &str) -> Option<McpElicit> {
        let asking = Arc::new(self.clone());
        let (server, item_id) = (server.to_owned(), item_id.to_owned());
        Some(Arc::new(move |params: Value| {
            let (asking, server, item_id) = (asking.clone(), server.clone(), item_id.clone());
            Box::pin(async move { asking.ask(&server, &item_id, params).await })
        }))
    }
}

impl<S: Store + Clone + 'static> Run<'_, S> {
    /// Where the questions of this run's MCP calls go.
    pub(super) fn mcp_asking(&self) -> StoreAsking<S> {
        StoreAsking {
            store: self.runner.store.clone(),
            client: self.runner.client.clone(),
            events: self.events.clone(),
            thread_id: self.state.thread_id.clone(),
            turn_id: self.state.turn_id.clone(),
        }
    }
}

impl<S: Store> StoreAsking<S> {
    async fn ask(&self, server: &str, item_id: &str, params: Value) -> Value {
        let declined = serde_json::json!({"action": "decline"});
        let Ok(request) = serde_json::from_value::<McpElicitation>(params) else {
            tracing::warn!(
                server,
                "an MCP server asked a question spool cannot read: declined"
            );
            return declined;
        };
        let request = ServerRequest::McpServerElicitation(McpServerElicitationRequestParams {
            thread_id: self.thread_id.clone(),
            turn_id: Some(self.turn_id.clone()),
            server_name: server.to_owned(),
            request,
        });
        let pending = super::requests::new_request(request, item_id);
        if let Err(error) = self.store.open_request(pending.clone(), None).await {
            tracing::warn!(server, %error, "cannot record an MCP server's question: declined");
            return declined;
        }
        let answer = match &self.client {
            Some(client) => client.ask(&pending).await,
            None => None,
        };
        let answer = match answer {
            Some(ServerRequestAnswer::McpServerElicitation(response)) => {
                serde_json::json!({"action": response.action, "content": response.content})
            }
            _ => declined,
        };
        match self
            .store
            .resolve_request(&self.thread_id, &pending.request_id, answer.clone())
            .await
        {
            Ok(resolved) => {
                let _ = self.events.send(Appended::Logged(resolved.event));
            }
            Err(error) => tracing::warn!(server, %error, "cannot record the answer to a question"),
        }
        answer
    }
}

/// The text of a progress report: its message, and how far along it is.
fn progress_message(progress: &McpProgress) -> String {
    let fraction = match progress.total {
        Some(total) => format!("{}/{}", progress.progress, total),
        None => progress.progress.to_string(),
    };
    match &progress.message {
        Some(message) => format!("{message} ({fraction})"),
        None => fraction,
    }
}

/// The completed item and its `item/completed`.
fn finish(
    mut open: OpenItem,
    outcome: Result<spool_tools::mcp::McpOutcome, String>,
    duration_ms: i64,
    sink: &ItemSink,
) -> (ThreadItem, ServerNotification) {
    let (status, new_result, new_error) = match outcome {
        Ok(outcome) => {
            let error = outcome.is_error.then(|| McpToolCallError {
                message: error_text(&outcome.content),
            });
            let status = match outcome.is_error {
                true => McpToolCallStatus::Failed,
                false => McpToolCallStatus::Completed,
            };
            let result = McpToolCallResult {
                content: outcome.content,
                structured_content: outcome.structured_content,
                meta: None,
            };
            (status, Some(Box::new(result)), error)
        }
        Err(message) => (
            McpToolCallStatus::Failed,
            None,
            Some(McpToolCallError { message }),
        ),
    };
    if let ThreadItem::McpToolCall {
        status: s,
        result,
        error,
        duration_ms: d,
        ..
    } = &mut open.item
    {
        *s = status;
        *result = new_result;
        *error = new_error;
        *d = Some(duration_ms);
    }
    let envelope = match status {
        McpToolCallStatus::Completed => ItemStatus::Completed,
        McpToolCallStatus::Failed | McpToolCallStatus::InProgress => ItemStatus::Failed,
    };
    (open.item.clone(), sink.complete(open, envelope))
}

/// What an error result says: its text blocks, joined.
fn error_text(content: &[Value]) -> String {
    let texts: Vec<&str> = content
        .iter()
        .filter(|block| block.get("type").and_then(Value::as_str) == Some("text"))
        .filter_map(|block| block.get("text").and_then(Value::as_str))
        .collect();
    match texts.is_empty() {
        true => "the tool reported an error".to_owned(),
        false => texts.join("\n"),
    }
}

/// The completion of a call that will not run (declined by a person, or
/// refused by the policy with `reason`).
pub(super) fn declined(
    mut open: OpenItem,
    reason: Option<String>,
    sink: &ItemSink,
) -> ServerNotification {
    if let ThreadItem::McpToolCall {
        status,
        error,
        duration_ms,
        ..
    } = &mut open.item
    {
        *status = McpToolCallStatus::Failed;
        *error = Some(McpToolCallError {
            message: reason.unwrap_or_else(|| "The user declined this tool call.".to_owned()),
        });
        *duration_ms = Some(0);
    }
    sink.complete(open, ItemStatus::Declined)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn progress_reads_as_message_and_fraction() {
        let at = |progress: f64, total: Option<f64>, message: Option<&str>| {
            progress_message(&McpProgress {
                progress,
                total,
                message: message.map(str::to_owned),
            })
        };
        assert_eq!(at(2.0, Some(5.0), Some("step 2")), "step 2 (2/5)");
        assert_eq!(at(0.5, None, None), "0.5");
    }

    #[test]
    fn an_error_result_says_what_its_text_says() {
        let content = vec![
            serde_json::json!({"type": "text", "text": "no such file"}),
            serde_json::json!({"type": "image", "data": "", "mimeType": "image/png"}),
        ];
        assert_eq!(error_text(&content), "no such file");
        assert_eq!(error_text(&[]), "the tool reported an error");
    }
}

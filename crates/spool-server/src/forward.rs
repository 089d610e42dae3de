//! Requests for a thread another server holds (PostgreSQL): forwarded to
//! that server through the store, run there as if a client of its own had
//! sent them, and answered here with its reply, so clients never need to
//! reach the server that runs their thread (`docs/internals/replicas.md`,
//! "Commands").

use std::sync::Arc;

use serde_json::{Value, json};
use spool_protocol::ClientRequest;
use spool_protocol::jsonrpc::RequestId;
use spool_store::{ForwardReply, Forwarded, Store};

use crate::connection::ConnectionState;
use crate::hub::{Hub, HubError};
use crate::methods::{self, MethodError, Reply};

/// The thread of a request that must run where the thread is held: one
/// that appends to it or acts on its run. Reads run anywhere.
pub(crate) fn needs_holder(call: &ClientRequest) -> Option<&str> {
    match call {
        ClientRequest::TurnStart(_)
        | ClientRequest::TurnSteer(_)
        | ClientRequest::TurnInterrupt(_)
        | ClientRequest::ThreadArchive(_)
        | ClientRequest::ThreadUnarchive(_)
        | ClientRequest::ThreadSetName(_)
        | ClientRequest::ThreadRevert(_)
        | ClientRequest::ThreadRollback(_)
        | ClientRequest::ThreadCompactStart(_)
        | ClientRequest::McpServerToolCall(_)
        | ClientRequest::ThreadDelete(_) => call.thread_id(),
        _ => None,
    }
}

/// Runs `call` on `holder` and answers with its reply.
pub(crate) async fn forward(
    hub: &Hub,
    holder: &str,
    thread_id: &str,
    call: &ClientRequest,
) -> Result<Reply, MethodError> {
    let request = call.to_jsonrpc(RequestId::Integer(0));
    let params = request.params.unwrap_or(Value::Null);
    let reply = hub
        .store()
        .forward(holder, thread_id, &request.method, &params)
        .await
        .map_err(|error| MethodError {
            code: spool_protocol::jsonrpc::error_codes::INTERNAL_ERROR,
            message: error.to_string(),
        })?;
    match reply {
        ForwardReply::Result(value) => Ok(Reply(value.to_string())),
        ForwardReply::Error { code, message } => Err(MethodError { code, message }),
    }
}

/// The method of a forwarded answer to a server request (spool's own:
/// clients never send it).
const ANSWER: &str = "spool/answer";

/// Gives the answer to a request of a run on `holder`'s thread to that
/// server (see [`Hub::answer_paused`]).
pub(crate) async fn forward_answer(
    hub: &Hub,
    holder: &str,
    thread_id: &str,
    request_id: &str,
    answer: Value,
) -> Result<(), HubError> {
    let params = json!({"threadId": thread_id, "requestId": request_id, "answer": answer});
    match hub
        .store()
        .forward(holder, thread_id, ANSWER, &params)
        .await?
    {
        ForwardReply::Result(_) => Ok(()),
        ForwardReply::Error { message, .. } => Err(HubError::Invalid(message)),
    }
}

/// Runs a forwarded answer here, as if this server's client had sent it:
/// to the run waiting on it, or recorded and the paused run resumed.
async fn run_answer(hub: &Arc<Hub>, thread_id: &str, params: &Value) -> Result<(), HubError> {
    let request_id = params["requestId"]
        .as_str()
        .ok_or_else(|| HubError::Invalid("a forwarded answer without its request".to_owned()))?;
    let stored = hub
        .store()
        .request(thread_id, request_id)
        .await?
        .ok_or_else(|| HubError::Invalid(format!("no request {request_id}")))?;
    let answer = crate::answers::answer_of(&stored.request, params["answer"].clone())
        .map_err(|e| HubError::Invalid(format!("not an answer to {request_id}: {e}")))?;
    if hub.answer(request_id, answer.clone()).await.is_err() {
        hub.answer_paused(thread_id, request_id, answer).await?;
    }
    Ok(())
}

/// Runs what other servers forward to this one, if its store has other
/// servers; the task ends with the store's feed.
pub fn start(hub: &Arc<Hub>) {
    let Some(mut forwarded) = hub.store().forwarded() else {
        return;
    };
    let hub = Arc::downgrade(hub);
    tokio::spawn(async move {
        while let Some(command) = forwarded.recv().await {
            let Some(hub) = hub.upgrade() else {
                return;
            };
            // Each on its own: a turn/start answers at once, but a
            // thread/compact/start or a slow store must not hold up others.
            tokio::spawn(run(hub, command));
        }
    });
}

/// Runs one forwarded request and records its reply.
async fn run(hub: Arc<Hub>, command: Forwarded) {
    // Recorded with its first events: a request that took effect here is
    // never run again by a server taking the thread over.
    if let Err(error) = hub
        .store()
        .forward_applying(&command.id, &command.thread_id)
        .await
    {
        let reply = ForwardReply::Error {
            code: spool_protocol::jsonrpc::error_codes::INTERNAL_ERROR,
            message: format!("cannot run the request here: {error}"),
        };
        record(&hub, &command, &reply).await;
        return;
    }
    if command.method == ANSWER {
        let reply = match run_answer(&hub, &command.thread_id, &command.params).await {
            Ok(()) => ForwardReply::Result(json!({})),
            Err(error) => {
                let error = MethodError::from(error);
                ForwardReply::Error {
                    code: error.code,
                    message: error.message,
                }
            }
        };
        record(&hub, &command, &reply).await;
        return;
    }
    let reply = match ClientRequest::from_method_params(&command.method, command.params.clone()) {
        // Only what a server forwards, and for the thread it was claimed
        // for (the claim followed that thread's lease): a row that says
        // otherwise is refused, whoever wrote it.
        Ok(call) if needs_holder(&call) != Some(command.thread_id.as_str()) => {
            ForwardReply::Error {
                code: spool_protocol::jsonrpc::error_codes::INVALID_REQUEST,
                message: format!(
                    "{} on thread {} is not a request servers forward",
                    command.method, command.thread_id
                ),
            }
        }
        Ok(call) => {
            // A connection of no one: the request acts, nobody is
            // subscribed by it here (its client watches on its server).
            let mut state = ConnectionState::new();
            match methods::dispatch(&hub, &mut state, call).await {
                Ok(Reply(json)) => match serde_json::from_str(&json) {
                    Ok(value) => ForwardReply::Result(value),
                    Err(error) => ForwardReply::Error {
                        code: spool_protocol::jsonrpc::error_codes::INTERNAL_ERROR,
                        message: format!("cannot read the reply: {error}"),
                    },
                },
                Err(MethodError { code, message }) => ForwardReply::Error { code, message },
            }
        }
        Err(error) => ForwardReply::Error {
            code: error.code(),
            message: error.to_string(),
        },
    };
    record(&hub, &command, &reply).await;
}

async fn record(hub: &Hub, command: &Forwarded, reply: &ForwardReply) {
    if let Err(error) = hub.store().forward_done(&command.id, reply).await {
        tracing::warn!(id = %command.id, thread_id = %command.thread_id, %error,
            "cannot record a forwarded request's reply");
    }
}

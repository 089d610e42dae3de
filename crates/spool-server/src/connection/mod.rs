//! One client connection speaking JSON-RPC: messages in, replies,
//! notifications and server requests out, over any transport of text
//! messages: [`serve_messages`] takes a stream and a sink (a WebSocket's
//! text frames), [`serve_lines`] adapts a byte stream with one message per
//! line (stdio).
//!
//! Every request gets exactly one reply: a malformed message gets an error
//! (`-32700` not JSON, `-32600` not a request), an unknown method `-32601`,
//! bad params `-32602`, a failure inside `-32603`; requests are handled in
//! the order they arrive; a message over [`MAX_MESSAGE_BYTES`] gets
//! `-32600`. A reply to one of our requests (an approval)
//! goes to the hub.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use futures_util::{Sink, SinkExt, Stream, StreamExt};
use serde_json::{Value, json};
use spool_protocol::jsonrpc::{
    JsonRpcError, JsonRpcMessage, JsonRpcNotification, JsonRpcRequest, RequestId, error_codes,
};
use spool_store::PendingRequest;
use tokio::sync::mpsc;

use crate::answers;
use crate::filter::{Capabilities, line_for_client};
use crate::hub::{ConnectionId, Delivery, Hub};
use crate::methods;
use crate::outbox::{Outbox, Unsent, max_unsent_bytes, outbox};

mod lines;

pub use lines::{Outgoing, serve_lines, write_line};
pub(crate) use lines::{read_line_blocking, read_line_blocking_capped};

/// The largest message a client may send (a line, a text frame). A larger
/// line is answered `-32600` and the connection goes on; WebSocket closes
/// on a larger frame.
pub(crate) const MAX_MESSAGE_BYTES: usize = 16 << 20;

static NEXT_CONNECTION: AtomicU64 = AtomicU64::new(1);

/// What a connection knows about itself.
pub(crate) struct ConnectionState {
    pub id: ConnectionId,
    pub initialized: bool,
    pub capabilities: Capabilities,
    /// The client opted in to any of spool's additions (`capabilities.spool`
    /// at `initialize`), so it knows spool's values beyond Codex's.
    pub spool_additions: bool,
    /// Shared with the reader: whether a message whose id cannot be read
    /// gets an error reply with `"id": null` (JSON-RPC 2.0). Only clients
    /// that opted into spool's additions get one; Codex's `RequestId` has
    /// no null, so a Codex client gets a documented silence (and the
    /// server logs it), as Codex's own server does.
    pub(crate) null_id_replies: Arc<std::sync::atomic::AtomicBool>,
    /// Requests forwarded to this client and not answered yet: request id →
    /// (thread, request).
    pub forwarded: HashMap<String, PendingRequest>,
    /// Requests this client answered: a request delivered twice (again
    /// after a resume, and by the resumed run asking it) is not forwarded
    /// once answered.
    answered: HashSet<String>,
    /// Threads this connection was delivered an event of (see
    /// `handle_delivering`).
    delivered_threads: HashSet<String>,
    pub deliveries: mpsc::UnboundedSender<Delivery>,
    /// Methods the client opted out of at `initialize`, for the server's
    /// own notices (thread events use `capabilities`).
    pub opted_out_methods: HashSet<String>,
    /// How a replay to this connection waits for it to read (`outbox.rs`).
    pub room: crate::outbox::Room,
    receiver: Option<mpsc::UnboundedReceiver<Delivery>>,
}

/// Serves one connection until `incoming` ends: each item is one JSON-RPC
/// message (a line, a WebSocket text frame); each message sent on
/// `outgoing` is one reply, notification or server request.
pub async fn serve_messages<I, O>(hub: Arc<Hub>, incoming: I, outgoing: O)
where
    I: Stream<Item = String> + Send + 'static,
    O: Sink<Outgoing> + Send + 'static,
{
    // Everything for the client waits here, bounded (see `outbox.rs`).
    let (lines_tx, unsent) = outbox(max_unsent_bytes());
    let (close_tx, close_rx) = tokio::sync::oneshot::channel();
    let writing = tokio::spawn(write_messages(outgoing, unsent, close_rx));
    // Messages wait here while an earlier request is handled; a request
    // that finds the queue full is answered -32001 at once (see `queue`).
    let (queued_tx, mut queued) = mpsc::channel::<String>(max_queued());
    let mut state = ConnectionState::new();
    state.room = lines_tx.room();
    let null_id_replies = state.null_id_replies.clone();
    let reading = tokio::spawn(queue(
        incoming,
        queued_tx,
        lines_tx.clone(),
        null_id_replies,
    ));
    let mut deliveries_rx = state.take_deliveries();
    let mut notices = hub.subscribe_notices();
    loop {
        tokio::select! {
            () = lines_tx.overflowed() => {
                let _ = close_tx.send(lines_tx.overflow_reason());
                break;
            }
            // The hub outlives its connections: the channel never closes,
            // and a connection too slow for it skips what it missed.
            Ok((method, line)) = notices.recv() => {
                if state.initialized && !state.opted_out_methods.contains(method) {
                    lines_tx.send_paced(line.to_string());
                }
            }
            message = queued.recv() => {
                let Some(message) = message else { break };
                handle_delivering(&hub, &mut state, &message, &mut deliveries_rx, &lines_tx).await;
            }
            Some(delivery) = deliveries_rx.recv() => {
                send_delivery(&mut state, delivery, &lines_tx);
            }
        }
    }
    reading.abort();
    hub.unsubscribe_all(state.id);
    drop(lines_tx);
    let _ = writing.await;
}

/// Handles one message (sending its reply, if any) while still delivering,
/// meanwhile, the events of
/// the threads it cannot be about: a request waiting on the store (a
/// `turn/start` waits for its `turn/started` to be committed) would
/// otherwise hold up every other thread's stream on this connection.
///
/// What is held until the reply is sent, in the order it came: the events
/// of the thread the message names (`params.threadId`), of threads this
/// connection was not delivered anything of before (a thread the request
/// subscribes to: its replay follows the reply, as before), every server
/// request (forwarding one updates the connection's state), and whatever
/// comes after a held delivery of the same thread.
async fn handle_delivering(
    hub: &Arc<Hub>,
    state: &mut ConnectionState,
    line: &str,
    deliveries: &mut mpsc::UnboundedReceiver<Delivery>,
    lines: &Outbox,
) {
    let capabilities = state.capabilities;
    let mut held_threads: HashSet<String> = named_thread(line).into_iter().collect();
    let seen = std::mem::take(&mut state.delivered_threads);
    let mut held = Vec::new();
    let reply = {
        let handling = handle_line(hub, state, line);
        tokio::pin!(handling);
        loop {
            tokio::select! {
                biased;
                reply = &mut handling => break reply,
                Some(delivery) = deliveries.recv() => {
                    let thread = delivery_thread(&delivery);
                    let passes = matches!(delivery, Delivery::Event(_))
                        && seen.contains(thread)
                        && !held_threads.contains(thread);
                    if passes {
                        if let Delivery::Event(event) = &delivery
                            && let Some(line) = line_for_client(event, &capabilities)
                        {
                            lines.send_paced(line);
                        }
                    } else {
                        held_threads.insert(thread.to_owned());
                        lines.hold();
                        held.push(delivery);
                    }
                }
            }
        }
    };
    state.delivered_threads = seen;
    if let Some(reply) = reply {
        lines.send(reply);
    }
    let count = held.len();
    for delivery in held {
        send_delivery(state, delivery, lines);
    }
    lines.release(count);
}

/// The `params.threadId` of a request or notification, if it names one.
fn named_thread(line: &str) -> Option<String> {
    #[derive(serde::Deserialize)]
    struct Params {
        #[serde(rename = "threadId")]
        thread_id: String,
    }
    #[derive(serde::Deserialize)]
    struct Message {
        params: Params,
    }
    serde_json::from_str::<Message>(line)
        .ok()
        .map(|message| message.params.thread_id)
}

fn delivery_thread(delivery: &Delivery) -> &str {
    match delivery {
        Delivery::Event(event) => event.notification().thread_id(),
        Delivery::Request(request) => &request.thread_id,
    }
}

/// Requests a connection may have waiting behind the one being handled
/// (`SPOOL_SERVE_MAX_QUEUED` overrides it, for tests).
const MAX_QUEUED: usize = 1_024;

fn max_queued() -> usize {
    std::env::var("SPOOL_SERVE_MAX_QUEUED")
        .ok()
        .and_then(|v| v.parse().ok())
        .filter(|&n| n > 0)
        .unwrap_or(MAX_QUEUED)
}

/// Reads a connection's messages into the bounded queue. A request that
/// finds the queue full gets `-32001` (overloaded) and is not handled;
/// anything else (an answer to one of our requests, a notification) waits
/// for room, since dropping it would lose an approval or a handshake.
async fn queue<I>(
    incoming: I,
    queued: mpsc::Sender<String>,
    replies: Outbox,
    null_id_replies: Arc<std::sync::atomic::AtomicBool>,
) where
    I: Stream<Item = String>,
{
    let mut incoming = std::pin::pin!(incoming);
    while let Some(message) = incoming.next().await {
        if message.trim().is_empty() {
            continue;
        }
        if message.len() > MAX_MESSAGE_BYTES {
            let reason = format!("message too large (more than {MAX_MESSAGE_BYTES} bytes)");
            if null_id_replies.load(std::sync::atomic::Ordering::Relaxed) {
                let reply = error_line(None, error_codes::INVALID_REQUEST, &reason);
                replies.send(reply);
            } else {
                tracing::warn!(%reason, "a message without a readable id: not answered");
            }
            continue;
        }
        match queued.try_send(message) {
            Ok(()) => {}
            Err(mpsc::error::TrySendError::Closed(_)) => return,
            Err(mpsc::error::TrySendError::Full(message)) => {
                match JsonRpcMessage::parse(&message) {
                    Ok(JsonRpcMessage::Request(request)) => {
                        replies.send(error_line(
                            Some(request.id),
                            error_codes::OVERLOADED,
                            "server overloaded: too many requests waiting on this connection; retry later",
                        ));
                    }
                    _ => {
                        if queued.send(message).await.is_err() {
                            return;
                        }
                    }
                }
            }
        }
    }
}

/// Messages written to the transport before it is flushed, when more are
/// queued.
const MAX_WRITE_BATCH: usize = 64;

/// Writes every queued message, flushing once what queued up meanwhile is
/// written (at most [`MAX_WRITE_BATCH`] at a time), not after each. When
/// `close` says why (the client fell behind), writing stops, even in the
/// middle of a write the client does not take, and the reason is sent if
/// the transport takes it within a second.
async fn write_messages<O: Sink<Outgoing>>(
    outgoing: O,
    mut unsent: Unsent,
    mut close: tokio::sync::oneshot::Receiver<String>,
) {
    let mut outgoing = std::pin::pin!(outgoing);
    let reason = loop {
        let line = tokio::select! {
            reason = &mut close => break reason.ok(),
            line = unsent.lines.recv() => match line {
                Some(line) => line,
                None => break None,
            },
        };
        let written = async {
            let mut bytes = line.len();
            outgoing
                .feed(Outgoing::Message(line))
                .await
                .map_err(|_| ())?;
            for _ in 1..MAX_WRITE_BATCH {
                let Ok(line) = unsent.lines.try_recv() else {
                    break;
                };
                bytes += line.len();
                outgoing
                    .feed(Outgoing::Message(line))
                    .await
                    .map_err(|_| ())?;
            }
            outgoing.flush().await.map_err(|_| ())?;
            Ok::<usize, ()>(bytes)
        };
        let outcome = tokio::select! {
            reason = &mut close => Err(reason.ok()),
            written = written => written.map_err(|()| None),
        };
        match outcome {
            Ok(bytes) => unsent.written(bytes),
            Err(reason) => break reason,
        }
    };
    if let Some(reason) = reason {
        let closing = outgoing.send(Outgoing::Close(reason));
        let _ = tokio::time::timeout(std::time::Duration::from_secs(1), closing).await;
    }
    let _ = outgoing.close().await;
}

impl ConnectionState {
    /// A fresh connection: not initialized, no opt-ins.
    pub(crate) fn new() -> ConnectionState {
        let (deliveries, receiver) = mpsc::unbounded_channel();
        ConnectionState {
            id: next_connection_id(),
            initialized: false,
            capabilities: Capabilities::default(),
            spool_additions: false,
            null_id_replies: Arc::new(std::sync::atomic::AtomicBool::new(false)),
            forwarded: HashMap::new(),
            answered: HashSet::new(),
            delivered_threads: HashSet::new(),
            deliveries,
            opted_out_methods: HashSet::new(),
            room: crate::outbox::Room::unbounded(),
            receiver: Some(receiver),
        }
    }

    /// The receiving end of what the hub delivers to this connection.
    // Invariant: a connection takes its receiver once, when it starts.
    #[allow(clippy::expect_used)]
    pub(crate) fn take_deliveries(&mut self) -> mpsc::UnboundedReceiver<Delivery> {
        self.receiver
            .take()
            .expect("a connection's deliveries are taken once")
    }
}

/// Handles one message; returns the reply line, if any.
async fn handle_line(hub: &Arc<Hub>, state: &mut ConnectionState, line: &str) -> Option<String> {
    let message = match JsonRpcMessage::parse(line) {
        Ok(message) => message,
        Err(error) => {
            let id = match &error {
                spool_protocol::jsonrpc::EnvelopeError::Invalid { id, .. } => id.clone(),
                spool_protocol::jsonrpc::EnvelopeError::Parse(_) => None,
            };
            if id.is_none() && !state.spool_additions {
                tracing::warn!(%error, "a message without a readable id: not answered");
                return None;
            }
            return Some(error_line(id, error.code(), &error.to_string()));
        }
    };
    match message {
        JsonRpcMessage::Request(request) => Some(handle_request(hub, state, request).await),
        JsonRpcMessage::Notification(notification) => {
            handle_notification(state, notification);
            None
        }
        JsonRpcMessage::Response(response) => {
            handle_answer(hub, state, response.id, Ok(response.result)).await
        }
        JsonRpcMessage::Error(error) => match error.id {
            Some(id) => handle_answer(hub, state, id, Err(error.error.message)).await,
            None => None,
        },
    }
}

async fn handle_request(
    hub: &Arc<Hub>,
    state: &mut ConnectionState,
    request: JsonRpcRequest,
) -> String {
    let id = request.id.clone();
    if request.method == "initialize" {
        if state.initialized {
            return error_line(
                Some(id),
                error_codes::INVALID_REQUEST,
                "Already initialized",
            );
        }
    } else if !state.initialized {
        return error_line(Some(id), error_codes::INVALID_REQUEST, "Not initialized");
    }
    match methods::call(hub, state, &request).await {
        Ok(result) => result.to_line(&id),
        Err(error) => error_line(Some(id), error.code, &error.message),
    }
}

fn handle_notification(state: &mut ConnectionState, notification: JsonRpcNotification) {
    // `initialized` confirms `initialize`; nothing else is expected.
    if notification.method != "initialized" {
        tracing::debug!(method = %notification.method, "ignoring a client notification");
    } else {
        let _ = state;
    }
}

/// A client's reply to a request we forwarded.
///
/// An error reply is a refusal, recorded as such. A result that is not an
/// answer to the request is refused back to the client (an error with the
/// request's id naming the answers it takes), and the request stays open.
async fn handle_answer(
    hub: &Arc<Hub>,
    state: &mut ConnectionState,
    id: RequestId,
    result: Result<Value, String>,
) -> Option<String> {
    let key = id.to_string();
    let Some(request) = state.forwarded.remove(&key) else {
        tracing::warn!(request = %key, "a reply to no request of ours");
        return None;
    };
    let answer = match result {
        Ok(value) => match answers::answer_of(&request.request, value) {
            Ok(answer) => answer,
            Err(error) => {
                let message = format!(
                    "not an answer to {}: {error}; it takes {}",
                    request.request.method(),
                    answers::valid_answers(&request.request)
                );
                state.forwarded.insert(key, request);
                return Some(error_line(Some(id), error_codes::INVALID_PARAMS, &message));
            }
        },
        Err(message) => {
            tracing::info!(request = %key, %message, "the client failed our request: a refusal");
            let why = format!("the client failed the call: {message}");
            request.request.refusal(&why)
        }
    };
    state.answered.insert(key.clone());
    if hub.answer(&key, answer.clone()).await.is_err() {
        // Nobody waits in this process: the run paused (or the server
        // restarted). Record the answer and resume it.
        let thread_id = request.thread_id;
        let elsewhere = matches!(
            spool_store::Store::held_elsewhere(hub.store(), &thread_id).await,
            Ok(Some(_))
        );
        let hub = hub.clone();
        let answering = async move {
            if let Err(error) = hub.answer_paused(&thread_id, &key, answer).await {
                tracing::warn!(request = %key, %error, "answering a paused request failed");
            }
        };
        match elsewhere {
            // Forwarded to the server holding the thread, whose reply may
            // take until its lease runs out if it died: not on this
            // connection, which goes on serving its client.
            true => {
                tokio::spawn(answering);
            }
            // Here: before this client's next message, which may act on
            // the resumed run.
            false => answering.await,
        }
    }
    None
}

/// Queues a delivery for the client. Deliveries are paced at their source
/// (a watcher's forwarder waits for room, see `outbox.rs`), so they are
/// queued whatever the bound; replies are not, and overflow it.
fn send_delivery(state: &mut ConnectionState, delivery: Delivery, lines: &Outbox) {
    if let Some(line) = deliver(state, delivery) {
        lines.send_paced(line);
    }
}

/// A delivery as the line this client gets (or nothing, when the client
/// did not opt in to what it is).
fn deliver(state: &mut ConnectionState, delivery: Delivery) -> Option<String> {
    match delivery {
        Delivery::Event(appended) => {
            let thread = appended.notification().thread_id();
            if !state.delivered_threads.contains(thread) {
                state.delivered_threads.insert(thread.to_owned());
            }
            line_for_client(&appended, &state.capabilities)
        }
        Delivery::Request(request) => {
            if state.forwarded.contains_key(&request.request_id)
                || state.answered.contains(&request.request_id)
            {
                return None;
            }
            let line = request_message(&request)?.to_string();
            state.forwarded.insert(request.request_id.clone(), request);
            Some(line)
        }
    }
}

/// A server → client request as its JSON-RPC message.
pub(crate) fn request_message(request: &PendingRequest) -> Option<Value> {
    let params = serde_json::to_value(&request.request).ok()?;
    Some(json!({
        "jsonrpc": "2.0",
        "id": request.request_id,
        "method": params["method"],
        "params": params["params"],
    }))
}

/// A fresh connection id (also for HTTP watchers).
pub(crate) fn next_connection_id() -> ConnectionId {
    NEXT_CONNECTION.fetch_add(1, Ordering::Relaxed)
}

pub(crate) fn error_line(id: Option<RequestId>, code: i64, message: &str) -> String {
    JsonRpcMessage::Error(JsonRpcError::new(id, code, message)).to_line()
}

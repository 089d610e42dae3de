//! A Responses API server that keeps what it is sent, as OpenAI's does:
//! stored responses that `previous_response_id` continues, conversations
//! that requests add to, and the checks the real API makes on the history
//! a request adds up to (an item id twice, a tool output without its call,
//! an unknown response). Every request body is recorded, and so is the
//! whole history each one added up to: what the model "saw".

use std::collections::{HashMap, VecDeque};
use std::io;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, MutexGuard};

use serde_json::{Value, json};
use tokio::io::BufReader;
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinHandle;

use crate::http::{RecordedRequest, read_request, write_chunk, write_end, write_head};

/// What the next request to `/responses` gets.
#[derive(Debug, Clone)]
pub enum Reply {
    /// An assistant message.
    Message(String),
    /// Function calls: `(call_id, name, arguments JSON)`, in output order.
    Calls(Vec<(String, String, String)>),
    /// An assistant message in a response that has no id (and so cannot be
    /// continued from).
    MessageWithoutId(String),
    /// Function calls in a response that has no id: the provider keeps
    /// none of it.
    CallsWithoutId(Vec<(String, String, String)>),
    /// A reasoning item (provider id `rs_N`, this summary, encrypted
    /// content) before the output of the inner reply.
    Reasoned(String, Box<Reply>),
    /// An HTTP error status, with nothing stored.
    Fail(u16),
}

impl Reply {
    pub fn message(text: &str) -> Reply {
        Reply::Message(text.to_owned())
    }

    /// `self`, with a reasoning item first.
    pub fn reasoned(self, summary: &str) -> Reply {
        Reply::Reasoned(summary.to_owned(), Box::new(self))
    }

    pub fn call(call_id: &str, name: &str, arguments: Value) -> Reply {
        Reply::Calls(vec![(
            call_id.to_owned(),
            name.to_owned(),
            arguments.to_string(),
        )])
    }
}

/// One request to `/responses` as the server understood it.
#[derive(Debug, Clone, PartialEq)]
pub struct Exchange {
    /// The request body as sent.
    pub body: Value,
    /// The history it added up to: what a stored response or conversation
    /// held, then the request's own input.
    pub context: Vec<Value>,
    /// The status answered.
    pub status: u16,
    /// The id of the response given, if it had one.
    pub response_id: Option<String>,
    /// Why it was refused, when it was.
    pub error: Option<String>,
}

#[derive(Debug, Default)]
struct State {
    replies: VecDeque<Reply>,
    /// Stored responses: the history through their output.
    responses: HashMap<String, Vec<Value>>,
    conversations: HashMap<String, Vec<Value>>,
    /// Compaction items handed out: the history each stands for.
    compactions: HashMap<String, Vec<Value>>,
    /// Whether `/responses/compact` is served.
    compact_endpoint: bool,
    exchanges: Vec<Exchange>,
    /// Requests to anything but `/responses`, in order.
    other: Vec<RecordedRequest>,
    next_id: u64,
}

impl State {
    fn fresh_id(&mut self, prefix: &str) -> String {
        self.next_id += 1;
        format!("{prefix}_{}", self.next_id)
    }
}

/// The server, on `127.0.0.1:0`. Stops when dropped.
#[derive(Debug)]
pub struct StatefulResponses {
    addr: SocketAddr,
    state: Arc<Mutex<State>>,
    accept: JoinHandle<()>,
}

impl StatefulResponses {
    pub async fn start(replies: impl IntoIterator<Item = Reply>) -> io::Result<Self> {
        let listener = TcpListener::bind(("127.0.0.1", 0)).await?;
        let addr = listener.local_addr()?;
        let state = Arc::new(Mutex::new(State {
            replies: replies.into_iter().collect(),
            compact_endpoint: true,
            ..State::default()
        }));
        let shared = state.clone();
        let accept = tokio::spawn(async move {
            while let Ok((socket, _)) = listener.accept().await {
                let state = shared.clone();
                tokio::spawn(async move {
                    if let Err(e) = serve(socket, state).await {
                        eprintln!("StatefulResponses: connection ended: {e}");
                    }
                });
            }
        });
        Ok(StatefulResponses {
            addr,
            state,
            accept,
        })
    }

    /// Whether `/responses/compact` is served (it is at first); a
    /// provider without the endpoint answers 404.
    pub fn serve_compact_endpoint(&self, served: bool) {
        lock(&self.state).compact_endpoint = served;
    }

    pub fn push(&self, reply: Reply) {
        lock(&self.state).replies.push_back(reply);
    }

    /// `http://127.0.0.1:PORT/v1`.
    pub fn url(&self) -> String {
        format!("http://{}/v1", self.addr)
    }

    /// Every request to `/responses`, in order.
    pub fn exchanges(&self) -> Vec<Exchange> {
        lock(&self.state).exchanges.clone()
    }

    /// Requests to other endpoints (conversations), in order.
    pub fn other_requests(&self) -> Vec<RecordedRequest> {
        lock(&self.state).other.clone()
    }

    /// Replies not used yet.
    pub fn remaining(&self) -> usize {
        lock(&self.state).replies.len()
    }
}

impl Drop for StatefulResponses {
    fn drop(&mut self) {
        self.accept.abort();
    }
}

fn lock(state: &Mutex<State>) -> MutexGuard<'_, State> {
    state.lock().unwrap_or_else(|p| p.into_inner())
}

/// The answer to one request: status, and either SSE events or JSON.
enum Answer {
    Json(u16, Value),
    Sse(Vec<Value>),
}

async fn serve(socket: TcpStream, state: Arc<Mutex<State>>) -> io::Result<()> {
    let mut reader = BufReader::new(socket);
    let Some(request) = read_request(&mut reader).await? else {
        return Ok(());
    };
    let answer = {
        let mut state = lock(&state);
        if request.method == "POST" && request.path.ends_with("/responses") {
            respond(&mut state, &request.body)
        } else if request.method == "POST"
            && request.path.ends_with("/responses/compact")
            && state.compact_endpoint
        {
            let answer = compact(&mut state, &request.body);
            state.other.push(request);
            answer
        } else if request.method == "POST" && request.path.ends_with("/conversations") {
            let id = state.fresh_id("conv");
            state.conversations.insert(id.clone(), Vec::new());
            state.other.push(request);
            Answer::Json(200, json!({"id": id, "object": "conversation"}))
        } else {
            state.other.push(request);
            Answer::Json(404, json!({"error": {"message": "not here"}}))
        }
    };
    let mut socket = reader.into_inner();
    match answer {
        Answer::Json(status, body) => {
            let headers = [("content-type".to_owned(), "application/json".to_owned())];
            let chunked = write_head(&mut socket, status, &headers).await?;
            write_chunk(&mut socket, chunked, body.to_string().as_bytes()).await?;
            write_end(&mut socket, chunked).await
        }
        Answer::Sse(events) => {
            let headers = [("content-type".to_owned(), "text/event-stream".to_owned())];
            let chunked = write_head(&mut socket, 200, &headers).await?;
            for event in events {
                let name = event["type"].as_str().unwrap_or("message").to_owned();
                let chunk = format!("event: {name}\ndata: {event}\n\n");
                write_chunk(&mut socket, chunked, chunk.as_bytes()).await?;
            }
            write_end(&mut socket, chunked).await
        }
    }
}

fn error(status: u16, message: String) -> Answer {
    Answer::Json(
        status,
        json!({"error": {"message": message, "type": "invalid_request_error"}}),
    )
}

fn respond(state: &mut State, body: &Value) -> Answer {
    let input: Vec<Value> = match &body["input"] {
        Value::Array(items) => items.clone(),
        Value::String(text) => vec![json!({"role": "user", "content": text})],
        _ => Vec::new(),
    };
    let mut exchange = Exchange {
        body: body.clone(),
        context: Vec::new(),
        status: 200,
        error: None,
        response_id: None,
    };
    let checked = build_context(state, body, input);
    let answer = match checked {
        Err(message) => {
            exchange.status = 400;
            exchange.error = Some(message.clone());
            error(400, message)
        }
        Ok(context) => {
            exchange.context = context.clone();
            match state.replies.pop_front() {
                None => {
                    exchange.status = 500;
                    error(500, "StatefulResponses has no reply left".into())
                }
                Some(Reply::Fail(status)) => {
                    exchange.status = status;
                    error(status, format!("scripted failure {status}"))
                }
                Some(reply) => {
                    let (answer, id) = answer(state, body, context, reply);
                    exchange.response_id = id;
                    answer
                }
            }
        }
    };
    state.exchanges.push(exchange);
    answer
}

/// `/responses/compact`: one opaque compaction item standing for the
/// history the request adds up to.
fn compact(state: &mut State, body: &Value) -> Answer {
    let input: Vec<Value> = body["input"].as_array().cloned().unwrap_or_default();
    match build_context(state, body, input) {
        Err(message) => error(400, message),
        Ok(context) => {
            let id = state.fresh_id("cmp");
            state.compactions.insert(id.clone(), context);
            let response = state.fresh_id("resp");
            Answer::Json(
                200,
                json!({"id": response, "object": "response.compaction",
                       "output": [{"type": "compaction", "id": id,
                                   "encrypted_content": format!("enc_{id}")}]}),
            )
        }
    }
}

/// The history a request adds up to, or why the API would refuse it.
fn build_context(state: &State, body: &Value, input: Vec<Value>) -> Result<Vec<Value>, String> {
    let mut context = Vec::new();
    if let Some(previous) = body["previous_response_id"].as_str() {
        match state.responses.get(previous) {
            Some(held) => context.extend(held.iter().cloned()),
            None => return Err(format!("Previous response with id '{previous}' not found.")),
        }
    }
    if let Some(conversation) = body["conversation"].as_str() {
        if body
            .get("previous_response_id")
            .is_some_and(|v| !v.is_null())
        {
            return Err("`conversation` and `previous_response_id` cannot both be set".into());
        }
        match state.conversations.get(conversation) {
            Some(held) => context.extend(held.iter().cloned()),
            None => return Err(format!("Conversation with id '{conversation}' not found.")),
        }
    }
    // A compaction item stands for the history it was made from.
    for item in input {
        let compacted = (item["type"] == "compaction")
            .then(|| item["id"].as_str())
            .flatten()
            .map(|id| state.compactions.get(id).ok_or(id));
        match compacted {
            Some(Ok(held)) => context.extend(held.iter().cloned()),
            Some(Err(id)) => return Err(format!("Compaction item '{id}' not found.")),
            None => context.push(item),
        }
    }
    let mut ids = std::collections::HashSet::new();
    let mut calls = std::collections::HashSet::new();
    let mut answered = std::collections::HashSet::new();
    for item in &context {
        if let Some(id) = item["id"].as_str()
            && !ids.insert(id.to_owned())
        {
            return Err(format!("Duplicate item found with id {id}."));
        }
        let call_id = item["call_id"].as_str().unwrap_or_default().to_owned();
        match item["type"].as_str() {
            Some("function_call") if !calls.insert(call_id.clone()) => {
                return Err(format!("Duplicate function call with call_id {call_id}."));
            }
            Some("function_call_output") => {
                if !calls.contains(&call_id) {
                    return Err(format!(
                        "No tool call found for function call output with call_id {call_id}."
                    ));
                }
                if !answered.insert(call_id.clone()) {
                    return Err(format!("Duplicate output for call_id {call_id}."));
                }
            }
            _ => {}
        }
    }
    Ok(context)
}

/// Streams `reply` and stores the exchange as the API would.
fn answer(
    state: &mut State,
    body: &Value,
    context: Vec<Value>,
    reply: Reply,
) -> (Answer, Option<String>) {
    let with_id = !matches!(reply, Reply::MessageWithoutId(_) | Reply::CallsWithoutId(_));
    let response_id = state.fresh_id("resp");
    let output = output(state, reply);
    let mut events = Vec::new();
    let id_field = if with_id {
        json!({"id": response_id})
    } else {
        json!({})
    };
    events.push(json!({"type": "response.created", "response": id_field}));
    for (index, item) in output.iter().enumerate() {
        let mut opening = item.clone();
        opening["status"] = json!("in_progress");
        if opening["type"] == "message" {
            opening["content"] = json!([]);
        }
        if opening["type"] == "function_call" {
            opening["arguments"] = json!("");
        }
        if opening["type"] == "reasoning" {
            opening["summary"] = json!([]);
        }
        events.push(
            json!({"type": "response.output_item.added", "output_index": index,
            "item": opening}),
        );
        events.push(
            json!({"type": "response.output_item.done", "output_index": index,
            "item": item}),
        );
    }
    // Usage as a real server counts it: the whole context the response was
    // made from (what it holds, not just what this request sent), then its
    // output; here about four bytes of JSON a token.
    let input_tokens = estimated_tokens(&context);
    let output_tokens = estimated_tokens(&output);
    let mut completed = id_field.clone();
    completed["usage"] = json!({"input_tokens": input_tokens, "output_tokens": output_tokens,
                                "total_tokens": input_tokens + output_tokens});
    events.push(json!({"type": "response.completed", "response": completed}));
    let mut held = context;
    held.extend(output);
    // `store` is on unless the request turned it off.
    if with_id && body["store"] != json!(false) {
        state.responses.insert(response_id.clone(), held.clone());
    }
    if let Some(conversation) = body["conversation"].as_str() {
        state.conversations.insert(conversation.to_owned(), held);
    }
    (Answer::Sse(events), with_id.then_some(response_id))
}

/// A token count for `items`: about four bytes of their JSON a token.
fn estimated_tokens(items: &[Value]) -> usize {
    items
        .iter()
        .map(|item| item.to_string().len().div_ceil(4))
        .sum()
}

/// The output items of a reply, with fresh provider ids.
fn output(state: &mut State, reply: Reply) -> Vec<Value> {
    match reply {
        Reply::Message(text) | Reply::MessageWithoutId(text) => {
            let id = state.fresh_id("msg");
            vec![json!({"type": "message", "id": id, "role": "assistant",
                "status": "completed",
                "content": [{"type": "output_text", "text": text, "annotations": []}]})]
        }
        Reply::Calls(calls) | Reply::CallsWithoutId(calls) => calls
            .into_iter()
            .map(|(call_id, name, arguments)| {
                let id = state.fresh_id("fc");
                json!({"type": "function_call", "id": id, "call_id": call_id, "name": name,
                    "arguments": arguments, "status": "completed"})
            })
            .collect(),
        Reply::Reasoned(summary, then) => {
            let id = state.fresh_id("rs");
            let mut items = vec![json!({"type": "reasoning", "id": id,
                "summary": [{"type": "summary_text", "text": summary}],
                "encrypted_content": format!("enc_{id}")})];
            items.extend(output(state, *then));
            items
        }
        Reply::Fail(_) => Vec::new(),
    }
}

//! A real HTTP server that plays back scripted responses.

use std::collections::VecDeque;
use std::io;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use serde_json::{Value, json};
use tokio::io::BufReader;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Notify;
use tokio::task::JoinHandle;

use crate::http::{RecordedRequest, read_request, write_chunk, write_end, write_head};

/// One scripted answer: status, headers, body parts, and how it ends.
#[derive(Debug, Clone)]
pub struct ScriptedResponse {
    status: u16,
    headers: Vec<(String, String)>,
    parts: Vec<Part>,
    /// Waited before every chunk after the first.
    chunk_delay: Option<Duration>,
    /// Close the socket after the parts, without ending the body.
    abort: bool,
}

#[derive(Debug, Clone)]
enum Part {
    Bytes(Vec<u8>),
    Delay(Duration),
    Wait(Gate),
}

/// A point a scripted response waits at until the test opens it: lets a test
/// act while a response is provably mid-stream, without sleeping.
#[derive(Debug, Clone, Default)]
pub struct Gate(Arc<Notify>);

impl Gate {
    pub fn new() -> Self {
        Gate::default()
    }

    /// Let the waiting response go on (or the next one to arrive here).
    pub fn open(&self) {
        self.0.notify_one();
    }
}

impl ScriptedResponse {
    /// A response with `status`, no headers and no body yet.
    pub fn new(status: u16) -> Self {
        ScriptedResponse {
            status,
            headers: Vec::new(),
            parts: Vec::new(),
            chunk_delay: None,
            abort: false,
        }
    }

    /// A JSON body, e.g. an error: `json(400, json!({"error": {...}}))`.
    pub fn json(status: u16, body: &Value) -> Self {
        ScriptedResponse::new(status)
            .header("content-type", "application/json")
            .chunk(body.to_string())
    }

    /// A plain-text body.
    pub fn text(status: u16, body: &str) -> Self {
        ScriptedResponse::new(status)
            .header("content-type", "text/plain")
            .chunk(body)
    }

    /// A 200 SSE stream of named events, one chunk per event:
    /// `event: NAME\ndata: JSON\n\n`.
    pub fn sse<N: Into<String>>(events: impl IntoIterator<Item = (N, Value)>) -> Self {
        let mut response = Self::event_stream();
        for (name, data) in events {
            response = response.sse_event(&name.into(), &data);
        }
        response
    }

    /// A 200 SSE stream of unnamed events, one chunk per event:
    /// `data: TEXT\n\n` (Chat Completions style; pass `"[DONE]"` as is).
    pub fn sse_data<D: Into<String>>(datas: impl IntoIterator<Item = D>) -> Self {
        let mut response = Self::event_stream();
        for data in datas {
            response = response.chunk(format!("data: {}\n\n", data.into()));
        }
        response
    }

    /// A 200 SSE stream written as raw lines, one chunk per line (a `\n` is
    /// appended to each), for malformed or unusual framing.
    pub fn sse_lines<L: Into<String>>(lines: impl IntoIterator<Item = L>) -> Self {
        let mut response = Self::event_stream();
        for line in lines {
            response = response.chunk(format!("{}\n", line.into()));
        }
        response
    }

    /// A 200 SSE response with no body yet; add events with
    /// [`ScriptedResponse::sse_event`] or raw [`ScriptedResponse::chunk`]s.
    pub fn event_stream() -> Self {
        ScriptedResponse::new(200)
            .header("content-type", "text/event-stream")
            .header("cache-control", "no-cache")
    }

    /// Append one named SSE event as a chunk.
    pub fn sse_event(self, name: &str, data: &Value) -> Self {
        self.chunk(format!("event: {name}\ndata: {data}\n\n"))
    }

    pub fn header(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        self.headers.push((name.into(), value.into()));
        self
    }

    /// Append a body chunk, written and flushed on its own.
    pub fn chunk(mut self, bytes: impl Into<Vec<u8>>) -> Self {
        self.parts.push(Part::Bytes(bytes.into()));
        self
    }

    /// Pause here before writing the next chunk.
    pub fn delay(mut self, delay: Duration) -> Self {
        self.parts.push(Part::Delay(delay));
        self
    }

    /// Wait here until `gate` is opened.
    pub fn wait_for(mut self, gate: &Gate) -> Self {
        self.parts.push(Part::Wait(gate.clone()));
        self
    }

    /// Pause before every chunk after the first.
    pub fn chunk_delay(mut self, delay: Duration) -> Self {
        self.chunk_delay = Some(delay);
        self
    }

    /// After the parts written so far and any added later, close the socket
    /// without ending the body: the client sees a dropped connection.
    pub fn abort(mut self) -> Self {
        self.abort = true;
        self
    }
}

#[derive(Debug, Default)]
struct Shared {
    queue: VecDeque<ScriptedResponse>,
    requests: Vec<RecordedRequest>,
    standing: Vec<Standing>,
}

/// A request predicate and the response every matching request gets
/// (a copy each time), ahead of the queue.
struct Standing {
    matches: Box<dyn Fn(&RecordedRequest) -> bool + Send>,
    response: ScriptedResponse,
}

impl std::fmt::Debug for Standing {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Standing")
            .field("response", &self.response)
            .finish_non_exhaustive()
    }
}

/// An HTTP/1.1 server on `127.0.0.1:0` answering requests, in arrival
/// order, with queued [`ScriptedResponse`]s. With the queue empty it answers
/// 500 with a message saying so, which fails the test visibly. Stops when
/// dropped.
#[derive(Debug)]
pub struct ScriptedServer {
    addr: SocketAddr,
    shared: Arc<Mutex<Shared>>,
    accept: JoinHandle<()>,
}

impl ScriptedServer {
    /// Bind and start serving, with nothing queued.
    pub async fn start() -> io::Result<Self> {
        Self::with_responses([]).await
    }

    /// Bind and start serving `responses`, in order.
    pub async fn with_responses(
        responses: impl IntoIterator<Item = ScriptedResponse>,
    ) -> io::Result<Self> {
        let listener = TcpListener::bind(("127.0.0.1", 0)).await?;
        let addr = listener.local_addr()?;
        let shared = Arc::new(Mutex::new(Shared {
            queue: responses.into_iter().collect(),
            requests: Vec::new(),
            standing: Vec::new(),
        }));
        let accept_shared = shared.clone();
        let accept = tokio::spawn(async move {
            while let Ok((socket, _)) = listener.accept().await {
                let shared = accept_shared.clone();
                tokio::spawn(async move {
                    if let Err(e) = serve(socket, shared).await {
                        // The client hanging up early is part of many tests.
                        eprintln!("ScriptedServer: connection ended: {e}");
                    }
                });
            }
        });
        Ok(ScriptedServer {
            addr,
            shared,
            accept,
        })
    }

    /// Queue one more response.
    pub fn push(&self, response: ScriptedResponse) {
        lock(&self.shared).queue.push_back(response);
    }

    /// Answer every request for which `matches` holds with a copy of
    /// `response`, without taking from the queue: for requests a client
    /// makes on its own, at times the test does not control (e.g. a
    /// client's background title generation beside the scripted turns).
    pub fn answer_matching(
        &self,
        matches: impl Fn(&RecordedRequest) -> bool + Send + 'static,
        response: ScriptedResponse,
    ) {
        lock(&self.shared).standing.push(Standing {
            matches: Box::new(matches),
            response,
        });
    }

    /// `http://127.0.0.1:PORT/v1`, the base URL a provider is configured with.
    pub fn url(&self) -> String {
        format!("{}/v1", self.origin())
    }

    /// `http://127.0.0.1:PORT`.
    pub fn origin(&self) -> String {
        format!("http://{}", self.addr)
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Every request received so far, in order.
    pub fn requests(&self) -> Vec<RecordedRequest> {
        lock(&self.shared).requests.clone()
    }

    /// Responses queued and not yet served.
    pub fn remaining(&self) -> usize {
        lock(&self.shared).queue.len()
    }
}

impl Drop for ScriptedServer {
    fn drop(&mut self) {
        self.accept.abort();
    }
}

fn lock(shared: &Mutex<Shared>) -> MutexGuard<'_, Shared> {
    // A panicking test thread poisons nothing we cannot still read.
    shared.lock().unwrap_or_else(|p| p.into_inner())
}

async fn serve(socket: TcpStream, shared: Arc<Mutex<Shared>>) -> io::Result<()> {
    let mut reader = BufReader::new(socket);
    let Some(request) = read_request(&mut reader).await? else {
        return Ok(());
    };
    let response = {
        let mut shared = lock(&shared);
        let label = format!("{} {}", request.method, request.path);
        // The script is of model responses: a client asking which models
        // there are (`GET …/models`) is told none are listed, and neither
        // consumes a response nor counts as a request.
        if request.method == "GET" && request.path.ends_with("/models") {
            ScriptedResponse::json(404, &json!({"error": {"message": "not listed"}}))
        } else {
            let standing = shared
                .standing
                .iter()
                .find(|s| (s.matches)(&request))
                .map(|s| s.response.clone());
            shared.requests.push(request);
            standing
                .or_else(|| shared.queue.pop_front())
                .unwrap_or_else(|| {
                    ScriptedResponse::json(
                        500,
                        &json!({"error": {"message": format!(
                            "ScriptedServer has no scripted response left for {label}"
                        )}}),
                    )
                })
        }
    };
    let mut socket = reader.into_inner();
    let chunked = write_head(&mut socket, response.status, &response.headers).await?;
    let mut first = true;
    for part in &response.parts {
        match part {
            Part::Delay(d) => tokio::time::sleep(*d).await,
            Part::Wait(gate) => gate.0.notified().await,
            Part::Bytes(bytes) => {
                if let Some(d) = response.chunk_delay.filter(|_| !first) {
                    tokio::time::sleep(d).await;
                }
                first = false;
                write_chunk(&mut socket, chunked, bytes).await?;
            }
        }
    }
    if response.abort {
        // Dropping the socket without the final chunk is what a crashed
        // server or a cut network looks like to the client.
        drop(socket);
        return Ok(());
    }
    write_end(&mut socket, chunked).await
}

//! Network clients of `spool serve` for the end-to-end tests: the server
//! as a child process (its bound addresses read from stderr), HTTP/1.1
//! requests and SSE streams (chunked) written on a TCP socket to see the
//! exact bytes, and a WebSocket client (tokio-tungstenite) whose messages
//! are checked against Codex's schema.

#![allow(dead_code)]

mod turns;

use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::Value;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;
use tokio::process::{Child, Command};

use tokio_tungstenite::tungstenite::Message;

use crate::support::Home;
use crate::support::peer::Peer;
use crate::support::schema::Conformance;
#[allow(unused_imports)] // not every test binary makes threads over HTTP
pub use turns::{new_thread, run_turn, start_turn};

const WAIT: Duration = Duration::from_secs(30);

/// A `spool serve` child process with network listeners.
pub struct Server {
    pub child: Child,
    /// Bound addresses as printed: `ws://127.0.0.1:PORT`, …
    pub listening: Vec<String>,
    /// Everything it wrote on stderr.
    pub stderr: Arc<Mutex<Vec<String>>>,
    /// Copies stderr into `stderr` until the process closes it.
    stderr_reader: Option<tokio::task::JoinHandle<()>>,
}

impl Server {
    /// Starts `spool serve ARGS` and waits until it printed `listeners`
    /// bound addresses.
    pub async fn start(home: &Home, model_url: &str, args: &[&str], listeners: usize) -> Server {
        Server::start_with_env(home, model_url, args, listeners, &[]).await
    }

    pub async fn start_with_env(
        home: &Home,
        model_url: &str,
        args: &[&str],
        listeners: usize,
        env: &[(&str, &str)],
    ) -> Server {
        let command = Command::new(env!("CARGO_BIN_EXE_spool"));
        Server::spawn(command, home, model_url, args, listeners, env).await
    }

    /// [`Server::start`] with at most `descriptors` open files (`ulimit -n`).
    pub async fn start_with_descriptors(
        home: &Home,
        model_url: &str,
        args: &[&str],
        listeners: usize,
        descriptors: u32,
    ) -> Server {
        let mut command = Command::new("sh");
        command.args([
            "-c",
            &format!("ulimit -n {descriptors} && exec \"$0\" \"$@\""),
            env!("CARGO_BIN_EXE_spool"),
        ]);
        Server::spawn(command, home, model_url, args, listeners, &[]).await
    }

    async fn spawn(
        mut command: Command,
        home: &Home,
        model_url: &str,
        args: &[&str],
        listeners: usize,
        env: &[(&str, &str)],
    ) -> Server {
        server_command(&mut command, "serve", home, model_url, args);
        command
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        for (key, value) in env {
            command.env(key, value);
        }
        let mut child = command.spawn().expect("spool serve starts");
        let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
        let stderr = Arc::new(Mutex::new(Vec::new()));
        let mut listening = Vec::new();
        while listening.len() < listeners {
            let line = tokio::time::timeout(WAIT, lines.next_line())
                .await
                .expect("the server prints its addresses")
                .unwrap()
                .unwrap_or_else(|| panic!("the server exited: {:?}", stderr.lock().unwrap()));
            eprintln!("[spool serve] {line}");
            if let Some(address) = line.strip_prefix("spool serve: listening on ") {
                listening.push(address.to_owned());
            }
            stderr.lock().unwrap().push(line);
        }
        let keep = stderr.clone();
        let stderr_reader = tokio::spawn(async move {
            while let Ok(Some(line)) = lines.next_line().await {
                eprintln!("[spool serve] {line}");
                keep.lock().unwrap().push(line);
            }
        });
        Server {
            child,
            listening,
            stderr,
            stderr_reader: Some(stderr_reader),
        }
    }

    /// `host:port` of the listener whose URL starts with `scheme://`, with
    /// an unspecified host (0.0.0.0) reached through 127.0.0.1.
    pub fn addr(&self, scheme: &str) -> String {
        let prefix = format!("{scheme}://");
        let url = self
            .listening
            .iter()
            .find(|u| u.starts_with(&prefix))
            .unwrap_or_else(|| panic!("no {scheme} listener in {:?}", self.listening));
        url[prefix.len()..].replace("0.0.0.0", "127.0.0.1")
    }

    pub fn stderr_text(&self) -> String {
        self.stderr.lock().unwrap().join("\n")
    }

    /// Sends SIGTERM and waits for the exit status and the end of its
    /// stderr (so `stderr_text` then has every line).
    pub async fn terminate(&mut self) -> std::process::ExitStatus {
        let pid = self.child.id().expect("still running").to_string();
        let killed = Command::new("kill")
            .args(["-TERM", &pid])
            .status()
            .await
            .unwrap();
        assert!(killed.success());
        let status = tokio::time::timeout(WAIT, self.child.wait())
            .await
            .expect("the server exits after SIGTERM")
            .unwrap();
        if let Some(reader) = self.stderr_reader.take() {
            tokio::time::timeout(WAIT, reader)
                .await
                .expect("stderr closes when the server exits")
                .unwrap();
        }
        status
    }
}

/// An HTTP response read to its end.
#[derive(Debug)]
pub struct Response {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: String,
}

impl Response {
    pub fn json(&self) -> Value {
        serde_json::from_str(&self.body)
            .unwrap_or_else(|e| panic!("not JSON ({e}): {} {}", self.status, self.body))
    }

    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

fn has_header(headers: &[(&str, &str)], name: &str) -> bool {
    headers.iter().any(|(k, _)| k.eq_ignore_ascii_case(name))
}

/// A request line and headers: `Host: ADDR` unless `headers` has a Host,
/// and a body is JSON unless `headers` has a Content-Type.
fn request_text(
    addr: &str,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: Option<&str>,
) -> String {
    let mut text = format!("{method} {path} HTTP/1.1\r\nConnection: close\r\n");
    if !has_header(headers, "host") {
        text.push_str(&format!("Host: {addr}\r\n"));
    }
    for (name, value) in headers {
        text.push_str(&format!("{name}: {value}\r\n"));
    }
    if let Some(body) = body {
        if !has_header(headers, "content-type") {
            text.push_str("Content-Type: application/json\r\n");
        }
        text.push_str(&format!("Content-Length: {}\r\n", body.len()));
    }
    text.push_str("\r\n");
    if let Some(body) = body {
        text.push_str(body);
    }
    text
}

/// Reads a status line and headers.
async fn read_head(reader: &mut BufReader<TcpStream>) -> (u16, Vec<(String, String)>) {
    let mut line = String::new();
    reader.read_line(&mut line).await.unwrap();
    let status = line
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("not an HTTP status line: {line:?}"));
    let mut headers = Vec::new();
    loop {
        line.clear();
        reader.read_line(&mut line).await.unwrap();
        let trimmed = line.trim_end();
        if trimmed.is_empty() {
            break;
        }
        if let Some((k, v)) = trimmed.split_once(':') {
            headers.push((k.trim().to_owned(), v.trim().to_owned()));
        }
    }
    (status, headers)
}

fn is_chunked(headers: &[(String, String)]) -> bool {
    headers.iter().any(|(k, v)| {
        k.eq_ignore_ascii_case("transfer-encoding") && v.eq_ignore_ascii_case("chunked")
    })
}

/// `spool SUBCOMMAND ARGS` in `home`, with the model at `model_url` and
/// none of the environment's settings that would change what it serves.
pub fn server_command(
    command: &mut Command,
    subcommand: &str,
    home: &Home,
    model_url: &str,
    args: &[&str],
) {
    command
        .arg(subcommand)
        .args(args)
        .current_dir(home.path())
        .env("SPOOL_HOME", home.path())
        .env("SPOOL_LOCAL_MODEL_URL", model_url)
        .env_remove("OPENAI_API_KEY")
        .env_remove("SPOOL_STORE")
        .env_remove("SPOOL_AUTH_TOKEN")
        .env_remove("SPOOL_ALLOW_ORIGIN")
        .env_remove("SPOOL_ALLOW_HOST");
}

/// One HTTP request, answered in full.
pub async fn http(
    addr: &str,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: Option<&Value>,
) -> Response {
    let body = body.map(Value::to_string);
    http_text(addr, method, path, headers, body.as_deref()).await
}

/// One HTTP request with a body as given (its Content-Type in `headers`,
/// else JSON), answered in full.
pub async fn http_text(
    addr: &str,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: Option<&str>,
) -> Response {
    Body::open(addr, method, path, headers, body)
        .await
        .read_to_end()
        .await
}

/// A response body read as it comes (chunked or to the end).
pub struct Body {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    reader: BufReader<TcpStream>,
    chunked: bool,
    done: bool,
}

impl Body {
    pub async fn open(
        addr: &str,
        method: &str,
        path: &str,
        headers: &[(&str, &str)],
        body: Option<&str>,
    ) -> Body {
        Body::open_raw(addr, &request_text(addr, method, path, headers, body)).await
    }

    /// Sends `request` exactly as written (it should ask for
    /// `Connection: close`).
    pub async fn open_raw(addr: &str, request: &str) -> Body {
        let mut stream = TcpStream::connect(addr).await.expect("the server accepts");
        stream.write_all(request.as_bytes()).await.unwrap();
        let mut reader = BufReader::new(stream);
        let (status, headers) = read_head(&mut reader).await;
        let chunked = is_chunked(&headers);
        Body {
            status,
            headers,
            reader,
            chunked,
            done: false,
        }
    }

    /// The whole response.
    pub async fn read_to_end(mut self) -> Response {
        let mut text = Vec::new();
        while let Some(bytes) = tokio::time::timeout(WAIT, self.next_bytes())
            .await
            .expect("the response ends")
        {
            text.extend(bytes);
        }
        Response {
            status: self.status,
            headers: self.headers,
            body: String::from_utf8(text).unwrap(),
        }
    }

    /// The next piece of the body; `None` at its end.
    pub async fn next_bytes(&mut self) -> Option<Vec<u8>> {
        if self.done {
            return None;
        }
        if !self.chunked {
            let mut buf = vec![0; 8192];
            let n = self.reader.read(&mut buf).await.unwrap_or(0);
            if n == 0 {
                self.done = true;
                return None;
            }
            buf.truncate(n);
            return Some(buf);
        }
        let mut line = String::new();
        if self.reader.read_line(&mut line).await.unwrap_or(0) == 0 {
            self.done = true;
            return None;
        }
        let size = usize::from_str_radix(line.trim().split(';').next().unwrap(), 16)
            .unwrap_or_else(|_| panic!("not a chunk size: {line:?}"));
        if size == 0 {
            self.done = true;
            return None;
        }
        let mut buf = vec![0; size + 2];
        self.reader.read_exact(&mut buf).await.unwrap();
        buf.truncate(size);
        Some(buf)
    }
}

/// One Server-Sent Event.
#[derive(Debug, Clone)]
pub struct SseEvent {
    pub id: Option<u64>,
    pub event: String,
    pub data: Value,
}

/// An SSE response read event by event.
pub struct Sse {
    pub body: Body,
    pending: String,
}

impl Sse {
    pub async fn open(
        addr: &str,
        method: &str,
        path: &str,
        headers: &[(&str, &str)],
        body: Option<&Value>,
    ) -> Sse {
        let body = body.map(Value::to_string);
        Sse {
            body: Body::open(addr, method, path, headers, body.as_deref()).await,
            pending: String::new(),
        }
    }

    /// The next event; `None` when the stream ended.
    pub async fn next(&mut self) -> Option<SseEvent> {
        loop {
            if let Some(end) = self.pending.find("\n\n") {
                let block: String = self.pending.drain(..end + 2).collect();
                let mut event = SseEvent {
                    id: None,
                    event: "message".to_owned(),
                    data: Value::Null,
                };
                let mut data = String::new();
                for line in block.lines() {
                    if let Some(v) = line.strip_prefix("id:") {
                        event.id = v.trim().parse().ok();
                    } else if let Some(v) = line.strip_prefix("event:") {
                        event.event = v.trim().to_owned();
                    } else if let Some(v) = line.strip_prefix("data:") {
                        data.push_str(v.strip_prefix(' ').unwrap_or(v));
                    }
                }
                if data.is_empty() {
                    continue; // a keep-alive comment
                }
                event.data = serde_json::from_str(&data).unwrap();
                return Some(event);
            }
            let bytes = tokio::time::timeout(WAIT, self.body.next_bytes())
                .await
                .expect("the stream goes on within 30 s")?;
            self.pending.push_str(&String::from_utf8(bytes).unwrap());
        }
    }

    /// Events until one matches (included); panics if the stream ends.
    pub async fn until(&mut self, matches: impl Fn(&SseEvent) -> bool) -> Vec<SseEvent> {
        let mut out = Vec::new();
        loop {
            let event = self.next().await.expect("the stream ended early");
            let done = matches(&event);
            out.push(event);
            if done {
                return out;
            }
        }
    }
}

/// A WebSocket client (tokio-tungstenite) speaking JSON text frames;
/// everything it receives is checked against Codex's schema.
pub struct WebSocket {
    stream: tokio_tungstenite::WebSocketStream<TcpStream>,
    pub conformance: Conformance,
    /// Everything received that was not a reply waited for.
    pub seen: Vec<Value>,
}

/// The outcome of a WebSocket handshake.
#[allow(clippy::large_enum_variant)] // one per test connection
pub enum Upgrade {
    Open(WebSocket),
    Refused(Response),
}

impl WebSocket {
    /// An upgrade request with `Host: ADDR` unless `headers` has a Host.
    pub async fn connect(addr: &str, path: &str, headers: &[(&str, &str)]) -> Upgrade {
        use tokio_tungstenite::tungstenite::client::IntoClientRequest;
        use tokio_tungstenite::tungstenite::http::{HeaderName, HeaderValue};
        let stream = TcpStream::connect(addr).await.expect("the server accepts");
        let mut request = format!("ws://{addr}{path}").into_client_request().unwrap();
        for (name, value) in headers {
            request.headers_mut().insert(
                HeaderName::from_bytes(name.as_bytes()).unwrap(),
                HeaderValue::from_str(value).unwrap(),
            );
        }
        match tokio_tungstenite::client_async(request, stream).await {
            Ok((stream, _)) => Upgrade::Open(WebSocket {
                stream,
                conformance: Conformance::default(),
                seen: Vec::new(),
            }),
            Err(tokio_tungstenite::tungstenite::Error::Http(response)) => {
                let headers = response
                    .headers()
                    .iter()
                    .map(|(k, v)| (k.to_string(), v.to_str().unwrap_or_default().to_owned()))
                    .collect();
                let body = response.body().clone().unwrap_or_default();
                Upgrade::Refused(Response {
                    status: response.status().as_u16(),
                    headers,
                    body: String::from_utf8_lossy(&body).into_owned(),
                })
            }
            Err(other) => panic!("the WebSocket handshake failed: {other}"),
        }
    }

    /// Sends one text frame.
    pub async fn send(&mut self, message: &Value) {
        use futures_util::SinkExt;
        self.conformance.sent(message);
        self.stream
            .send(Message::text(message.to_string()))
            .await
            .unwrap();
    }

    /// Sends one binary frame of raw bytes.
    pub async fn send_binary(&mut self, bytes: &[u8]) {
        use futures_util::SinkExt;
        self.stream
            .send(Message::binary(bytes.to_vec()))
            .await
            .unwrap();
    }

    /// The next text frame as JSON; `None` when the server closed.
    pub async fn next(&mut self) -> Option<Value> {
        use futures_util::StreamExt;
        loop {
            let frame = tokio::time::timeout(WAIT, self.stream.next())
                .await
                .expect("the server sends within 30 s")?;
            match frame.ok()? {
                Message::Text(text) => {
                    let message: Value = serde_json::from_str(&text).unwrap();
                    self.conformance.received(&message);
                    return Some(message);
                }
                Message::Close(_) => return None,
                _ => continue, // ping, pong
            }
        }
    }
}

/// A WebSocket client on `/` of `addr`, initialized with `capabilities`.
pub async fn ws_open(addr: &str, capabilities: Value) -> WebSocket {
    let mut ws = match WebSocket::connect(addr, "/", &[]).await {
        Upgrade::Open(ws) => ws,
        Upgrade::Refused(r) => panic!("upgrade refused: {} {}", r.status, r.body),
    };
    let init = ws.initialize(capabilities).await;
    assert!(init["result"].is_object(), "{init}");
    ws
}

impl Peer for WebSocket {
    async fn send_message(&mut self, message: Value) {
        self.send(&message).await;
    }

    async fn next_message(&mut self) -> Value {
        self.next().await.expect("the server is still there")
    }

    fn seen(&mut self) -> &mut Vec<Value> {
        &mut self.seen
    }
}

//! The model server of `spool bench live`: a Responses API endpoint on a
//! real loopback socket that streams one assistant message of N text
//! deltas as Server-Sent Events.
//!
//! - Fast: the whole stream is written at once, as fast as the socket
//!   takes it (the server under test reads it as fast as it can).
//! - Paced: one delta every `pace`, each carrying the instant it was
//!   written (`@<nanoseconds since the bench's epoch> `), so the client
//!   can tell how long it took to reach it.
//!
//! Every request is answered with `connection: close` (the body ends
//! with the connection) and its arrival instant is noted. Paths other
//! than `…/responses` get a 404.

use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use anyhow::Context;
use serde_json::json;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinHandle;

/// What the next responses stream.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Plan {
    pub deltas: usize,
    /// `None`: fast.
    pub pace: Option<Duration>,
}

/// The delta text of the fast mode: one o200k_base token.
pub(crate) const FAST_DELTA: &str = "x ";

struct Shared {
    epoch: Instant,
    plan: Mutex<Plan>,
    /// When each `/responses` request arrived.
    requests: Mutex<Vec<Instant>>,
    /// When each `/responses` stream began writing its deltas, in the
    /// order the streams began.
    delta_starts: Mutex<Vec<Instant>>,
    /// Streams started so far: each paced stream's phase.
    streams: Mutex<u64>,
}

pub(crate) struct ModelServer {
    url: String,
    shared: Arc<Shared>,
    accept: JoinHandle<()>,
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|p| p.into_inner())
}

impl ModelServer {
    pub(crate) async fn start(epoch: Instant) -> anyhow::Result<ModelServer> {
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let url = format!("http://{}/v1", listener.local_addr()?);
        let shared = Arc::new(Shared {
            epoch,
            plan: Mutex::new(Plan {
                deltas: 1,
                pace: None,
            }),
            requests: Mutex::new(Vec::new()),
            delta_starts: Mutex::new(Vec::new()),
            streams: Mutex::new(0),
        });
        let serving = Arc::clone(&shared);
        let accept = tokio::spawn(async move {
            while let Ok((socket, _)) = listener.accept().await {
                let shared = Arc::clone(&serving);
                tokio::spawn(async move {
                    match serve(socket, &shared).await {
                        // A server killed mid-stream (`bench server`'s
                        // takeover) leaves its stream unread: not a fault.
                        Err(error) if client_gone(&error) => {}
                        Err(error) => eprintln!("    model server: {error:#}"),
                        Ok(()) => {}
                    }
                });
            }
        });
        Ok(ModelServer {
            url,
            shared,
            accept,
        })
    }

    /// The base URL (`http://127.0.0.1:PORT/v1`).
    pub(crate) fn url(&self) -> &str {
        &self.url
    }

    pub(crate) fn set_plan(&self, plan: Plan) {
        *lock(&self.shared.plan) = plan;
    }

    /// When the `/responses` requests arrived, in order.
    pub(crate) fn requests(&self) -> Vec<Instant> {
        lock(&self.shared.requests).clone()
    }

    /// When each stream began writing its deltas, in the order they began.
    pub(crate) fn delta_starts(&self) -> Vec<Instant> {
        lock(&self.shared.delta_starts).clone()
    }
}

impl Drop for ModelServer {
    fn drop(&mut self) {
        self.accept.abort();
    }
}

async fn serve(socket: TcpStream, shared: &Shared) -> anyhow::Result<()> {
    socket.set_nodelay(true)?;
    let mut reader = BufReader::new(socket);
    let mut request_line = String::new();
    if reader.read_line(&mut request_line).await? == 0 {
        return Ok(());
    }
    let arrived = Instant::now();
    let mut length = 0usize;
    loop {
        let mut line = String::new();
        reader.read_line(&mut line).await?;
        let line = line.trim_end();
        if line.is_empty() {
            break;
        }
        if let Some((name, value)) = line.split_once(':')
            && name.eq_ignore_ascii_case("content-length")
        {
            length = value.trim().parse().context("a bad content-length")?;
        }
    }
    let mut body = vec![0; length];
    reader.read_exact(&mut body).await?;
    let mut socket = reader.into_inner();
    let path = request_line.split_whitespace().nth(1).unwrap_or("");
    if !request_line.starts_with("POST ") || !path.ends_with("/responses") {
        let body =
            r#"{"error":{"message":"not served by the bench","type":"invalid_request_error"}}"#;
        let head = format!(
            "HTTP/1.1 404 Not Found\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
            body.len()
        );
        socket.write_all(head.as_bytes()).await?;
        socket.write_all(body.as_bytes()).await?;
        return Ok(());
    }
    lock(&shared.requests).push(arrived);
    let plan = *lock(&shared.plan);
    let stream_number = {
        let mut streams = lock(&shared.streams);
        *streams += 1;
        *streams
    };
    socket
        .write_all(
            b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncache-control: no-cache\r\nconnection: close\r\n\r\n",
        )
        .await?;
    let ids = (
        format!("resp_{stream_number}"),
        format!("msg_{stream_number}"),
    );
    socket.write_all(&opening(&ids)).await?;
    let mut text = String::new();
    match plan.pace {
        None => {
            let mut out = Vec::with_capacity(plan.deltas * 160);
            for _ in 0..plan.deltas {
                out.extend_from_slice(&delta(&ids.1, FAST_DELTA));
            }
            text = FAST_DELTA.repeat(plan.deltas);
            lock(&shared.delta_starts).push(Instant::now());
            socket.write_all(&out).await?;
        }
        Some(pace) => {
            // Each stream at its own phase within a period.
            let phase = pace.mul_f64((stream_number % 97) as f64 / 97.0);
            let start = tokio::time::Instant::now() + phase;
            lock(&shared.delta_starts).push(start.into_std());
            for n in 0..plan.deltas {
                tokio::time::sleep_until(start + pace * n as u32).await;
                let stamp = format!("@{} ", shared.epoch.elapsed().as_nanos());
                socket.write_all(&delta(&ids.1, &stamp)).await?;
                text.push_str(&stamp);
            }
        }
    }
    socket.write_all(&closing(&ids, &text, plan.deltas)).await?;
    socket.shutdown().await?;
    Ok(())
}

fn event(value: serde_json::Value) -> Vec<u8> {
    let kind = value["type"].as_str().unwrap_or("message").to_owned();
    format!("event: {kind}\ndata: {value}\n\n").into_bytes()
}

fn opening((response, message): &(String, String)) -> Vec<u8> {
    let mut out = event(json!({"type": "response.created", "response": {
        "id": response, "object": "response", "status": "in_progress", "output": []}}));
    out.extend(event(
        json!({"type": "response.output_item.added", "output_index": 0,
        "item": {"type": "message", "id": message, "role": "assistant",
                 "status": "in_progress", "content": []}}),
    ));
    out.extend(event(
        json!({"type": "response.content_part.added", "item_id": message,
        "output_index": 0, "content_index": 0,
        "part": {"type": "output_text", "text": "", "annotations": []}}),
    ));
    out
}

fn delta(message: &str, text: &str) -> Vec<u8> {
    event(
        json!({"type": "response.output_text.delta", "item_id": message,
        "output_index": 0, "content_index": 0, "delta": text}),
    )
}

fn closing((response, message): &(String, String), text: &str, deltas: usize) -> Vec<u8> {
    let item = json!({"type": "message", "id": message, "role": "assistant",
        "status": "completed",
        "content": [{"type": "output_text", "text": text, "annotations": []}]});
    let mut out = event(
        json!({"type": "response.output_text.done", "item_id": message,
        "output_index": 0, "content_index": 0, "text": text}),
    );
    out.extend(event(
        json!({"type": "response.output_item.done", "output_index": 0,
        "item": item}),
    ));
    out.extend(event(json!({"type": "response.completed", "response": {
        "id": response, "object": "response", "status": "completed", "output": [item],
        "usage": {"input_tokens": 20, "input_tokens_details": {"cached_tokens": 0},
                  "output_tokens": deltas,
                  "output_tokens_details": {"reasoning_tokens": 0},
                  "total_tokens": 20 + deltas}}})));
    out
}

/// Whether a stream failed because its reader went away.
fn client_gone(error: &anyhow::Error) -> bool {
    use std::io::ErrorKind;
    error.downcast_ref::<std::io::Error>().is_some_and(|e| {
        matches!(
            e.kind(),
            ErrorKind::BrokenPipe | ErrorKind::ConnectionReset | ErrorKind::ConnectionAborted
        )
    })
}

//! The relay floors of `spool bench live`: the least an app server can do
//! on the live path, run as a child process over stdio like the servers
//! they are set beside.
//!
//! The relay answers `initialize`, `thread/start` and `turn/start` (no
//! store, no state), streams each turn from the model server through
//! spool's own Responses provider (the same HTTP client and SSE parsing as
//! `spool serve`), and writes every text delta as an
//! `item/agentMessage/delta` line straight to stdout from the task that
//! read it: no log, no hub, no ordering stage, no writer hand-off. What its
//! figures show is what the kernel, the two processes of the bench and the
//! provider cost on this machine; spool's distance from them is spool's own
//! hops.
//!
//! The durable relay (`--log`) does the same and also keeps every delta it
//! sent: appended to a file and synced within [`SYNC_WITHIN`](super::group::SYNC_WITHIN) of being
//! sent, on a thread of its own, as spool commits its deltas in groups.
//! What it adds to the relay is what durability alone costs here — the
//! `write`s and `fdatasync`s, and on a virtual machine the exits to the
//! host that each sync takes — without any of spool's rows, indexes or
//! hops.

use std::io::Write;
use std::path::PathBuf;
use std::sync::{Arc, OnceLock};

use futures_util::StreamExt;
use serde_json::{Value, json};
use spool_model::{
    ModelEvent, ModelProvider, ModelRequest, ProviderConfig, ResponsesProvider, RetryPolicy,
};
use spool_protocol::responses::ResponseItem;
use tokio::io::{AsyncBufReadExt, BufReader};

use super::group::Unsynced;
use super::store_relay;

/// The durable relay's lines sent and not yet synced, once `--log`
/// opened its file.
static LOG: OnceLock<Unsynced<u8>> = OnceLock::new();

/// Writes one message as one line, with one `write` on the caller's
/// thread (stdout is a `LineWriter` behind its own lock), and hands it to
/// the log when there is one. Returns the line.
fn send(message: &Value) -> String {
    let mut line = message.to_string();
    line.push('\n');
    {
        let mut out = std::io::stdout().lock();
        // A closed pipe means the bench is gone; stdin's end stops the relay.
        let _ = out.write_all(line.as_bytes());
        let _ = out.flush();
    }
    if let Some(log) = LOG.get() {
        log.push(line.bytes());
    }
    line
}

/// Starts the thread that syncs the log: each group of lines is written
/// and synced [`SYNC_WITHIN`](super::group::SYNC_WITHIN) after its first
/// line was sent.
fn open_log(path: PathBuf) -> anyhow::Result<()> {
    let mut file = std::fs::File::create(&path)?;
    let log = LOG.get_or_init(Unsynced::new);
    std::thread::Builder::new()
        .name("relay-sync".to_owned())
        .spawn(move || {
            let mut group = Vec::new();
            loop {
                log.wait_due();
                log.take(&mut group);
                if file
                    .write_all(&group)
                    .and_then(|()| file.sync_data())
                    .is_err()
                {
                    eprintln!("relay: cannot write the log");
                    return;
                }
                group.clear();
            }
        })?;
    Ok(())
}

/// Serves stdin until it ends. `log`: the durable relay's file; `store`:
/// the store relay's (`store_relay.rs`).
pub async fn relay(
    model_url: String,
    log: Option<PathBuf>,
    store: Option<PathBuf>,
) -> anyhow::Result<()> {
    if let Some(path) = log {
        open_log(path)?;
    }
    if let Some(path) = store {
        store_relay::open(path).await?;
    }
    let provider: Arc<dyn ModelProvider> = Arc::new(ResponsesProvider::new(
        ProviderConfig::new("relay", model_url).with_retry(RetryPolicy::none()),
    ));
    let mut lines = BufReader::new(tokio::io::stdin()).lines();
    let mut next = 0u64;
    while let Some(line) = lines.next_line().await? {
        let Ok(message) = serde_json::from_str::<Value>(&line) else {
            continue;
        };
        let (Some(id), Some(method)) = (message.get("id"), message["method"].as_str()) else {
            continue;
        };
        next += 1;
        let result = match method {
            "initialize" => json!({"userAgent": "spool-bench-relay"}),
            "thread/start" => json!({"thread": {"id": format!("relay-thread-{next}")}}),
            "turn/start" => {
                let thread = message["params"]["threadId"].as_str().unwrap_or_default();
                let turn = format!("relay-turn-{next}");
                tokio::spawn(stream(
                    Arc::clone(&provider),
                    thread.to_owned(),
                    turn.clone(),
                ));
                json!({"turn": {"id": turn, "items": [], "status": "inProgress"}})
            }
            _ => {
                send(&json!({"jsonrpc": "2.0", "id": id,
                    "error": {"code": -32601, "message": "the relay serves no such method"}}));
                continue;
            }
        };
        send(&json!({"jsonrpc": "2.0", "id": id, "result": result}));
    }
    store_relay::close()
}

/// One turn: the model's text deltas as they come, then `turn/completed`.
async fn stream(provider: Arc<dyn ModelProvider>, thread: String, turn: String) {
    let request = ModelRequest {
        model: "bench-model".to_owned(),
        input: vec![ResponseItem::user_text("stream")],
        ..ModelRequest::default()
    };
    let mut events = provider.stream(request);
    let mut status = "completed";
    while let Some(event) = events.next().await {
        match event {
            Ok(ModelEvent::OutputTextDelta { item_id, delta, .. }) => {
                let mut line = send(
                    &json!({"jsonrpc": "2.0", "method": "item/agentMessage/delta",
                    "params": {"threadId": thread, "turnId": turn, "itemId": &item_id,
                               "delta": delta}}),
                );
                if store_relay::is_open() {
                    line.pop();
                    store_relay::keep(store_relay::Row {
                        thread_id: thread.clone(),
                        item_id,
                        payload: line,
                    });
                }
            }
            Ok(_) => {}
            Err(error) => {
                eprintln!("relay: {error}");
                status = "failed";
            }
        }
    }
    send(&json!({"jsonrpc": "2.0", "method": "turn/completed",
        "params": {"threadId": thread, "turn": {"id": turn, "items": [], "status": status}}}));
}

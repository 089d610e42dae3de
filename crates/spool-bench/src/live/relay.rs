//! The relay floor of `spool bench live`: the least an app server can do
//! on the live path, run as a child process over stdio like the servers
//! it is set beside.
//!
//! It answers `initialize`, `thread/start` and `turn/start` (no store, no
//! state), streams each turn from the model server through spool's own
//! Responses provider (the same HTTP client and SSE parsing as `spool
//! serve`), and writes every text delta as an `item/agentMessage/delta`
//! line straight to stdout from the task that read it: no log, no hub, no
//! ordering stage, no writer hand-off. What its figures show is what the
//! kernel, the two processes of the bench and the provider cost on this
//! machine; spool's distance from them is spool's own hops.

use std::io::Write;
use std::sync::Arc;

use futures_util::StreamExt;
use serde_json::{Value, json};
use spool_model::{
    ModelEvent, ModelProvider, ModelRequest, ProviderConfig, ResponsesProvider, RetryPolicy,
};
use spool_protocol::responses::ResponseItem;
use tokio::io::{AsyncBufReadExt, BufReader};

/// Writes one message as one line, with one `write` on the caller's
/// thread (stdout is a `LineWriter` behind its own lock).
fn send(message: &Value) {
    let mut line = message.to_string();
    line.push('\n');
    let mut out = std::io::stdout().lock();
    // A closed pipe means the bench is gone; stdin's end stops the relay.
    let _ = out.write_all(line.as_bytes());
    let _ = out.flush();
}

/// Serves stdin until it ends.
pub async fn relay(model_url: String) -> anyhow::Result<()> {
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
    Ok(())
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
                send(
                    &json!({"jsonrpc": "2.0", "method": "item/agentMessage/delta",
                    "params": {"threadId": thread, "turnId": turn, "itemId": item_id,
                               "delta": delta}}),
                );
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

//! What every test client of `spool serve` does the same way, over any
//! transport: call and wait for the reply, read until a message matches,
//! initialize. A transport only sends and receives ([`Peer::send`],
//! [`Peer::next`]) and keeps what it read past ([`Peer::seen`]).

use serde_json::{Value, json};

/// A JSON-RPC client connection (stdio, WebSocket).
#[allow(async_fn_in_trait)] // used by the tests' own single-threaded runtimes
pub trait Peer {
    /// Sends one message.
    async fn send_message(&mut self, message: Value);
    /// The next message received.
    async fn next_message(&mut self) -> Value;
    /// Everything received that was not a reply waited for.
    fn seen(&mut self) -> &mut Vec<Value>;

    /// Sends a request and returns its reply (result or error object).
    async fn call(&mut self, id: i64, method: &str, params: Value) -> Value {
        self.send_message(json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}))
            .await;
        self.reply_to(json!(id)).await
    }

    /// Reads until the reply to `id`, keeping everything else.
    async fn reply_to(&mut self, id: Value) -> Value {
        loop {
            let message = self.next_message().await;
            if message.get("id") == Some(&id) && message.get("method").is_none() {
                return message;
            }
            self.seen().push(message);
        }
    }

    /// Reads until a message matches, keeping everything read.
    async fn until(&mut self, matches: impl Fn(&Value) -> bool) -> Value {
        if let Some(found) = self.seen().iter().find(|m| matches(m)) {
            return found.clone();
        }
        loop {
            let message = self.next_message().await;
            self.seen().push(message.clone());
            if matches(&message) {
                return message;
            }
        }
    }

    /// `initialize` (request id 0) with `capabilities`, then `initialized`;
    /// returns the reply.
    async fn initialize(&mut self, capabilities: Value) -> Value {
        let reply = self
            .call(
                0,
                "initialize",
                json!({"clientInfo": {"name": "test", "version": "1"}, "capabilities": capabilities}),
            )
            .await;
        self.send_message(json!({"jsonrpc": "2.0", "method": "initialized"}))
            .await;
        reply
    }

    /// How many messages of `method` were kept.
    fn count(&mut self, method: &str) -> usize {
        self.seen()
            .iter()
            .filter(|m| m["method"].as_str() == Some(method))
            .count()
    }
}

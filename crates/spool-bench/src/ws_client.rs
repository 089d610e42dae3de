//! The WebSocket JSON-RPC client `spool bench server` measures with
//! (tokio-tungstenite, the WebSocket implementation the server uses too).

use std::time::Instant;

use anyhow::{Context, bail};
use futures_util::{SinkExt, StreamExt};
use serde_json::{Value, json};
use tokio::net::TcpStream;
use tokio_tungstenite::WebSocketStream;
use tokio_tungstenite::tungstenite::Message;

use super::server::WAIT;

/// A JSON-RPC client over a WebSocket: text frames in and out.
pub(super) struct Client {
    stream: WebSocketStream<TcpStream>,
    next_id: u64,
}

impl Client {
    pub(super) async fn connect(addr: &str) -> anyhow::Result<Client> {
        let stream = TcpStream::connect(addr).await?;
        stream.set_nodelay(true)?;
        let (stream, _) = tokio_tungstenite::client_async(format!("ws://{addr}/"), stream)
            .await
            .context("the WebSocket upgrade failed")?;
        Ok(Client { stream, next_id: 1 })
    }

    /// Connects and initializes, opting into spool's additions (`seq`,
    /// views).
    pub(super) async fn connect_initialized(addr: &str) -> anyhow::Result<Client> {
        let mut client = Client::connect(addr).await?;
        client
            .call(
                "initialize",
                json!({
                    "clientInfo": {"name": "spool-bench", "version": env!("CARGO_PKG_VERSION")},
                    "capabilities": {"spool": {"seq": true, "views": true}},
                }),
            )
            .await?;
        Ok(client)
    }

    /// Sends a request; returns its id.
    pub(super) async fn send_request(
        &mut self,
        method: &str,
        params: Value,
    ) -> anyhow::Result<u64> {
        let id = self.next_id;
        self.next_id += 1;
        self.send(json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}))
            .await?;
        Ok(id)
    }

    /// Sends one message as a text frame.
    pub(super) async fn send(&mut self, message: Value) -> anyhow::Result<()> {
        self.stream.send(Message::text(message.to_string())).await?;
        Ok(())
    }

    /// The next text frame (pings and pongs skipped).
    pub(super) async fn next_frame(&mut self) -> anyhow::Result<String> {
        tokio::time::timeout(WAIT, self.read_frame())
            .await
            .context("no message from the server in time")?
    }

    pub(super) async fn read_frame(&mut self) -> anyhow::Result<String> {
        loop {
            match self.stream.next().await {
                Some(Ok(Message::Text(text))) => return Ok(text.to_string()),
                Some(Ok(Message::Close(_))) | None => bail!("the server closed the connection"),
                Some(Ok(_)) => {} // ping, pong, binary
                Some(Err(error)) => return Err(error.into()),
            }
        }
    }

    /// A request and its reply (notifications before it are dropped), and
    /// the instant its frame arrived (before it was parsed).
    pub(super) async fn call_timed(
        &mut self,
        method: &str,
        params: Value,
    ) -> anyhow::Result<(Value, Instant)> {
        let id = self.send_request(method, params).await?;
        loop {
            let frame = self.next_frame().await?;
            let at = Instant::now();
            let message: Value = serde_json::from_str(&frame)?;
            if message.get("method").is_none() && message["id"] == json!(id) {
                if let Some(error) = message.get("error") {
                    bail!("{method} failed: {error}");
                }
                return Ok((message, at));
            }
        }
    }

    pub(super) async fn call(&mut self, method: &str, params: Value) -> anyhow::Result<Value> {
        Ok(self.call_timed(method, params).await?.0)
    }

    /// `thread/start` with the server's defaults; the new thread's id.
    pub(super) async fn start_thread(&mut self) -> anyhow::Result<String> {
        let reply = self.call("thread/start", json!({})).await?;
        reply["result"]["thread"]["id"]
            .as_str()
            .map(str::to_owned)
            .context("thread/start returned no thread id")
    }
}
